"""Slow clients: header and idle timeouts, and healthz under slowloris."""

import threading
import time

from hostilelib import (HostileTestCase, SANITIZED, SLOW, STARVED,
                        closed_by_peer, connect, healthz_latency, percentile,
                        read_answer, status_of, raise_nofile)

PARTIAL = b'GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: '


class HeaderTimeoutTest(HostileTestCase):
    """A request must arrive whole within --header-timeout."""

    agentd_args = ('--header-timeout', '1000', '--idle-timeout', '3000')

    def test_partial_request_is_closed(self):
        s = connect(self.agentd.port)
        s.sendall(PARTIAL)
        closed, took = closed_by_peer(s, 6 * SLOW)
        s.close()
        self.assertTrue(closed, 'a partial request still open after 6 s')
        self.assertGreater(took, 0.7, 'closed before the header timeout')

    def test_silent_connection_is_closed(self):
        s = connect(self.agentd.port)
        closed, took = closed_by_peer(s, 6 * SLOW)
        s.close()
        self.assertTrue(closed, 'a connection that sent nothing still open')
        self.assertGreater(took, 0.7)

    def test_drip_feed_does_not_extend_the_deadline(self):
        """One byte every 200 ms keeps the idle timer alive, not the deadline."""
        s = connect(self.agentd.port)
        s.sendall(PARTIAL)
        t0 = time.monotonic()
        closed = False
        while time.monotonic() - t0 < 6 * SLOW:
            try:
                s.sendall(b'a')
            except OSError:
                closed = True
                break
            c, _ = closed_by_peer(s, 0.2)
            if c:
                closed = True
                break
        took = time.monotonic() - t0
        s.close()
        self.assertTrue(closed, 'a drip-fed request still open after 6 s')
        self.assertLess(took, 4 * SLOW)

    def test_whole_request_is_answered_after_a_slow_start(self):
        """A request that completes within the deadline is answered."""
        s = connect(self.agentd.port)
        for b in (b'GET /healthz HTTP/1.1\r\n', b'Host: localhost\r\n', b'\r\n'):
            s.sendall(b)
            time.sleep(0.2)
        data, _ = read_answer(s, 5 * SLOW)
        s.close()
        self.assertEqual(status_of(data), 200, data[:200])

    def test_long_poll_outlives_the_header_timeout(self):
        """No deadline runs while a handler holds the request."""
        w = self.create(argv=['sleep', '30'])
        t0 = time.monotonic()
        r = self.req('GET', '/v1/sessions/%s?cursor=%d&wait_ms=2500'
                     % (w['id'], w['cursor']))
        took = time.monotonic() - t0
        self.expect(r, 200)
        self.assertGreater(took, 2.0, 'long-poll answered early')
        # And the connection stays usable for the next request.
        self.healthz()
        self.req('DELETE', '/v1/sessions/%s?grace_ms=0' % w['id'])

    def test_keep_alive_idle_then_closed(self):
        """After an answer: open for --idle-timeout, then closed."""
        s = connect(self.agentd.port)
        s.sendall(b'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n')
        data, closed = read_answer(s, 5 * SLOW)
        self.assertEqual(status_of(data), 200)
        self.assertFalse(closed)
        closed, took = closed_by_peer(s, 10 * SLOW)
        s.close()
        self.assertTrue(closed, 'idle keep-alive connection never closed')
        self.assertGreater(took, 2.5, 'closed before --idle-timeout')


class PreauthTimeoutTest(HostileTestCase):
    """A connection that has not sent the token yet has --preauth-timeout,
    shorter than --header-timeout and --idle-timeout (issue 13, item 7:
    idle peers held the slots); one that has sent it keeps the long ones."""

    agentd_args = ('--header-timeout', '60s', '--idle-timeout', '60s',
                   '--preauth-timeout', '700')

    def test_unproven_connections_are_cut_early(self):
        silent = connect(self.agentd.port)
        probe = connect(self.agentd.port)    # an unauthenticated healthz
        probe.sendall(b'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n')
        data, _ = read_answer(probe, 5 * SLOW)
        self.assertEqual(status_of(data), 200)
        proven = connect(self.agentd.port)
        proven.sendall(b'GET /v1/sessions HTTP/1.1\r\nHost: localhost\r\n'
                       b'Authorization: Bearer %s\r\n\r\n'
                       % self.agentd.token.encode())
        data, _ = read_answer(proven, 5 * SLOW)
        self.assertEqual(status_of(data), 200)
        for s in (silent, probe):
            closed, took = closed_by_peer(s, 10 * SLOW)
            s.close()
            self.assertTrue(closed, 'an unproven connection still open')
        closed, _ = closed_by_peer(proven, 1.0)
        self.assertFalse(closed, 'a connection with the token was cut')
        proven.sendall(b'GET /v1/sessions HTTP/1.1\r\nHost: localhost\r\n'
                       b'Authorization: Bearer %s\r\n\r\n'
                       % self.agentd.token.encode())
        data, _ = read_answer(proven, 5 * SLOW)
        proven.close()
        self.assertEqual(status_of(data), 200)


class SlowlorisTest(HostileTestCase):
    """Hundreds of half-open requests must not delay healthz."""

    agentd_args = ('--header-timeout', '3000', '--max-peer-unproven', '1000')
    HALF_OPEN = 500

    def test_healthz_under_slowloris(self):
        raise_nofile()
        base_fds = self.fds()
        socks = []
        for i in range(self.HALF_OPEN):
            s = connect(self.agentd.port)
            s.sendall(PARTIAL + b'%d' % i)
            socks.append(s)
        stop = threading.Event()

        def drip():
            # Keep every one of them trickling, as slowloris does.
            while not stop.is_set():
                for s in socks:
                    try:
                        s.send(b'x')
                    except OSError:
                        pass
                stop.wait(0.3)

        t = threading.Thread(target=drip, daemon=True)
        t.start()
        try:
            # Best of two: other processes on a shared machine add noise.
            lat, statuses = healthz_latency(self.agentd.port, n=100)
            p95 = percentile(lat, 95)
        finally:
            stop.set()
            t.join()
        self.__class__.figure = p95
        print('healthz under %d half-open connections: p50 %.1f ms, '
              'p95 %.1f ms, max %.1f ms' % (self.HALF_OPEN,
                                            percentile(lat, 50) * 1000,
                                            p95 * 1000, max(lat) * 1000))
        self.assertEqual(statuses, [200] * len(statuses))
        # Answered while every half-open request waits for its 3 s deadline
        # (how fast: bench/).
        self.assertLess(max(lat), STARVED, 'healthz max %.0f ms'
                        % (max(lat) * 1000))
        # Every half-open connection is closed by the header timeout.
        deadline = time.monotonic() + 10 * SLOW
        open_ = list(socks)
        while open_ and time.monotonic() < deadline:
            still = []
            for s in open_:
                c, _ = closed_by_peer(s, 0)
                if not c:
                    still.append(s)
            open_ = still
            if open_:
                time.sleep(0.1)
        for s in socks:
            s.close()
        self.assertEqual(len(open_), 0, '%d half-open connections survived '
                         'the header timeout' % len(open_))
        self.wait_fds(base_fds)
        self.assertAlive()


class GateMemoryTest(HostileTestCase):
    """What an unauthenticated peer's bytes cost agentd's memory while the
    request gate holds them: a head sent a byte per segment (each read
    became a chain of at least 1 KiB: 20 connections took 66 MiB), and
    pipelined requests whose answers are never read (evhttp reads on while
    it writes: one connection took 1.5 GiB; now a request's worth, then
    the connection is closed)."""

    agentd_args = ('--header-timeout', '60s', '--preauth-timeout', '60s',
                   '--idle-timeout', '60s')

    def setUp(self):
        if SANITIZED:
            self.skipTest("ASan's shadow and quarantine swamp the figures")
        super().setUp()

    def test_head_a_byte_at_a_time(self):
        import socket
        from hostilelib import rss_kib
        base = rss_kib(self.pid())
        socks = []
        for _ in range(20):
            s = connect(self.agentd.port)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.sendall(b'GET /')
            socks.append(s)
        sent = 0
        for _ in range(2000):           # 20 x 2000 bytes, one a segment
            for s in socks:
                s.send(b'a')
                sent += 1
            time.sleep(0.0005)
        time.sleep(0.5)
        grew = rss_kib(self.pid(), 'VmHWM') - base
        print('%d bytes of heads a byte at a time: RSS +%d KiB'
              % (sent, grew))
        for s in socks:
            s.close()
        # The bytes themselves are 40 KiB; a chain per byte was 40 MiB.
        self.assertLess(grew, 8 * 1024)
        self.assertAlive()

    def test_unread_answers_cut_the_connection(self):
        import socket
        from hostilelib import rss_kib
        base = rss_kib(self.pid())
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(('127.0.0.1', self.agentd.port))
        s.settimeout(2)
        req = b'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n'
        sent = 0
        junk = req * 1000
        deadline = time.monotonic() + 20 * SLOW
        try:
            while sent < (256 << 20) and time.monotonic() < deadline:
                s.sendall(junk)
                sent += len(junk)
        except OSError:
            pass                        # agentd closed it: good
        grew = rss_kib(self.pid(), 'VmHWM') - base
        print('pipelined %d MiB without reading an answer: RSS +%d KiB'
              % (sent >> 20, grew))
        s.close()
        self.assertLess(grew, 32 * 1024)
        self.assertAlive()
