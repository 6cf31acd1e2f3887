"""Files: GET/PUT raw files, stat, fetch (from a local HTTP server)."""

import hashlib
import http.server
import os
import threading
import unittest
import urllib.parse

from harness import AgentdTestCase, TS_RE, free_port


def q(**kw):
    return '?' + urllib.parse.urlencode(kw)


class FilesTest(AgentdTestCase):

    def setUp(self):
        super().setUp()
        self.root = os.path.join(self.agentd.dir, 'files')
        os.mkdir(self.root)

    def put(self, path, data, **params):
        return self.req('PUT', '/v1/files' + q(path=path, **params), data,
                        headers={'Content-Type': 'application/octet-stream'})

    def get_file(self, path, **params):
        return self.req('GET', '/v1/files' + q(path=path, **params))

    def test_put_and_get(self):
        p = os.path.join(self.root, 'a.bin')
        data = bytes(range(256)) * 100
        r = self.put(p, data, mode='0644')
        self.expect(r, 200)
        self.assertEqual(r.json['path'], p)
        self.assertEqual(r.json['size'], len(data))
        self.assertEqual(r.json['sha256'], hashlib.sha256(data).hexdigest())
        with open(p, 'rb') as f:
            self.assertEqual(f.read(), data)
        self.assertEqual(os.stat(p).st_mode & 0o7777, 0o644)
        g = self.get_file(p)
        self.expect(g, 200)
        self.assertEqual(g.body, data)
        self.assertIn('application/octet-stream', g.header('Content-Type') or '')
        g = self.get_file(p, offset=10, length=20)
        self.expect(g, 200)
        self.assertEqual(g.body, data[10:30])
        g = self.get_file(p, offset=len(data) - 5)
        self.assertEqual(g.body, data[-5:])
        # no temporary files left beside it
        self.assertEqual(os.listdir(self.root), ['a.bin'])

    def test_put_mode_and_replace(self):
        p = os.path.join(self.root, 'x.sh')
        self.expect(self.put(p, b'one', mode='0755'), 200)
        self.assertEqual(os.stat(p).st_mode & 0o777, 0o755)
        ino = os.stat(p).st_ino
        self.expect(self.put(p, b'two', mode='0600'), 200)
        with open(p, 'rb') as f:
            self.assertEqual(f.read(), b'two')
        self.assertEqual(os.stat(p).st_mode & 0o777, 0o600)
        self.assertNotEqual(os.stat(p).st_ino, ino, 'not replaced by rename')
        self.assertEqual(sorted(os.listdir(self.root)), ['x.sh'])

    def test_put_mkdir(self):
        p = os.path.join(self.root, 'd1', 'd2', 'f.txt')
        self.expect(self.put(p, b'deep', mkdir='true'), 200)
        with open(p, 'rb') as f:
            self.assertEqual(f.read(), b'deep')
        r = self.put(os.path.join(self.root, 'nodir', 'f.txt'), b'x')
        self.assertGreaterEqual(r.status, 400)
        self.assertIn('error', r.json)

    def test_put_empty_and_large(self):
        p = os.path.join(self.root, 'empty')
        r = self.put(p, b'')
        self.expect(r, 200)
        self.assertEqual(r.json['size'], 0)
        self.assertEqual(os.path.getsize(p), 0)
        big = os.urandom(3 * 1024 * 1024)
        p2 = os.path.join(self.root, 'big')
        r = self.put(p2, big)
        self.expect(r, 200)
        self.assertEqual(r.json['sha256'], hashlib.sha256(big).hexdigest())
        self.assertEqual(self.get_file(p2).body, big)

    def test_get_errors(self):
        self.assertError(self.get_file(os.path.join(self.root, 'missing')), 404, 'not_found')
        self.assertError(self.get_file(self.root), 409, 'is_a_directory')
        self.assertError(self.get_file('relative/path'), 400, 'invalid_request', 'path')
        self.assertError(self.req('GET', '/v1/files'), 400, 'invalid_request', 'path')

    def test_put_errors(self):
        self.assertError(self.put('relative.txt', b'x'), 400, 'invalid_request', 'path')
        self.assertError(self.put(self.root, b'x'), 409, 'is_a_directory')

    def test_stat(self):
        f = os.path.join(self.root, 'f')
        with open(f, 'wb') as fh:
            fh.write(b'twelve bytes')
        os.chmod(f, 0o640)
        link = os.path.join(self.root, 'l')
        os.symlink(f, link)
        missing = os.path.join(self.root, 'nope')
        r = self.req('POST', '/v1/files/stat', {'paths': [f, self.root, link, missing]})
        self.expect(r, 200)
        res = r.json['results']
        self.assertEqual([x['path'] for x in res], [f, self.root, link, missing])
        a, d, l, m = res
        self.assertTrue(a['exists'])
        self.assertEqual(a['type'], 'file')
        self.assertEqual(a['size'], 12)
        self.assertEqual(a['mode'], '0640')
        self.assertRegex(a['mtime'], TS_RE)
        self.assertEqual(a['uid'], os.getuid())
        self.assertEqual(a['gid'], os.getgid())
        self.assertEqual(d['type'], 'dir')
        self.assertEqual(l['type'], 'symlink')
        self.assertFalse(m['exists'])
        self.assertEqual(m['error'], 'ENOENT')

    def test_stat_limits(self):
        paths = ['/tmp'] * 1001
        self.assertError(self.req('POST', '/v1/files/stat', {'paths': paths}), 400,
                         'invalid_request', 'paths')
        r = self.req('POST', '/v1/files/stat', {'paths': ['/tmp'] * 1000})
        self.expect(r, 200)
        self.assertEqual(len(r.json['results']), 1000)
        self.assertError(self.req('POST', '/v1/files/stat', {'paths': 'x'}), 400,
                         'invalid_request', 'paths')


class _Handler(http.server.BaseHTTPRequestHandler):
    payload = b''

    def do_GET(self):
        if self.path == '/ok':
            self.send_response(200)
            self.send_header('Content-Length', str(len(self.payload)))
            self.end_headers()
            self.wfile.write(self.payload)
        else:
            self.send_response(404)
            self.send_header('Content-Length', '0')
            self.end_headers()

    def log_message(self, *a):
        pass


class FetchTest(AgentdTestCase):

    def setUp(self):
        super().setUp()
        self.root = os.path.join(self.agentd.dir, 'fetched')
        os.mkdir(self.root)
        self.payload = os.urandom(200000)
        handler = type('H', (_Handler,), {'payload': self.payload})
        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def tearDown(self):
        self.server.shutdown()
        self.server.server_close()
        super().tearDown()

    def fetch(self, **body):
        return self.req('POST', '/v1/files/fetch', body)

    def test_fetch_ok(self):
        p = os.path.join(self.root, 'f.bin')
        sha = hashlib.sha256(self.payload).hexdigest()
        r = self.fetch(url='http://127.0.0.1:%d/ok' % self.port, path=p, mode='0600',
                       sha256=sha, timeout_ms=30000)
        self.expect(r, 200)
        self.assertEqual(r.json['path'], p)
        self.assertEqual(r.json['size'], len(self.payload))
        self.assertEqual(r.json['sha256'], sha)
        with open(p, 'rb') as f:
            self.assertEqual(f.read(), self.payload)
        self.assertEqual(os.stat(p).st_mode & 0o777, 0o600)
        self.assertEqual(os.listdir(self.root), ['f.bin'])

    def test_fetch_checksum_mismatch(self):
        p = os.path.join(self.root, 'bad.bin')
        r = self.fetch(url='http://127.0.0.1:%d/ok' % self.port, path=p, sha256='0' * 64)
        self.assertError(r, 422, 'checksum_mismatch')
        self.assertFalse(os.path.exists(p))
        self.assertEqual(os.listdir(self.root), [])

    def test_fetch_failed(self):
        p = os.path.join(self.root, 'missing.bin')
        r = self.fetch(url='http://127.0.0.1:%d/missing' % self.port, path=p)
        self.assertError(r, 502, 'fetch_failed')
        self.assertFalse(os.path.exists(p))
        r = self.fetch(url='http://127.0.0.1:%d/ok' % free_port(), path=p, timeout_ms=5000)
        self.assertError(r, 502, 'fetch_failed')
        self.assertEqual(os.listdir(self.root), [])

    def test_fetch_invalid(self):
        p = os.path.join(self.root, 'x')
        self.assertError(self.fetch(url='http://127.0.0.1:%d/ok' % self.port, path='rel'),
                         400, 'invalid_request', 'path')
        self.assertError(self.fetch(path=p), 400, 'invalid_request', 'url')


if __name__ == '__main__':
    unittest.main()
