"""What a browser page or a header flood can do to agentd before auth
(issue 13, items 1 and 5): header lines are bounded by count, so memory
follows parsed headers and returns; cross-site pages, DNS rebinding and
text/plain POSTs are refused, with or without a token."""

import json
import time

from hostilelib import (HostileTestCase, SANITIZED, SLOW, connect,
                        read_answer, rss_kib, status_of)


def body_of(data):
    return data.split(b'\r\n\r\n', 1)[1] if b'\r\n\r\n' in data else b''


class BrowserTest(HostileTestCase):
    """With no token (the `make run` default) a page in a browser could
    otherwise start commands: a cross-site POST needs no preflight when it
    is text/plain, and DNS rebinding makes the page same-origin."""

    agentd_token = False

    def raw(self, data, timeout=5.0):
        s = connect(self.agentd.port)
        s.sendall(data)
        ans, _ = read_answer(s, timeout * SLOW)
        s.close()
        return status_of(ans), ans

    def post(self, headers, body=b'{"cmd": "true"}', host=b'localhost'):
        return self.raw(b'POST /v1/sessions HTTP/1.1\r\nHost: %s\r\n%s'
                        b'Content-Length: %d\r\n\r\n%s'
                        % (host, headers, len(body), body))

    def sessions(self):
        r = self.req('GET', '/v1/sessions')
        return json.loads(r.body)['sessions']

    def error_code(self, ans):
        return json.loads(body_of(ans))['error']['code']

    def test_cross_site_origin_is_refused(self):
        for hdrs in (b'Origin: http://evil.example\r\n'
                     b'Content-Type: application/json\r\n',
                     b'Origin: null\r\nContent-Type: application/json\r\n',
                     b'Sec-Fetch-Site: cross-site\r\n'
                     b'Content-Type: application/json\r\n',
                     b'Sec-Fetch-Site: same-site\r\n'
                     b'Content-Type: application/json\r\n'):
            st, ans = self.post(hdrs)
            self.assertEqual(st, 403, ans[:300])
            self.assertEqual(self.error_code(ans), 'forbidden_origin')
        self.assertEqual(self.sessions(), [])
        # The page's own origin (none is served, but it is not an attack).
        st, ans = self.post(b'Origin: http://localhost\r\n'
                            b'Sec-Fetch-Site: same-origin\r\n'
                            b'Content-Type: application/json\r\n')
        self.assertEqual(st, 201, ans[:300])

    def test_text_plain_post_is_refused(self):
        # What a page may send across sites without a preflight, from a
        # browser (same-origin and a Mozilla User-Agent: no Origin check
        # stops it).
        browser = (b'Sec-Fetch-Site: same-origin\r\n',
                   b'User-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\n')
        for mark in browser:
            for ctype in (b'text/plain', b'application/x-www-form-urlencoded',
                          b'multipart/form-data; boundary=x'):
                st, ans = self.post(mark + b'Content-Type: %s\r\n' % ctype)
                self.assertEqual(st, 415, ans[:300])
                self.assertEqual(self.error_code(ans),
                                 'unsupported_media_type')
            st, ans = self.post(mark)
            self.assertEqual(st, 415, ans[:300])
        self.assertEqual(self.sessions(), [])
        # Not a browser: curl -d's form type, Node fetch's text/plain and
        # no type at all keep working.
        for hdrs in (b'User-Agent: curl/7.88.1\r\nContent-Type: '
                     b'application/x-www-form-urlencoded\r\n',
                     b'User-Agent: node\r\nContent-Type: '
                     b'text/plain;charset=UTF-8\r\n', b''):
            st, ans = self.post(hdrs)
            self.assertEqual(st, 201, ans[:300])
        st, ans = self.post(b'Content-Type: application/json; charset=utf-8\r\n')
        self.assertEqual(st, 201, ans[:300])
        # stdin takes raw bytes too; PUT /v1/files any type.
        sid = json.loads(body_of(ans))['id']
        st, ans = self.raw(b'POST /v1/sessions/%s/stdin HTTP/1.1\r\n'
                           b'Host: localhost\r\nContent-Type: '
                           b'application/octet-stream\r\nContent-Length: 0'
                           b'\r\n\r\n' % sid.encode())
        self.assertNotEqual(st, 415, ans[:300])
        st, ans = self.raw(b'PUT /v1/files?path=%s/f HTTP/1.1\r\n'
                           b'Host: localhost\r\nContent-Type: text/plain\r\n'
                           b'Content-Length: 2\r\n\r\nhi'
                           % self.agentd.workdir.encode())
        self.assertIn(st, (200, 201), ans[:300])

    def test_dns_rebinding_host_is_refused(self):
        port = b'%d' % self.agentd.port
        for host in (b'evil.example:' + port, b'evil.example',
                     b'127.0.0.1.evil.example:' + port):
            st, ans = self.raw(b'GET /v1/sessions HTTP/1.1\r\nHost: %s\r\n\r\n'
                               % host)
            self.assertEqual(st, 403, ans[:300])
            self.assertEqual(self.error_code(ans), 'forbidden_host')
        for host in (b'localhost:' + port, b'127.0.0.1:' + port,
                     b'127.0.0.1', b'[::1]:' + port, b'api.localhost:' + port,
                     b'LOCALHOST.'):
            st, ans = self.raw(b'GET /v1/sessions HTTP/1.1\r\nHost: %s\r\n\r\n'
                               % host)
            self.assertEqual(st, 200, (host, ans[:300]))


class RebindingWithTokenTest(HostileTestCase):
    """With a token a rebound page can do nothing (it has no token), and a
    sidecar proxy that connects over loopback may pass the platform's own
    Host on: any Host is served."""

    def test_any_host_with_the_token(self):
        s = connect(self.agentd.port)
        s.sendall(b'GET /v1/sessions HTTP/1.1\r\nHost: sandbox.svc:49984\r\n'
                  b'Authorization: Bearer %s\r\n\r\n'
                  % self.agentd.token.encode())
        data, _ = read_answer(s, 5 * SLOW)
        s.close()
        self.assertEqual(status_of(data), 200, data[:300])


class HeaderFloodTest(HostileTestCase):
    """Thousands of tiny header lines (':\\n') cost evhttp ~110 bytes of heap
    each: 100 connections sending 12 MiB took RSS to 697 MiB.  Now a head
    with more than --max-headers lines is refused (431) after ~100 lines,
    and its bytes are dropped."""

    CONNS = 100
    LINES = 30000            # 60 KB of ':\n' each, under the 64 KiB limit

    def test_header_lines_are_bounded(self):
        base = rss_kib(self.pid())
        flood = b'GET /healthz HTTP/1.1\r\nHost: localhost\r\n' + \
            b':\n' * self.LINES
        socks = []
        for _ in range(self.CONNS):
            s = connect(self.agentd.port)
            try:
                s.sendall(flood)
            except OSError:
                pass
            socks.append(s)
        time.sleep(0.5)
        grown = rss_kib(self.pid()) - base
        answers = {}
        for s in socks:
            data, _ = read_answer(s, 2 * SLOW)
            st = status_of(data)
            answers[st] = answers.get(st, 0) + 1
            if st == 431:
                self.assertIn(b'headers_too_large', data)
            s.close()
        print('%d connections x %d header lines: RSS grew %d KiB; answers %r'
              % (self.CONNS, self.LINES, grown, answers))
        self.assertGreater(answers.get(431, 0), self.CONNS // 2, answers)
        self.assertLess(grown, (64 if SANITIZED else 16) * 1024)
        # A request with many (legal) headers, under the limit, still works.
        s = connect(self.agentd.port)
        s.sendall(b'GET /healthz HTTP/1.1\r\nHost: localhost\r\n' +
                  b''.join(b'X-H%d: v\r\n' % i for i in range(90)) + b'\r\n')
        data, _ = read_answer(s, 5 * SLOW)
        s.close()
        self.assertEqual(status_of(data), 200, data[:300])
        self.assertAlive()
