"""GET /v1/ports: listening TCP and bound UDP sockets, their pid and session;
?port=P&wait_ms=W answering when something listens there or at the deadline."""

import json
import os
import signal
import socket
import threading
import time
import unittest

from harness import AgentdTestCase, free_port, query


def free_udp_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


class PortsTest(AgentdTestCase):

    def ports(self, **params):
        r = self.req('GET', '/v1/ports' + (query(**params) if params else ''))
        self.expect(r, 200)
        body = r.json
        self.assertEqual(list(body), ['ports'])
        for e in body['ports']:
            self.assertEqual(sorted(e), ['address', 'forward', 'pid', 'port',
                                         'protocol', 'session'])
            self.assertIsNone(e['forward'])     # off unless PID 1 or asked
            self.assertIn(e['protocol'], ('tcp', 'tcp6', 'udp', 'udp6'))
        return body['ports'], r.elapsed

    def on(self, entries, port, protocol=None):
        return [e for e in entries if e['port'] == port and
                (protocol is None or e['protocol'] == protocol)]

    def cmdline(self, pid):
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            return f.read().replace(b'\0', b' ').decode()

    def test_http_server_named_by_its_session(self):
        port = free_port()
        s = self.create(cmd='exec python3 -m http.server %d --bind 127.0.0.1' % port)
        entries, _ = self.ports(port=port, wait_ms=20000)
        self.assertEqual(len(entries), 1, entries)
        e = entries[0]
        self.assertEqual(e['address'], '127.0.0.1')
        self.assertEqual(e['protocol'], 'tcp')
        self.assertEqual(e['session'], s['id'])
        self.assertIn('http.server', self.cmdline(e['pid']))
        # The whole list has it too, and agentd's own listener (no session).
        entries, _ = self.ports()
        self.assertEqual(self.on(entries, port), [e])
        own = self.on(entries, self.agentd.port, 'tcp')
        self.assertEqual(len(own), 1, entries)
        self.assertEqual(own[0]['pid'], self.agentd.proc.pid)
        self.assertIsNone(own[0]['session'])
        # Gone once its session is.
        self.expect(self.req('DELETE', '/v1/sessions/' + s['id']), 200)
        deadline = time.monotonic() + 10
        while self.on(self.ports()[0], port) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(self.on(self.ports()[0], port), [])

    def test_setsid_child_found_through_its_parent(self):
        port = free_port()
        s = self.create(cmd='setsid python3 -m http.server %d --bind 127.0.0.1 '
                        '& wait' % port)
        entries, _ = self.ports(port=port, wait_ms=20000)
        self.assertEqual(len(entries), 1, entries)
        self.assertEqual(entries[0]['session'], s['id'])
        pid = entries[0]['pid']
        self.assertNotEqual(os.getsid(pid), s['pid'], 'setsid did not happen')

    def test_udp_and_ipv6(self):
        port = free_udp_port()
        prog = ('import socket, time\n'
                'u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n'
                'u.bind(("127.0.0.1", %d))\n'
                't = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)\n'
                't.bind(("::1", %d)); t.listen(1)\n'
                'print("up", flush=True); time.sleep(60)\n' % (port, port))
        s = self.create(argv=['python3', '-c', prog], wait_ms=10000)
        entries, _ = self.ports(port=port, wait_ms=10000)
        if not self.on(entries, port, 'tcp6') or not self.on(entries, port, 'udp'):
            entries, _ = self.ports(port=port)
        udp = self.on(entries, port, 'udp')
        tcp6 = self.on(entries, port, 'tcp6')
        self.assertEqual(len(udp), 1, entries)
        self.assertEqual(udp[0]['address'], '127.0.0.1')
        self.assertEqual(udp[0]['session'], s['id'])
        self.assertEqual(len(tcp6), 1, entries)
        self.assertEqual(tcp6[0]['address'], '::1')
        self.assertEqual(tcp6[0]['pid'], udp[0]['pid'])

    def test_port_events(self):
        """port.opened and port.closed reach the event feed without anyone
        asking /v1/ports (the feed's refresh, --ports-feed-interval)."""
        port = free_port()
        r = self.req('GET', '/v1/events' + query(types='port.opened,port.closed'))
        self.expect(r, 200)
        cursor = r.json['cursor']
        s = self.create(cmd='exec python3 -m http.server %d --bind 127.0.0.1' % port)

        def next_event(cursor):
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                r = self.req('GET', '/v1/events' + query(
                    cursor=cursor, wait_ms=10000,
                    types='port.opened,port.closed'))
                self.expect(r, 200)
                mine = [e for e in r.json['events'] if e['port'] == port]
                cursor = r.json['cursor']
                if mine:
                    return mine[0], cursor
            self.fail('no port event for %d' % port)

        e, cursor = next_event(cursor)
        self.assertEqual(e['type'], 'port.opened')
        self.assertEqual(e['session'], s['id'])
        self.assertEqual(e['address'], '127.0.0.1')
        self.assertEqual(e['protocol'], 'tcp')
        self.assertIsInstance(e['pid'], int)
        self.expect(self.req('DELETE', '/v1/sessions/' + s['id']), 200)
        e, cursor = next_event(cursor)
        self.assertEqual(e['type'], 'port.closed')
        self.assertEqual(e['session'], s['id'])
        self.assertEqual(e['port'], port)

    def test_socket_outside_any_session(self):
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            t.bind(('127.0.0.1', 0))
            t.listen(1)
            u.bind(('127.0.0.1', 0))
            entries, _ = self.ports()
            e = self.on(entries, t.getsockname()[1], 'tcp')
            self.assertEqual(len(e), 1, entries)
            self.assertIsNone(e[0]['session'])
            self.assertEqual(e[0]['pid'], os.getpid())
            e = self.on(entries, u.getsockname()[1], 'udp')
            self.assertEqual(len(e), 1, entries)
            self.assertIsNone(e[0]['session'])
        finally:
            t.close()
            u.close()

    def test_wait_answers_when_the_port_opens(self):
        port = free_port()
        got = {}

        def wait():
            c = self.agentd.tcp_client()
            try:
                r = c.request('GET', '/v1/ports' + query(port=port, wait_ms=20000))
                got['status'], got['body'] = r.status, r.json
                got['at'] = time.monotonic()
            finally:
                c.close()
        th = threading.Thread(target=wait)
        th.start()
        time.sleep(0.8)
        self.assertTrue(th.is_alive(), 'answered before anything listened: %r' % got)
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            t.bind(('127.0.0.1', port))
            t.listen(1)
            opened = time.monotonic()
            th.join(15)
            self.assertFalse(th.is_alive())
            self.assertEqual(got['status'], 200)
            self.assertEqual(len(got['body']['ports']), 1, got)
            self.assertEqual(got['body']['ports'][0]['port'], port)
            # The refresh runs every --ports-interval (250 ms) while waiting.
            self.assertLess(got['at'] - opened, 2.0)
        finally:
            t.close()

    def test_wait_ends_at_the_deadline_empty(self):
        port = free_port()
        entries, elapsed = self.ports(port=port, wait_ms=700)
        self.assertEqual(entries, [])
        self.assertGreaterEqual(elapsed, 0.65)
        self.assertLess(elapsed, 5)
        # Listening already: at once.
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            t.bind(('127.0.0.1', port))
            t.listen(1)
            entries, elapsed = self.ports(port=port, wait_ms=20000)
            self.assertEqual(len(entries), 1)
            self.assertLess(elapsed, 2)
        finally:
            t.close()

    def test_shutdown_ends_a_wait(self):
        # A session that ignores SIGTERM keeps the shutdown in its grace.
        self.create(cmd="trap '' TERM; sleep 60")
        got = {}

        def wait():
            c = self.agentd.tcp_client()
            try:
                r = c.request('GET', '/v1/ports' + query(port=free_port(),
                                                         wait_ms=30000))
                got['status'], got['body'] = r.status, r.json
            finally:
                c.close()
        th = threading.Thread(target=wait)
        th.start()
        time.sleep(0.5)
        self.agentd.proc.send_signal(signal.SIGTERM)
        th.join(10)
        self.assertFalse(th.is_alive(), 'the wait outlived the shutdown')
        self.assertEqual(got['status'], 503, got)
        self.assertEqual(got['body']['error']['code'], 'shutting_down')
        self.stop_agentd()

    def test_wait_client_gone_frees_the_wait(self):
        # Without the event feed's refreshes, only waits run the timer.
        self.stop_agentd()
        self.start_agentd(['--ports-feed-interval', '0'])
        port = free_port()
        for _ in range(20):
            c = socket.create_connection(('127.0.0.1', self.agentd.port))
            c.sendall(('GET /v1/ports?port=%d&wait_ms=60000 HTTP/1.1\r\n'
                       'Host: localhost\r\n%s\r\n' % (port, ''.join(
                           '%s: %s\r\n' % kv for kv in
                           self.agentd.auth_headers().items()))).encode())
            time.sleep(0.05)
            c.close()
        time.sleep(0.5)
        # The waits are gone: the refresh timer (250 ms) has stopped.
        before = self.refreshes()
        time.sleep(0.8)
        self.assertEqual(self.refreshes(), before)
        entries, _ = self.ports(port=port)
        self.assertEqual(entries, [])

    def refreshes(self):
        for line in self.req('GET', '/metrics').body.decode().splitlines():
            if line.startswith('agentd_ports_refreshes_total '):
                return int(line.split()[1])
        self.fail('no agentd_ports_refreshes_total')

    def test_bad_requests(self):
        for q in ('port=0', 'port=65536', 'port=x', 'port=', 'port=-1'):
            self.assertError(self.req('GET', '/v1/ports?' + q), 400,
                             'invalid_request', 'port')
        for q in ('port=80&wait_ms=x', 'wait_ms=-5'):
            self.assertError(self.req('GET', '/v1/ports?' + q), 400,
                             'invalid_request', 'wait_ms')
        self.assertError(self.req('POST', '/v1/ports', {}), 405,
                         'method_not_allowed')
        self.assertError(self.req('GET', '/v1/ports/x'), 404, 'not_found')
        self.assertError(self.req('GET', '/v1/ports', auth=False), 401,
                         'unauthorized')
        r = self.req('HEAD', '/v1/ports')
        self.expect(r, 200)
        self.assertEqual(r.body, b'')
        r = self.req('GET', '/metrics')
        self.assertIn('agentd_ports ', r.body.decode())


# Issue 32 R3: a process holding as many fds as it may (RLIMIT_NOFILE).
FD_HOLDER = r"""
import os, resource, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
n = min(hard, 20000)
resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))
fd = os.open('/dev/null', os.O_RDONLY)
for i in range(fd + 1, n):
    os.dup2(fd, i)
print('up', flush=True)
sys.stdin.read()
"""

# Bind a UDP socket, pass it into a unix socket's queue (SCM_RIGHTS) and
# close it, every PERIOD s (0: as fast as it can, taking the oldest back
# out and closing it once WINDOW are queued, so that they open and close).
CHURN = r"""
import array, collections, socket, sys, time
period, window = float(sys.argv[1]), int(sys.argv[2])
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
queued = 0
print('up', flush=True)
while True:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(('127.0.0.1', 0))
    a.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                        array.array('i', [u.fileno()]))])
    u.close()
    queued += 1
    if queued > window:
        msg, anc, flags, addr = b.recvmsg(1, socket.CMSG_LEN(4))
        for level, kind, data in anc:
            for fd in array.array('i', data):
                socket.socket(fileno=fd).close()
        queued -= 1
    if period > 0:
        time.sleep(period)
"""


class PortsChurnTest(AgentdTestCase):
    """Issue 32 R3: processes full of fds and sockets no process holds
    (passed with SCM_RIGHTS and closed) must not hold the loop through the
    port feed's look for pids, nor port events push a session's out of the
    event feed."""

    agentd_args = ('--ports-feed-interval', '100', '--max-events', '1000')

    def spawn(self, prog, *args):
        import subprocess
        p = subprocess.Popen(['python3', '-c', prog] + list(args),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.addCleanup(lambda: (p.kill(), p.wait()))
        self.assertEqual(p.stdout.readline().strip(), b'up')
        return p

    def healthz_max(self, seconds):
        worst, end = 0.0, time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.monotonic()
            self.expect(self.req('GET', '/healthz', auth=False), 200)
            worst = max(worst, time.monotonic() - t0)
            time.sleep(0.05)
        return worst

    def test_fd_holders_and_orphans_never_hold_the_loop(self):
        for _ in range(25):
            self.spawn(FD_HOLDER)
        self.spawn(CHURN, '0.2', '1000000')
        worst = self.healthz_max(5)
        self.assertLess(worst, 0.25, 'GET /healthz took %.3f s' % worst)
        # The orphans are listed, and given up in time: pid null.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            entries = self.expect(self.req('GET', '/v1/ports'), 200).json['ports']
            udp = [e for e in entries if e['protocol'] == 'udp' and
                   e['address'] == '127.0.0.1' and e['pid'] is None]
            if udp:
                break
            time.sleep(0.5)
        self.assertTrue(udp, 'no orphan socket listed')

    def test_churn_never_pushes_a_session_exit_out(self):
        s = self.create(cmd='sleep 0.5')
        self.spawn(CHURN, '0', '100')
        time.sleep(9)
        r = self.expect(self.req('GET', '/v1/events' + query(
            session=s['id'])), 200)
        types = [e['type'] for e in r.json['events']]
        self.assertIn('session.exited', types, r.json)
        self.assertEqual(r.json['dropped_events'], 0)
        r = self.expect(self.req('GET', '/v1/events' + query(
            types='port.opened,port.closed')), 200)
        self.assertLessEqual(len(r.json['events']), 64 * 10 + 32)


if __name__ == '__main__':
    unittest.main()


class LazyBaselineTest(AgentdTestCase):
    """Issue 41 item 4: agentd reads no socket list at its start.  The
    feed's baseline is the first read, taken when first needed (here: before
    the first session's spawn), and says what one read at the start would:
    a socket that listened before agentd is listed and never posted, one a
    session opens is posted."""

    autostart = False
    ports = PortsTest.ports
    on = PortsTest.on
    refreshes = PortsTest.refreshes

    def test_baseline_taken_before_the_first_spawn(self):
        before = socket.socket()
        before.bind(('127.0.0.1', 0))
        before.listen(1)
        old = before.getsockname()[1]
        try:
            self.start_agentd(['--ports-feed-interval', '3000'])
            self.assertEqual(self.refreshes(), 0, 'a read at the start')
            port = free_port()
            s = self.create(cmd='exec python3 -m http.server %d '
                                '--bind 127.0.0.1' % port)
            self.assertEqual(self.refreshes(), 1, 'no baseline at the spawn')
            self.wait_until(lambda: any(
                e['pid'] is not None for e in self.on(self.ports()[0], port)),
                timeout=20, what='the session listening, its pid known')
            entries, _ = self.ports()
            self.assertEqual(len(self.on(entries, old, 'tcp')), 1, entries)
            r = self.req('GET', '/v1/events' + query(
                cursor=0, types='port.opened,port.closed'))
            self.expect(r, 200)
            posted = [(e['type'], e['port']) for e in r.json['events']]
            self.assertIn(('port.opened', port), posted)
            self.assertNotIn(('port.opened', old), posted)
            self.expect(self.req('DELETE', '/v1/sessions/' + s['id']), 200)
        finally:
            before.close()
