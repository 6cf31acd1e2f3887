"""POST /v1/sandbox/resumed and /v1/sandbox/pause: generation, the window of
one restore, bad input, the entropy, the clock left alone (--clock-step 0:
these tests never step the machine's clock), and the keepalive probe of the
connections from before a restore.

The real snapshot and restore (qemu migrate, vmgenid, the RTC, the clock
step, dead connections) is tests/e2e/restore.py.
"""

import base64
import os
import shutil
import signal
import socket
import time
import unittest

from harness import Agentd, AgentdTestCase, Background

PORT_STATE_ESTABLISHED = '01'


def b64(n):
    return base64.b64encode(os.urandom(n)).decode()


def tcp_timer(local_port, remote_port):
    """The timer kind ("tr" of /proc/net/tcp) of agentd's end of a connection:
    0 none, 1 retransmit, 2 keepalive; None when not found."""
    want_local = '%04X' % remote_port
    want_remote = '%04X' % local_port
    with open('/proc/net/tcp') as f:
        next(f)
        for line in f:
            fields = line.split()
            local, remote, state, timer = fields[1], fields[2], fields[3], fields[5]
            if (local.endswith(':' + want_local) and remote.endswith(':' + want_remote)
                    and state == PORT_STATE_ESTABLISHED):
                return int(timer.split(':')[0], 16)
    return None


class SandboxTest(AgentdTestCase):

    agentd_args = ('--clock-step', '0', '--restore-probe', '1')

    def resumed(self, body=None, status=200):
        r = self.req('POST', '/v1/sandbox/resumed', body if body is not None else b'')
        if status == 200:
            self.expect(r, 200)
        return r

    def generation(self):
        h = self.req('GET', '/healthz').json
        m = self.req('GET', '/metrics').body.decode()
        line = [l for l in m.split('\n') if l.startswith('agentd_generation ')]
        self.assertEqual(len(line), 1, m)
        self.assertEqual(int(line[0].split()[1]), h['generation'])
        return h['generation']

    def test_generation_counts_once_per_window(self):
        self.assertEqual(self.generation(), 0)
        doc = self.resumed().json
        self.assertEqual(doc['generation'], 1)
        self.assertFalse(doc['same_restore'])
        self.assertEqual(doc['clock_step_ms'], 0)
        self.assertEqual(doc['clock'], 'none')   # no unix_ms, no /dev/rtc0 here
        self.assertIn('clock_error', doc)
        self.assertEqual(self.generation(), 1)
        # Shortly after: the same restore.
        doc = self.resumed({}).json
        self.assertEqual(doc['generation'], 1)
        self.assertTrue(doc['same_restore'])
        self.assertEqual(self.generation(), 1)

    def test_window_ends(self):
        self.stop_agentd()
        self.start_agentd(('--clock-step', '0', '--restore-window', '300ms'))
        self.assertEqual(self.resumed().json['generation'], 1)
        time.sleep(0.6)
        doc = self.resumed().json
        self.assertEqual(doc['generation'], 2)
        self.assertFalse(doc['same_restore'])
        self.assertEqual(self.generation(), 2)

    def test_bad_input(self):
        cases = [
            ({'entropy': b64(31)}, 'entropy'),
            ({'entropy': b64(513)}, 'entropy'),
            ({'entropy': 'not base64!'}, 'entropy'),
            ({'entropy': 32}, 'entropy'),
            ({'unix_ms': -1}, 'unix_ms'),
            ({'unix_ms': 'now'}, 'unix_ms'),
            ({'unix_ms': 1.5}, 'unix_ms'),
            ({'unix_ms': 253402300800000}, 'unix_ms'),
            ({'unix_ms': 1, 'when': 2}, 'when'),
            ([1], None),
        ]
        for body, field in cases:
            r = self.req('POST', '/v1/sandbox/resumed', body)
            self.assertError(r, 400, 'invalid_request')
            if field:
                self.assertIn(field, r.json['error']['message'], body)
        r = self.req('POST', '/v1/sandbox/resumed', b'{"unix_ms": ',
                     headers={'Content-Type': 'application/json'})
        self.assertError(r, 400, 'invalid_json')
        self.assertError(self.req('GET', '/v1/sandbox/resumed'), 405, 'method_not_allowed')
        self.assertError(self.req('GET', '/v1/sandbox/pause'), 405, 'method_not_allowed')
        self.assertError(self.req('POST', '/v1/sandbox/other', {}), 404, 'not_found')
        self.assertEqual(self.generation(), 0, 'bad input counted as a restore')

    def test_entropy_bounds(self):
        for n in (32, 512):
            doc = self.resumed({'entropy': b64(n)}).json
            if os.geteuid() == 0:
                self.assertEqual(doc['entropy_bytes'], n, doc)
                self.assertNotIn('entropy_error', doc)
            else:   # RNDADDENTROPY needs CAP_SYS_ADMIN
                self.assertEqual(doc['entropy_bytes'], 0, doc)
                self.assertIn('RNDADDENTROPY', doc['entropy_error'])

    def test_unix_ms_left_to_platform(self):
        doc = self.resumed({'unix_ms': int(time.time() * 1000) + 60000}).json
        self.assertEqual(doc['clock'], 'none')
        self.assertEqual(doc['clock_step_ms'], 0)
        self.assertIn('--clock-step 0', doc['clock_error'])

    def test_pause(self):
        doc = self.expect(self.req('POST', '/v1/sandbox/pause'), 200).json
        self.assertEqual(set(doc), {'generation', 'synced', 'sync_ms'})
        self.assertEqual((doc['generation'], doc['synced']), (0, True))
        self.assertGreaterEqual(doc['sync_ms'], 0)
        self.resumed()
        doc = self.expect(self.req('POST', '/v1/sandbox/pause', {}), 200).json
        self.assertEqual((doc['generation'], doc['synced']), (1, True))

    def test_probe_of_older_connections(self):
        # An idle keep-alive connection from before the restore.
        old = self.agentd.tcp_client()
        self.expect(self.req('GET', '/healthz', client=old), 200)
        lport = old.conn.sock.getsockname()[1]
        self.assertEqual(tcp_timer(lport, self.agentd.port), 0)
        doc = self.resumed().json
        self.assertGreaterEqual(doc['connections_probed'], 2, doc)  # old and this one
        self.assertEqual(tcp_timer(lport, self.agentd.port), 2, 'no keepalive timer')
        # A live peer answers the probes: the connection stays, and serves.
        time.sleep(3.5)
        self.expect(self.req('GET', '/healthz', client=old), 200)
        self.assertEqual(old.connects, 1, 'the old connection was closed')
        # The probing ends: keepalive off again ((3 + 2) x 1 s).
        deadline = time.monotonic() + 10
        while tcp_timer(lport, self.agentd.port) == 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(tcp_timer(lport, self.agentd.port), 0, 'keepalive left on')
        # Connections opened after the restore are not probed.
        new = self.agentd.tcp_client()
        self.expect(self.req('GET', '/healthz', client=new), 200)
        nport = new.conn.sock.getsockname()[1]
        self.assertEqual(tcp_timer(nport, self.agentd.port), 0)
        old.close()
        new.close()


class PauseOffLoopTest(AgentdTestCase):
    """The pause's sync runs on a thread of its own: a slow one (strace
    delays the sync system call by 3 s) holds only the pause, where it used
    to hold the whole loop (a FUSE mount that never answers: forever)."""
    autostart = False

    def test_a_slow_sync_holds_only_the_pause(self):
        if shutil.which('strace') is None:
            self.skipTest('needs strace')
        # LeakSanitizer cannot work under ptrace: an ASan build leaves it out.
        asan = os.environ.get('ASAN_OPTIONS', '')
        a = Agentd(['--clock-step', '0'], env={
            'ASAN_OPTIONS': (asan + ':' if asan else '') + 'detect_leaks=0'})
        argv = a.argv
        a.argv = lambda: (['strace', '-f', '--seccomp-bpf', '-qq', '-o',
                           '/dev/null', '-e', 'trace=sync', '-e',
                           'inject=sync:delay_enter=3000000', '--'] + argv())
        self._all_agentd.append(a)
        a.start()
        self.agentd = a
        self.c = a.tcp_client()
        with open('/proc/%d/task/%d/children' % (a.proc.pid, a.proc.pid)) as f:
            pid = int(f.read().split()[0])     # agentd, strace's child
        self.addCleanup(lambda: a.stopped or os.kill(pid, signal.SIGKILL))
        bg = Background(self.req, 'POST', '/v1/sandbox/pause', b'',
                        client=a.tcp_client())
        time.sleep(0.3)
        self.expect(self.req('GET', '/healthz'), 200)
        w = self.create(cmd='echo during', yield_ms=10000)
        self.assertEqual(w['state'], 'exited')
        self.assertTrue(bg.is_alive(), 'the pause answered before its '
                        '3 s sync ended, or the loop waited for it')
        doc = self.expect(bg.join_result(30), 200).json
        self.assertIs(doc['synced'], True)
        self.assertGreaterEqual(doc['sync_ms'], 2500)
        # agentd, not strace, gets the SIGTERM; strace exits with its status.
        os.kill(pid, signal.SIGTERM)
        self.assertEqual(a.proc.wait(30), 0)
        a.stopped = True


if __name__ == '__main__':
    unittest.main()
