"""MCP at /mcp: the official TypeScript SDK's client (mcp_client.mjs), and
the JSON-RPC and Streamable HTTP edges by hand.

The SDK test needs node and tests/node/node_modules (build-aux/deps.sh test
installs them with npm ci); it is skipped only when node is missing.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from harness import AgentdTestCase, SLOW

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NODE_MODULES = os.path.join(ROOT, 'tests', 'node', 'node_modules')

INIT = {'jsonrpc': '2.0', 'id': 1, 'method': 'initialize',
        'params': {'protocolVersion': '2025-06-18', 'capabilities': {},
                   'clientInfo': {'name': 'test', 'version': '0'}}}
ACCEPT = 'application/json, text/event-stream'


class McpSdkTest(AgentdTestCase):
    """The TypeScript SDK's client against the real agentd over TCP."""

    def test_sdk_client(self):
        node = shutil.which('node')
        if node is None:
            raise unittest.SkipTest('node is not installed')
        self.assertTrue(os.path.isdir(os.path.join(
            NODE_MODULES, '@modelcontextprotocol', 'sdk')),
            'tests/node/node_modules lacks @modelcontextprotocol/sdk: run '
            'build-aux/deps.sh test (npm ci in tests/node)')
        # Bare imports resolve from the script's folder up: run a copy
        # beside a link to tests/node/node_modules.
        tmp = tempfile.mkdtemp(prefix='agentd-mcp-')
        try:
            shutil.copy(os.path.join(HERE, 'mcp_client.mjs'), tmp)
            os.symlink(NODE_MODULES, os.path.join(tmp, 'node_modules'))
            url = 'http://127.0.0.1:%d/mcp' % self.agentd.port
            p = subprocess.run([node, os.path.join(tmp, 'mcp_client.mjs'),
                                url, self.agentd.token], cwd=tmp,
                               stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT,
                               timeout=120 * SLOW)
        finally:
            shutil.rmtree(tmp)
        out = p.stdout.decode('utf-8', 'replace')
        self.assertEqual(p.returncode, 0, out + self.agentd.stderr())
        for name in ('initialize', 'tools/list', 'echo hi',
                     'bash on a tty, answered with write_stdin',
                     'unknown session', '401 without the token'):
            self.assertIn('ok %s\n' % name, out)

    def test_readme_example(self):
        """docs/clients.md's MCP example is mcp_client.mjs's, which runs above."""
        with open(os.path.join(HERE, 'mcp_client.mjs')) as f:
            src = f.read()
        example = src.split('// README-BEGIN\n')[1].split('// README-END\n')[0]
        with open(os.path.join(ROOT, 'docs', 'clients.md')) as f:
            readme = f.read()
        self.assertTrue('```js\n' + example + '```\n' in readme,
                        'docs/clients.md lacks the example of mcp_client.mjs:\n'
                        + example)


class McpProtocolTest(AgentdTestCase):
    """JSON-RPC and the transport's rules, by hand."""

    def post(self, body, sid=None, headers=None, raw=False, client=None):
        h = {'Content-Type': 'application/json', 'Accept': ACCEPT}
        if sid is not None:
            h['Mcp-Session-Id'] = sid
        h.update(headers or {})
        data = body if raw else json.dumps(body)
        return self.req('POST', '/mcp', data, headers=h, client=client)

    def session(self, version='2025-03-26'):
        init = dict(INIT, params=dict(INIT['params'], protocolVersion=version))
        r = self.post(init)
        self.expect(r, 200)
        sid = r.header('Mcp-Session-Id')
        self.assertRegex(sid, r'^[0-9a-f]{32}$')
        self.assertEqual(r.json['result']['protocolVersion'], version)
        r = self.post({'jsonrpc': '2.0', 'method': 'notifications/initialized'},
                      sid)
        self.expect(r, 202)
        self.assertEqual(r.body, b'')
        return sid

    def rpc_error(self, r, status, code, id=None, message=None):
        self.expect(r, status)
        self.assertEqual(r.header('Content-Type'), 'application/json')
        self.assertEqual(r.json['jsonrpc'], '2.0')
        self.assertEqual(r.json['id'], id)
        self.assertEqual(r.json['error']['code'], code, r.json)
        if message:
            self.assertRegex(r.json['error']['message'], message)
        self.assertNotIn('result', r.json)

    def test_initialize(self):
        r = self.post(INIT)
        self.expect(r, 200)
        self.assertEqual(r.header('Content-Type'), 'application/json')
        res = r.json['result']
        self.assertEqual(r.json['id'], 1)
        self.assertEqual(res['protocolVersion'], '2025-06-18')
        self.assertEqual(res['serverInfo']['name'], 'agentd')
        self.assertEqual(res['capabilities'], {'tools': {'listChanged': False}})
        # Two sessions, two ids.
        self.assertNotEqual(self.session(), self.session())

    def test_unknown_protocol_version_gets_the_newest(self):
        r = self.post(dict(INIT, params=dict(INIT['params'],
                                             protocolVersion='1999-01-01')))
        self.expect(r, 200)
        self.assertEqual(r.json['result']['protocolVersion'], '2025-11-25')

    def test_wrong_protocol_version_header(self):
        sid = self.session()
        r = self.post({'jsonrpc': '2.0', 'id': 2, 'method': 'ping'}, sid,
                      headers={'MCP-Protocol-Version': '2024-01-01'})
        self.rpc_error(r, 400, -32000, message='unsupported MCP-Protocol-Version')
        r = self.post({'jsonrpc': '2.0', 'id': 2, 'method': 'ping'}, sid,
                      headers={'MCP-Protocol-Version': '2025-06-18'})
        self.expect(r, 200)
        self.assertEqual(r.json, {'jsonrpc': '2.0', 'id': 2, 'result': {}})

    def test_bad_json(self):
        for body in ('{', '{"jsonrpc": "2.0", "id": 1, "id": 2}', 'nul', ''):
            r = self.post(body, raw=True)
            self.rpc_error(r, 400, -32700, message='^parse error')

    def test_invalid_requests(self):
        sid = self.session()
        for msg, id in ((42, None),
                        ({'jsonrpc': '1.0', 'id': 3, 'method': 'ping'}, 3),
                        ({'id': 3, 'method': 'ping'}, 3),
                        ({'jsonrpc': '2.0', 'id': 3, 'method': 7}, 3),
                        ({'jsonrpc': '2.0', 'id': None, 'method': 'ping'}, None),
                        ({'jsonrpc': '2.0', 'id': 1.5, 'method': 'ping'}, None),
                        ({'jsonrpc': '2.0', 'id': 3}, 3)):
            r = self.post(msg, sid)
            self.rpc_error(r, 400, -32600, id=id)

    def test_method_not_found_and_invalid_params(self):
        sid = self.session()
        r = self.post({'jsonrpc': '2.0', 'id': 'a', 'method': 'resources/list'},
                      sid)
        self.rpc_error(r, 200, -32601, id='a', message="'resources/list' not found")
        r = self.post({'jsonrpc': '2.0', 'id': 'b', 'method': 'tools/call',
                       'params': [1]}, sid)
        self.rpc_error(r, 200, -32602, id='b')
        r = self.post({'jsonrpc': '2.0', 'id': 'c', 'method': 'tools/call',
                       'params': {'arguments': {}}}, sid)
        self.rpc_error(r, 200, -32602, id='c', message="'name'")
        r = self.post({'jsonrpc': '2.0', 'id': 'd', 'method': 'tools/call',
                       'params': {'name': 'rm_rf'}}, sid)
        self.rpc_error(r, 200, -32602, id='d', message="unknown tool 'rm_rf'")
        r = self.post(dict(INIT, params={'protocolVersion': 5}))
        self.rpc_error(r, 200, -32602, id=1)

    def test_notifications_and_responses_get_202(self):
        sid = self.session()
        for msg in ({'jsonrpc': '2.0', 'method': 'notifications/cancelled',
                     'params': {'requestId': 9}},
                    {'jsonrpc': '2.0', 'method': 'no/such/notification'},
                    {'jsonrpc': '2.0', 'id': 5, 'result': {}},
                    {'jsonrpc': '2.0', 'id': 6,
                     'error': {'code': 1, 'message': 'x'}}):
            r = self.post(msg, sid)
            self.expect(r, 202)
            self.assertEqual(r.body, b'')

    def test_session_header(self):
        r = self.post({'jsonrpc': '2.0', 'id': 1, 'method': 'tools/list'})
        self.rpc_error(r, 400, -32000, message='Mcp-Session-Id')
        r = self.post({'jsonrpc': '2.0', 'id': 1, 'method': 'tools/list'},
                      '0' * 32)
        self.rpc_error(r, 404, -32001)
        sid = self.session()
        r = self.req('DELETE', '/mcp', headers={'Mcp-Session-Id': sid})
        self.expect(r, 204)
        r = self.post({'jsonrpc': '2.0', 'id': 1, 'method': 'tools/list'}, sid)
        self.rpc_error(r, 404, -32001)
        r = self.req('DELETE', '/mcp', headers={'Mcp-Session-Id': sid})
        self.rpc_error(r, 404, -32001)
        r = self.req('DELETE', '/mcp')
        self.rpc_error(r, 400, -32000)

    def test_get_is_405(self):
        r = self.req('GET', '/mcp', headers={'Accept': 'text/event-stream'})
        self.assertError(r, 405, 'method_not_allowed')
        self.assertEqual(r.header('Allow'), 'POST, DELETE')

    def test_batches_by_protocol_version(self):
        sid = self.session('2025-06-18')
        batch = [{'jsonrpc': '2.0', 'id': 1, 'method': 'ping'}]
        r = self.post(batch, sid)
        self.rpc_error(r, 400, -32600, message='2025-06-18 has no batches')
        sid = self.session('2025-03-26')
        r = self.post([], sid)
        self.rpc_error(r, 400, -32600, message='empty batch')
        batch = [{'jsonrpc': '2.0', 'id': 1, 'method': 'ping'},
                 {'jsonrpc': '2.0', 'method': 'notifications/initialized'},
                 {'jsonrpc': '2.0', 'id': 2, 'method': 'tools/call',
                  'params': {'name': 'exec_command',
                             'arguments': {'cmd': 'sleep 0.3; echo a',
                                           'yield_time_ms': 5000}}},
                 {'jsonrpc': '2.0', 'id': 3, 'method': 'nope'},
                 17,
                 {'jsonrpc': '2.0', 'id': 4, 'method': 'tools/call',
                  'params': {'name': 'exec_command',
                             'arguments': {'cmd': 'echo b',
                                           'yield_time_ms': 5000}}},
                 INIT]
        r = self.post(batch, sid)
        self.expect(r, 200)
        got = r.json
        self.assertEqual([m['id'] for m in got], [1, 2, 3, None, 4, 1])
        self.assertEqual(got[0]['result'], {})
        self.assertEqual(got[1]['result']['structuredContent']['output'], 'a\n')
        self.assertEqual(got[2]['error']['code'], -32601)
        self.assertEqual(got[3]['error']['code'], -32600)
        self.assertEqual(got[4]['result']['structuredContent']['output'], 'b\n')
        self.assertEqual(got[5]['error']['code'], -32600)
        r = self.post([{'jsonrpc': '2.0', 'method': 'notifications/x'}], sid)
        self.expect(r, 202)

    def test_batch_bounds(self):
        # A batch of 150,000 tools/list made a 650 MB answer, past every
        # budget, and held the loop for seconds.  Now a batch has at most
        # 64 messages, and its answers count against --max-answer-bytes
        # as they are made.
        sid = self.session('2025-03-26')
        ping = {'jsonrpc': '2.0', 'id': 1, 'method': 'ping'}
        r = self.post([ping] * 65, sid)
        self.rpc_error(r, 400, -32600, message='batch of 65 messages: at most 64')
        r = self.post([dict(ping, id=i) for i in range(64)], sid)
        self.expect(r, 200)
        self.assertEqual([m['id'] for m in r.json], list(range(64)))

        self.start_agentd(['--max-answer-bytes', '1MiB'])
        sid = self.session('2025-03-26')
        big = {'jsonrpc': '2.0', 'method': 'tools/call',
               'params': {'name': 'exec_command',
                          'arguments': {'cmd': 'head -c 300000 /dev/zero | tr "\\0" a',
                                        'yield_time_ms': 10000,
                                        'max_output_tokens': 80000}}}
        r = self.post([dict(big, id=i) for i in range(8)], sid)
        self.rpc_error(r, 503, -32603, message='--max-answer-bytes')
        r = self.post([dict(big, id=i) for i in range(1)], sid)
        self.expect(r, 200)
        self.assertEqual(len(r.json[0]['result']['structuredContent']['output']),
                         300000)

    def call(self, sid, name, args, id=1):
        r = self.post({'jsonrpc': '2.0', 'id': id, 'method': 'tools/call',
                       'params': {'name': name, 'arguments': args}}, sid)
        self.expect(r, 200)
        self.assertEqual(r.json['id'], id)
        return r.json['result']

    def test_output_since_the_last_result(self):
        sid = self.session()
        res = self.call(sid, 'exec_command',
                        {'cmd': 'echo one; sleep 0.6; echo two; sleep 30',
                         'yield_time_ms': 250})
        sc = res['structuredContent']
        self.assertEqual(sc['output'], 'one\n')
        self.assertTrue(sc['running'])
        res = self.call(sid, 'write_stdin', {'session_id': sc['session_id'],
                                             'yield_time_ms': 1000})
        self.assertEqual(res['structuredContent']['output'], 'two\n')
        # Another MCP session reads from the start.
        other = self.session()
        res = self.call(other, 'write_stdin', {'session_id': sc['session_id'],
                                               'yield_time_ms': 300})
        self.assertEqual(res['structuredContent']['output'], 'one\ntwo\n')
        res = self.call(sid, 'kill_session', {'session_id': sc['session_id']})
        self.assertEqual(res['structuredContent']['output'], '')
        self.assertEqual(res['structuredContent']['exit_code'], 143)
        r = self.req('GET', '/v1/sessions/' + sc['session_id'])
        self.assertError(r, 404, 'not_found')

    def test_kill_session_answers_when_nothing_is_left(self):
        # As a DELETE: the answer comes once the leader is reaped (also
        # without cgroups, where the leader was a zombie for a while).
        sid = self.session()
        res = self.call(sid, 'exec_command',
                        {'cmd': 'trap "" TERM; sleep 1000 & wait',
                         'yield_time_ms': 300})
        sc = res['structuredContent']
        r = self.req('GET', '/v1/sessions/' + sc['session_id'])
        self.expect(r, 200)
        leader = r.json['pid']
        self.call(sid, 'kill_session', {'session_id': sc['session_id']})
        with self.assertRaises(ProcessLookupError):
            os.kill(leader, 0)

    def test_yield_does_not_block_the_loop(self):
        sid = self.session()
        box = {}

        def slow():
            box['r'] = self.call(sid, 'exec_command',
                                 {'cmd': 'sleep 2; echo done',
                                  'yield_time_ms': 30000})
        t = threading.Thread(target=slow)
        t.start()
        c = self.agentd.tcp_client()
        for _ in range(5):
            r = self.req('GET', '/healthz', client=c)
            self.expect(r, 200)
            self.assertLess(r.elapsed, 0.5 * SLOW)
        t.join(30 * SLOW)
        sc = box['r']['structuredContent']
        self.assertEqual((sc['exit_code'], sc['output']), (0, 'done\n'))

    def readers(self):
        r = self.req('GET', '/debug/stat', client=self.agentd.unix_client())
        self.expect(r, 200)
        return {s['id']: s['readers'] for s in r.json['sessions']}

    def test_client_gone_frees_the_wait(self):
        sid = self.session()
        for body in ({'jsonrpc': '2.0', 'id': 1, 'method': 'tools/call',
                      'params': {'name': 'exec_command',
                                 'arguments': {'cmd': 'sleep 60',
                                               'yield_time_ms': 30000}}},
                     [{'jsonrpc': '2.0', 'id': 2, 'method': 'ping'},
                      {'jsonrpc': '2.0', 'id': 3, 'method': 'tools/call',
                       'params': {'name': 'exec_command',
                                  'arguments': {'cmd': 'sleep 60',
                                                'yield_time_ms': 30000}}},
                      {'jsonrpc': '2.0', 'id': 4, 'method': 'ping'}]):
            data = json.dumps(body).encode()
            s = socket.create_connection(('127.0.0.1', self.agentd.port))
            s.sendall(b'POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n'
                      b'Authorization: Bearer %s\r\nMcp-Session-Id: %s\r\n'
                      b'MCP-Protocol-Version: 2025-03-26\r\n'
                      b'Content-Type: application/json\r\n'
                      b'Content-Length: %d\r\n\r\n%s'
                      % (self.agentd.token.encode(), sid.encode(), len(data),
                         data))
            deadline = time.monotonic() + 10 * SLOW
            while sum(self.readers().values()) != 1:
                self.assertLess(time.monotonic(), deadline, 'no wait')
                time.sleep(0.05)
            s.close()
            while sum(self.readers().values()) != 0:
                self.assertLess(time.monotonic(), deadline, 'wait not freed')
                time.sleep(0.05)
        self.assertTrue(all(s['state'] == 'running'
                            for s in self.list_sessions()))

    def test_shutdown_with_a_waiting_batch(self):
        """A stop is not held up by it, nor does it crash or leak (the
        answer may go out or not, as for the API's long-polls)."""
        sid = self.session('2025-03-26')
        box = {}
        c = self.agentd.tcp_client()

        def post():
            try:
                box['r'] = self.post(
                [{'jsonrpc': '2.0', 'id': 1, 'method': 'tools/call',
                  'params': {'name': 'exec_command',
                             'arguments': {'cmd': "trap '' TERM; sleep 60",
                                           'yield_time_ms': 30000}}},
                 {'jsonrpc': '2.0', 'id': 2, 'method': 'tools/call',
                  'params': {'name': 'exec_command',
                             'arguments': {'cmd': 'echo late'}}}], sid,
                    client=c)
            except AssertionError as e:
                box['e'] = e    # the connection closed at the stop
        t = threading.Thread(target=post)
        t.start()
        deadline = time.monotonic() + 10 * SLOW
        while sum(self.readers().values()) != 1:
            self.assertLess(time.monotonic(), deadline, 'no wait')
            time.sleep(0.05)
        time.sleep(0.3)         # the trap is set
        self.stop_agentd()      # fails unless agentd exits 0 in time
        t.join(30 * SLOW)
        self.assertFalse(t.is_alive())
        if 'r' not in box:
            return
        r = box['r']
        self.expect(r, 200)
        first, second = r.json
        self.assertIn(first['result']['structuredContent']['exit_code'],
                      (137, 143))   # SIGKILL after the grace
        self.assertTrue(second['result']['isError'])
        self.assertEqual(second['result']['content'][0]['text'],
                         'shutting_down: agentd is shutting down')

    def test_invalid_utf8_output(self):
        sid = self.session()
        res = self.call(sid, 'exec_command', {'cmd': r"printf 'a\377b\n'",
                                              'yield_time_ms': 5000})
        self.assertEqual(res['structuredContent']['output'], 'a\ufffdb\n')

    def test_evicts_the_least_recently_used(self):
        self.stop_agentd()
        self.start_agentd(['--mcp-sessions', '2'])
        a = self.session()
        b = self.session()
        self.post({'jsonrpc': '2.0', 'id': 1, 'method': 'ping'}, a)
        self.session()          # b goes, a was used since
        r = self.post({'jsonrpc': '2.0', 'id': 1, 'method': 'ping'}, b)
        self.rpc_error(r, 404, -32001)
        r = self.post({'jsonrpc': '2.0', 'id': 1, 'method': 'ping'}, a)
        self.expect(r, 200)
        m = self.req('GET', '/metrics').body.decode()
        self.assertIn('agentd_mcp_sessions 2\n', m)
        self.assertIn('agentd_mcp_sessions_max 2\n', m)
        self.assertIn('agentd_mcp_sessions_evicted_total 1\n', m)

    def test_token_and_unix_socket(self):
        r = self.req('POST', '/mcp', json.dumps(INIT),
                     client=self.agentd.tcp_client(auth=False),
                     headers={'Content-Type': 'application/json'})
        self.assertError(r, 401, 'unauthorized')
        r = self.req('POST', '/mcp', json.dumps(INIT),
                     client=self.agentd.unix_client(),
                     headers={'Content-Type': 'application/json'})
        self.expect(r, 200)


if __name__ == '__main__':
    unittest.main()
