"""GET /v1/sessions/{id}/cast: a session's output as an asciicast v2
recording (API.md, "Recordings"), and `agentctl cast ID`.
"""

import json
import os
import subprocess
import time
import unittest

from harness import AgentdTestCase
from test_upgrade import UpgradeTestCase


def parse_cast(tc, body):
    """(header, events) of an asciicast v2 file, its format rules checked."""
    text = body.decode('utf-8')     # the whole file is UTF-8
    lines = text.split('\n')
    tc.assertEqual(lines[-1], '', 'the file ends with a newline')
    header = json.loads(lines[0])
    tc.assertEqual(header['version'], 2)
    for k in ('width', 'height', 'timestamp'):
        tc.assertIsInstance(header[k], int, k)
        tc.assertGreater(header[k], 0, k)
    events = []
    last = 0.0
    for line in lines[1:-1]:
        ev = json.loads(line)
        tc.assertIsInstance(ev, list)
        tc.assertEqual(len(ev), 3, ev)
        t, code, data = ev
        tc.assertIsInstance(t, (int, float))
        tc.assertIn(code, ('o', 'r', 'm'))
        tc.assertIsInstance(data, str)
        tc.assertGreaterEqual(t, last, 'times never decrease: %r' % ev)
        last = t
        events.append((t, code, data))
    return header, events


def output_of(events):
    return ''.join(d for (_, c, d) in events if c == 'o')


class CastCase(AgentdTestCase):

    def cast(self, sid, client=None):
        r = self.req('GET', '/v1/sessions/%s/cast' % sid, client=client)
        self.expect(r, 200, 'cast %s' % sid)
        self.assertEqual(r.header('Content-Type'), 'application/x-asciicast')
        self.assertEqual(r.header('Content-Disposition'),
                         'attachment; filename="%s.cast"' % sid)
        return parse_cast(self, r.body)

    def held(self, sid):
        """What the ring still holds, as one reader gets it from cursor 0."""
        ck = self.read_all(sid, max_bytes=64 << 20)
        return ck


class CastTest(CastCase):

    def test_pty_times_resizes_utf8(self):
        t0 = time.time()
        self.create(id='rec', tty=True, rows=30, cols=100,
                    cmd="printf 'one\\377\\376two\\n'; sleep 0.6; "
                        "printf '\\342\\202'; sleep 0.3; printf '\\254 euro\\n'; "
                        "sleep 0.6; echo three")
        time.sleep(0.3)
        self.expect(self.resize_raw('rec', 40, 120), 200)
        self.wait_state('rec')
        header, events = self.cast('rec')
        self.assertEqual((header['width'], header['height']), (100, 30))
        self.assertLessEqual(abs(header['timestamp'] - t0), 2)
        ck = self.held('rec')
        raw = ck.data()
        # The bytes that are not UTF-8 become U+FFFD, each; the euro sign
        # split between two reads stays whole.
        self.assertEqual(output_of(events), raw.decode('utf-8', 'replace'))
        self.assertIn('one\ufffd\ufffdtwo', output_of(events))
        self.assertIn('\u20ac euro', output_of(events))
        # The resize, at its time, between the outputs around it.
        resizes = [(t, d) for (t, c, d) in events if c == 'r']
        self.assertEqual([d for (_, d) in resizes], ['120x40'])
        self.assertTrue(0.15 <= resizes[0][0] <= 0.6 + 0.5, resizes)
        # Each output at the time it was read, not all at once.
        def at(needle):
            for (t, c, d) in events:
                if c == 'o' and needle in d:
                    return t
            self.fail('%r not in %r' % (needle, events))
        self.assertLess(at('one'), 0.5)
        self.assertGreaterEqual(at('euro'), 0.8)
        self.assertGreaterEqual(at('three'), 1.4)
        self.assertLess(at('one'), resizes[0][0])
        self.assertLess(resizes[0][0], at('euro'))

    def test_pipe_session(self):
        self.create(id='pipe', cmd='echo out; echo err >&2')
        self.wait_state('pipe')
        header, events = self.cast('pipe')
        self.assertEqual((header['width'], header['height']), (80, 24))
        self.assertEqual(sorted(output_of(events).split()), ['err', 'out'])
        self.assertEqual([e for e in events if e[1] != 'o'], [])

    def test_token_rules(self):
        self.create(id='tok', cmd='echo hi')
        self.wait_state('tok')
        r = self.c.request('GET', '/v1/sessions/tok/cast', auth=False)
        self.assertError(r, 401, 'unauthorized')
        r = self.c.request('GET', '/v1/sessions/tok/cast',
                           headers={'Authorization': 'Bearer wrong'}, auth=False)
        self.assertError(r, 401, 'unauthorized')
        self.assertError(self.req('GET', '/v1/sessions/nope/cast'), 404, 'not_found')
        self.assertError(self.req('POST', '/v1/sessions/tok/cast', {}), 405,
                         'method_not_allowed')
        r = self.req('HEAD', '/v1/sessions/tok/cast')
        self.expect(r, 200)
        self.assertEqual(r.body, b'')
        self.assertEqual(r.header('Content-Type'), 'application/x-asciicast')
        # Over the unix socket, as the rest of the API.
        _, events = self.cast('tok', client=self.agentd.unix_client())
        self.assertEqual(output_of(events), 'hi\n')

    def test_eviction_marker(self):
        # 4 KiB of ring, 40 KB of numbered lines: the start is gone.
        self.create(id='ev', ring_bytes=4096,
                    cmd='for i in $(seq 1 4000); do echo line $i; done')
        self.wait_state('ev')
        header, events = self.cast('ev')
        ck = self.held('ev')
        self.assertGreater(ck.dropped, 0)
        self.assertEqual(events[0][1], 'm', events[:3])
        self.assertIn('evicted', events[0][2])
        self.assertEqual(output_of(events), ck.data().decode())
        self.assertTrue(output_of(events).endswith('line 4000\n'))

    def test_big_cast_streams(self):
        # 8 MiB of output in an 8 MiB ring: sent as rendered, all of it.
        self.create(id='big', ring_bytes=8 << 20,
                    cmd="head -c 6000000 /dev/zero | tr '\\0' 'a'; echo; "
                        "seq 1 100000")
        self.wait_state('big', timeout=60)
        before = self.metric('agentd_casts_total')
        header, events = self.cast('big')
        out = output_of(events)
        self.assertTrue(out.startswith('a' * 1000))
        self.assertTrue(out.endswith('\n99999\n100000\n'))
        self.assertEqual(len(out), 6000001 + len(''.join(
            '%d\n' % i for i in range(1, 100001))))
        self.assertEqual(self.metric('agentd_casts_total'), before + 1)
        self.assertEqual(self.metric('agentd_casts'), 0)

    def test_resize_log_bounded(self):
        self.stop_agentd()
        self.start_agentd(['--cast-resizes', '3'])
        self.assertEqual(self.metric('agentd_cast_resizes_max'), 3)
        self.create(id='rz', tty=True, rows=24, cols=80, cmd='sleep 30')
        for i in range(6):
            self.expect(self.resize_raw('rz', 10 + i, 50 + i), 200)
        header, events = self.cast('rz')
        self.assertEqual((header['width'], header['height']), (80, 24))
        self.assertEqual([d for (_, c, d) in events if c == 'r'],
                         ['53x13', '54x14', '55x15'])
        self.expect(self.delete('rz', grace_ms=100), 200)

    def test_agentctl_cast(self):
        ctl = os.environ.get('AGENTCTL') or os.path.join(
            os.path.dirname(os.path.dirname(self.agentd.binary)), 'agentctl', 'agentctl')
        if not os.path.exists(ctl):
            self.skipTest('no agentctl beside agentd')
        self.create(id='ctl', tty=True, rows=20, cols=70, cmd='echo from agentctl')
        self.wait_state('ctl')
        r = self.req('GET', '/v1/sessions/ctl/cast')
        env = dict(os.environ, AGENTD_SOCKET=self.agentd.socket_path)
        out = subprocess.run([ctl, 'cast', 'ctl'], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, timeout=60)
        self.assertEqual(out.returncode, 0, out)
        self.assertEqual(out.stdout, r.body)
        header, events = parse_cast(self, out.stdout)
        self.assertEqual((header['width'], header['height']), (70, 20))
        self.assertIn('from agentctl', output_of(events))
        bad = subprocess.run([ctl, 'cast', 'nope'], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, timeout=60)
        self.assertEqual(bad.returncode, 1, bad)
        self.assertEqual(bad.stdout, b'')


class CastUpgradeTest(UpgradeTestCase, CastCase):

    def test_times_survive_an_upgrade(self):
        self.create(id='up', tty=True, rows=25, cols=90,
                    cmd='echo before; sleep 0.6; echo later; read x; echo after $x')
        self.read_until('up', b'later')
        self.expect(self.resize_raw('up', 30, 100), 200)
        h0, e0 = self.cast('up')
        self.upgrade(self.new_binary())
        self.wait_upgraded(1)
        h1, e1 = self.cast('up')
        # The same file: header, events, times.
        self.assertEqual(h1, h0)
        self.assertEqual(e1, e0)
        self.assertGreaterEqual([t for (t, c, d) in e0 if 'later' in d][0], 0.5)
        # And new output goes on from there, later still.
        self.stdin('up', text='x\n')
        self.wait_state('up')
        _, e2 = self.cast('up')
        self.assertEqual(e2[:len(e0)], e0)
        t_after = [t for (t, c, d) in e2 if c == 'o' and 'after x' in d]
        self.assertTrue(t_after and t_after[0] >= e0[-1][0], e2)


if __name__ == '__main__':
    unittest.main()
