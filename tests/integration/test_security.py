"""Security round 3 (issue 26): attacks by a non-root user in the sandbox, a
hostile client, a page in a browser, a hostile fetch server; each test fails
on the code before its fix."""

import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from harness import Agentd, AgentdTestCase, agentd_path, short

NOBODY = 65534

# Holds a write lease on argv[1] as an unprivileged user: an open for exec
# then waits for the lease break (fs.lease-break-time, 45 s by default),
# which this holder ignores (SIGIO) until it is killed.
LEASE_HOLDER = r'''
import fcntl, os, signal, sys, time
signal.signal(signal.SIGIO, signal.SIG_IGN)
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.fcntl(fd, 1024, fcntl.F_WRLCK)    # F_SETLEASE
print('leased', flush=True)
time.sleep(300)
'''


def as_nobody():
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def proc_running(needle):
    """Pids whose command line holds needle."""
    found = []
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            with open('/proc/%s/cmdline' % pid, 'rb') as f:
                if needle.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


class SpawnOffLoopTest(AgentdTestCase):
    """26.1: a create whose execve waits on a lease blocks only itself."""

    agentd_args = ('--spawn-timeout', '1500')

    def setUp(self):
        if os.geteuid() != 0:
            raise unittest.SkipTest('needs root (chown to nobody)')
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix='agentd-lease-')
        os.chmod(self.dir, 0o755)
        self.prog = os.path.join(self.dir, 'leased-prog')
        with open(self.prog, 'w') as f:
            f.write('#!/bin/sh\necho ran\nexec sleep 60\n')
        os.chmod(self.prog, 0o755)
        os.chown(self.prog, NOBODY, NOBODY)
        self.holder = None

    def tearDown(self):
        self.release()
        super().tearDown()
        shutil.rmtree(self.dir, ignore_errors=True)

    def lease(self):
        self.holder = subprocess.Popen(
            ['/usr/bin/python3', '-c', LEASE_HOLDER, self.prog],
            preexec_fn=as_nobody, stdout=subprocess.PIPE)
        self.assertEqual(self.holder.stdout.readline().strip(), b'leased')

    def release(self):
        if self.holder is not None:
            self.holder.kill()
            self.holder.wait()
            self.holder.stdout.close()
            self.holder = None

    def create_async(self, **fields):
        """POST /v1/sessions on a client of its own, in a thread."""
        out = {}

        def run():
            c = self.agentd.tcp_client()
            try:
                out['r'] = self.req('POST', '/v1/sessions', fields, client=c)
            finally:
                c.close()
        t = threading.Thread(target=run)
        t.start()
        return t, out

    def test_leased_exec_times_out_alone(self):
        self.lease()
        stuck = [self.create_async(argv=[self.prog], id='stuck%d' % i)
                 for i in range(2)]
        time.sleep(0.3)                 # both are in execve by now
        # The loop goes on: healthz, a create, the reserved id.
        for _ in range(3):
            h = self.req('GET', '/healthz')
            self.expect(h, 200)
            self.assertLess(h.elapsed, 1.0, 'healthz waited on a spawn')
        other = self.create(cmd='echo other', yield_ms=5000)
        self.assertEqual(other['exit_code'], 0)
        self.assertError(self.create_raw(cmd='true', id='stuck0'), 409,
                         'session_exists')
        self.assertEqual(self.metric('agentd_sessions_starting'), 2)
        for t, out in stuck:
            t.join(30)
            self.assertError(out['r'], 504, 'spawn_timeout')
        self.assertEqual(self.get_raw('stuck0').status, 404)
        self.assertEqual(self.metric('agentd_spawn_timeouts_total'), 2)
        self.assertEqual(self.metric('agentd_sessions_starting'), 0)

        # The children, still waiting in execve, are killed at once (issue
        # 32 R5): their threads are back while the lease holds.
        deadline = time.monotonic() + 10
        while (time.monotonic() < deadline and
               self.metric('agentd_spawns_abandoned') != 0):
            time.sleep(0.05)
        self.assertEqual(self.metric('agentd_spawns_abandoned'), 0)
        self.release()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (
                self.metric('agentd_spawns_abandoned') != 0 or
                proc_running(self.prog)):
            time.sleep(0.05)
        self.assertEqual(self.metric('agentd_spawns_abandoned'), 0)
        self.assertEqual(proc_running(self.prog), [])
        self.assertEqual(self.metric('agentd_session_leaders_unreaped'), 0)
        # The id is free again, and the program runs.
        s = self.create(argv=[self.prog], id='stuck0', wait_ms=5000)
        self.expect(self.delete(s['id'], grace_ms=0), 200)

    def test_leased_exec_completes_late(self):
        self.stop_agentd()
        self.start_agentd(('--spawn-timeout', '30000'))
        self.lease()
        t, out = self.create_async(argv=[self.prog], wait_ms=5000)
        time.sleep(0.5)
        self.expect(self.req('GET', '/healthz'), 200)
        self.assertNotIn('r', out)
        self.release()
        t.join(30)
        self.expect(out['r'], 201)
        body = out['r'].json
        self.assertEqual(self.agentd_output(body), 'ran\n')
        self.expect(self.delete(body['id'], grace_ms=0), 200)

    def agentd_output(self, body):
        import base64
        return b''.join(base64.b64decode(c['data'])
                        for c in body['output']).decode()

    def test_client_gone_during_spawn(self):
        self.lease()
        c = self.agentd.tcp_client()
        conn = c._connection()
        conn.request('POST', '/v1/sessions',
                     body=json.dumps({'argv': [self.prog], 'id': 'gone'}),
                     headers=dict(self.agentd.auth_headers(),
                                  **{'Content-Type': 'application/json'}))
        time.sleep(0.3)
        c.close()
        deadline = time.monotonic() + 5
        while (time.monotonic() < deadline and
               self.metric('agentd_sessions_starting') != 0):
            time.sleep(0.05)
        self.assertEqual(self.metric('agentd_sessions_starting'), 0)
        self.release()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc_running(self.prog):
            time.sleep(0.05)
        self.assertEqual(proc_running(self.prog), [])
        self.assertEqual(self.get_raw('gone').status, 404)

    def test_shutdown_during_spawn(self):
        self.stop_agentd()
        self.start_agentd(('--spawn-timeout', '30000'))
        self.lease()
        t, out = self.create_async(argv=[self.prog], id='late')
        time.sleep(0.3)
        rc, took = self.agentd.stop()
        t.join(30)
        self.assertEqual(rc, 0)
        self.assertError(out['r'], 503, 'shutting_down')
        self.agentd.stopped = True


class StuckSpawnTest(AgentdTestCase):
    """Issue 32 R5: a spawn given up while its child is stuck in chdir on a
    FUSE mount that never answers: the child is killed, so its spawner
    thread comes back.  Before, each kept its thread for good, and once all
    of them were stuck every create anywhere got 504."""

    agentd_args = ('--spawn-timeout', '1000', '--spawn-threads', '2')

    def setUp(self):
        sys.path.insert(0, os.path.join(os.path.dirname(
            os.path.abspath(__file__)), '..', 'files'))
        import slowfs
        if not slowfs.available():
            raise unittest.SkipTest('needs root and /dev/fuse')
        super().setUp()
        self.mnt = tempfile.mkdtemp(prefix='agentd-stuck-')
        self.fs = slowfs.SlowFS(self.mnt, stall=True)

    def tearDown(self):
        self.fs.close()
        super().tearDown()
        os.rmdir(self.mnt)

    def test_given_up_spawns_keep_no_thread(self):
        cwd = os.path.join(self.mnt, 'sub')
        for i in range(4):
            r = self.create_raw(cmd='echo never', cwd=cwd)
            self.assertError(r, 504, 'spawn_timeout')
        # The threads are back: an unrelated create is answered.
        other = self.create_raw(cmd='echo other', yield_ms=5000)
        self.expect(other, 201, 'a create after 4 stuck spawns')
        self.assertEqual(other.json['exit_code'], 0)
        r = self.req('GET', '/metrics')
        self.assertIn('\nagentd_spawns_abandoned 0\n', r.body.decode())
        # A client gone during a stuck spawn: the same.
        c = self.agentd.tcp_client()
        conn = c._connection()
        conn.request('POST', '/v1/sessions',
                     body=json.dumps({'cmd': 'echo never', 'cwd': cwd}),
                     headers=dict(self.agentd.auth_headers(),
                                  **{'Content-Type': 'application/json'}))
        time.sleep(0.3)
        c.close()
        for i in range(2):
            r = self.create_raw(cmd='echo never', cwd=cwd)
            self.assertError(r, 504, 'spawn_timeout')
        other = self.create_raw(cmd='echo other', yield_ms=5000)
        self.expect(other, 201, 'a create after a client gone')


class HeldMemoryTest(AgentdTestCase):
    """26.2: memory an authenticated client can pin is counted and capped."""

    agentd_args = ('--max-answer-bytes', '16MiB', '--max-session-bytes', '1MiB')

    def test_unread_answers_are_capped(self):
        s = self.create(cmd="head -c 3000000 /dev/zero | tr '\\0' a",
                        ring_bytes=8 << 20, yield_ms=20000, max_bytes=0)
        self.assertEqual(s['state'], 'exited')
        path = '/v1/sessions/%s?max_bytes=%d' % (s['id'], 8 << 20)
        head = ('GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n' % (
            path, ''.join('%s: %s\r\n' % kv for kv in
                          self.agentd.auth_headers().items()))).encode()
        socks, statuses = [], []
        for _ in range(8):
            k = socket.socket()
            k.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            k.connect(('127.0.0.1', self.agentd.port))
            k.sendall(head)
            socks.append(k)
            time.sleep(0.3)
            # The status line is in the first bytes: read only those.
            statuses.append(k.recv(12)[9:12])
        try:
            self.assertEqual(statuses[:2], [b'200', b'200'])
            self.assertIn(b'503', statuses[2:])
            held = self.metric('agentd_http_answer_bytes')
            self.assertLessEqual(held, 16 << 20)
            self.assertGreater(held, 4 << 20)
            self.expect(self.req('GET', '/healthz'), 200)
            r = self.get_raw(s['id'], max_bytes=8 << 20)
            self.assertError(r, 503, 'too_busy')
        finally:
            for k in socks:
                k.close()
        deadline = time.monotonic() + 10
        while (time.monotonic() < deadline and
               self.metric('agentd_http_answer_bytes') > 0):
            time.sleep(0.05)
        self.assertEqual(self.metric('agentd_http_answer_bytes'), 0)
        self.expect(self.get_raw(s['id'], max_bytes=8 << 20), 200)

    def test_file_sent_from_disk_holds_no_budget(self):
        # A files GET is sent with sendfile: an unread 40 MiB download
        # holds no memory, and must not take the answers' budget.
        path = os.path.join(self.agentd.workdir, 'big')
        with open(path, 'wb') as f:
            f.truncate(40 << 20)
        k = socket.socket()
        k.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        k.connect(('127.0.0.1', self.agentd.port))
        try:
            k.sendall(('GET /v1/files?path=%s HTTP/1.1\r\nHost: 127.0.0.1\r\n'
                       '%s\r\n' % (path, ''.join(
                           '%s: %s\r\n' % kv for kv in
                           self.agentd.auth_headers().items()))).encode())
            self.assertEqual(k.recv(12)[9:12], b'200')
            self.assertLess(self.metric('agentd_http_answer_bytes'), 1 << 20)
        finally:
            k.close()

    def test_kept_argv_is_capped(self):
        big = ['x' * 100000] * 3        # exec takes 128 KiB per string
        ids = []
        for i in range(3):
            w = self.create(argv=['true'] + big, yield_ms=5000)
            self.assertEqual(w['state'], 'exited')
            ids.append(w['id'])
        self.assertGreater(self.metric('agentd_session_bytes'), 900000)
        self.assertError(self.create_raw(argv=['true'] + big), 429,
                         'session_budget_exceeded')
        self.expect(self.delete(ids[0]), 200)
        self.create(argv=['true'] + big, yield_ms=5000)

    def test_list_pages(self):
        ids = [self.create(cmd='true', yield_ms=5000)['id'] for _ in range(5)]
        whole = self.req('GET', '/v1/sessions').json
        self.assertEqual([x['id'] for x in whole['sessions']], ids)
        self.assertNotIn('next', whole)
        seen, after = [], None
        for _ in range(5):
            q = '?limit=2' + ('&after=' + after if after else '')
            page = self.req('GET', '/v1/sessions' + q).json
            self.assertLessEqual(len(page['sessions']), 2)
            seen += [x['id'] for x in page['sessions']]
            after = page.get('next')
            if after is None:
                break
        self.assertEqual(seen, ids)
        self.assertError(self.req('GET', '/v1/sessions?after=x'), 400,
                         'invalid_cursor')


class TokenFileTest(unittest.TestCase):
    """26.5: a token file with a NUL, or blank, stops agentd at start."""

    def start(self, text):
        d = tempfile.mkdtemp(prefix='agentd-tok-')
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, 'token')
        with open(path, 'wb') as f:
            f.write(text)
        os.chmod(path, 0o600)
        p = subprocess.run([agentd_path(), '--token-file', path, '--listen',
                            '127.0.0.1:0', '--dual-stack', '0', '--socket',
                            ''], capture_output=True, timeout=20)
        return p.returncode, p.stderr.decode()

    def test_nul_or_blank_token_file_is_fatal(self):
        for text, why in ((b'\0secret', 'NUL'), (b'abc\0def\n', 'NUL'),
                          (b'\n \t\r\n', 'empty'), (b'', 'empty')):
            rc, err = self.start(text)
            self.assertNotEqual(rc, 0, '%r: agentd started' % text)
            self.assertIn(why, err, '%r' % text)


def own_address():
    """An IPv4 address of a non-loopback interface of this machine, or None."""
    import array
    import fcntl
    import struct
    for _, name in socket.if_nameindex():
        if name == 'lo':
            continue
        k = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            req = struct.pack('256s', name.encode()[:15])
            got = fcntl.ioctl(k.fileno(), 0x8915, req)     # SIOCGIFADDR
            addr = socket.inet_ntoa(got[20:24])
            if not addr.startswith('127.'):
                return addr
        except OSError:
            pass
        finally:
            k.close()
    return None


class HostRuleTest(AgentdTestCase):
    """26.6: without a token, the Host rule holds on every listener (qemu and
    Docker forward the host's 127.0.0.1 to the guest's eth0)."""

    autostart = False

    def test_foreign_host_refused_on_a_non_loopback_listener(self):
        addr = own_address()
        if addr is None:
            raise unittest.SkipTest('no non-loopback IPv4 address')
        from harness import free_port
        port = free_port()
        self.start_agentd(('--listen', '%s:%d' % (addr, port)), token=False)
        c = http.client.HTTPConnection(addr, port, timeout=30)
        for host, status in (('rebound.example:%d' % port, 403),
                             ('%s:%d' % (addr, port), 200),
                             ('localhost:%d' % port, 200)):
            c.request('POST', '/v1/sessions', body='{"cmd": "id"}',
                      headers={'Host': host,
                               'Content-Type': 'application/json'})
            r = c.getresponse()
            body = r.read()
            self.assertEqual(r.status, {403: 403, 200: 201}[status],
                             '%s: %r' % (host, body))
            if status == 403:
                self.assertEqual(json.loads(body)['error']['code'],
                                 'forbidden_host')
        c.close()


if __name__ == '__main__':
    unittest.main()
