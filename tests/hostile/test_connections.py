"""Connection limits: --max-connections, 10,000 idle connections held,
accept backing off on EMFILE, fds returned when clients go."""

import os
import re
import resource
import select
import signal
import socket
import time

from harness import Agentd
from hostilelib import (HostileTestCase, SLOW, STARVED, closed_by_peer, connect,
                        connect_unix, cpu_seconds, debug_stat, fd_count,
                        healthz_latency, percentile, raise_nofile,
                        read_answer, status_of)


def still_open(socks):
    """The sockets of socks the peer has not closed (nothing readable)."""
    p = select.poll()
    for s in socks:
        p.register(s, select.POLLIN | select.POLLERR | select.POLLHUP)
    ready = {fd for fd, _ in p.poll(0)}
    return [s for s in socks if s.fileno() not in ready]


class MaxConnectionsTest(HostileTestCase):
    """Beyond --max-connections a new connection gets 503 and a close, at
    once, when every connection held has sent the token; else the oldest
    that has not gives way.  The unix socket has a budget of its own."""

    LIMIT = 50
    agentd_args = ('--max-connections', str(LIMIT), '--header-timeout', '60s',
                   '--preauth-timeout', '60s')

    def prove(self, s):
        """An authenticated request on s: its connection is never evicted."""
        s.sendall(b'GET /v1/sessions HTTP/1.1\r\nHost: localhost\r\n'
                  b'Authorization: Bearer %s\r\n\r\n'
                  % self.agentd.token.encode())
        data, _ = read_answer(s, 5 * SLOW)
        self.assertEqual(status_of(data), 200, data[:300])

    def test_one_too_many(self):
        base = self.fds()
        held = [connect(self.agentd.port) for _ in range(self.LIMIT)]
        for s in held:
            self.prove(s)
        self.wait_fds_above(base + self.LIMIT - 2)
        t0 = time.monotonic()
        extra = connect(self.agentd.port)
        data, closed = read_answer(extra, 5 * SLOW)
        took = time.monotonic() - t0
        extra.close()
        self.assertEqual(status_of(data), 503, data[:300])
        self.assertIn(b'too_many_connections', data)
        # At once: not at the 60 s header timeout.
        self.assertLess(took, STARVED, 'the 503 took %.2fs' % took)
        # Held connections still work.
        held[0].sendall(b'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n')
        data, _ = read_answer(held[0], 5 * SLOW)
        self.assertEqual(status_of(data), 200, data[:300])
        # The unix socket is not locked out by a TCP flood.
        u = connect_unix(self.agentd.socket_path)
        u.sendall(b'GET /debug/stat HTTP/1.1\r\nHost: localhost\r\n\r\n')
        data, _ = read_answer(u, 5 * SLOW)
        u.close()
        self.assertEqual(status_of(data), 200, data[:300])
        # Closing some makes room again.
        for s in held[:10]:
            s.close()
        deadline = time.monotonic() + 5 * SLOW
        while True:
            lat, st = healthz_latency(self.agentd.port, n=1)
            if st == [200] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(st, [200])
        for s in held[10:]:
            s.close()
        self.wait_fds(base)
        # The harness's client and /debug/stat's own, at most.
        self.assertLessEqual(debug_stat(self.agentd)['connections_open'], 2)
        self.assertAlive()

    def test_metrics_count_the_503(self):
        base = self.fds()
        held = [connect(self.agentd.port) for _ in range(self.LIMIT)]
        for s in held:
            self.prove(s)
        self.wait_fds_above(base + self.LIMIT - 2)
        for _ in range(3):
            s = connect(self.agentd.port)
            read_answer(s, 5 * SLOW)
            s.close()
        for s in held:
            s.close()
        self.wait_fds(base)
        deadline = time.monotonic() + 5 * SLOW
        while True:
            r = self.req('GET', '/metrics')
            if r.status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertIn(b'agentd_http_requests_total{code="503"} 3', r.body)


class ReserveTest(HostileTestCase):
    """Idle connections that never sent the token cannot lock the platform
    out (issue 13, item 7): a new connection beyond --max-connections
    closes the oldest of them, with a 503, instead of being refused."""

    LIMIT = 32
    agentd_args = ('--max-connections', str(LIMIT), '--header-timeout', '60s',
                   '--preauth-timeout', '60s')

    def test_idle_unauthenticated_connections_give_way(self):
        base = self.fds()
        idle = [connect(self.agentd.port) for _ in range(self.LIMIT)]
        time.sleep(0.2)
        platform = []
        for i in range(5):
            s = connect(self.agentd.port)
            s.sendall(b'GET /v1/sessions HTTP/1.1\r\nHost: localhost\r\n'
                      b'Authorization: Bearer %s\r\n\r\n'
                      % self.agentd.token.encode())
            data, _ = read_answer(s, 5 * SLOW)
            platform.append(s)
            self.assertEqual(status_of(data), 200, data[:300])
        # The oldest idle ones were closed, with a 503 of their own.
        for s in idle[:5]:
            data, closed = read_answer(s, 5 * SLOW)
            self.assertEqual(status_of(data), 503, data[:300])
            self.assertIn(b'too_many_connections', data)
        for s in platform:
            s.close()
        r = self.req('GET', '/metrics')
        m = re.search(rb'agentd_http_evicted_total (\d+)', r.body)
        self.assertIsNotNone(m, r.body)
        self.assertGreaterEqual(int(m.group(1)), 5)
        for s in idle:
            s.close()
        self.wait_fds(base + 1)     # the harness client of /metrics
        self.assertAlive()

    def test_unauthenticated_body_is_never_read(self):
        """A body without the token is refused from the headers: 401 at
        once, no byte of it buffered, no share of the in-flight budget."""
        s = connect(self.agentd.port)
        s.sendall(b'PUT /v1/files?path=/tmp/x HTTP/1.1\r\nHost: localhost\r\n'
                  b'Content-Length: 100000000\r\n\r\n')
        data, closed = read_answer(s, 5 * SLOW)
        s.close()
        self.assertEqual(status_of(data), 401, data[:300])
        self.assertIn(b'unauthorized', data)
        self.assertIn(b'WWW-Authenticate: Bearer', data)


class PeerLimitTest(HostileTestCase):
    """One peer's connections without the token are limited: past
    --max-peer-unproven its own oldest gives way, another peer's stay."""

    agentd_args = ('--max-peer-unproven', '4', '--header-timeout', '60s',
                   '--preauth-timeout', '60s')

    def connect_from(self, src):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((src, 0))
        s.connect(('127.0.0.1', self.agentd.port))
        return s

    def test_a_peer_only_pushes_out_its_own(self):
        mine = [self.connect_from('127.0.0.2') for _ in range(4)]
        other = [self.connect_from('127.0.0.3') for _ in range(4)]
        time.sleep(0.2)
        more = [self.connect_from('127.0.0.2') for _ in range(2)]
        for s in mine[:2]:
            data, closed = read_answer(s, 5 * SLOW)
            self.assertEqual(status_of(data), 503, data[:300])
            self.assertIn(b'max-peer-unproven', data)
        time.sleep(0.2)
        self.assertEqual(still_open(other + mine[2:] + more),
                         other + mine[2:] + more)
        # A connection that sent the token no longer counts.
        s = more[0]
        s.sendall(b'GET /v1/sessions HTTP/1.1\r\nHost: localhost\r\n'
                  b'Authorization: Bearer %s\r\n\r\n'
                  % self.agentd.token.encode())
        data, _ = read_answer(s, 5 * SLOW)
        self.assertEqual(status_of(data), 200, data[:300])
        extra = self.connect_from('127.0.0.2')
        time.sleep(0.2)
        self.assertEqual(still_open(mine[2:] + more + [extra]),
                         mine[2:] + more + [extra])
        for s in mine + other + more + [extra]:
            s.close()
        self.assertAlive()


class PeerBurstTest(HostileTestCase):
    """Many connections of one peer at once, each sending its token at once:
    none is one that sent nothing, so none gives way for the next."""

    N = 48
    agentd_args = ('--max-peer-unproven', '8')

    def test_a_burst_with_the_token_is_served(self):
        req = (b'GET /v1/sessions HTTP/1.1\r\nHost: localhost\r\n'
               b'Authorization: Bearer %s\r\n\r\n' % self.agentd.token.encode())
        # agentd stopped: the kernel completes the handshakes and queues
        # the requests, and agentd accepts all of them in one go.
        os.kill(self.pid(), signal.SIGSTOP)
        try:
            socks = []
            for _ in range(self.N):
                s = connect(self.agentd.port)
                s.sendall(req)
                socks.append(s)
        finally:
            os.kill(self.pid(), signal.SIGCONT)
        statuses = []
        for s in socks:
            data, _ = read_answer(s, 10 * SLOW)
            statuses.append(status_of(data))
            s.close()
        self.assertEqual(statuses, [200] * self.N)
        self.assertAlive()


class TenThousandTest(HostileTestCase):
    """10,000 idle connections are held; healthz still answers at once;
    every fd is given back when the clients go."""

    N = int(os.environ.get('AGENTD_HOSTILE_CONNS', '10000'))
    agentd_args = ('--header-timeout', '300s', '--idle-timeout', '300s',
                   '--preauth-timeout', '300s', '--max-peer-unproven', '100000')

    def test_ten_thousand_idle_connections(self):
        limit = raise_nofile()
        if limit < self.N + 200:
            self.skipTest('RLIMIT_NOFILE %d is below %d' % (limit, self.N + 200))
        with open('/proc/%d/limits' % self.pid()) as f:
            lim = [l for l in f if l.startswith('Max open files')][0].split()
        if int(lim[3]) < self.N + 100:
            self.skipTest('agentd may open only %s fds' % lim[3])
        base = self.fds()
        socks = []
        t0 = time.monotonic()
        for i in range(self.N):
            socks.append(socket.create_connection(('127.0.0.1', self.agentd.port),
                                                  timeout=30))
        took = time.monotonic() - t0
        # agentd accepts them all (its fd count is the proof).
        deadline = time.monotonic() + 30 * SLOW
        while self.fds() < base + self.N - 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        held = self.fds() - base
        lat, statuses = healthz_latency(self.agentd.port, n=20)
        alive = still_open(socks)
        stat = debug_stat(self.agentd)
        print('%d connections opened in %.1fs; agentd holds %d more fds, '
              'RSS %d KiB; healthz p50 %.1f ms, max %.1f ms'
              % (self.N, took, held, stat['rss_bytes'] // 1024,
                 percentile(lat, 50) * 1000, max(lat) * 1000))
        self.assertGreaterEqual(held, self.N - 2)   # base had a closing one
        self.assertEqual(statuses, [200] * 20)
        self.assertLess(max(lat), STARVED)
        self.assertEqual(len(alive), self.N, '%d of the idle connections were '
                         'closed' % (self.N - len(alive)))
        self.assertGreaterEqual(stat['connections_open'], self.N)
        for s in socks:
            s.close()
        self.wait_fds(base, timeout=30)
        self.assertAlive()


class EmfileBackoffTest(HostileTestCase):
    """With its fds used up, agentd rests instead of spinning on accept,
    and serves again once fds are free."""

    autostart = False
    NOFILE = 64

    def test_accept_backs_off(self):
        a = Agentd(('--header-timeout', '60s'))
        binary = a.binary
        a.argv_orig = a.argv

        def argv():
            return ['prlimit', '--nofile=%d:%d' % (self.NOFILE, self.NOFILE),
                    '--'] + a.argv_orig()
        a.argv = argv
        self._all_agentd.append(a)
        a.start()
        self.agentd = a
        self.c = a.tcp_client()
        self.assertTrue(os.path.exists(binary))
        pid = a.proc.pid
        # prlimit execs agentd: same pid.
        base = fd_count(pid)
        socks = []
        for _ in range(self.NOFILE * 2):
            socks.append(connect(a.port, timeout=30))
        deadline = time.monotonic() + STARVED
        while fd_count(pid) < self.NOFILE - 2 and \
                time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertGreaterEqual(fd_count(pid), self.NOFILE - 2)
        cpu0 = cpu_seconds(pid)
        time.sleep(2.0)
        cpu = cpu_seconds(pid) - cpu0
        print('at EMFILE: %.2f s of CPU in 2 s' % cpu)
        self.assertLess(cpu, 0.3, 'agentd spins at EMFILE: %.2f s CPU in 2 s'
                        % cpu)
        for s in socks:
            s.close()
        deadline = time.monotonic() + 10 * SLOW
        while fd_count(pid) > base + 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        lat, st = healthz_latency(a.port, n=5)
        self.assertEqual(st, [200] * 5)
        self.assertIn('pausing', a.stderr())
        self.assertLessEqual(a.stderr().count('pausing'), 3,
                             'the EMFILE warning floods the log')
