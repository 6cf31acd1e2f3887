"""--web-dir: the web terminal's files at /term/ on agentd's own listeners
(API.md, "The web terminal's files").

Served without the token (they hold no data), with the page's CSP, no
framing and nosniff, a Content-Type by extension; the Host and cross-site
rules apply as to every route; nothing outside the folder, nothing but
regular files, nothing over --web-file-max.
"""

import http.client
import os
import shutil
import tempfile
import unittest

from harness import AgentdTestCase, free_port

FILES = {
    'index.html': ('text/html', b'<!doctype html><title>t</title>\n'),
    'app.js': ('text/javascript', b'console.log(1);\n'),
    'style.css': ('text/css', b'body{}\n'),
    'x.json': ('application/json', b'{}\n'),
    'app.js.map': ('application/json', b'{"version":3}\n'),
    'i.svg': ('image/svg+xml', b'<svg/>\n'),
    'i.png': ('image/png', b'\x89PNG\r\n\x1a\n'),
    'favicon.ico': ('image/x-icon', b'\x00\x00\x01\x00'),
    'f.woff2': ('font/woff2', b'wOF2'),
    'lib/xterm.js': ('text/javascript', b'var xterm;\n'),
}


class WebDirCase(AgentdTestCase):
    autostart = False

    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp(prefix='agentd-web-')
        self.addCleanup(shutil.rmtree, self.root, True)
        self.web = os.path.join(self.root, 'web')
        os.makedirs(os.path.join(self.web, 'lib'))
        for name, (_, data) in FILES.items():
            with open(os.path.join(self.web, name), 'wb') as f:
                f.write(data)

    def start(self, extra=(), **kw):
        return self.start_agentd(['--web-dir', self.web] + list(extra), **kw)

    def page(self, path, method='GET', headers=None, client=None):
        return (client or self.c).request(method, path, headers=headers, auth=False)

    def assertPageHeaders(self, r):
        csp = r.header('Content-Security-Policy') or ''
        for part in ("default-src 'self'", "script-src 'self'",
                     "style-src 'self' 'unsafe-inline'", "frame-ancestors 'none'"):
            self.assertIn(part, csp)
        self.assertNotIn('unsafe-eval', csp)
        self.assertNotIn("script-src 'self' 'unsafe-inline'", csp)
        self.assertEqual(r.header('X-Frame-Options'), 'DENY')
        self.assertEqual(r.header('X-Content-Type-Options'), 'nosniff')


class WebDirTest(WebDirCase):

    def test_files_headers_and_types(self):
        self.start()
        before = self.metric('agentd_web_files_total')
        for name, (ctype, data) in FILES.items():
            r = self.page('/term/' + name)
            self.expect(r, 200, name)
            self.assertEqual(r.body, data, name)
            self.assertEqual(r.header('Content-Type').split(';')[0], ctype, name)
            self.assertPageHeaders(r)
        # /term/ is index.html; HEAD has its length and no body.
        r = self.page('/term/')
        self.expect(r, 200)
        self.assertEqual(r.body, FILES['index.html'][1])
        self.assertPageHeaders(r)
        r = self.page('/term/app.js', method='HEAD')
        self.expect(r, 200)
        self.assertEqual(r.body, b'')
        self.assertEqual(r.header('Content-Length'), str(len(FILES['app.js'][1])))
        self.assertEqual(self.metric('agentd_web_files_total'),
                         before + len(FILES) + 2)

    def test_redirect(self):
        self.start()
        r = self.page('/term')
        self.assertEqual(r.status, 301)
        self.assertEqual(r.header('Location'), '/term/')
        r = self.page('/term?session=abc')
        self.assertEqual(r.status, 301)
        self.assertEqual(r.header('Location'), '/term/?session=abc')

    def test_no_token_for_the_page_only(self):
        self.start()
        self.expect(self.page('/term/'), 200)
        # The API beside it still wants the token, and so does any other
        # method on /term.
        r = self.c.request('GET', '/v1/sessions', auth=False)
        self.assertError(r, 401, 'unauthorized')
        r = self.c.request('POST', '/term/', auth=False)
        self.assertError(r, 401, 'unauthorized')
        r = self.c.request('DELETE', '/term/', auth=True)
        self.assertError(r, 405, 'method_not_allowed')
        # A wrong token does not matter to the page.
        r = self.page('/term/', headers={'Authorization': 'Bearer wrong'})
        self.expect(r, 200)

    def test_refusals(self):
        self.start(['--web-file-max', '2048'])
        self.assertEqual(self.metric('agentd_web_file_max_bytes'), 2048)
        outside = os.path.join(self.root, 'secret.txt')
        with open(outside, 'w') as f:
            f.write('TOPSECRET')
        os.symlink(outside, os.path.join(self.web, 'out.txt'))
        os.symlink('../secret.txt', os.path.join(self.web, 'lib', 'up.js'))
        os.symlink(self.root, os.path.join(self.web, 'rootdir'))
        os.symlink('app.js', os.path.join(self.web, 'in.js'))
        os.mkfifo(os.path.join(self.web, 'fifo.js'))
        with open(os.path.join(self.web, 'big.js'), 'wb') as f:
            f.write(b'x' * 4096)
        with open(os.path.join(self.web, '.hidden'), 'wb') as f:
            f.write(b'h')
        for path in ('/term/out.txt', '/term/lib/up.js', '/term/rootdir/secret.txt',
                     '/term/../secret.txt', '/term/lib/../../secret.txt',
                     '/term/%2e%2e/secret.txt', '/term/lib/%2e%2e/app.js',
                     '/term/.hidden', '/term/./app.js', '/term//app.js',
                     '/term/lib', '/term/lib/', '/term/fifo.js', '/term/big.js',
                     '/term/nothing.js', '/term/app.js%00.png', '/term/a\\b'):
            r = self.page(path)
            self.assertEqual(r.status, 404, '%s: %r' % (path, r.body[:200]))
            self.assertNotIn(b'TOPSECRET', r.body)
        # A symlink that stays inside the folder is followed.
        r = self.page('/term/in.js')
        self.expect(r, 200)
        self.assertEqual(r.body, FILES['app.js'][1])

    def test_unix_socket(self):
        self.start()
        c = self.agentd.unix_client()
        r = c.request('GET', '/term/app.js')
        self.expect(r, 200)
        self.assertEqual(r.body, FILES['app.js'][1])
        self.assertPageHeaders(r)

    def test_not_on_envd_listeners(self):
        port = free_port()
        self.start(['--envd-listen', '127.0.0.1:%d' % port])
        c = http.client.HTTPConnection('127.0.0.1', port, timeout=30)
        c.request('GET', '/term/app.js')
        r = c.getresponse()
        body = r.read()
        c.close()
        # envd's routes: no such file (its 404, or its token first).
        self.assertIn(r.status, (401, 404), body)
        self.assertNotEqual(body, FILES['app.js'][1])
        self.expect(self.page('/term/app.js'), 200)

    def test_disabled(self):
        a = self.start_agentd(['--web-dir', ''])
        self.assertEqual(self.page('/term/').status, 404)
        self.assertEqual(self.page('/term/app.js').status, 404)
        self.stop_agentd(a)
        self.start_agentd(['--web-dir', os.path.join(self.root, 'missing')])
        self.assertEqual(self.page('/term/').status, 404)
        self.assertIn('missing', self.agentd.stderr())

    def test_cross_site_refused(self):
        self.start()
        for h in ({'Origin': 'http://evil.example'},
                  {'Sec-Fetch-Site': 'cross-site'}):
            r = self.page('/term/', headers=h)
            self.assertError(r, 403, 'forbidden_origin')
        # The page's own origin, and a navigation, are served.
        r = self.page('/term/', headers={'Origin': 'http://127.0.0.1:%d' % self.agentd.port,
                                         'Sec-Fetch-Site': 'same-origin'})
        self.expect(r, 200)
        self.expect(self.page('/term/', headers={'Sec-Fetch-Site': 'none'}), 200)


class WebDirNoTokenTest(WebDirCase):

    def test_host_rule(self):
        self.start(token=False)
        r = self.page('/term/', headers={'Host': 'evil.example'})
        self.assertError(r, 403, 'forbidden_host')
        r = self.page('/term/', headers={'Host': 'localhost:%d' % self.agentd.port})
        self.expect(r, 200)
        self.assertPageHeaders(r)


if __name__ == '__main__':
    unittest.main()
