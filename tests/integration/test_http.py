"""HTTP conformance with real clients (issue 14, item 10): HEAD answers
without a body, 413 from the headers instead of 100 Continue, Allow on 405,
Host required on HTTP/1.1, Date on HTTP/1.0, chunk extensions ignored, and
every error body JSON.  Raw sockets, so that nothing is smoothed over."""

import email.utils
import json
import os
import socket
import subprocess
import time
import unittest

from harness import AgentdTestCase, SLOW, agentd_path, free_port


class Raw:
    """A raw HTTP/1.x connection to agentd."""

    def __init__(self, port, timeout=10.0 * SLOW):
        self.s = socket.create_connection(('127.0.0.1', port), timeout=timeout)
        self.buf = b''

    def send(self, data):
        self.s.sendall(data)

    def _fill(self):
        chunk = self.s.recv(65536)
        if not chunk:
            raise EOFError('closed')
        self.buf += chunk

    def head(self):
        """Read one status line and headers: (status, {name: [values]})."""
        while b'\r\n\r\n' not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b'\r\n\r\n', 1)
        lines = head.decode('latin-1').split('\r\n')
        status = int(lines[0].split()[1])
        hdrs = {}
        for line in lines[1:]:
            k, v = line.split(':', 1)
            hdrs.setdefault(k.strip().lower(), []).append(v.strip())
        return status, hdrs

    def answer(self, head_only=False):
        """One answer: (status, headers, body); a HEAD answer has none."""
        status, hdrs = self.head()
        n = 0 if head_only else int(hdrs.get('content-length', ['0'])[0])
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, hdrs, body

    def rest(self, timeout=2.0 * SLOW):
        """Whatever comes until the close or timeout."""
        self.s.settimeout(timeout)
        try:
            while True:
                self._fill()
        except (EOFError, socket.timeout, ConnectionResetError):
            pass
        out, self.buf = self.buf, b''
        return out

    def close(self):
        self.s.close()


class HttpTest(AgentdTestCase):

    agentd_args = ('--max-body', '4096')

    def raw(self):
        r = Raw(self.agentd.port)
        self.addCleanup(r.close)
        return r

    def auth(self):
        return b'Authorization: Bearer %s\r\n' % self.agentd.token.encode()

    def assertJsonError(self, status, hdrs, body, want_status, code=None):
        self.assertEqual(status, want_status, body[:300])
        self.assertTrue(hdrs.get('content-type', [''])[0].startswith(
            'application/json'), hdrs)
        err = json.loads(body)['error']
        if code is not None:
            self.assertEqual(err['code'], code, body)

    def test_head_answers_have_no_body(self):
        r = self.raw()
        r.send(b'HEAD /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n'
               b'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n')
        st, hdrs, body = r.answer(head_only=True)
        self.assertEqual(st, 200)
        # The length a GET would have, and no body after the head: the
        # next bytes are the second answer's status line.
        self.assertGreater(int(hdrs['content-length'][0]), 0)
        st, hdrs2, body2 = r.answer()
        self.assertEqual(st, 200, r.buf[:200])
        self.assertEqual(json.loads(body2)['status'], 'ok')

    def test_head_of_an_error_has_no_body(self):
        r = self.raw()
        r.send(b'HEAD /nowhere HTTP/1.1\r\nHost: localhost\r\n%s\r\n'
               b'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n' % self.auth())
        st, _, _ = r.answer(head_only=True)
        self.assertEqual(st, 404)
        st, _, body = r.answer()
        self.assertEqual(st, 200, body[:200])

    def test_head_wherever_get(self):
        # RFC 9110 9.3.2: HEAD is GET without the body.  Every route a GET
        # reads answers it (the files' GET excepted, API.md), and a 405
        # names HEAD in Allow beside GET.
        doc = b'{"id": "h1", "cmd": "echo hi", "yield_ms": 5000}'
        r = self.raw()
        r.send(b'POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\n%s'
               b'Content-Length: %d\r\n\r\n%s' % (self.auth(), len(doc), doc))
        self.assertEqual(r.answer()[0], 201)
        for target, accept in ((b'/metrics', b''), (b'/v1/sessions', b''),
                               (b'/v1/sessions/h1?cursor=0', b''),
                               (b'/v1/sessions/h1?cursor=0',
                                b'Accept: Application/Octet-Stream\r\n')):
            with self.subTest(target=target, accept=accept):
                r.send(b'GET %s HTTP/1.1\r\nHost: localhost\r\n%s%s\r\n'
                       % (target, accept, self.auth()))
                st, hdrs, body = r.answer()
                self.assertEqual(st, 200, body[:200])
                r.send(b'HEAD %s HTTP/1.1\r\nHost: localhost\r\n%s%s\r\n'
                       % (target, accept, self.auth()))
                st, hhdrs, _ = r.answer(head_only=True)
                self.assertEqual(st, 200)
                self.assertEqual(hhdrs['content-type'], hdrs['content-type'])
                if target != b'/metrics':   # its uptime changes its length
                    self.assertEqual(hhdrs['content-length'],
                                     [str(len(body))])
        self.assertEqual(hdrs['content-type'], ['application/octet-stream'])
        self.assertEqual(body, b'hi\n')
        # No body came after the HEAD answers: the next bytes are this one's.
        r.send(b'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n')
        st, _, body = r.answer()
        self.assertEqual(st, 200, r.buf[:200])
        self.assertEqual(json.loads(body)['status'], 'ok')
        r.send(b'PATCH /v1/sessions/h1 HTTP/1.1\r\nHost: localhost\r\n%s\r\n'
               % self.auth())
        st, hdrs, body = r.answer()
        self.assertJsonError(st, hdrs, body, 405, 'method_not_allowed')
        self.assertEqual(hdrs['allow'], ['GET, HEAD, DELETE'])

    def test_reason_phrases(self):
        # evhttp's own table stops at 417 and 505 ("Client Error" for 422
        # and 429): each status has its name.
        r = self.raw()
        doc = b'{"argv": ["/nonexistent/x"]}'
        r.send(b'POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\n%s'
               b'Content-Length: %d\r\n\r\n%s' % (self.auth(), len(doc), doc))
        while b'\r\n' not in r.buf:
            r._fill()
        self.assertTrue(r.buf.startswith(
            b'HTTP/1.1 422 Unprocessable Entity\r\n'), r.buf[:100])
        self.assertJsonError(*r.answer(), 422, 'spawn_failed')

    def test_expect_continue_over_max_body_gets_413_at_once(self):
        r = self.raw()
        t0 = time.monotonic()
        r.send(b'POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\n%s'
               b'Content-Type: application/json\r\nContent-Length: 5000\r\n'
               b'Expect: 100-continue\r\n\r\n' % self.auth())
        st, hdrs, body = r.answer()
        self.assertJsonError(st, hdrs, body, 413, 'body_too_large')
        self.assertLess(time.monotonic() - t0, 2.0 * SLOW)

    def test_expect_continue_within_max_body_continues(self):
        r = self.raw()
        doc = b'{"cmd": "true", "yield_ms": 5000}'
        r.send(b'POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\n%s'
               b'Content-Type: application/json\r\nContent-Length: %d\r\n'
               b'Expect: 100-continue\r\n\r\n' % (self.auth(), len(doc)))
        st, _ = r.head()
        self.assertEqual(st, 100)
        r.send(doc)
        st, _, body = r.answer()
        self.assertEqual(st, 201, body[:300])

    def test_other_expectations_get_417_json(self):
        r = self.raw()
        r.send(b'POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\n%s'
               b'Content-Length: 2\r\nExpect: teapot\r\n\r\n{}' % self.auth())
        self.assertJsonError(*r.answer(), 417, 'expectation_failed')

    def test_405_says_allow(self):
        r = self.raw()
        r.send(b'DELETE /healthz HTTP/1.1\r\nHost: localhost\r\n%s\r\n'
               % self.auth())
        st, hdrs, body = r.answer()
        self.assertJsonError(st, hdrs, body, 405, 'method_not_allowed')
        self.assertEqual(hdrs['allow'], ['GET, HEAD'])
        r.send(b'PUT /v1/sessions HTTP/1.1\r\nHost: localhost\r\n%s'
               b'Content-Length: 0\r\n\r\n' % self.auth())
        st, hdrs, body = r.answer()
        self.assertEqual(st, 405)
        self.assertEqual(hdrs['allow'], ['GET, HEAD, POST'])

    def test_http11_needs_one_host(self):
        for req in (b'GET /healthz HTTP/1.1\r\n\r\n',
                    b'GET /healthz HTTP/1.1\r\nHost: localhost\r\n'
                    b'Host: 127.0.0.1\r\n\r\n'):
            r = self.raw()
            r.send(req)
            self.assertJsonError(*r.answer(), 400, 'invalid_request')
        # HTTP/1.0 needs none.
        r = self.raw()
        r.send(b'GET /healthz HTTP/1.0\r\n\r\n')
        st, hdrs, body = r.answer()
        self.assertEqual(st, 200, body)

    def test_http_versions(self):
        # RFC 9110 2.5: a higher minor version is served as the highest one
        # known (HTTP/1.1), keep-alive and all; another major version is
        # 505, in the shape of every error.
        for version in (b'1.2', b'1.9'):
            r = self.raw()
            r.send(b'GET /healthz HTTP/%s\r\nHost: localhost\r\n\r\n'
                   b'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n'
                   % version)
            st, hdrs, body = r.answer()
            self.assertEqual(st, 200, (version, body))
            self.assertEqual(json.loads(body)['status'], 'ok')
            st, hdrs, body = r.answer()
            self.assertEqual(st, 200, (version, body))
        for version in (b'2.0', b'3.0', b'0.9'):
            r = self.raw()
            r.send(b'GET /healthz HTTP/%s\r\nHost: localhost\r\n\r\n'
                   % version)
            st, hdrs, body = r.answer()
            self.assertJsonError(st, hdrs, body, 505,
                                 'http_version_not_supported')
            self.assertEqual(hdrs.get('connection'), ['close'], hdrs)
        # The answer speaks HTTP/1.1, not the client's 1.2.
        r = self.raw()
        r.send(b'GET /healthz HTTP/1.2\r\nHost: localhost\r\n'
               b'Connection: close\r\n\r\n')
        self.assertTrue(r.rest().startswith(b'HTTP/1.1 200 '))

    def test_http10_answers_are_dated(self):
        for version in (b'1.0', b'1.1'):
            r = self.raw()
            r.send(b'GET /healthz HTTP/%s\r\nHost: localhost\r\n\r\n' % version)
            st, hdrs, _ = r.answer()
            self.assertEqual(st, 200)
            self.assertEqual(len(hdrs.get('date', [])), 1, hdrs)
            self.assertTrue(hdrs['date'][0].endswith(' GMT'), hdrs)

    def test_http10_answers_have_a_length(self):
        # evhttp ends an HTTP/1.0 answer that is not kept alive by the close
        # alone; it carries its Content-Length all the same, errors too.
        for target, auth in ((b'/healthz', b''), (b'/v1/sessions', b''),
                             (b'/v1/sessions', self.auth())):
            r = self.raw()
            r.send(b'GET %s HTTP/1.0\r\n%s\r\n' % (target, auth))
            st, hdrs = r.head()
            body = r.rest()
            self.assertEqual(hdrs.get('content-length'), [str(len(body))],
                             (target, st, hdrs))

    def test_date_is_now(self):
        # The Date is formatted once a second and kept: each answer's is
        # the second it was sent in, and it moves on.
        r = self.raw()
        dates = []
        for i in range(2):
            if i:
                time.sleep(1.2)
            t0 = time.time()
            r.send(b'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n')
            st, hdrs, _ = r.answer()
            t1 = time.time()
            self.assertEqual(st, 200)
            date = email.utils.parsedate_to_datetime(hdrs['date'][0])
            dates.append(date.timestamp())
            self.assertGreaterEqual(dates[-1], int(t0), hdrs)
            self.assertLessEqual(dates[-1], t1, hdrs)
        self.assertGreater(dates[1], dates[0])

    def test_request_targets_long_and_short_are_checked(self):
        # The gate checks a target of up to 255 bytes on the stack, a
        # longer one in a malloc'd copy: both parse, both refuse a bad one.
        r = self.raw()
        for n in (1, 254, 255, 256, 257, 4000):
            target = b'/healthz?' + b'x' * (n - 9) if n > 9 else b'/'
            target = target[:n]
            r.send(b'GET %s HTTP/1.1\r\nHost: localhost\r\n%s\r\n'
                   % (target, self.auth()))
            st, hdrs, body = r.answer()
            self.assertEqual(st, 200 if n >= 8 else 404, (n, body[:200]))
        for n in (10, 300):
            r = self.raw()
            r.send(b'GET http://[%s/ HTTP/1.1\r\nHost: localhost\r\n%s\r\n'
                   % (b'x' * n, self.auth()))
            st, hdrs, body = r.answer()
            self.assertJsonError(st, hdrs, body, 400, 'invalid_request')
            self.assertIn(b'malformed request target', body)

    def test_chunk_extensions_are_ignored(self):
        doc = b'{"cmd": "echo hi", "yield_ms": 5000}'
        r = self.raw()
        r.send(b'POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\n%s'
               b'Content-Type: application/json\r\n'
               b'Transfer-Encoding: chunked\r\n\r\n'
               b'%x;name=value;other\r\n%s\r\n%x ; x="y"\r\n%s\r\n'
               b'0;last\r\nX-Trailer: 1\r\n\r\n'
               % (self.auth(), 10, doc[:10], len(doc) - 10, doc[10:]))
        st, _, body = r.answer()
        self.assertEqual(st, 201, body[:300])
        # The connection goes on.
        r.send(b'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n')
        self.assertEqual(r.answer()[0], 200)

    def test_chunk_size_lines_are_bounded(self):
        doc = b'{"cmd": "true", "yield_ms": 5000}'
        for n, want in ((1024, 201), (1025, 400)):
            line = b'%x;' % len(doc)
            line += b'e' * (n - len(line))
            r = self.raw()
            r.send(b'POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\n%s'
                   b'Content-Type: application/json\r\n'
                   b'Transfer-Encoding: chunked\r\n\r\n%s\r\n%s\r\n0\r\n\r\n'
                   % (self.auth(), line, doc))
            st, _, body = r.answer()
            self.assertEqual(st, want, (n, body[:300]))

    def test_chunked_body_over_max_body_gets_json_413(self):
        r = self.raw()
        r.send(b'POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\n%s'
               b'Content-Type: application/json\r\n'
               b'Transfer-Encoding: chunked\r\n\r\n' % self.auth())
        for _ in range(3):
            r.send(b'800\r\n' + b' ' * 0x800 + b'\r\n')
        self.assertJsonError(*r.answer(), 413, 'body_too_large')

    def test_not_http_is_refused_at_once(self):
        # An https:// client's TLS handshake has no line end for the gate
        # to wait for: it gets a 400 (and its TLS library an error) at
        # once, not a silent close at the header timeout.
        r = self.raw()
        r.send(b'\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03' + b'\x00' * 32)
        st, hdrs, body = r.answer()
        self.assertJsonError(st, hdrs, body, 400, 'invalid_request')
        self.assertIn(b'not an HTTP request', body)

    def pipelined_then_half_close(self, reqs, unix=False):
        """Send reqs on one connection, shut our side; every answer."""
        if unix:
            r = Raw.__new__(Raw)
            r.s = socket.socket(socket.AF_UNIX)
            r.s.settimeout(10.0 * SLOW)
            r.s.connect(self.agentd.socket_path)
            r.buf = b''
            self.addCleanup(r.close)
        else:
            r = self.raw()
        r.send(b''.join(reqs))
        r.s.shutdown(socket.SHUT_WR)
        answers = []
        try:
            while True:
                answers.append(r.answer())
        except EOFError:
            pass
        return answers

    def test_pipelined_requests_before_a_half_close_are_answered(self):
        # RFC 9112 9.6: a client may send its requests and shut its side;
        # every whole request sent before that is answered, in order.  It
        # was the first only, as often as not: the close was read before
        # the second request was.
        get = (b'GET %s HTTP/1.1\r\nHost: localhost\r\n' + self.auth() +
               b'%s\r\n')
        for path in (b'/v1/events?cursor=0', b'/v1/sessions') * 10:
            answers = self.pipelined_then_half_close(
                [get % (b'/healthz', b''),
                 get % (path, b'Connection: close\r\n')])
            self.assertEqual([a[0] for a in answers], [200, 200], path)
            self.assertEqual(json.loads(answers[0][2])['status'], 'ok')
            self.assertIn(b'cursor' if b'events' in path else b'sessions',
                          answers[1][2])
        # Four, one with a body, the last without Connection: close.
        body = b'{"text": "hi\\n"}'
        post = (b'POST /v1/sessions/nope/stdin HTTP/1.1\r\nHost: localhost'
                b'\r\n' + self.auth() + b'Content-Type: application/json\r\n'
                b'Content-Length: %d\r\n\r\n%s' % (len(body), body))
        answers = self.pipelined_then_half_close(
            [get % (b'/healthz', b''), post, get % (b'/v1/sessions', b''),
             get % (b'/healthz', b'')])
        self.assertEqual([a[0] for a in answers], [200, 404, 200, 200],
                         answers)
        self.assertIn(b'sessions', answers[2][2])
        # The unix socket (vsock goes the same way: conn.c).
        for _ in range(10):
            answers = self.pipelined_then_half_close(
                [get % (b'/healthz', b''), get % (b'/v1/sessions', b'')],
                unix=True)
            self.assertEqual([a[0] for a in answers], [200, 200])
        self.assertGreater(self.metric('agentd_http_pipelined_pauses_total'), 0)

    def test_a_request_cut_short_by_a_half_close_is_not_waited_for(self):
        # The second request's head is not whole: the first is answered,
        # then the connection ends (nothing waits for bytes that cannot
        # come).
        r = self.raw()
        r.send(b'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n'
               b'GET /healthz HTTP/1.1\r\nHost: loc')
        r.s.shutdown(socket.SHUT_WR)
        t0 = time.monotonic()
        status, _, _ = r.answer()
        self.assertEqual(status, 200)
        self.assertEqual(r.rest(), b'')
        self.assertLess(time.monotonic() - t0, 2.0 * SLOW)

    def test_every_error_body_is_json(self):
        cases = [
            (b'GET\r\n\r\n', 400),
            (b'GET /healthz HTTP/9.9\r\nHost: localhost\r\n\r\n', 505),
            (b'GET /a b c HTTP/1.1\r\nHost: localhost\r\n\r\n', 400),
            (b'GET /healthz HTTP/1.1\r\nHost: localhost\r\nbad header\r\n\r\n', 400),
            (b'GET /healthz HTTP/1.1\r\nHost: localhost\r\n x: folded\r\n\r\n', 400),
            (b'GET /healthz HTTP/1.1\r\nHost: localhost\r\nX: a\x00b\r\n\r\n', 400),
            (b'GET /healthz HTTP/1.1\r\nHost: localhost\r\nX: a\rb\r\n\r\n', 400),
            (b'GET /healthz HTTP/1.1\r\nHost: localhost\r\nX: '
             + b'y' * 70000 + b'\r\n\r\n', 431),
            (b'POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\n'
             b'Transfer-Encoding: gzip\r\n\r\n', 400),
            (b'POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\n'
             b'Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}', 400),
            (b'POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\n'
             b'Content-Length: -1\r\n\r\n', 400),
            (b'POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\nAUTH'
             b'Transfer-Encoding: chunked\r\n\r\nzz\r\n', 400),
            (b'POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\nAUTH'
             b'Content-Length: 99999999999999999999\r\n\r\n', 400),
            (b'POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\nAUTH'
             b'Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n'
             b'no colon\r\n\r\n', 400),
            (b'POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\nAUTH'
             b'Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n'
             b' folded: x\r\n\r\n', 400),
            # evhttp counts the trailer with the head: 64 KiB in all.
            (b'POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\nAUTH'
             b'X: ' + b'a' * 60000 + b'\r\nTransfer-Encoding: chunked\r\n'
             b'\r\n2\r\n{}\r\n0\r\nT: ' + b'b' * 10000 + b'\r\n\r\n', 431),
        ]
        for req, want in cases:
            r = self.raw()
            r.send(req.replace(b'AUTH', self.auth()))
            try:
                st, hdrs, body = r.answer()
            except EOFError:
                self.fail('%r: closed without an answer' % req[:60])
            with self.subTest(req=req[:70]):
                self.assertJsonError(st, hdrs, body, want)
            r.close()


class ListenTest(AgentdTestCase):
    """Port squatting (issue 13, item 8): a user who binds [::1]:PORT beside
    agentd's 127.0.0.1:PORT gets the requests, and the token, of every
    client that resolves localhost to ::1.  agentd listens on the twin too,
    and does not start when it is taken."""

    autostart = False

    def v6_listener(self, port):
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        try:
            s.bind(('::1', port))
        except OSError as e:
            s.close()
            raise unittest.SkipTest('no IPv6 loopback here: %s' % e)
        s.listen(8)
        self.addCleanup(s.close)
        return s

    def run_agentd(self, *args):
        """Run agentd briefly: its exit status (None: still running)."""
        if '--socket' not in args:
            args = ('--socket', '') + args
        if '--listen' not in args:
            args += ('--listen', '127.0.0.1:%d' % free_port())
        p = subprocess.Popen([agentd_path()] + list(args),
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
        try:
            _, err = p.communicate(timeout=3 * SLOW)
        except subprocess.TimeoutExpired:
            p.terminate()
            _, err = p.communicate()
            return None, err
        return p.returncode, err

    def test_loopback_twin_is_served(self):
        a = self.start_agentd()
        self.v6_listener(0)       # skips without IPv6
        s = socket.create_connection(('::1', a.port), timeout=5 * SLOW)
        s.sendall(b'GET /healthz HTTP/1.1\r\nHost: [::1]\r\n\r\n')
        self.assertTrue(s.recv(100).startswith(b'HTTP/1.1 200'))
        s.close()

    def test_squatted_twin_stops_the_start(self):
        port = free_port()
        self.v6_listener(port)
        rc, err = self.run_agentd('--listen', '127.0.0.1:%d' % port)
        self.assertIsNotNone(rc, 'agentd started beside a squatter of '
                             '[::1]:%d' % port)
        self.assertNotEqual(rc, 0)
        self.assertIn(b'[::1]:%d is in use' % port, err)
        # Asked not to: it starts.
        rc, err = self.run_agentd('--listen', '127.0.0.1:%d' % port,
                                  '--dual-stack', '0')
        self.assertIsNone(rc, err)

    def test_socket_path_is_never_taken_from_others(self):
        """--socket removes a stale socket only: not a file, not the live
        socket of another agentd."""
        a = self.start_agentd()
        path = os.path.join(a.dir, 'file')
        with open(path, 'w') as f:
            f.write('keep me')
        rc, err = self.run_agentd('--socket', path)
        self.assertIsNotNone(rc, 'agentd started on a file')
        self.assertNotEqual(rc, 0)
        with open(path) as f:
            self.assertEqual(f.read(), 'keep me')
        rc, err = self.run_agentd('--socket', a.socket_path)
        self.assertIsNotNone(rc, 'agentd took a live socket')
        self.assertIn(b'in use', err)
        r = self.req('GET', '/v1/sessions', client=a.unix_client())
        self.assertEqual(r.status, 200)
        # A stale one (nobody listens) is replaced.
        stale = os.path.join(a.dir, 'stale.sock')
        s = socket.socket(socket.AF_UNIX)
        s.bind(stale)
        s.close()
        rc, err = self.run_agentd('--socket', stale)
        self.assertIsNone(rc, err)


if __name__ == '__main__':
    unittest.main()
