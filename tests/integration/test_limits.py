"""Limits: max sessions, max body, exited TTL, ring sizes, stdin backpressure."""

import json
import os
import shutil
import subprocess
import time
import unittest

from harness import Agentd, AgentdTestCase, agentd_path, b64


class MaxSessionsTest(AgentdTestCase):
    agentd_args = ('--max-sessions', '2')

    def test_too_many_sessions(self):
        done = self.create(cmd='true', yield_ms=5000)       # exited: not counted
        self.assertEqual(done['state'], 'exited')
        a = self.create(cmd='sleep 30')
        b = self.create(cmd='sleep 30')
        r = self.create_raw(cmd='echo third', id='third')
        self.assertError(r, 429, 'too_many_sessions')
        # never a silent eviction
        ids = {s['id'] for s in self.list_sessions()}
        self.assertEqual(ids, {done['id'], a['id'], b['id']})
        self.assertEqual(self.get_raw('third').status, 404)
        self.expect(self.delete(a['id']), 200)
        c = self.create(cmd='echo third', id='third', yield_ms=5000)
        self.assertEqual(c['state'], 'exited')
        self.expect(self.delete(b['id']), 200)

    def test_slot_frees_when_a_session_exits(self):
        a = self.create(cmd='sleep 0.3')
        self.create(cmd='sleep 30')
        self.assertError(self.create_raw(cmd='true'), 429, 'too_many_sessions')
        self.wait_state(a['id'], timeout=10)
        self.create(cmd='true')


class MaxBodyTest(AgentdTestCase):
    agentd_args = ('--max-body', '1024')

    def test_json_body_too_large(self):
        r = self.create_raw(cmd='echo ' + 'x' * 2000)
        self.assertError(r, 413, 'body_too_large')
        self.assertEqual(self.list_sessions(), [])

    def test_stdin_body_too_large(self):
        w = self.create(cmd='cat')
        r = self.stdin_raw(w['id'], data=b'y' * 2000)
        self.assertError(r, 413, 'body_too_large')
        r = self.stdin_octets(w['id'], b'z' * 2000)
        self.assertError(r, 413, 'body_too_large')
        # nothing was written; a small body still works
        self.stdin(w['id'], text='ok\n', eof=True)
        ck = self.read_all(w['id'], tty=False)
        self.assertEqual(ck.data(), b'ok\n')

    def test_body_at_limit_is_accepted(self):
        body = {'cmd': 'echo ok', 'yield_ms': 5000, 'env': {'PAD': ''}}
        raw = json.dumps(body)
        body['env']['PAD'] = 'p' * (1024 - len(raw))
        raw = json.dumps(body).encode()
        self.assertEqual(len(raw), 1024)
        r = self.req('POST', '/v1/sessions', raw, headers={'Content-Type': 'application/json'})
        self.expect(r, 201)

    def test_chunked_body_too_large(self):
        # Transfer-Encoding: chunked, no Content-Length
        import http.client
        conn = http.client.HTTPConnection('127.0.0.1', self.agentd.port, timeout=30)
        try:
            body = json.dumps({'cmd': 'echo ' + 'x' * 4000}).encode()
            conn.putrequest('POST', '/v1/sessions')
            for k, v in self.agentd.auth_headers().items():
                conn.putheader(k, v)
            conn.putheader('Content-Type', 'application/json')
            conn.putheader('Transfer-Encoding', 'chunked')
            conn.endheaders()
            for i in range(0, len(body), 500):
                part = body[i:i + 500]
                conn.send(b'%x\r\n%s\r\n' % (len(part), part))
            conn.send(b'0\r\n\r\n')
            r = conn.getresponse()
            data = r.read()
            self.assertEqual(r.status, 413, data)
        except (ConnectionResetError, BrokenPipeError):
            pass            # closing the connection on an oversized body is fine too
        finally:
            conn.close()
        self.assertEqual(self.list_sessions(), [])


class ExitedTtlTest(AgentdTestCase):
    agentd_args = ('--exited-ttl', '1')

    def test_exited_session_removed_after_ttl(self):
        w = self.create(cmd='echo bye', yield_ms=5000)
        self.assertEqual(w['state'], 'exited')
        t0 = time.monotonic()
        g = self.get(w['id'])
        self.assertEqual(g['state'], 'exited')
        running = self.create(cmd='sleep 30')

        def gone():
            return self.get_raw(w['id']).status == 404
        self.wait_until(gone, 12, 'exited session removed after --exited-ttl 1')
        took = time.monotonic() - t0
        self.assertGreater(took, 0.5, 'removed well before the TTL')
        self.assertNotIn(w['id'], [s['id'] for s in self.list_sessions()])
        # a running session is never removed by the TTL
        time.sleep(1.5)
        self.assertEqual(self.get(running['id'])['state'], 'running')
        self.expect(self.delete(running['id']), 200)


class RingBytesTest(AgentdTestCase):
    agentd_args = ('--max-ring-bytes', '1048576')

    def test_ring_bytes_range(self):
        self.assertError(self.create_raw(cmd='true', ring_bytes=4095), 400,
                         'invalid_request', 'ring_bytes')
        self.assertError(self.create_raw(cmd='true', ring_bytes=1048577), 400,
                         'invalid_request', 'ring_bytes')
        self.assertError(self.create_raw(cmd='true', ring_bytes=-1), 400,
                         'invalid_request', 'ring_bytes')
        self.assertError(self.create_raw(cmd='true', ring_bytes='4096'), 400,
                         'invalid_request', 'ring_bytes')
        self.assertEqual(self.list_sessions(), [])
        self.create(cmd='true', ring_bytes=4096)
        self.create(cmd='true', ring_bytes=1048576)

    def test_ring_bytes_holds_the_tail(self):
        w = self.create(cmd='head -c 300000 /dev/zero | tr "\\0" r; echo END',
                        ring_bytes=65536, yield_ms=10000)
        self.wait_state(w['id'])
        ck = self.read_all(w['id'], tty=False)
        self.assertGreater(ck.dropped, 0)
        self.assertLessEqual(len(ck.data()), 65536)
        self.assertTrue(ck.data().endswith(b'rrrEND\n'))
        self.assertEqual(ck.last['bytes_out'], 300004)


PIPE_SIZES = ('import fcntl; '
              'print(fcntl.fcntl(1, 1032), fcntl.fcntl(2, 1032))')   # F_GETPIPE_SZ


class PipeBytesTest(AgentdTestCase):
    """--pipe-bytes: the kernel buffer of a pipe session's stdout and stderr."""

    def pipe_sizes(self):
        w = self.create(argv=['python3', '-c', PIPE_SIZES], yield_ms=10000)
        self.wait_state(w['id'])
        out = self.read_all(w['id'], tty=False).data('stdout').split()
        return [int(n) for n in out]

    def pipe_metric(self):
        r = self.req('GET', '/metrics')
        self.expect(r, 200, 'metrics')
        for line in r.body.decode().splitlines():
            if line.startswith('agentd_pipe_bytes '):
                return int(line.split()[1])
        self.fail('no agentd_pipe_bytes in /metrics')

    def test_default_is_one_mib(self):
        self.assertEqual(self.pipe_sizes(), [1 << 20, 1 << 20])
        self.assertEqual(self.pipe_metric(), 1 << 20)

    def restart_agentd(self, *args):
        self.stop_agentd()
        self.start_agentd(args)

    def test_zero_keeps_the_kernels(self):
        self.restart_agentd('--pipe-bytes', '0')
        self.assertEqual(self.pipe_sizes(), [65536, 65536])
        self.assertEqual(self.pipe_metric(), 0)

    def test_set_and_bounded(self):
        self.restart_agentd('--pipe-bytes', '256KiB')
        self.assertEqual(self.pipe_sizes(), [262144, 262144])
        self.assertEqual(self.pipe_metric(), 262144)
        p = subprocess.run([agentd_path(), '--socket', '', '--listen', '127.0.0.1:1',
                            '--pipe-bytes', '65MiB'], capture_output=True, timeout=10)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(b'pipe-bytes', p.stderr)


    def test_unprivileged_keeps_the_kernels(self):
        # Without CAP_SYS_RESOURCE and CAP_SYS_ADMIN the big pipes would
        # count against fs.pipe-user-pages-soft: not applied.
        if os.geteuid() != 0 or shutil.which('setpriv') is None:
            self.skipTest('needs root and setpriv')
        self.stop_agentd()
        a = Agentd()
        argv = a.argv
        a.argv = lambda: (['setpriv', '--bounding-set',
                           '-sys_admin,-sys_resource', '--'] + argv())
        self._all_agentd.append(a)
        a.start()
        self.agentd = a
        self.c = a.tcp_client()
        self.assertEqual(self.pipe_sizes(), [65536, 65536])
        self.assertEqual(self.pipe_metric(), 0)


class StdinBackpressureTest(AgentdTestCase):
    agentd_args = ('--stdin-buffer', '65536')

    def test_backpressure_and_nothing_of_the_rejected_request_written(self):
        # The process does not read stdin until the file "go" exists; then it
        # counts what it gets.
        cmd = 'while [ ! -e go ]; do sleep 0.05; done; exec wc -c'
        w = self.create(cmd=cmd)
        sid = w['id']
        block = b'b' * 16384
        accepted = 0
        rejected = 0
        for i in range(64):             # 1 MiB at most
            r = self.stdin_raw(sid, data=block)
            if r.status == 429:
                self.assertError(r, 429, 'stdin_backpressure')
                rejected += 1
                break
            self.expect(r, 200)
            self.assertEqual(r.json['written'], len(block))
            accepted += len(block)
        self.assertEqual(rejected, 1, 'no 429 after %d bytes queued with --stdin-buffer 65536'
                         % accepted)
        self.assertGreaterEqual(accepted, 65536 - len(block),
                                'backpressure long before the stdin buffer is full')
        # raw bodies are refused the same way
        self.assertError(self.stdin_octets(sid, block), 429, 'stdin_backpressure')
        open(os.path.join(self.agentd.workdir, 'go'), 'w').close()
        # the queue drains; eof then goes through (retrying while still full)
        deadline = time.monotonic() + 30
        while True:
            r = self.stdin_raw(sid, eof=True)
            if r.status == 200:
                break
            self.assertError(r, 429, 'stdin_backpressure')
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        ck = self.read_all(sid, tty=False, timeout=30)
        self.assertEqual(int(ck.data().strip()), accepted)


if __name__ == '__main__':
    unittest.main()
