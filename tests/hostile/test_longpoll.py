"""Clients that vanish during a long-poll: the waiter and the fd go at once."""

import os
import socket
import time

from hostilelib import (HostileTestCase, SLOW, STARVED, connect, cpu_seconds,
                        debug_stat, read_answer, status_of)


class VanishingClientTest(HostileTestCase):

    N = 50

    def readers(self, sid):
        for s in debug_stat(self.agentd)['sessions']:
            if s['id'] == sid:
                return s['readers']
        return None

    def park(self, sid, cursor, path_extra=''):
        socks = []
        for _ in range(self.N):
            s = connect(self.agentd.port)
            s.sendall(('GET /v1/sessions/%s?cursor=%d&wait_ms=60000%s HTTP/1.1\r\n'
                       'Host: localhost\r\nAuthorization: Bearer %s\r\n\r\n'
                       % (sid, cursor, path_extra, self.agentd.token)).encode())
            socks.append(s)
        deadline = time.monotonic() + 10 * SLOW
        while self.readers(sid) < self.N and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.readers(sid), self.N)
        return socks

    def test_close_frees_waiters_and_fds(self):
        w = self.create(argv=['sleep', '60'])
        base = self.fds()
        socks = self.park(w['id'], w['cursor'])
        self.assertGreaterEqual(self.fds(), base + self.N - 1)
        t0 = time.monotonic()
        for s in socks:
            s.close()
        deadline = time.monotonic() + 5 * SLOW
        while (self.readers(w['id']) > 0 or self.fds() > base) and \
                time.monotonic() < deadline:
            time.sleep(0.01)
        took = time.monotonic() - t0
        print('%d abandoned long-polls freed in %.0f ms' % (self.N, took * 1000))
        self.assertEqual(self.readers(w['id']), 0)
        self.wait_fds(base, timeout=STARVED)  # /debug/stat's may be closing
        # At once: not at the long-polls' wait_ms.
        self.assertLess(took, STARVED, 'waiters freed only after %.2fs' % took)
        # The session still answers a new reader.
        r = self.get_raw(w['id'], cursor=w['cursor'], wait_ms=100)
        self.expect(r, 200)
        deadline = time.monotonic() + 2 * SLOW
        while debug_stat(self.agentd)['connections_open'] > 2 and \
                time.monotonic() < deadline:
            time.sleep(0.02)
        # The harness's client and /debug/stat's.
        self.assertLessEqual(debug_stat(self.agentd)['connections_open'], 2)
        self.assertAlive()

    def test_close_at_once_frees_too(self):
        """A client gone before the waiter watches for its close (the watch
        starts API_WATCH_AFTER_MS into a wait): found all the same."""
        w = self.create(argv=['sleep', '60'])
        base = self.fds()
        for _ in range(self.N):
            s = connect(self.agentd.port)
            s.sendall(('GET /v1/sessions/%s?cursor=%d&wait_ms=60000 HTTP/1.1\r\n'
                       'Host: localhost\r\nAuthorization: Bearer %s\r\n\r\n'
                       % (w['id'], w['cursor'], self.agentd.token)).encode())
            s.close()
        deadline = time.monotonic() + 5 * SLOW
        while (self.readers(w['id']) > 0 or self.fds() > base) and \
                time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(self.readers(w['id']), 0)
        self.wait_fds(base, timeout=STARVED)
        self.assertAlive()

    def test_reset_frees_too(self):
        """An abortive close (RST) instead of a FIN."""
        w = self.create(argv=['sleep', '60'])
        base = self.fds()
        socks = self.park(w['id'], w['cursor'])
        for s in socks:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                         b'\x01\x00\x00\x00\x00\x00\x00\x00')
            s.close()
        deadline = time.monotonic() + 5 * SLOW
        while self.readers(w['id']) > 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(self.readers(w['id']), 0)
        self.wait_fds(base, timeout=5)
        # Nothing left spinning on the reset fds (epoll's EPOLLERR).
        cpu0 = cpu_seconds(self.pid())
        time.sleep(1.0)
        cpu = cpu_seconds(self.pid()) - cpu0
        self.assertLess(cpu, 0.2, 'agentd used %.2fs of CPU in 1s' % cpu)
        self.assertAlive()

    def test_pipelined_request_during_long_poll(self):
        """Data after a parked request is not a close: both get answered."""
        # Its output comes when we say (a file), not after a time.
        go = os.path.join(self.agentd.dir, 'go')
        w = self.create(argv=['sh', '-c', 'while [ ! -e %s ]; do sleep 0.02;'
                              ' done; echo done; sleep 30' % go])
        s = connect(self.agentd.port)
        req = ('GET /v1/sessions/%s?cursor=%d&wait_ms=60000 HTTP/1.1\r\n'
               'Host: localhost\r\nAuthorization: Bearer %s\r\n\r\n'
               % (w['id'], w['cursor'], self.agentd.token)).encode()
        s.sendall(req)
        deadline = time.monotonic() + STARVED
        while self.readers(w['id']) != 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertEqual(self.readers(w['id']), 1)
        s.sendall(b'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n')
        time.sleep(0.3)
        self.assertEqual(self.readers(w['id']), 1, 'pipelined data freed the waiter')
        open(go, 'w').close()
        s.settimeout(15 * SLOW)
        data = b''
        while data.count(b'HTTP/1.1 200') < 2:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        self.assertEqual(data.count(b'HTTP/1.1 200'), 2, data[:600])
        self.assertIn(b'"status": "ok"', data)
        self.req('DELETE', '/v1/sessions/%s?grace_ms=0' % w['id'])

    def test_half_close_during_long_poll(self):
        """shutdown(SHUT_WR) during a long-poll: freed too (EV_CLOSED sees
        the FIN); no answer is owed to a client that cannot say more."""
        w = self.create(argv=['sleep', '60'])
        base = self.fds()
        s = connect(self.agentd.port)
        s.sendall(('GET /v1/sessions/%s?cursor=%d&wait_ms=60000 HTTP/1.1\r\n'
                   'Host: localhost\r\nAuthorization: Bearer %s\r\n\r\n'
                   % (w['id'], w['cursor'], self.agentd.token)).encode())
        time.sleep(0.2)
        s.shutdown(socket.SHUT_WR)
        data, closed = read_answer(s, 5 * SLOW)
        s.close()
        self.assertTrue(closed or status_of(data) == 200)
        self.wait_fds(base, timeout=5)

    def test_delete_whose_client_vanishes(self):
        """A DELETE still removes the session after its client went away."""
        w = self.create(argv=['sh', '-c', 'trap "" TERM; sleep 2'])
        s = connect(self.agentd.port)
        s.sendall(('DELETE /v1/sessions/%s?grace_ms=1000 HTTP/1.1\r\nHost: localhost\r\n'
                   'Authorization: Bearer %s\r\n\r\n'
                   % (w['id'], self.agentd.token)).encode())
        time.sleep(0.2)
        s.close()
        deadline = time.monotonic() + 10 * SLOW
        while time.monotonic() < deadline:
            r = self.get_raw(w['id'])
            if r.status == 404:
                break
            time.sleep(0.1)
        self.assertEqual(r.status, 404, 'session not removed: %r' % r.body[:200])


class VanishingFetchClientTest(HostileTestCase):

    def test_reset_during_fetch_does_not_spin(self):
        """A client resetting its connection while a fetch runs."""
        srv = socket.socket()
        srv.bind(('127.0.0.1', 0))
        srv.listen(4)           # accepts, never answers: the fetch waits
        self.addCleanup(srv.close)
        body = ('{"url": "http://127.0.0.1:%d/x", "path": "%s/never", '
                '"timeout_ms": 20000}' % (srv.getsockname()[1],
                                          self.agentd.dir)).encode()
        auth = ''.join('%s: %s\r\n' % kv
                       for kv in self.agentd.auth_headers().items())
        s = connect(self.agentd.port)
        s.sendall(b'POST /v1/files/fetch HTTP/1.1\r\nHost: localhost\r\n%s'
                  b'Content-Length: %d\r\n\r\n%s'
                  % (auth.encode(), len(body), body))
        time.sleep(0.5 * SLOW)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                     b'\x01\x00\x00\x00\x00\x00\x00\x00')
        s.close()
        time.sleep(0.3 * SLOW)
        cpu0 = cpu_seconds(self.pid())
        time.sleep(1.0)
        cpu = cpu_seconds(self.pid()) - cpu0
        self.assertLess(cpu, 0.2, 'agentd used %.2fs of CPU in 1s' % cpu)
        self.assertAlive()
