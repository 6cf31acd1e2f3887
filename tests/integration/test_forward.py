"""Services on localhost reach the platform (--forward-localhost): a TCP
service listening on loopback only gets a listener on the outward address,
same port, spliced in agentd's loop.

The module runs in a network namespace of its own (unshare(CLONE_NEWNET),
as root): lo, and a veth pair whose v0 has OUT and the default route, so
that agentd finds the outward address as it does in a VM and no other
process's loopback services are forwarded.
"""

import ctypes
import hashlib
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import unittest

from harness import AgentdTestCase, free_port

OUT = '10.213.0.1'
CLONE_NEWNET = 0x40000000
NS_ERROR = None


def setUpModule():
    global NS_ERROR
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        NS_ERROR = os.strerror(ctypes.get_errno())
        raise unittest.SkipTest('no network namespace: %s' % NS_ERROR)
    for cmd in (['ip', 'link', 'set', 'lo', 'up'],
                ['ip', 'link', 'add', 'v0', 'type', 'veth', 'peer', 'name', 'v1'],
                ['ip', 'addr', 'add', OUT + '/24', 'dev', 'v0'],
                ['ip', 'link', 'set', 'v1', 'up'],
                ['ip', 'link', 'set', 'v0', 'up'],
                ['ip', 'route', 'add', 'default', 'dev', 'v0']):
        subprocess.run(cmd, check=True)


class Service:
    """A TCP listener on (host, port) in a thread; connections kept."""

    def __init__(self, host, port, family=socket.AF_INET, rcvbuf=None):
        self.s = socket.socket(family, socket.SOCK_STREAM)
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if rcvbuf is not None:      # inherited by the accepted sockets
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.s.bind((host, port))
        self.s.listen(16)

    def accept(self, timeout=10):
        self.s.settimeout(timeout)
        c, _ = self.s.accept()
        c.settimeout(timeout)
        return c

    def close(self):
        self.s.close()


def recv_all(c, n=None):
    out = b''
    while n is None or len(out) < n:
        b = c.recv(65536)
        if not b:
            break
        out += b
    return out


class ForwardTestCase(AgentdTestCase):
    agentd_args = ('--forward-localhost', '1')

    def reach(self, port, host=OUT, timeout=5.0):
        """Connect to host:port until it answers; the socket and the time."""
        t0 = time.monotonic()
        while True:
            try:
                c = socket.create_connection((host, port), timeout=5)
                return c, time.monotonic() - t0
            except OSError:
                if time.monotonic() - t0 > timeout:
                    raise
                time.sleep(0.02)

    def unreachable(self, port, timeout=5.0):
        """Wait until host:port refuses; the time it took."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            try:
                socket.create_connection((OUT, port), timeout=5).close()
            except ConnectionRefusedError:
                return time.monotonic() - t0
            time.sleep(0.05)
        self.fail('%s:%d still accepts after %.1fs' % (OUT, port, timeout))

    def ports(self, port):
        r = self.req('GET', '/v1/ports?port=%d' % port)
        self.expect(r, 200)
        return r.json['ports']

    def stat(self):
        if getattr(self, 'unix', None) is None:
            self.unix = self.agentd.unix_client()
        r = self.req('GET', '/debug/stat', client=self.unix)
        self.expect(r, 200)
        return r.json

    def wait_metric(self, name, value, timeout=5.0):
        deadline = time.monotonic() + timeout
        while self.metric(name) != value and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.metric(name), value, name)


class ForwardTest(ForwardTestCase):

    def test_loopback_service_reached_on_the_outward_address(self):
        port = free_port()
        svc = Service('127.0.0.1', port)
        self.addCleanup(svc.close)
        c, took = self.reach(port)
        self.assertLess(took, 2.5, 'the forward came after %.2fs' % took)
        a = svc.accept()
        c.sendall(b'ping')
        self.assertEqual(a.recv(4), b'ping')
        a.sendall(b'pong')
        self.assertEqual(c.recv(4), b'pong')
        # GET /v1/ports: the service's entry says where it is reached;
        # agentd's own listener there is listed too.
        entries = self.ports(port)
        lo = [e for e in entries if e['address'] == '127.0.0.1']
        self.assertEqual(len(lo), 1, entries)
        self.assertEqual(lo[0]['forward'], {'forwarded_on': '%s:%d' % (OUT, port),
                                            'connections': 1})
        own = [e for e in entries if e['address'] == OUT]
        self.assertEqual(len(own), 1, entries)
        self.assertIsNone(own[0]['forward'])
        self.assertIn(own[0]['pid'], (None, self.agentd.proc.pid))  # looked up
        # agentd's own API on 127.0.0.1 is not a service to forward.
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection((OUT, self.agentd.port), timeout=5)
        st = self.stat()['forward']
        self.assertTrue(st['enabled'])
        self.assertEqual(st['address'], OUT)
        self.assertEqual(st['forwards'], [{'port': port, 'on': '%s:%d' % (OUT, port),
                                           'to': '127.0.0.1', 'listening': True,
                                           'connections': 1}])
        self.assertEqual(self.metric('agentd_forwards'), 1)
        self.assertEqual(self.metric('agentd_forward_conns'), 1)
        self.assertEqual(self.metric('agentd_forward_bytes_total'), 8)
        # agentctl ports says it too (next to agentd, when built).
        ctl = os.path.join(os.path.dirname(os.path.dirname(self.agentd.binary)),
                           'agentctl', 'agentctl')
        if os.path.exists(ctl):
            env = dict(os.environ, AGENTD_SOCKET=self.agentd.socket_path)
            env.pop('AGENTD_URL', None)
            p = subprocess.run([ctl, 'ports', '-p', str(port)], env=env,
                               capture_output=True, text=True, timeout=10)
            self.assertEqual(p.returncode, 0, p.stderr)
            rows = [l.split() for l in p.stdout.splitlines()]
            self.assertEqual(rows[0][-1], 'FORWARDED')
            self.assertIn(['tcp', '127.0.0.1', str(port), str(os.getpid()),
                           '-', '%s:%d' % (OUT, port)], rows)
        c.close()
        self.assertEqual(recv_all(a), b'')
        a.close()
        self.wait_metric('agentd_forward_conns', 0)

    def test_ipv6_loopback(self):
        port = free_port()
        svc = Service('::1', port, socket.AF_INET6)
        self.addCleanup(svc.close)
        c, _ = self.reach(port)
        a = svc.accept()
        c.sendall(b'six')
        self.assertEqual(a.recv(3), b'six')
        e = [e for e in self.ports(port) if e['address'] == '::1']
        self.assertEqual(e[0]['forward']['forwarded_on'], '%s:%d' % (OUT, port))
        c.close()
        a.close()

    def test_wildcard_and_outward_services_get_none(self):
        for host in ('0.0.0.0', OUT):
            port = free_port()
            svc = Service(host, port)
            self.addCleanup(svc.close)
            # And one on loopback too (a wildcard wins over it).
            lo = Service('127.0.0.1', port) if host == OUT else None
            if lo is not None:
                self.addCleanup(lo.close)
            time.sleep(2.5)
            entries = self.ports(port)
            self.assertEqual(len(entries), 2 if lo else 1, entries)
            self.assertTrue(all(e['forward'] is None for e in entries), entries)
            self.assertNotIn(self.agentd.proc.pid, [e['pid'] for e in entries])
            c, _ = self.reach(port)
            a = svc.accept()	# the service itself answered
            c.close()
            a.close()
        self.assertEqual(self.metric('agentd_forwards'), 0)

    def test_only_localhost_as_envd(self):
        # 127.0.0.3 is loopback but not localhost's: it stays inside (a
        # resolver's stub on 127.0.0.53 is not for the platform).
        port = free_port()
        svc = Service('127.0.0.3', port)
        self.addCleanup(svc.close)
        time.sleep(2.5)
        self.assertIsNone(self.ports(port)[0]['forward'])
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection((OUT, port), timeout=5)

    def test_stop_and_start_again(self):
        port = free_port()
        svc = Service('127.0.0.1', port)
        c, _ = self.reach(port)
        c.close()
        svc.close()
        took = self.unreachable(port)
        self.assertLess(took, 3.5)
        self.wait_metric('agentd_forwards', 0)
        svc = Service('127.0.0.1', port)
        self.addCleanup(svc.close)
        c, took = self.reach(port)
        self.assertLess(took, 2.5)
        a = svc.accept()
        c.sendall(b'again')
        self.assertEqual(a.recv(5), b'again')
        c.close()
        a.close()

    def test_half_close_both_ways(self):
        port = free_port()
        svc = Service('127.0.0.1', port)
        self.addCleanup(svc.close)
        c, _ = self.reach(port)
        svc.accept().close()
        c.close()
        self.wait_metric('agentd_forward_conns', 0)
        fds = self.stat()['fds']
        # The client ends its side first: the service sees EOF and still
        # answers, then ends its own.
        c, _ = self.reach(port)
        a = svc.accept()
        c.sendall(b'request')
        c.shutdown(socket.SHUT_WR)
        self.assertEqual(recv_all(a), b'request')
        a.sendall(b'answer' * 10000)
        a.shutdown(socket.SHUT_WR)
        self.assertEqual(recv_all(c), b'answer' * 10000)
        c.close()
        a.close()
        # The service ends first: the client still sends after it.
        c, _ = self.reach(port)
        a = svc.accept()
        a.sendall(b'banner')
        a.shutdown(socket.SHUT_WR)
        self.assertEqual(recv_all(c), b'banner')
        c.sendall(b'late' * 10000)
        c.shutdown(socket.SHUT_WR)
        self.assertEqual(recv_all(a), b'late' * 10000)
        a.close()
        c.close()
        self.wait_metric('agentd_forward_conns', 0)
        self.assertEqual(self.stat()['fds'], fds)

    def test_error_closes_both(self):
        port = free_port()
        svc = Service('127.0.0.1', port)
        self.addCleanup(svc.close)
        c, _ = self.reach(port)
        a = svc.accept()
        c.sendall(b'x')
        self.assertEqual(a.recv(1), b'x')
        # The service resets: the client's end closes too.
        a.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b'\1\0\0\0\0\0\0\0')
        a.close()
        c.settimeout(5)
        try:
            self.assertEqual(c.recv(10), b'')
        except ConnectionResetError:
            pass
        c.close()
        self.wait_metric('agentd_forward_conns', 0)


class ForwardTotalTest(ForwardTestCase):
    """--forward-total-conns bounds the connections of all forwards
    together (each holds two of PID 1's fds)."""
    agentd_args = ('--forward-localhost', '1', '--forward-max-conns', '2',
                   '--forward-total-conns', '3')

    def test_total_conns(self):
        ports = [free_port(), free_port()]
        svcs = [Service('127.0.0.1', p) for p in ports]
        for svc in svcs:
            self.addCleanup(svc.close)
        held = []
        for p, svc in ((ports[0], svcs[0]), (ports[0], svcs[0]),
                       (ports[1], svcs[1])):
            c, _ = self.reach(p)
            held += [c, svc.accept()]
        # Its forward has room for one more; all of them have none.
        c4 = socket.create_connection((OUT, ports[1]), timeout=5)
        try:
            self.assertEqual(c4.recv(1), b'')
        except ConnectionResetError:
            pass
        c4.close()
        self.assertEqual(self.metric('agentd_forward_refused_total'), 1)
        self.assertEqual(self.metric('agentd_forward_conns'), 3)
        for s in held:
            s.close()
        self.wait_metric('agentd_forward_conns', 0)


class ForwardLimitsTest(ForwardTestCase):
    agentd_args = ('--forward-localhost', '1', '--forward-max', '1',
                   '--forward-max-conns', '2', '--forward-buffer', '4096')

    def test_max_forwards(self):
        p1, p2 = free_port(), free_port()
        s1 = Service('127.0.0.1', p1)
        self.addCleanup(s1.close)
        s2 = Service('127.0.0.1', p2)
        self.addCleanup(s2.close)
        time.sleep(2.5)
        self.assertEqual(self.metric('agentd_forwards'), 1)
        self.assertEqual(self.metric('agentd_forwards_skipped'), 1)
        fwd = [e for p in (p1, p2) for e in self.ports(p) if e['forward']]
        self.assertEqual(len(fwd), 1, fwd)

    def test_max_conns_and_buffer(self):
        port = free_port()
        svc = Service('127.0.0.1', port, rcvbuf=65536)
        self.addCleanup(svc.close)
        c1, _ = self.reach(port)
        a1 = svc.accept()
        c2, _ = self.reach(port)
        a2 = svc.accept()
        # A third is closed at once, and counted.
        c3 = socket.create_connection((OUT, port), timeout=5)
        try:
            self.assertEqual(c3.recv(1), b'')
        except ConnectionResetError:
            pass
        c3.close()
        self.assertEqual(self.metric('agentd_forward_refused_total'), 1)
        self.assertEqual(self.metric('agentd_forward_conns'), 2)
        # The service does not read: agentd holds a few KiB, not 4 MiB.
        data = os.urandom(16 << 20)

        def send():
            c1.settimeout(30)
            c1.sendall(data)
            c1.shutdown(socket.SHUT_WR)
        t = threading.Thread(target=send)
        t.start()
        time.sleep(1.0)
        held = self.metric('agentd_forward_buffered_bytes')
        self.assertGreater(held, 0)
        self.assertLessEqual(held, 2 * 4096)
        self.assertEqual(hashlib.sha256(recv_all(a1)).digest(),
                         hashlib.sha256(data).digest())
        t.join()
        for s in (c1, c2, a1, a2):
            s.close()
        self.wait_metric('agentd_forward_conns', 0)


class ForwardOffTest(ForwardTestCase):
    agentd_args = ()

    def test_off_unless_pid1_or_asked(self):
        port = free_port()
        svc = Service('127.0.0.1', port)
        self.addCleanup(svc.close)
        time.sleep(2.5)
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection((OUT, port), timeout=5)
        self.assertEqual(self.stat()['forward'], {'enabled': False})
        self.assertIsNone(self.ports(port)[0]['forward'])

    def test_bad_address(self):
        for bad in ('example.com', '10.0.0.300', ''):
            p = subprocess.run([self.agentd.binary, '--forward-address', bad,
                                '--listen', '127.0.0.1:1'],
                               capture_output=True, text=True, timeout=10)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("--forward-address: '%s' is not an IPv4 or IPv6 " % bad,
                          p.stderr)


class ForwardFlagAddressTest(ForwardTestCase):
    agentd_args = ('--forward-localhost', '1', '--forward-address', '127.0.0.2')

    def test_address_by_flag(self):
        port = free_port()
        svc = Service('127.0.0.1', port)
        self.addCleanup(svc.close)
        c, _ = self.reach(port, host='127.0.0.2')
        a = svc.accept()
        c.sendall(b'two')
        self.assertEqual(a.recv(3), b'two')
        c.close()
        a.close()
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection((OUT, port), timeout=5)


class ForwardUpgradeTest(ForwardTestCase):
    agentd_args = ('--forward-localhost', '1', '--forward-buffer', '4096')

    def test_upgrade_keeps_forwards_and_connections(self):
        port = free_port()
        svc = Service('127.0.0.1', port, rcvbuf=65536)
        self.addCleanup(svc.close)
        c, _ = self.reach(port)
        a = svc.accept()
        c.sendall(b'before')
        self.assertEqual(a.recv(6), b'before')
        # Bytes in agentd's buffers at the hand-over: the service does not
        # read while the client sends 8 MiB.
        data = os.urandom(8 << 20)
        t = threading.Thread(target=lambda: (c.settimeout(30), c.sendall(data)))
        t.start()
        time.sleep(0.5)
        self.assertGreater(self.metric('agentd_forward_buffered_bytes'), 0)
        path = os.path.join(self.agentd.dir, 'agentd-next')
        shutil.copyfile(self.agentd.binary, path)
        os.chmod(path, 0o755)
        self.expect(self.req('POST', '/v1/sandbox/upgrade', {'path': path}), 202)
        deadline = time.monotonic() + 10
        while True:
            try:
                if self.healthz()['upgrades'] == 1:
                    break
            except OSError:
                pass
            self.assertLess(time.monotonic(), deadline, 'no upgrade')
            time.sleep(0.05)
        # Every byte arrives, in order, through the same connection.
        self.assertEqual(hashlib.sha256(recv_all(a, len(data))).digest(),
                         hashlib.sha256(data).digest())
        t.join()
        a.sendall(b'after')
        self.assertEqual(c.recv(5), b'after')
        self.assertEqual(self.metric('agentd_forward_conns'), 1)
        # The listener came across and stays (the successor's refreshes
        # keep it): a new connection, and a half-close.
        time.sleep(2.5)
        c2, _ = self.reach(port, timeout=0.5)
        a2 = svc.accept()
        c2.sendall(b'new')
        self.assertEqual(a2.recv(3), b'new')
        c.shutdown(socket.SHUT_WR)
        self.assertEqual(recv_all(a), b'')
        a.close()
        self.assertEqual(recv_all(c), b'')
        for s in (c, c2, a2):
            s.close()
        self.wait_metric('agentd_forward_conns', 0)


if __name__ == '__main__':
    unittest.main()
