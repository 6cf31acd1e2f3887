"""POST /v1/files/fetch: http:// and https:// into a file, atomically."""

import hashlib
import os
import socket
import stat
import threading
import time
import unittest

from harness import Background, free_port
from filesutil import FilesCase, rss_kib
from servers import Server, TestPKI, big_sha256


class FetchCase(FilesCase):
    payload = os.urandom(300007)

    def setUp(self):
        super().setUp()
        self.http = Server(self.payload)
        self.sha = hashlib.sha256(self.payload).hexdigest()

    def tearDown(self):
        self.http.close()
        super().tearDown()

    def fetched(self, r, path, data=None):
        data = self.payload if data is None else data
        self.expect(r, 200)
        self.assertEqual(r.json, {'path': path, 'size': len(data),
                                  'sha256': hashlib.sha256(data).hexdigest()})
        with open(path, 'rb') as f:
            self.assertEqual(f.read(), data)
        self.assertEqual(self.leftovers(os.path.dirname(path)), [])

    def nothing_at(self, path):
        self.assertFalse(os.path.lexists(path), '%s was left behind' % path)
        self.assertEqual(self.leftovers(os.path.dirname(path)), [])


class FetchHTTPTest(FetchCase):

    def test_framings(self):
        for how in ('ok', 'chunked', 'close'):
            path = self.p(how)
            self.fetched(self.fetch(url=self.http.url('/' + how), path=path), path)
        path = self.p('empty')
        self.fetched(self.fetch(url=self.http.url('/empty'), path=path), path, b'')
        # a query string and a fragment
        path = self.p('q')
        self.fetched(self.fetch(url=self.http.url('/ok?a=1&b=%20#frag'), path=path), path)
        self.assertIn('/ok?a=1&b=%20', self.http.hits)

    def test_sha256_and_mode(self):
        path = self.p('f.bin')
        r = self.fetch(url=self.http.url('/ok'), path=path, sha256=self.sha.upper(),
                       mode='0750', timeout_ms=30000)
        self.fetched(r, path)
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o750)
        path = self.p('g.bin')
        self.fetched(self.fetch(url=self.http.url('/ok'), path=path, mode=0o600), path)
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        path = self.p('h.bin')
        self.fetched(self.fetch(url=self.http.url('/ok'), path=path), path)
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o644)

    def test_checksum_mismatch(self):
        path = self.p('bad.bin')
        r = self.fetch(url=self.http.url('/ok'), path=path, sha256='0' * 64)
        err = self.assertError(r, 422, 'checksum_mismatch')
        self.assertIn(self.sha, err['message'])
        self.nothing_at(path)
        # an older file stays as it was
        with open(path, 'wb') as f:
            f.write(b'old')
        self.assertError(self.fetch(url=self.http.url('/chunked'), path=path,
                                    sha256='1' * 64), 422, 'checksum_mismatch')
        with open(path, 'rb') as f:
            self.assertEqual(f.read(), b'old')
        self.assertEqual(self.leftovers(), [])

    def test_mkdir(self):
        path = self.p('x', 'y', 'z.bin')
        self.assertError(self.fetch(url=self.http.url('/ok'), path=path), 404, 'not_found')
        self.assertFalse(os.path.exists(self.p('x')))
        self.fetched(self.fetch(url=self.http.url('/ok'), path=path, mkdir=True), path)
        self.assertError(self.fetch(url=self.http.url('/ok'), path=self.root), 409,
                         'is_a_directory')

    def test_redirects(self):
        for kind, n in (('abs', 1), ('abs', 5), ('rel', 5), ('proto', 2)):
            path = self.p('%s%d' % (kind, n))
            self.fetched(self.fetch(url=self.http.url('/r/%s/%d' % (kind, n)), path=path),
                         path)
        for code in (301, 302, 303, 307, 308):
            path = self.p('code%d' % code)
            self.fetched(self.fetch(url=self.http.url('/r/code/%d' % code), path=path), path)
        path = self.p('toomany')
        err = self.assertError(self.fetch(url=self.http.url('/r/abs/6'), path=path),
                               502, 'fetch_failed')
        self.assertIn('redirect', err['message'])
        self.nothing_at(path)
        err = self.assertError(self.fetch(url=self.http.url('/r/loop'), path=path),
                               502, 'fetch_failed')
        self.assertIn('redirect', err['message'])
        self.nothing_at(path)

    def test_http_status(self):
        path = self.p('st')
        for code in (404, 500, 403, 410):
            err = self.assertError(self.fetch(url=self.http.url('/status/%d' % code),
                                              path=path), 502, 'fetch_failed')
            self.assertIn(str(code), err['message'])
            self.nothing_at(path)

    def test_unreachable(self):
        path = self.p('u')
        t0 = time.monotonic()
        err = self.assertError(self.fetch(url='http://127.0.0.1:%d/x' % free_port(),
                                          path=path, timeout_ms=60000), 502, 'fetch_failed')
        self.assertIn('connect', err['message'])
        self.assertIn('refused', err['message'].lower())
        # At once, not at the timeout (a bound for a busy machine).
        self.assertLess(time.monotonic() - t0, 20)
        self.nothing_at(path)

    def test_timeout(self):
        path = self.p('slow')
        t0 = time.monotonic()
        err = self.assertError(self.fetch(url=self.http.url('/slow?ms=60000'), path=path,
                                          timeout_ms=500), 502, 'fetch_failed')
        took = time.monotonic() - t0
        self.assertIn('timeout', err['message'])
        # Ended by the timeout, not by the server's minute (a busy machine
        # may be late; a timer is never early).
        self.assertLess(took, 20)
        self.assertGreaterEqual(took, 0.45)
        self.nothing_at(path)
        # a body that stalls half-way
        err = self.assertError(self.fetch(url=self.http.url('/trickle'), path=path,
                                          timeout_ms=1500), 502, 'fetch_failed')
        self.assertIn('timeout', err['message'])
        self.nothing_at(path)

    def test_loop_not_blocked(self):
        """healthz and other requests answer while fetches wait."""
        path = self.p('slow')
        c2 = self.agentd.tcp_client()
        bg = Background(self.fetch, url=self.http.url('/slow?ms=8000'), path=path)
        time.sleep(0.2)
        self.healthz(client=c2)
        self.expect(self.req('POST', '/v1/files/stat', {'paths': ['/']}, client=c2), 200)
        # Answered while the fetch waits (an order, not a speed: with the
        # loop blocked they would come after the server's 8 s).
        self.assertIsNone(bg.done_at, 'the fetch ended before healthz')
        self.fetched(bg.join_result(), path)

    def test_client_goes_away(self):
        """A client that hangs up cancels its fetch: no file, no temporary file."""
        path = self.p('gone')
        body = ('{"url": "%s", "path": "%s"}' % (self.http.url('/trickle'), path)).encode()
        for _ in range(3):
            s = socket.create_connection(('127.0.0.1', self.agentd.port))
            s.sendall(b'POST /v1/files/fetch HTTP/1.1\r\nHost: localhost\r\n'
                      b'Authorization: Bearer ' + self.agentd.token.encode() +
                      b'\r\nContent-Type: application/json\r\n'
                      b'Content-Length: %d\r\n\r\n' % len(body) + body)
            self.wait_for(lambda: any('agentd-tmp' in n for n in os.listdir(self.root)),
                          what='the download started')
            s.close()
            self.wait_for(lambda: self.leftovers() == [], timeout=5,
                          what='the temporary file removed')
        self.assertFalse(os.path.exists(path))
        self.healthz()
        # the slots came back
        for i in range(9):
            self.fetched(self.fetch(url=self.http.url('/ok'), path=self.p('after%d' % i)),
                         self.p('after%d' % i))

    def test_shutdown_during_fetch(self):
        """SIGTERM while a download runs: agentd exits 0, no file left."""
        path = self.p('stopped')
        bg = Background(self.fetch, url=self.http.url('/trickle'), path=path,
                        client=self.agentd.tcp_client())
        self.wait_for(lambda: self.leftovers() != [], what='the download started')
        t0 = time.monotonic()
        self.stop_agentd()          # fails unless it exits 0 in time
        self.assertLess(time.monotonic() - t0, 20)  # not the 1000 s trickle
        self.nothing_at(path)
        bg.join(10)

    def test_concurrency_limit(self):
        clients = [self.agentd.tcp_client() for _ in range(8)]
        bgs = [Background(self.fetch, url=self.http.url('/slow?ms=2500'),
                          path=self.p('c%d' % i), client=c) for i, c in enumerate(clients)]
        self.wait_for(lambda: len([n for n in os.listdir(self.root)
                                   if 'agentd-tmp' in n]) == 8, what='8 fetches running')
        self.assertError(self.fetch(url=self.http.url('/ok'), path=self.p('ninth')), 429,
                         'too_many_fetches')
        results = [bg.join_result() for bg in bgs]
        for i, r in enumerate(results):
            self.fetched(r, self.p('c%d' % i))
        self.fetched(self.fetch(url=self.http.url('/ok'), path=self.p('ninth')),
                     self.p('ninth'))

    def test_invalid(self):
        p = self.p('x')
        url = self.http.url('/ok')
        cases = [
            ({'path': p}, 'url'),
            ({'url': url}, 'path'),
            ({'url': url, 'path': 'rel'}, 'path'),
            ({'url': 'ftp://127.0.0.1/x', 'path': p}, 'url'),
            ({'url': 'file:///etc/passwd', 'path': p}, 'url'),
            ({'url': 'http://', 'path': p}, 'url'),
            ({'url': 'http://a b/', 'path': p}, 'url'),
            ({'url': 'http://u:pw@127.0.0.1/', 'path': p}, 'url'),
            ({'url': 'http://127.0.0.1:99999/', 'path': p}, 'url'),
            ({'url': url, 'path': p, 'sha256': 'abc'}, 'sha256'),
            ({'url': url, 'path': p, 'sha256': 'g' * 64}, 'sha256'),
            ({'url': url, 'path': p, 'mode': '0999'}, 'mode'),
            ({'url': url, 'path': p, 'timeout_ms': -1}, 'timeout_ms'),
            ({'url': url, 'path': p, 'timeout_ms': 'x'}, 'timeout_ms'),
            ({'url': url, 'path': p, 'ca_file': 'rel.pem'}, 'ca_file'),
            ({'url': url, 'path': p, 'mkdir': 'yes'}, 'mkdir'),
            ({'url': url, 'path': p, 'nope': 1}, 'nope'),
        ]
        for body, field in cases:
            self.assertError(self.fetch(**body), 400, 'invalid_request', field)
        self.nothing_at(p)
        self.assertError(self.req('GET', '/v1/files/fetch'), 405, 'method_not_allowed')

    def test_big_download_bounded_rss(self):
        mib = 48
        path = self.p('big')
        base = rss_kib(self.agentd.proc.pid)
        peak = [base]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], rss_kib(self.agentd.proc.pid))
                time.sleep(0.02)
        t = threading.Thread(target=sample, daemon=True)
        t.start()
        try:
            r = self.fetch(url=self.http.url('/big?mib=%d' % mib), path=path,
                           sha256=big_sha256(mib))
        finally:
            done.set()
            t.join()
        self.expect(r, 200)
        self.assertEqual(r.json['size'], mib << 20)
        self.assertEqual(os.path.getsize(path), mib << 20)
        self.assertLess(peak[0], 64 * 1024, 'agentd RSS peaked at %d KiB' % peak[0])


class FetchHTTPSTest(FetchCase):

    @classmethod
    def setUpClass(cls):
        try:
            cls.pki = TestPKI()
        except (RuntimeError, OSError) as e:
            raise unittest.SkipTest(str(e))
        cls.good = cls.pki.server_cert('good', 'DNS:localhost,IP:127.0.0.1,IP:::1')
        cls.wrong = cls.pki.server_cert('wrong', 'DNS:wrong.example,IP:10.9.9.9')

    @classmethod
    def tearDownClass(cls):
        cls.pki.cleanup()

    def setUp(self):
        super().setUp()
        self.https = Server(self.payload, self.pki.context(*self.good))
        self.https_wrong = Server(self.payload, self.pki.context(*self.wrong))
        self.http.set_peer(self.https)

    def tearDown(self):
        self.https.close()
        self.https_wrong.close()
        super().tearDown()

    def test_https_with_ca_file(self):
        for host in ('127.0.0.1', 'localhost'):
            for how in ('/ok', '/chunked', '/close', '/r/rel/2'):
                path = self.p(host + how.replace('/', '_'))
                r = self.fetch(url=self.https.url(how, host), path=path,
                               ca_file=self.pki.ca_crt, sha256=self.sha)
                self.fetched(r, path)

    def test_https_without_ca_fails(self):
        path = self.p('nope')
        err = self.assertError(self.fetch(url=self.https.url('/ok'), path=path), 502,
                               'fetch_failed')
        self.assertIn('verify', err['message'])
        self.nothing_at(path)

    def test_https_wrong_name(self):
        path = self.p('wrong')
        for host in ('127.0.0.1', 'localhost'):
            err = self.assertError(self.fetch(url=self.https_wrong.url('/ok', host),
                                              path=path, ca_file=self.pki.ca_crt),
                                   502, 'fetch_failed')
            self.assertIn('verify', err['message'])
            self.nothing_at(path)

    def test_https_bad_ca_file(self):
        path = self.p('x')
        self.assertError(self.fetch(url=self.https.url('/ok'), path=path,
                                    ca_file=self.p('missing.pem')), 400,
                         'invalid_request', 'ca_file')
        junk = self.p('junk.pem')
        with open(junk, 'w') as f:
            f.write('not a certificate\n')
        self.assertError(self.fetch(url=self.https.url('/ok'), path=path, ca_file=junk),
                         400, 'invalid_request', 'ca_file')
        # another CA's file: the chain does not verify
        other = TestPKI()
        try:
            err = self.assertError(self.fetch(url=self.https.url('/ok'), path=path,
                                              ca_file=other.ca_crt), 502, 'fetch_failed')
            self.assertIn('verify', err['message'])
        finally:
            other.cleanup()
        self.nothing_at(path)

    def test_http_to_https_redirect(self):
        path = self.p('up')
        self.fetched(self.fetch(url=self.http.url('/to-https'), path=path,
                                ca_file=self.pki.ca_crt), path)

    def test_https_errors(self):
        path = self.p('e')
        err = self.assertError(self.fetch(url=self.https.url('/status/404'), path=path,
                                          ca_file=self.pki.ca_crt), 502, 'fetch_failed')
        self.assertIn('404', err['message'])
        # TLS to a plain HTTP server
        err = self.assertError(self.fetch(url='https://127.0.0.1:%d/ok' % self.http.port,
                                          path=path, ca_file=self.pki.ca_crt,
                                          timeout_ms=5000), 502, 'fetch_failed')
        self.assertIn('TLS', err['message'])
        self.nothing_at(path)


if __name__ == '__main__':
    unittest.main()
