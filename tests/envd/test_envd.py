"""envd's protocol on --envd-listen: the Connect wire (envelopes, the
end-of-stream message, the code-to-status table, proto-JSON), bad input,
the plain routes and the token; and the official E2B JS SDK
(sdk_process.mjs) driving commands and pty.

Run: AGENTD=build/agentd/agentd /usr/bin/python3 tests/run.py tests/envd/test_envd.py
"""

import base64
import http.client
import json
import os
import shutil
import struct
import subprocess
import tempfile
import time
import unittest

from harness import AgentdTestCase, SLOW, free_port

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NODE_MODULES = os.path.join(ROOT, 'tests', 'node', 'node_modules')
MAX_MESSAGE = 65536


def envelope(obj, flags=0):
    b = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return struct.pack('>BI', flags, len(b)) + b


def unenvelope(data):
    """The messages of a stream body: [(flags, object)]; asserts framing."""
    out = []
    while data:
        assert len(data) >= 5, 'a torn envelope: %r' % data
        flags, n = struct.unpack('>BI', data[:5])
        assert len(data) >= 5 + n, 'a short envelope: %r' % data
        out.append((flags, json.loads(data[5:5 + n])))
        data = data[5 + n:]
    return out


class EnvdCase(AgentdTestCase):
    autostart = False
    token = None
    extra_args = ()

    def setUp(self):
        super().setUp()
        self.eport = free_port()
        self.start_agentd(['--envd-listen', '127.0.0.1:%d' % self.eport,
                           '--envd-max-message', str(MAX_MESSAGE),
                           '--dual-stack', '0',
                           # /init's timestamp must not set the host's clock
                           '--clock-step', '0'] + list(self.extra_args),
                          token=self.token is not None)

    def raw(self, method, path, body=b'', headers=None):
        c = http.client.HTTPConnection('127.0.0.1', self.eport,
                                       timeout=30 * SLOW)
        h = {}
        if self.token is not None:
            h['X-Access-Token'] = self.agentd.token
        h.update(headers or {})
        c.request(method, path, body, h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, r.getheader('Content-Type'), data

    def unary(self, method, msg, headers=None):
        h = {'Content-Type': 'application/json',
             'Connect-Protocol-Version': '1'}
        h.update(headers or {})
        body = msg if isinstance(msg, bytes) else json.dumps(msg).encode()
        st, ct, data = self.raw('POST', '/' + method, body, h)
        return st, json.loads(data) if data else None

    def stream(self, method, msg, headers=None, body=None):
        h = {'Content-Type': 'application/connect+json',
             'Connect-Protocol-Version': '1'}
        h.update(headers or {})
        st, ct, data = self.raw('POST', '/' + method,
                                envelope(msg) if body is None else body, h)
        self.assertEqual(st, 200, data)
        self.assertEqual(ct, 'application/connect+json')
        msgs = unenvelope(data)
        self.assertTrue(msgs, 'no end-of-stream message')
        self.assertEqual(msgs[-1][0], 2, msgs)
        for flags, _ in msgs[:-1]:
            self.assertEqual(flags, 0)
        return [m for _, m in msgs[:-1]], msgs[-1][1]

    def start_stream(self, req):
        """A Start left open: its connection, its response, and its first
        message."""
        c = http.client.HTTPConnection('127.0.0.1', self.eport,
                                       timeout=30 * SLOW)
        c.request('POST', '/process.Process/Start', envelope(req),
                  {'Content-Type': 'application/connect+json'})
        r = c.getresponse()
        n = struct.unpack('>BI', r.read(5))[1]
        return c, r, json.loads(r.read(n))

    def start(self, cmd, **kw):
        req = {'process': {'cmd': '/bin/sh', 'args': ['-c', cmd]}}
        req.update(kw)
        return self.stream('process.Process/Start', req)

    def output(self, events, name='stdout'):
        return b''.join(base64.b64decode(e['event']['data'][name])
                        for e in events if 'data' in e['event'] and
                        name in e['event']['data'])


class ConnectWireTest(EnvdCase):
    """The Connect protocol as the spec writes it."""

    def test_stream_envelopes_and_end(self):
        events, end = self.start('printf out; printf err >&2; exit 3')
        self.assertEqual(end, {})
        self.assertIn('start', events[0]['event'])
        self.assertIsInstance(events[0]['event']['start']['pid'], int)
        self.assertEqual(self.output(events), b'out')
        self.assertEqual(self.output(events, 'stderr'), b'err')
        self.assertEqual(events[-1]['event']['end'],
                         {'exitCode': 3, 'exited': True,
                          'status': 'exit status 3',
                          'error': 'exit status 3'})
        # A oneof is one key, never null.
        for e in events:
            self.assertEqual(len(e['event']), 1, e)
            self.assertNotIn(None, e['event'].values())

    def test_defaults_omitted_and_signals(self):
        events, _ = self.start('true')
        self.assertEqual(events[-1]['event']['end'],
                         {'exited': True, 'status': 'exit status 0'})
        events, _ = self.start('kill -9 $$')
        self.assertEqual(events[-1]['event']['end'],
                         {'exitCode': -1, 'status': 'signal: killed',
                          'error': 'signal: killed'})

    def test_stdin_false_and_integer_strings(self):
        events, _ = self.start('cat', stdin=False)
        self.assertEqual(self.output(events), b'')
        st, body = self.unary('process.Process/List', {})
        self.assertEqual((st, body), (200, {'processes': []}))
        # An integer may come as a decimal string (proto-JSON's int64s).
        st, body = self.unary('process.Process/SendSignal',
                              {'process': {'pid': '999999'},
                               'signal': 'SIGNAL_SIGKILL'})
        self.assertEqual(st, 404)
        self.assertEqual(body['code'], 'not_found')

    def test_code_to_status(self):
        cases = [
            ({'process': {'pid': 1}, 'signal': 'SIGNAL_SIGKILL'}, 404,
             'not_found'),
            ({'process': {'pid': 'x'}}, 400, 'invalid_argument'),
            ({'process': {'pid': 1, 'tag': 'a'}}, 400, 'invalid_argument'),
            ({'process': {'pid': 1.5}}, 400, 'invalid_argument'),
            ({'process': 'nope'}, 400, 'invalid_argument'),
            ({'process': {'pid': -1}}, 400, 'invalid_argument'),
        ]
        for msg, status, code in cases:
            st, body = self.unary('process.Process/SendSignal', msg)
            self.assertEqual((st, body['code']), (status, code), (msg, body))
            self.assertIsInstance(body['message'], str)
        st, body = self.unary('process.Process/StreamInput', {})
        self.assertEqual((st, body['code']), (501, 'unimplemented'))

    def test_stream_errors_are_end_of_stream(self):
        events, end = self.start('true', process={'cmd': '/bin/sh',
                                                  'cwd': '/no/such/dir'})
        self.assertEqual(events, [])
        self.assertEqual(end['error']['code'], 'invalid_argument')
        events, end = self.stream('process.Process/Connect',
                                  {'process': {'pid': 999999}})
        self.assertEqual((events, end['error']['code']), ([], 'not_found'))

    def test_broken_envelopes(self):
        msg = json.dumps({'process': {'pid': 1}}).encode()
        bodies = [
            b'\x00\x00',                                 # torn header
            struct.pack('>BI', 0, len(msg) + 5) + msg,   # short
            struct.pack('>BI', 0, len(msg) - 1) + msg,   # long
            struct.pack('>BI', 1, len(msg)) + msg,       # compressed
            struct.pack('>BI', 2, len(msg)) + msg,       # end flag in
            envelope(b'{"process":'),                    # not JSON
            envelope(b'[1,2]'),                          # not an object
        ]
        for b in bodies:
            events, end = self.stream('process.Process/Connect', None,
                                      body=b)
            self.assertEqual(events, [], b)
            self.assertEqual(end['error']['code'], 'invalid_argument', b)

    def test_oversized_messages(self):
        big = {'process': {'cmd': 'x' * (MAX_MESSAGE + 10)}}
        events, end = self.stream('process.Process/Start', big)
        self.assertEqual(end['error']['code'], 'resource_exhausted')
        st, body = self.unary('process.Process/List',
                              {'pad': 'x' * (MAX_MESSAGE + 10)})
        self.assertEqual((st, body['code']), (429, 'resource_exhausted'))
        # An answer over the limit ends the stream the same way.
        events, end = self.start('head -c %d /dev/zero' % (MAX_MESSAGE * 2))
        self.assertEqual(end, {})
        self.assertEqual(len(self.output(events)), MAX_MESSAGE * 2)

    def test_unknown_methods_types_and_headers(self):
        st, body = self.unary('process.Process/Nope', {})
        self.assertEqual((st, body['code']), (404, 'unimplemented'))
        st, body = self.unary('nope.Nope/List', {})
        self.assertEqual(st, 404)
        st, ct, data = self.raw('GET', '/process.Process/List')
        self.assertEqual(st, 405)
        st, ct, data = self.raw('POST', '/process.Process/List', b'{}',
                                {'Content-Type': 'application/proto'})
        self.assertEqual(st, 415)
        st, ct, data = self.raw('POST', '/process.Process/Start',
                                envelope({}), {'Content-Type':
                                               'application/json'})
        self.assertEqual(st, 415)
        st, body = self.unary('process.Process/List', {},
                              {'Connect-Protocol-Version': '2'})
        self.assertEqual((st, body['code']), (400, 'invalid_argument'))
        st, body = self.unary('process.Process/List', {},
                              {'Connect-Timeout-Ms': 'soon'})
        self.assertEqual((st, body['code']), (400, 'invalid_argument'))
        st, body = self.unary('process.Process/List', b'')
        self.assertEqual((st, body), (200, {'processes': []}))

    def test_timeout_is_the_deadline(self):
        t0 = time.monotonic()
        events, end = self.stream('process.Process/Start',
                                  {'process': {'cmd': 'sleep',
                                               'args': ['30']}},
                                  {'Connect-Timeout-Ms': '300'})
        self.assertLess(time.monotonic() - t0, 10 * SLOW)
        self.assertEqual(end['error']['code'], 'deadline_exceeded')
        self.assertEqual(events[-1]['event']['end']['exitCode'], -1)

    def test_keepalive(self):
        events, end = self.stream('process.Process/Start',
                                  {'process': {'cmd': 'sleep',
                                               'args': ['1.6']}},
                                  {'Keepalive-Ping-Interval': '1'})
        self.assertEqual(end, {})
        self.assertIn({'event': {'keepalive': {}}}, events)

    def test_users(self):
        auth = 'Basic ' + base64.b64encode(b'nobody:').decode()
        events, end = self.stream('process.Process/Start',
                                  {'process': {'cmd': 'id', 'args': ['-un'],
                                               'cwd': '/'}},
                                  {'Authorization': auth})
        self.assertEqual(self.output(events), b'nobody\n')
        auth = 'Basic ' + base64.b64encode(b'no-such-user:').decode()
        st, body = self.unary('process.Process/List', {},
                              {'Authorization': auth})
        self.assertEqual((st, body['code']), (401, 'unauthenticated'))

    def test_session_is_agentd_s(self):
        """An envd process is a session: listed with its tag as a label."""
        auth = {}
        c = http.client.HTTPConnection('127.0.0.1', self.eport,
                                       timeout=30 * SLOW)
        c.request('POST', '/process.Process/Start',
                  envelope({'process': {'cmd': 'sleep', 'args': ['30']},
                            'tag': 'web'}),
                  {'Content-Type': 'application/connect+json'})
        r = c.getresponse()
        hdr = r.read(5)
        first = json.loads(r.read(struct.unpack('>BI', hdr)[1]))
        pid = first['event']['start']['pid']
        sessions = self.c.request('GET', '/v1/sessions').json['sessions']
        mine = [s for s in sessions if s['pid'] == pid]
        self.assertEqual(len(mine), 1, sessions)
        self.assertEqual(mine[0].get('labels'), {'tag': 'web'})
        # By tag through envd; the stream ends with the kill.
        st, body = self.unary('process.Process/SendSignal',
                              {'process': {'tag': 'web'},
                               'signal': 'SIGNAL_SIGKILL'})
        self.assertEqual(st, 200, body)
        rest = unenvelope(r.read())
        c.close()
        self.assertEqual(rest[-2][1]['event']['end']['status'],
                         'signal: killed')
        self.assertEqual(rest[-1], (2, {}))
        metrics = self.c.request('GET', '/metrics').body.decode()
        self.assertIn('agentd_envd_requests_total{method="process.Process/'
                      'Start"} 1', metrics)


class ProcessSemanticsTest(EnvdCase):
    """envd's semantics: disconnects, late Connects, PTY calls."""

    def open_start(self, req):
        c, r, first = self.start_stream(req)
        return c, r, first['event']['start']['pid']

    def listed(self):
        st, body = self.unary('process.Process/List', {})
        self.assertEqual(st, 200, body)
        return body['processes']

    def test_disconnect_leaves_it_running_and_connect_later(self):
        c, r, pid = self.open_start({'process': {'cmd': '/bin/sh', 'args': [
            '-c', 'cat >/dev/null; exit 5']}, 'tag': 'bg'})
        c.close()
        time.sleep(0.2)
        procs = self.listed()
        self.assertEqual([(p['pid'], p.get('tag')) for p in procs],
                         [(pid, 'bg')])
        self.assertEqual(procs[0]['config']['cmd'], '/bin/sh')
        st, body = self.unary('process.Process/SendInput', {
            'process': {'pid': pid},
            'input': {'stdin': base64.b64encode(b'hi\n').decode()}})
        self.assertEqual(st, 200, body)
        st, body = self.unary('process.Process/CloseStdin',
                              {'process': {'tag': 'bg'}})
        self.assertEqual(st, 200, body)
        for _ in range(100):
            if not self.listed():
                break
            time.sleep(0.05)
        self.assertEqual(self.listed(), [])
        # Ended within 30 s: a Connect gets start and end.
        events, end = self.stream('process.Process/Connect',
                                  {'process': {'pid': pid}})
        self.assertEqual(end, {})
        self.assertEqual([list(e['event']) for e in events],
                         [['start'], ['end']])
        self.assertEqual(events[1]['event']['end']['exitCode'], 5)
        # Unary calls see only running ones.
        st, body = self.unary('process.Process/SendInput', {
            'process': {'pid': pid}, 'input': {'stdin': 'eA=='}})
        self.assertEqual((st, body['code']), (404, 'not_found'))

    def test_pty_update_and_close_stdin(self):
        c, r, pid = self.open_start({'process': {'cmd': '/bin/sh'},
                                     'pty': {'size': {'cols': 90,
                                                      'rows': 20}}})
        s = [x for x in self.c.request('GET', '/v1/sessions').json[
            'sessions'] if x['pid'] == pid][0]
        self.assertEqual((s['tty'], s['rows'], s['cols']), (True, 20, 90))
        st, body = self.unary('process.Process/Update', {
            'process': {'pid': pid}, 'pty': {'size': {'cols': 100,
                                                      'rows': 30}}})
        self.assertEqual(st, 200, body)
        s = self.c.request('GET', '/v1/sessions/' + s['id']).json
        self.assertEqual((s['rows'], s['cols']), (30, 100))
        st, body = self.unary('process.Process/CloseStdin',
                              {'process': {'pid': pid}})
        self.assertEqual((st, body['code']), (400, 'failed_precondition'))
        st, body = self.unary('process.Process/SendInput', {
            'process': {'pid': pid},
            'input': {'pty': base64.b64encode(b'exit 7\n').decode()}})
        self.assertEqual(st, 200, body)
        rest = unenvelope(r.read())
        c.close()
        self.assertEqual(rest[-2][1]['event']['end']['exitCode'], 7)
        self.assertIn(b'exit 7', b''.join(
            base64.b64decode(m['event']['data']['pty']) for _, m in rest
            if 'data' in m.get('event', {})))

    def test_kill_ends_the_whole_session(self):
        # A job of the shell in a process group of its own: a kill of the
        # leader's group alone would leave it.
        c, r, pid = self.open_start({'process': {'cmd': '/bin/sh', 'args': [
            '-c', 'python3 -c "import os, time; os.setpgid(0, 0); '
            'time.sleep(300)" & echo $!; wait']}})
        n = struct.unpack('>BI', r.read(5))[1]
        job = int(base64.b64decode(json.loads(r.read(n))['event']['data'][
            'stdout']))
        for _ in range(200):
            if os.getpgid(job) != pid:
                break
            time.sleep(0.02)
        self.assertNotEqual(os.getpgid(job), pid)
        st, body = self.unary('process.Process/SendSignal',
                              {'process': {'pid': pid},
                               'signal': 'SIGNAL_SIGKILL'})
        self.assertEqual(st, 200, body)
        rest = unenvelope(r.read())
        c.close()
        self.assertEqual(rest[-2][1]['event']['end']['status'],
                         'signal: killed')
        for _ in range(100):
            try:
                with open('/proc/%d/stat' % job) as f:
                    if f.read().split(') ')[1].startswith('Z'):
                        break
            except FileNotFoundError:
                break
            time.sleep(0.05)
        else:
            self.fail('the job %d outlived the kill' % job)
        st, body = self.unary('process.Process/SendSignal',
                              {'process': {'pid': pid},
                               'signal': 'SIGNAL_SIGINT'})
        self.assertEqual((st, body['code']), (404, 'not_found'))

    def test_kill_reaps_at_once(self):
        # Issue 42 item 1: a killed process was left a zombie, which
        # `kill -0` from another process found (the SDKs' kill tests).
        for i in range(100):
            c, r, pid = self.open_start({'process': {'cmd': 'sleep',
                                                     'args': ['30']}})
            st, body = self.unary('process.Process/SendSignal', {
                'process': {'pid': pid}, 'signal': 'SIGNAL_SIGKILL'})
            self.assertEqual(st, 200, body)
            events, end = self.start('kill -0 %d 2>/dev/null' % pid)
            self.assertEqual(events[-1]['event']['end']['status'],
                             'exit status 1', 'round %d: pid %d still there'
                             % (i, pid))
            r.read()
            c.close()
        # One that exits: gone once its end is sent.
        for i in range(20):
            events, end = self.start('exit 0')
            pid = events[0]['event']['start']['pid']
            events, end = self.start('kill -0 %d 2>/dev/null' % pid)
            self.assertEqual(events[-1]['event']['end']['status'],
                             'exit status 1', 'round %d: pid %d still there'
                             % (i, pid))

    def test_cwd_is_entered_as_the_user(self):
        # Item 12: the cwd was looked at as root before the spawn, which
        # told a user whether a path in a folder it cannot read exists.
        hidden = tempfile.mkdtemp(prefix='agentd-hidden-')
        self.addCleanup(shutil.rmtree, hidden)
        os.chmod(hidden, 0o700)
        os.mkdir(os.path.join(hidden, 'there'))
        auth = {'Authorization': 'Basic ' +
                base64.b64encode(b'nobody:').decode()}
        answers = []
        for name in ('there', 'not-there'):
            path = os.path.join(hidden, name)
            events, end = self.stream('process.Process/Start', {
                'process': {'cmd': 'true', 'cwd': path}}, auth)
            self.assertEqual(events, [])
            self.assertEqual(end['error']['code'], 'invalid_argument')
            answers.append(end['error']['message'].replace(path, 'P'))
        self.assertEqual(answers[0], answers[1])
        self.assertIn('Permission denied', answers[0])
        # As root, a missing cwd is still invalid_argument, naming it.
        events, end = self.start('true', process={
            'cmd': 'true', 'cwd': os.path.join(hidden, 'not-there')})
        self.assertEqual(end['error']['code'], 'invalid_argument')
        self.assertIn("cwd '%s'" % os.path.join(hidden, 'not-there'),
                      end['error']['message'])

    def test_delete_through_agentd_ends_the_stream(self):
        c, r, pid = self.open_start({'process': {'cmd': 'sleep',
                                                 'args': ['30']}})
        s = [x for x in self.c.request('GET', '/v1/sessions').json[
            'sessions'] if x['pid'] == pid][0]
        self.c.request('DELETE', '/v1/sessions/%s?grace_ms=0' % s['id'])
        rest = unenvelope(r.read())
        c.close()
        self.assertEqual(rest[-1][0], 2)
        self.assertEqual(rest[-2][1]['event']['end']['exitCode'], -1)
        self.assertEqual(self.listed(), [])


class OptionalFieldsTest(EnvdCase):
    """R5-8: every optional field of process.Process may be absent; each
    such call is answered (Update without pty read an unset pointer)."""

    def test_every_optional_field_absent(self):
        c = http.client.HTTPConnection('127.0.0.1', self.eport,
                                       timeout=30 * SLOW)
        c.request('POST', '/process.Process/Start', envelope(
            {'process': {'cmd': '/bin/cat'}, 'pty': {}}),
            {'Content-Type': 'application/connect+json'})
        r = c.getresponse()
        n = struct.unpack('>BI', r.read(5))[1]
        pid = json.loads(r.read(n))['event']['start']['pid']
        s = [x for x in self.c.request('GET', '/v1/sessions').json[
            'sessions'] if x['pid'] == pid][0]
        self.assertEqual((s['tty'], s['rows'], s['cols']), (True, 24, 80))
        for method, msg in (
                ('Update', {'process': {'pid': pid}}),
                ('Update', {'process': {'pid': pid}, 'pty': {}}),
                ('Update', {'process': {'pid': pid}, 'pty': None}),
                ('SendInput', {'process': {'pid': pid}}),
                ('SendInput', {'process': {'pid': pid}, 'input': {}}),
                ('List', {}),
                ('Update', {}),
                ('SendInput', {}),
                ('CloseStdin', {}),
                ('SendSignal', {}),
                ('SendSignal', {'process': {'pid': pid}})):
            st, body = self.unary('process.Process/' + method, msg)
            self.assertIn(st, (200, 400), (method, msg, body))
            self.assertTrue(self.agentd.alive(), (method, msg))
        events, end = self.stream('process.Process/Connect', {})
        self.assertEqual((events, end['error']['code']),
                         ([], 'invalid_argument'))
        for pty in ({'size': {}}, {'size': {'cols': 100}}, {'size': None}):
            events, end = self.start('echo $COLUMNS; stty size', pty=pty)
            self.assertEqual(end, {}, pty)
            self.assertEqual(events[-1]['event']['end'].get('exitCode', 0),
                             0, pty)
        events, end = self.stream('process.Process/Start', {
            'process': {'cmd': '/bin/true', 'args': None, 'envs': None,
                        'cwd': None}, 'tag': None, 'stdin': None})
        self.assertEqual(end, {})
        self.assertEqual(self.unary('process.Process/SendSignal', {
            'process': {'pid': pid}, 'signal': 'SIGNAL_SIGKILL'})[0], 200)
        r.read()
        c.close()
        self.assertTrue(self.agentd.alive())


class ProcessBudgetTest(EnvdCase):
    """R5-5: a process's record keeps what List answers (cmd, args, envs,
    cwd, tag), counted in --max-session-bytes; List past --envd-max-message
    is resource_exhausted."""

    extra_args = ('--max-session-bytes', '1MiB',
                  '--envd-max-message', '600000')

    def open_start(self, req):
        c, r, first = self.start_stream(req)
        self.addCleanup(c.close)
        return first

    def test_records_are_bounded(self):
        # Unknown fields of ProcessConfig are not kept.
        first = self.open_start({'process': {
            'cmd': 'sleep', 'args': ['60'], 'envs': {'A': 'b'},
            'cwd': '/tmp', 'junk': 'x' * 500000}, 'tag': 't'})
        pid = first['event']['start']['pid']
        st, body = self.unary('process.Process/List', {})
        self.assertEqual(st, 200, body)
        self.assertEqual(body['processes'], [{
            'pid': pid, 'tag': 't', 'config': {
                'cmd': 'sleep', 'args': ['60'], 'envs': {'A': 'b'},
                'cwd': '/tmp'}}])
        # Envs count with argv in --max-session-bytes.
        before = self.metric('agentd_session_bytes')
        env = {k: 'y' * 100000 for k in 'ABC'}     # 128 KiB a variable
        started = 0
        for i in range(8):
            msg = self.open_start({'process': {'cmd': 'sleep',
                                               'args': ['60'],
                                               'envs': env}})
            if 'event' not in msg:
                break
            started += 1
        self.assertGreater(self.metric('agentd_session_bytes'),
                           before + 300000 * started)
        self.assertLess(started, 4)
        self.assertEqual(msg['error']['code'], 'resource_exhausted', msg)
        self.assertIn('--max-session-bytes', msg['error']['message'])

    def test_list_past_the_max_message(self):
        for i in range(3):
            self.open_start({'process': {'cmd': 'sleep', 'args': ['60'],
                                         'envs': {k: 'z' * 80000
                                                  for k in 'ABC'}}})
        st, body = self.unary('process.Process/List', {})
        self.assertEqual((st, body['code']), (429, 'resource_exhausted'))
        self.assertIn('--envd-max-message', body['message'])


class PlainRoutesTest(EnvdCase):
    def test_health_init_envs(self):
        st, ct, data = self.raw('GET', '/health')
        self.assertEqual((st, data), (204, b''))
        st, ct, data = self.raw('POST', '/init', json.dumps(
            {'envVars': {'A': '1', 'B': 'two'}, 'defaultUser': 'nobody',
             'defaultWorkdir': '/tmp', 'timestamp':
             '2026-01-01T00:00:00Z'}).encode(),
            {'Content-Type': 'application/json'})
        self.assertEqual(st, 204, data)
        st, ct, data = self.raw('GET', '/envs')
        self.assertEqual((st, json.loads(data)), (200, {'A': '1', 'B': 'two'}))
        events, _ = self.start('echo $A $B; id -un; pwd',
                               process={'cmd': '/bin/sh', 'args': [
                                   '-c', 'echo $A $B; id -un; pwd'],
                                   'envs': {'B': 'mine'}})
        self.assertEqual(self.output(events), b'1 mine\nnobody\n/tmp\n')
        st, ct, data = self.raw('POST', '/init', b'{"envVars": 3}',
                                {'Content-Type': 'application/json'})
        self.assertEqual(st, 400)
        self.assertEqual(json.loads(data)['code'], 400)

    def init(self, body, headers=None):
        st, ct, data = self.raw('POST', '/init', json.dumps(body).encode(),
                                headers)
        return st, data

    def envs(self, headers=None):
        st, ct, data = self.raw('GET', '/envs', headers=headers)
        self.assertEqual(st, 200, data)
        return json.loads(data)

    def test_init_vars_capped(self):
        """envVars up to 4096 names and 1 MiB: past that 400, and what
        was set stays."""
        st, data = self.init({'envVars': {'V%d' % i: 'x'
                                          for i in range(4096)}})
        self.assertEqual(st, 204, data)
        st, data = self.init({'envVars': {'V%d' % i: 'x'
                                          for i in range(4097)}})
        self.assertEqual(st, 400, data)
        self.assertEqual(json.loads(data)['code'], 400)
        self.assertEqual(len(self.envs()), 4096)
        st, data = self.init({'envVars': {'BIG%d' % i: 'z' * 300000
                                          for i in range(3)}})
        self.assertEqual(st, 204, data)
        st, data = self.init({'envVars': {'BIG%d' % i: 'z' * 300000
                                          for i in range(4)}})
        self.assertEqual(st, 400, data)
        self.assertEqual(len(self.envs()), 3)

    def test_init_vars_replaced(self):
        """A later /init's envVars replace the last set whole (envd's
        ReplaceUserVars): a name not given goes; no envVars keeps them."""
        st, data = self.init({'envVars': {'A': '1', 'B': '2'}})
        self.assertEqual(st, 204, data)
        st, data = self.init({'envVars': {'B': 'two', 'C': '3'}})
        self.assertEqual(st, 204, data)
        self.assertEqual(self.envs(), {'B': 'two', 'C': '3'})
        events, _ = self.start('echo "${A-unset} $B $C"')
        self.assertEqual(self.output(events), b'unset two 3\n')
        st, data = self.init({'defaultWorkdir': '/tmp'})
        self.assertEqual(st, 204, data)
        self.assertEqual(self.envs(), {'B': 'two', 'C': '3'})
        st, data = self.init({'envVars': {}})
        self.assertEqual(st, 204, data)
        self.assertEqual(self.envs(), {})

    def test_init_bad_input(self):
        """Each field's bad input is 400 with a cause, and nothing of
        that /init is applied."""
        st, data = self.init({'envVars': {'KEEP': '1'}})
        self.assertEqual(st, 204, data)
        pem = ('-----BEGIN CERTIFICATE-----\nMIIB\n'
               '-----END CERTIFICATE-----\n')
        for field, bad in (
                ('defaultUser', 3), ('defaultWorkdir', []),
                ('accessToken', {}), ('timestamp', 12),
                ('timestamp', 'yesterday'), ('timestamp', '2026-13-01T00:00:00Z'),
                ('timestamp', '2026-01-01T00:00:00'),
                ('caBundle', 5), ('caBundle', 'not a certificate'),
                ('caBundle', pem.replace('MIIB', 'MI!B')),
                ('caBundle', pem + 'trailing junk'),
                ('caBundle', pem.replace('-----END CERTIFICATE-----', '')),
                ('hyperloopIP', 7), ('hyperloopIP', '10.0.0'),
                ('hyperloopIP', 'events.e2b.local'),
                ('hyperloopIP', '10.0.0.1; rm -rf /'),
                ('envVars', 3), ('envVars', {'A': 1}), ('envVars', {'A=B': 'x'}),
                ('envVars', {'': 'x'}), ('defaultUser', 'no-such-user-x'),
                ('lifecycleID', 5), ('volumeMounts', 3),
                ('volumeMounts', {'path': '/mnt/x'}),
                ('volumeMounts', [{'path': '/mnt/x'}]),
                ('volumeMounts', [{'nfs_target': '10.0.0.1:/x'}]),
                ('volumeMounts', [{'nfs_target': 'nfs.example:/x',
                                   'path': '/mnt/x'}]),
                ('volumeMounts', [{'nfs_target': '10.0.0.1/x',
                                   'path': '/mnt/x'}]),
                ('volumeMounts', [{'nfs_target': '10.0.0.1:/x',
                                   'path': 'relative'}]),
                ('volumeMounts', [{'nfs_target': '10.0.0.1:/x',
                                   'path': '/mnt/%d' % i}
                                  for i in range(65)])):
            st, data = self.init({field: bad, 'envVars': {'NEW': '1'}}
                                 if field != 'envVars' else {field: bad})
            self.assertEqual(st, 400, (field, bad, data))
            self.assertEqual(json.loads(data)['code'], 400)
            self.assertTrue(json.loads(data)['message'], data)
            self.assertEqual(self.envs(), {'KEEP': '1'}, (field, bad))

    def test_init_stale_timestamp(self):
        """An /init older than the newest seen is answered 204 and ignored
        (envd's lastSetTime); one without a timestamp, or as new, is not."""
        st, data = self.init({'envVars': {'A': 'new'},
                              'timestamp': '2026-06-01T00:00:00.5Z'})
        self.assertEqual(st, 204, data)
        st, data = self.init({'envVars': {'A': 'old'},
                              'timestamp': '2026-06-01T02:00:00.4+02:00'})
        self.assertEqual(st, 204, data)
        self.assertEqual(self.envs(), {'A': 'new'})
        st, data = self.init({'envVars': {'A': 'same'},
                              'timestamp': '2026-06-01T00:00:00.500Z'})
        self.assertEqual(st, 204, data)
        self.assertEqual(self.envs(), {'A': 'same'})
        st, data = self.init({'envVars': {'A': 'none'}})
        self.assertEqual(st, 204, data)
        self.assertEqual(self.envs(), {'A': 'none'})

    def test_init_token_rules(self):
        """envd's /init token rules without MMDS: the first /init sets
        it; later, the body's accessToken being agentd's, or the header's,
        lets /init in; a body token that differs without the header, or
        none, is 401; with the header another token rotates it, and none
        keeps it (agentd has no MMDS to authorize a reset)."""
        st, data = self.init({'accessToken': 't1'})
        self.assertEqual(st, 204, data)
        st, data = self.init({'accessToken': 't1', 'envVars': {'A': '1'}})
        self.assertEqual(st, 204, data)
        self.assertEqual(self.envs({'X-Access-Token': 't1'}), {'A': '1'})
        st, data = self.init({'envVars': {'A': '2'}})
        self.assertEqual(st, 401, data)
        self.assertIn(b'reset not authorized', data)
        st, data = self.init({'accessToken': 'evil', 'envVars': {'A': '3'}})
        self.assertEqual(st, 401, data)
        self.assertIn(b'validation failed', data)
        self.assertEqual(self.envs({'X-Access-Token': 't1'}), {'A': '1'})
        st, data = self.init({'envVars': {'A': '4'}}, {'X-Access-Token': 't1'})
        self.assertEqual(st, 204, data)
        self.assertEqual(self.envs({'X-Access-Token': 't1'}), {'A': '4'})
        st, data = self.init({'accessToken': 't2'}, {'X-Access-Token': 't1'})
        self.assertEqual(st, 204, data)
        st, ct, data = self.raw('GET', '/envs', headers={
            'X-Access-Token': 't1'})
        self.assertEqual(st, 401)
        self.assertEqual(self.envs({'X-Access-Token': 't2'}), {'A': '4'})

    def test_host_rule_without_a_token(self):
        st, ct, data = self.raw('GET', '/health',
                                headers={'Host': 'evil.example'})
        self.assertEqual(st, 403, data)
        st, ct, data = self.raw('GET', '/health',
                                headers={'Host': 'localhost:1'})
        self.assertEqual(st, 204, data)

    def test_init_token_becomes_agentd_s(self):
        st, ct, data = self.raw('POST', '/init', b'{"accessToken": "tok"}')
        self.assertEqual(st, 204)
        st, ct, data = self.raw('GET', '/envs')
        self.assertEqual(st, 401)
        st, ct, data = self.raw('GET', '/health')
        self.assertEqual(st, 204)
        st, ct, data = self.raw('GET', '/envs', headers={
            'X-Access-Token': 'tok'})
        self.assertEqual(st, 200)
        # ... and /init needs it now too, and agentd's own API.
        st, ct, data = self.raw('POST', '/init', b'{}')
        self.assertEqual(st, 401)
        c = http.client.HTTPConnection('127.0.0.1', self.agentd.port,
                                       timeout=30 * SLOW)
        c.request('GET', '/v1/sessions')
        self.assertEqual(c.getresponse().status, 401)
        c.close()
        c = http.client.HTTPConnection('127.0.0.1', self.agentd.port,
                                       timeout=30 * SLOW)
        c.request('GET', '/v1/sessions', headers={
            'Authorization': 'Bearer tok'})
        self.assertEqual(c.getresponse().status, 200)
        c.close()


class TokenTest(EnvdCase):
    token = True

    def test_token(self):
        st, body = self.unary('process.Process/List', {})
        self.assertEqual(st, 200)
        self.token = None   # no header from here on
        st, body = self.unary('process.Process/List', {})
        self.assertEqual((st, body['code']), (401, 'unauthenticated'))
        st, ct, data = self.raw('GET', '/health')
        self.assertEqual(st, 204)
        st, ct, data = self.raw('POST', '/init', b'{}')
        self.assertEqual(st, 401)


class PlatformRoutesTest(EnvdCase):
    """What E2B's orchestrator asks of envd beyond the SDK: GET /metrics."""

    def metrics(self):
        st, ct, data = self.raw('GET', '/metrics')
        self.assertEqual((st, ct), (200, 'application/json'), data)
        self.assertTrue(data.endswith(b'\n'))
        return json.loads(data)

    def test_metrics(self):
        m = self.metrics()
        self.assertEqual(list(m), [
            'ts', 'cpu_count', 'cpu_used_pct', 'mem_total_mib',
            'mem_used_mib', 'mem_total', 'mem_used', 'mem_cache',
            'disk_used', 'disk_total'])
        self.assertLess(abs(m['ts'] - time.time()), 5)
        with open('/proc/stat') as f:
            cpus = sum(1 for l in f if l[:3] == 'cpu' and l[3].isdigit())
        self.assertEqual(m['cpu_count'], cpus)
        with open('/proc/meminfo') as f:
            mi = {l.split(':')[0]: int(l.split()[1]) * 1024 for l in f}
        self.assertEqual(m['mem_total'], mi['MemTotal'])
        self.assertEqual(m['mem_total_mib'], mi['MemTotal'] >> 20)
        self.assertEqual(m['mem_used_mib'], m['mem_used'] >> 20)
        # used is total less MemAvailable, within what moved meanwhile
        self.assertLess(abs(m['mem_used'] -
                            (mi['MemTotal'] - mi['MemAvailable'])), 256 << 20)
        self.assertLess(abs(m['mem_cache'] - mi['Cached'] -
                            mi['SReclaimable']), 256 << 20)
        vfs = os.statvfs('/')
        self.assertEqual(m['disk_total'], vfs.f_blocks * vfs.f_frsize)
        self.assertLess(abs(m['disk_used'] - (vfs.f_blocks - vfs.f_bavail)
                            * vfs.f_frsize), 256 << 20)
        self.assertTrue(0 <= m['cpu_used_pct'] <= 100)

    def test_cpu_since_the_last_call(self):
        """cpu_used_pct is the share since the previous call: a busy
        second between two calls shows; two calls back to back show
        (nearly) nothing of it."""
        self.metrics()
        spin = subprocess.Popen(['/bin/sh', '-c',
                                 'while :; do :; done'])
        try:
            time.sleep(1.0)
            busy = self.metrics()['cpu_used_pct']
        finally:
            spin.kill()
            spin.wait()
        self.assertGreater(busy, 100 / os.cpu_count() / 2)
        self.assertEqual(round(busy, 2), busy)

    def test_metrics_on_agentd_s_own_api_stay_prometheus(self):
        c = http.client.HTTPConnection('127.0.0.1', self.agentd.port,
                                       timeout=30 * SLOW)
        c.request('GET', '/metrics')
        r = c.getresponse()
        data = r.read()
        c.close()
        self.assertEqual(r.status, 200)
        self.assertIn(b'agentd_', data)
        self.assertFalse(data.startswith(b'{'))


class PlatformTokenTest(EnvdCase):
    """envd checks the token before it routes: with a token set, an
    unknown route or /metrics without it is 401, not 404 or 200."""
    token = True

    def test_token_before_routing(self):
        st, ct, data = self.raw('GET', '/metrics')
        self.assertEqual(st, 200, data)
        st, ct, data = self.raw('GET', '/no/such/route')
        self.assertEqual(st, 404, data)
        self.token = None   # no header from here on
        for method, path in (('GET', '/metrics'), ('GET', '/no/such/route'),
                             ('POST', '/no.Such/Method'),
                             ('POST', '/freeze')):
            st, ct, data = self.raw(method, path)
            self.assertEqual(st, 401, (path, data))
            self.assertEqual(json.loads(data)['code'], 401)
        st, ct, data = self.raw('GET', '/health')
        self.assertEqual(st, 204)


class SdkTest(EnvdCase):
    """The official E2B JS SDK, in debug mode, against --envd-listen."""

    def run_sdk(self, *args):
        node = shutil.which('node')
        if node is None:
            raise unittest.SkipTest('node is not installed')
        self.assertTrue(os.path.isdir(os.path.join(NODE_MODULES, 'e2b')),
                        'tests/node/node_modules lacks e2b: run '
                        'build-aux/deps.sh test (npm ci in tests/node)')
        tmp = tempfile.mkdtemp(prefix='agentd-envd-')
        try:
            shutil.copy(os.path.join(HERE, 'sdk_process.mjs'), tmp)
            os.symlink(NODE_MODULES, os.path.join(tmp, 'node_modules'))
            p = subprocess.run([node, os.path.join(tmp, 'sdk_process.mjs'),
                                'http://127.0.0.1:%d' % self.eport] +
                               list(args), cwd=tmp, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=120 * SLOW)
        finally:
            shutil.rmtree(tmp)
        out = p.stdout.decode('utf-8', 'replace')
        self.assertEqual(p.returncode, 0, out + self.agentd.stderr())
        for name in ('run foreground', 'run timeout', 'background stdin',
                     'connect output', 'killed ends', 'pty resize',
                     'kill reaps', 'pty kill reaps'):
            self.assertIn('ok ' + name + '\n', out)

    def test_sdk_process(self):
        self.run_sdk()


class SdkTokenTest(SdkTest):
    token = True

    def test_sdk_process(self):
        self.run_sdk(self.agentd.token)


class UpgradeCase(EnvdCase):
    """What /init set survives live upgrades (issue 38 R5-3): the default
    user, workdir and variables, and the token's origin."""

    def upgrade(self, n):
        """Upgrade to a copy of agentd (over the unix socket: no token)."""
        path = os.path.join(self.agentd.dir, 'agentd-%d' % n)
        shutil.copyfile(self.agentd.binary, path)
        os.chmod(path, 0o755)
        u = self.agentd.unix_client()
        r = u.request('POST', '/v1/sandbox/upgrade', json_body={'path': path})
        self.assertEqual(r.status, 202, r.body)
        deadline = time.monotonic() + 20 * SLOW
        while True:
            try:
                h = self.agentd.unix_client().request('GET', '/healthz')
                if h.status == 200 and h.json['upgrades'] == n:
                    return
            except (AssertionError, OSError):
                pass
            self.assertLess(time.monotonic(), deadline, self.agentd.stderr())
            time.sleep(0.05)

    def same_call(self, tok):
        h = {'X-Access-Token': tok}
        events, end = self.stream('process.Process/Start', {'process': {
            'cmd': '/bin/sh', 'args': ['-c', 'id -u; echo "$A $B"; pwd']}},
            headers=h)
        self.assertEqual(end, {})
        self.assertEqual(self.output(events), b'65534\n1 two\n/tmp\n')
        st, ct, data = self.raw('GET', '/envs', headers=h)
        self.assertEqual((st, json.loads(data)), (200, {'A': '1', 'B': 'two'}))


class UpgradeTest(UpgradeCase):

    def test_init_survives_two_upgrades(self):
        st, ct, data = self.raw('POST', '/init', json.dumps(
            {'envVars': {'A': '1', 'B': 'two'}, 'defaultUser': 'nobody',
             'defaultWorkdir': '/tmp', 'accessToken': 'tok1'}).encode())
        self.assertEqual(st, 204, data)
        self.same_call('tok1')
        for n in (1, 2):
            self.upgrade(n)
            self.same_call('tok1')
        # The token is still /init's: a later /init replaces it.
        st, ct, data = self.raw('POST', '/init', b'{"accessToken": "tok2"}',
                                headers={'X-Access-Token': 'tok1'})
        self.assertEqual(st, 204, data)
        st, ct, data = self.raw('GET', '/envs',
                                headers={'X-Access-Token': 'tok1'})
        self.assertEqual(st, 401)
        self.same_call('tok2')

    def test_process_records_survive_two_upgrades(self):
        """envd's process records go across live upgrades: List shows the
        process with its tag and envs, and a pid or the tag finds it for
        SendInput and SendSignal, after each of two upgrades."""
        out = os.path.join(self.agentd.dir, 'got')
        req = {'process': {'cmd': '/bin/sh', 'args': [
            '-c', 'while read l; do echo "$l $X" >>%s; done' % out],
            'envs': {'X': 'x1'}}, 'tag': 'bg'}
        c, _, first = self.start_stream(req)
        pid = first['event']['start']['pid']
        c.close()
        for n in (1, 2):
            self.upgrade(n)
            st, body = self.unary('process.Process/List', {})
            self.assertEqual(st, 200, body)
            self.assertEqual([(p['pid'], p.get('tag'), p['config'].get(
                'envs')) for p in body['processes']],
                [(pid, 'bg', {'X': 'x1'})], self.agentd.stderr())
            sel = {'tag': 'bg'} if n == 1 else {'pid': pid}
            st, body = self.unary('process.Process/SendInput', {
                'process': sel, 'input': {'stdin': base64.b64encode(
                    b'up%d\n' % n).decode()}})
            self.assertEqual(st, 200, body)
        def got():
            if not os.path.exists(out):
                return ''
            with open(out) as f:
                return f.read()
        deadline = time.monotonic() + 10 * SLOW
        while got().count('\n') != 2:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        self.assertEqual(got(), 'up1 x1\nup2 x1\n')
        st, body = self.unary('process.Process/SendSignal', {
            'process': {'tag': 'bg'}, 'signal': 'SIGNAL_SIGKILL'})
        self.assertEqual(st, 200, body)
        st, body = self.unary('process.Process/List', {})
        self.assertEqual(body, {'processes': []})

    def test_nothing_set(self):
        # Nothing set before: nothing after (root, no variables).
        self.upgrade(1)
        st, ct, data = self.raw('GET', '/envs')
        self.assertEqual((st, data), (200, b'{}'))
        events, _ = self.start('id -u')
        self.assertEqual(self.output(events), b'%d\n' % os.geteuid())


class UpgradeTokenFileTest(UpgradeCase):
    token = True

    def test_token_file_stays(self):
        # --token-file's token is never /init's to replace, before or
        # after an upgrade.
        for n in (0, 1):
            if n:
                self.upgrade(n)
            st, ct, data = self.raw('POST', '/init',
                                    b'{"accessToken": "other"}')
            self.assertEqual(st, 204, data)
            st, ct, data = self.raw('GET', '/envs',
                                    headers={'X-Access-Token': 'other'})
            self.assertEqual(st, 401)
            st, ct, data = self.raw('GET', '/envs')
            self.assertEqual(st, 200)


if __name__ == '__main__':
    unittest.main()
