"""Auth: bearer token, X-Access-Token, healthz, unix socket, env token, no token."""

import os
import socket
import unittest

from harness import AgentdTestCase, Client, free_port
import http.client


class TokenTest(AgentdTestCase):

    def anon(self):
        return self.agentd.tcp_client(auth=False)

    def assertUnauthorized(self, r):
        self.assertError(r, 401, 'unauthorized')
        www = r.header('WWW-Authenticate') or ''
        self.assertTrue(www.startswith('Bearer'), 'WWW-Authenticate %r' % www)

    def test_missing_token(self):
        c = self.anon()
        for method, path, body in (('GET', '/v1/sessions', None),
                                   ('POST', '/v1/sessions', {'cmd': 'touch pwned'}),
                                   ('GET', '/v1/sessions/x', None),
                                   ('DELETE', '/v1/sessions/x', None),
                                   ('GET', '/metrics', None),
                                   ('GET', '/v1/files?path=/etc/hostname', None),
                                   ('GET', '/v1/nope', None)):
            r = self.req(method, path, body, client=c)
            self.assertUnauthorized(r)
        self.assertFalse(os.path.exists(os.path.join(self.agentd.workdir, 'pwned')))
        self.assertEqual(self.list_sessions(), [])

    def test_wrong_token(self):
        c = self.anon()
        tok = self.agentd.token
        for hdrs in ({'Authorization': 'Bearer ' + tok[:-1]},
                     {'Authorization': 'Bearer ' + tok + 'x'},
                     {'Authorization': 'Bearer '},
                     {'Authorization': 'Basic ' + tok},
                     {'Authorization': tok},
                     {'X-Access-Token': tok[:-1] + ('a' if tok[-1] != 'a' else 'b')},
                     {'X-Access-Token': ''}):
            r = self.req('GET', '/v1/sessions', client=c, headers=hdrs)
            self.assertUnauthorized(r)

    def test_bearer_token(self):
        r = self.req('GET', '/v1/sessions')
        self.expect(r, 200)
        self.assertEqual(r.json, {'sessions': []})

    def test_x_access_token(self):
        c = self.anon()
        r = self.req('GET', '/v1/sessions', client=c,
                     headers={'X-Access-Token': self.agentd.token})
        self.expect(r, 200)
        r = self.req('POST', '/v1/sessions', {'cmd': 'echo hi', 'yield_ms': 5000}, client=c,
                     headers={'X-Access-Token': self.agentd.token})
        self.expect(r, 201)

    def test_either_header_carrying_the_token_will_do(self):
        # A proxy in front may put its own credentials in Authorization and
        # pass envd's X-Access-Token on: the request carries the token.
        c = self.anon()
        tok = self.agentd.token
        for auth in ('Bearer wrong', 'Basic eDp5'):
            hdrs = {'Authorization': auth, 'X-Access-Token': tok}
            self.expect(self.req('GET', '/v1/sessions', client=c,
                                 headers=hdrs), 200)
            # a body too, checked by the gate before it is read
            self.expect(self.req('POST', '/v1/sessions',
                                 {'cmd': 'true', 'yield_ms': 5000}, client=c,
                                 headers=hdrs), 201)
        self.expect(self.req('GET', '/v1/sessions', client=c, headers={
            'Authorization': 'Bearer ' + tok, 'X-Access-Token': 'wrong'}), 200)
        self.assertUnauthorized(self.req('GET', '/v1/sessions', client=c,
            headers={'Authorization': 'Bearer wrong', 'X-Access-Token': 'x'}))

    def test_healthz_needs_no_token(self):
        c = self.anon()
        r = self.req('GET', '/healthz', client=c)
        self.expect(r, 200)
        self.assertEqual(r.json['status'], 'ok')
        r = self.req('GET', '/healthz', client=c, headers={'Authorization': 'Bearer wrong'})
        self.assertEqual(r.status, 200)

    def test_unauthorized_keeps_connection_usable(self):
        c = self.anon()
        self.assertUnauthorized(self.req('GET', '/v1/sessions', client=c))
        r = self.req('GET', '/v1/sessions', client=c,
                     headers={'Authorization': 'Bearer ' + self.agentd.token})
        self.expect(r, 200)

    def test_unix_socket_needs_no_token(self):
        u = self.agentd.unix_client()
        r = self.req('GET', '/v1/sessions', client=u)
        self.expect(r, 200)
        st = os.stat(self.agentd.socket_path)
        self.assertEqual(st.st_mode & 0o777, 0o600)
        w = self.create(client=u, cmd='echo via unix', yield_ms=5000)
        self.assertEqual(w['exit_code'], 0)

    def test_token_not_in_session_environment(self):
        last, ck = self.run_cmd('env')
        self.assertNotIn(self.agentd.token.encode(), ck.data())


class TokenFileNewlineTest(AgentdTestCase):
    autostart = False

    def test_token_file_trailing_newline_ignored(self):
        tok = 'NewlineToken0123456789'
        a = self.start_agentd(token=True, token_file_text=tok + '\n')
        a.token = tok
        self.expect(self.req('GET', '/v1/sessions', client=a.tcp_client()), 200)


class EnvTokenTest(AgentdTestCase):
    autostart = False

    def test_agentd_token_env(self):
        a = self.start_agentd(token=True, token_in_env=True)
        self.expect(self.req('GET', '/v1/sessions'), 200)
        self.assertError(self.req('GET', '/v1/sessions', client=a.tcp_client(auth=False)),
                         401, 'unauthorized')
        # the token from the environment does not leak into sessions
        last, ck = self.run_cmd('env')
        self.assertNotIn(a.token.encode(), ck.data())


class NoTokenTest(AgentdTestCase):
    agentd_token = False

    def test_no_token_mode_serves(self):
        r = self.req('GET', '/v1/sessions')
        self.expect(r, 200)
        w = self.create(cmd='echo open', yield_ms=5000)
        self.assertEqual(w['exit_code'], 0)
        err = self.agentd.stderr().lower()
        self.assertTrue('token' in err or 'auth' in err,
                        'no warning about running without a token: %r' % err[:1000])


class ListenTest(AgentdTestCase):
    autostart = False

    def test_two_listeners_and_no_socket(self):
        p2 = free_port()
        a = self.start_agentd(['--listen', '127.0.0.1:%d' % p2], socket_path='')
        c2 = a.tcp_client(port=p2)
        self.expect(self.req('GET', '/v1/sessions', client=c2), 200)
        self.expect(self.req('GET', '/v1/sessions'), 200)
        self.assertError(self.req('GET', '/v1/sessions', client=a.tcp_client(auth=False, port=p2)),
                         401, 'unauthorized')
        self.assertEqual([n for n in os.listdir(a.dir) if n.endswith('.sock')], [])

    @unittest.skipUnless(socket.has_ipv6, 'no IPv6')
    def test_ipv6_listener(self):
        try:
            s = socket.socket(socket.AF_INET6)
            s.bind(('::1', 0))
            p6 = s.getsockname()[1]
            s.close()
        except OSError:
            self.skipTest('no ::1')
        a = self.start_agentd(['--listen', '[::1]:%d' % p6])
        c6 = Client(lambda: http.client.HTTPConnection('::1', p6, timeout=30),
                    a.auth_headers())
        a.clients.append(c6)
        self.expect(self.req('GET', '/v1/sessions', client=c6), 200)


if __name__ == '__main__':
    unittest.main()
