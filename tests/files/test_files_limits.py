"""Limits of the files API: what a peer or a sandbox user cannot make agentd do.

A FIFO as ca_file, a sysfs file whose size lies, a redirect to a local
service, a download without end, a redirect with control bytes.
"""

import http.client
import os
import socket
import unittest
import urllib.parse

from filesutil import FilesCase, q
from servers import Server

SYSFS_FILE = '/sys/devices/system/cpu/online'   # 4096 by stat, a few bytes read


def outward_address():
    """This machine's address toward the outside, or None (loopback only)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(('192.0.2.1', 9))     # TEST-NET-1: nothing is sent
        addr = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    return None if addr.startswith('127.') else addr


class LimitsTest(FilesCase):
    payload = os.urandom(300007)

    def setUp(self):
        super().setUp()
        self.http = Server(self.payload)

    def tearDown(self):
        self.http.close()
        super().tearDown()

    def test_fifo_ca_file(self):
        """A FIFO nobody writes: 400 at once, and no worker left stuck."""
        fifo = self.p('ca.fifo')
        os.mkfifo(fifo)
        url = self.http.url('/ok').replace('http://', 'https://')
        for i in range(10):     # more than the 8 fetches allowed at once
            r = self.fetch(url=url, path=self.p('f%d' % i), ca_file=fifo)
            self.assertError(r, 400, 'invalid_request', 'ca_file')
        r = self.fetch(url=self.http.url('/ok'), path=self.p('ok'))
        self.expect(r, 200)

    @unittest.skipUnless(os.path.exists(SYSFS_FILE), 'no ' + SYSFS_FILE)
    def test_sysfs_size(self):
        with open(SYSFS_FILE, 'rb') as f:
            want = f.read()
        r = self.expect(self.get_file(SYSFS_FILE), 200)
        self.assertEqual(r.body, want)
        self.assertEqual(int(r.header('Content-Length')), len(want))
        r = self.expect(self.get_file(SYSFS_FILE, offset=1, length=2), 200)
        self.assertEqual(r.body, want[1:3])

    def test_redirect_to_local_service(self):
        addr = outward_address()
        if addr is None:
            self.skipTest('no address but loopback')
        outer = Server(self.payload, host=addr)
        try:
            local = self.http.url('/ok')
            # The same redirect from a local URL is the client's choice.
            self.expect(self.fetch(url=self.http.url('/r/to' + q(url=local)),
                                   path=self.p('a')), 200)
            for target in (local, local.replace('127.0.0.1', 'localhost'),
                           'http://[::1]:%d/ok' % self.http.port,
                           'http://169.254.169.254/latest/meta-data/'):
                r = self.fetch(url=outer.url('/r/to' + q(url=target), host=addr),
                               path=self.p('b'), timeout_ms=20000)
                self.assertError(r, 502, 'fetch_failed', 'local')
                self.assertFalse(os.path.exists(self.p('b')))
            self.assertEqual(self.http.hits, ['/r/to?' + urllib.parse.urlencode(
                {'url': local}), '/ok'])
        finally:
            outer.close()

    def test_redirect_to_own_interface_address(self):
        # A service bound to the wildcard answers on the machine's own
        # address too (the VM's 10.0.2.15): a redirect there is local.
        addr = outward_address()
        if addr is None:
            self.skipTest('no address but loopback')
        outer = Server(self.payload, host=addr)
        wild = Server(self.payload, host='0.0.0.0')
        try:
            target = wild.url('/ok', host=addr)
            r = self.fetch(url=outer.url('/r/to' + q(url=target), host=addr),
                           path=self.p('c'), timeout_ms=20000)
            self.assertError(r, 502, 'fetch_failed', 'local')
            self.assertFalse(os.path.exists(self.p('c')))
            self.assertEqual(wild.hits, [])
        finally:
            outer.close()
            wild.close()

    def test_redirect_control_bytes(self):
        for loc in ('http://127.0.0.1:%d/a\x01b' % self.http.port, 'x\x7fy',
                    'http://127.0.0.1:%d/a b' % self.http.port):
            r = self.fetch(url=self.http.url('/r/to' + q(url=loc)),
                           path=self.p('f'))
            self.assertError(r, 502, 'fetch_failed', 'control')
        self.assertFalse(os.path.exists(self.p('f')))

    def test_max_fetch_bytes(self):
        self.stop_agentd()
        self.start_agentd(['--max-fetch-bytes', '100000'])
        for path in ('/ok', '/chunked', '/close'):
            r = self.fetch(url=self.http.url(path), path=self.p('big'))
            self.assertError(r, 502, 'fetch_failed', '--max-fetch-bytes')
            self.assertFalse(os.path.exists(self.p('big')))
            self.assertEqual(self.leftovers(), [])
        self.stop_agentd()
        self.start_agentd(['--max-fetch-bytes', str(len(self.payload))])
        self.expect(self.fetch(url=self.http.url('/chunked'), path=self.p('ok')),
                    200)


if __name__ == '__main__':
    unittest.main()
