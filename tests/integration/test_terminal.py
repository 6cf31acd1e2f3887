"""Sessions that behave like a real terminal and like the peers' contracts:
the PTY's line discipline (IUTF8), login shells, the sandbox-wide default
environment (--env, --env-file)."""

import os
import subprocess
import tempfile
import time
import unittest

from harness import AgentdTestCase, agentd_path, query, unb64


class Utf8TerminalTest(AgentdTestCase):

    def typed_line(self, env=None):
        """Type 'ab世' and a backspace into a tty session; return what read got."""
        fields = dict(cmd='IFS= read -r l; printf "GOT[%s]\\n" "$l"', tty=True)
        if env is not None:
            fields['env'] = env
        w = self.create(**fields)
        self.stdin(w['id'], data='ab\u4e16'.encode('utf-8') + b'\x7f\n')
        ck = self.read_all(w['id'], tty=True, timeout=20)
        self.assertEqual(ck.last['exit_code'], 0)
        out = ck.data()
        start = out.index(b'GOT[')
        return out[start + 4:out.index(b']\r\n', start)]

    def test_backspace_erases_a_whole_character(self):
        # agentd's default LANG is C.UTF-8: the erase takes all three bytes
        self.assertEqual(self.typed_line(), b'ab')

    def test_utf8_locale_from_the_request(self):
        self.assertEqual(self.typed_line({'LANG': 'C', 'LC_ALL': 'en_US.utf8'}),
                         b'ab')

    def test_non_utf8_locale_erases_a_byte(self):
        self.assertEqual(self.typed_line({'LANG': 'C'}),
                         'ab\u4e16'.encode('utf-8')[:-1])


def printed(ck, name):
    """The value of a 'name=value' line in the output."""
    for line in ck.data().splitlines():
        if line.startswith(name.encode() + b'='):
            return line.split(b'=', 1)[1].decode()
    return None


class LoginShellTest(AgentdTestCase):

    def setUp(self):
        super().setUp()
        self.home = tempfile.mkdtemp(prefix='agentd-login-')
        with open(os.path.join(self.home, '.profile'), 'w') as f:
            f.write('export LOGIN_MARK=profile\n')

    def tearDown(self):
        os.unlink(os.path.join(self.home, '.profile'))
        os.rmdir(self.home)
        super().tearDown()

    def run_mark(self, **fields):
        w, ck = self.run_cmd('echo "mark=$LOGIN_MARK"', env={'HOME': self.home},
                             **fields)
        self.assertEqual(ck.last['exit_code'], 0)
        return w, printed(ck, 'mark')

    def test_login_reads_the_profile(self):
        w, mark = self.run_mark(login=True)
        self.assertEqual(mark, 'profile')
        self.assertEqual(w['argv'][:2], ['/bin/sh', '-lc'])

    def test_no_login_by_default(self):
        w, mark = self.run_mark()
        self.assertEqual(mark, '')
        self.assertEqual(w['argv'][:2], ['/bin/sh', '-c'])

    def test_login_false_is_the_default(self):
        self.assertEqual(self.run_mark(login=False)[1], '')

    def test_login_with_argv_is_refused(self):
        r = self.create_raw(argv=['true'], login=True)
        self.assertError(r, 400, 'invalid_request', 'login')

    def test_login_must_be_a_boolean(self):
        r = self.create_raw(cmd='true', login='yes')
        self.assertError(r, 400, 'invalid_request', 'login')


class DefaultEnvTest(AgentdTestCase):
    autostart = False

    def setUp(self):
        super().setUp()
        fd, self.env_file = tempfile.mkstemp(prefix='agentd-env-')
        with os.fdopen(fd, 'w') as f:
            f.write('# defaults of this sandbox\n\nFROM_FILE=file\n'
                    'BOTH=file\nSPACED=a b  c\nLANG=C\n')

    def tearDown(self):
        super().tearDown()
        os.unlink(self.env_file)

    def test_defaults_under_the_request(self):
        self.start_agentd(['--env-file', self.env_file, '--env', 'BOTH=flag',
                           '--env', 'FROM_FLAG=flag', '--env', 'OVERRIDDEN=flag',
                           '--env', 'EMPTY='])
        w, ck = self.run_cmd('env', env={'OVERRIDDEN': 'request'})
        got = {k: printed(ck, k) for k in ('FROM_FILE', 'BOTH', 'SPACED', 'FROM_FLAG',
                                           'OVERRIDDEN', 'EMPTY', 'LANG')}
        self.assertEqual(got, {'FROM_FILE': 'file', 'BOTH': 'flag', 'SPACED': 'a b  c',
                               'FROM_FLAG': 'flag', 'OVERRIDDEN': 'request',
                               'EMPTY': '', 'LANG': 'C'})

    def test_no_defaults_without_flags(self):
        self.start_agentd()
        w, ck = self.run_cmd('echo "FROM_FILE=${FROM_FILE-unset}"')
        self.assertEqual(printed(ck, 'FROM_FILE'), 'unset')

    def bad_config(self, args):
        p = subprocess.run([agentd_path(), '--socket', '', '--listen', '127.0.0.1:1']
                           + args, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=30)
        self.assertNotEqual(p.returncode, 0)
        return p.stderr.decode(errors='replace')

    def test_bad_env_flag_is_refused(self):
        self.assertIn("'NOVALUE'", self.bad_config(['--env', 'NOVALUE']))
        self.assertIn('NAME=VALUE', self.bad_config(['--env', '=x']))

    def test_bad_env_file_is_refused(self):
        with open(self.env_file, 'a') as f:
            f.write('just words\n')
        self.assertIn('line 7', self.bad_config(['--env-file', self.env_file]))
        self.assertIn('No such file', self.bad_config(['--env-file', '/nonexistent/env']))


SMALL_WRITES = 'i=1; while [ $i -le %d ]; do echo $i; i=$((i+1)); done'


class RingBytesTest(AgentdTestCase):
    """ring_bytes means bytes: many tiny writes do not fill the chunk index
    before the ring's bytes."""

    def held(self, sid):
        w = self.get(sid, cursor=0, max_bytes=1)
        first = w['output'][0]['offset'] if w['output'] else w['bytes_out']
        return w, w['bytes_out'] - first

    def test_50000_one_line_writes_all_kept(self):
        # 288,894 bytes in 50,000 writes: far less than the 1 MiB ring
        w = self.create(cmd=SMALL_WRITES % 50000, yield_ms=60000, max_bytes=0)
        self.assertEqual(w['state'], 'exited')
        self.assertEqual(w['bytes_out'], 288894)
        last, held = self.held(w['id'])
        self.assertEqual(last['dropped_chunks'], 0)
        self.assertEqual(held, 288894)
        expected = b''.join(b'%d\n' % i for i in range(1, 50001))
        ck = self.read_all(w['id'], tty=False)
        self.assertEqual(ck.data(), expected)

    def test_a_small_ring_stays_full(self):
        ring = 65536
        w = self.create(cmd=SMALL_WRITES % 50000, yield_ms=60000, max_bytes=0,
                        ring_bytes=ring)
        self.assertEqual(w['state'], 'exited')
        last, held = self.held(w['id'])
        self.assertGreater(last['dropped_chunks'], 0)
        # a read takes at most 1/16 of the ring: the last reservation, the
        # end of the arena skipped and the overshoot of an eviction
        self.assertGreaterEqual(held, ring - 3 * ring // 16)
        self.assertLessEqual(held, ring)

    def test_tty_small_writes_kept(self):
        w = self.create(cmd=SMALL_WRITES % 20000, tty=True, yield_ms=60000,
                        max_bytes=0)
        self.assertEqual(w['state'], 'exited')
        last, held = self.held(w['id'])
        self.assertEqual(last['dropped_chunks'], 0)
        self.assertEqual(held, last['bytes_out'])
        self.assertEqual(last['bytes_out'], 108894 + 20000)   # ONLCR: \r\n


SEQ = b''.join(b'%d\n' % i for i in range(1, 20001))    # seq 1 20000


def window_bytes(w):
    return b''.join(unb64(c['data']) for c in w['output'])


class HeadTailTest(AgentdTestCase):
    """head_tail: over max_bytes, the output's head and tail, and the bytes
    left out between them said, and readable by cursor."""

    def check_cut(self, w, full, budget, start=0):
        """w holds full[start:]'s head and tail around truncated_bytes."""
        head, tail = budget // 2, budget - budget // 2
        rest = full[start:]
        self.assertEqual(window_bytes(w), rest[:head] + rest[-tail:])
        self.assertEqual(w['truncated_bytes'], len(rest) - budget)
        self.assertEqual(w['cursor'], w['last_chunk'])
        self.assertFalse(w['more'])
        # offsets stay true: the tail's first piece starts where it lies
        ends = [c['offset'] + len(unb64(c['data'])) for c in w['output']]
        self.assertEqual(ends[-1], len(full))
        cut = [i for i, c in enumerate(w['output'][1:], 1)
               if c['offset'] != ends[i - 1]]
        self.assertEqual(len(cut), 1)
        self.assertEqual(w['output'][cut[0]]['offset'], len(full) - tail)
        # the middle is still readable: from truncated_cursor on, in order
        g = self.get(w['id'], cursor=w['truncated_cursor'], max_bytes=1 << 20)
        self.assertEqual(g['dropped_chunks'], 0)
        first = g['output'][0]
        self.assertLessEqual(first['offset'], start + head)
        got = window_bytes(g)
        self.assertEqual(got, full[first['offset']:first['offset'] + len(got)])
        self.assertGreaterEqual(first['offset'] + len(got), len(full) - tail)

    def test_create_head_and_tail(self):
        w = self.create(cmd='seq 1 20000', yield_ms=30000, max_bytes=1000,
                        head_tail=True)
        self.assertEqual(w['state'], 'exited')
        self.check_cut(w, SEQ, 1000)
        self.assertTrue(w['eof'])

    def test_get_head_and_tail_from_a_cursor(self):
        w = self.create(cmd='seq 1 20000', yield_ms=30000, max_bytes=100)
        self.assertEqual(w['state'], 'exited')
        c = w['cursor']
        start = sum(len(unb64(x['data'])) for x in w['output'])
        self.assertNotIn('truncated_bytes', w)
        r = self.get_raw(w['id'], cursor=c, max_bytes=777, head_tail='true')
        self.expect(r, 200)
        self.check_cut(r.json, SEQ, 777, start)

    def test_fits_nothing_cut(self):
        w = self.create(cmd='seq 1 100', yield_ms=30000, head_tail=True)
        self.assertEqual(w['truncated_bytes'], 0)
        self.assertIsNone(w['truncated_cursor'])
        self.assertEqual(window_bytes(w), b''.join(b'%d\n' % i for i in range(1, 101)))

    def test_one_big_chunk_is_cut_both_ends(self):
        # one write, so most likely one chunk, whose middle is left out
        w = self.create(cmd='dd if=/dev/zero bs=30000 count=1 2>/dev/null',
                        yield_ms=30000, max_bytes=64, head_tail=True)
        self.assertEqual(window_bytes(w), bytes(64))
        self.assertEqual(w['truncated_bytes'], 30000 - 64)
        g = self.get(w['id'], cursor=w['truncated_cursor'], max_bytes=1 << 20)
        self.assertEqual(window_bytes(g), bytes(30000 - g['output'][0]['offset']))

    def test_head_is_whole_after_a_tiny_chunk(self):
        # chunk 1 is one byte, then a long one: the head still takes the
        # first max_bytes / 2 bytes, the long chunk cut
        w = self.create(cmd='cat')
        self.stdin(w['id'], text='<')
        self.read_until(w['id'], b'<', tty=False)
        body = bytes(range(48, 58)) * 300
        self.stdin(w['id'], data=body)
        full = b'<' + body
        self.read_until(w['id'], full, tty=False)
        r = self.get_raw(w['id'], cursor=0, max_bytes=1000, head_tail='true')
        self.expect(r, 200)
        self.assertEqual(window_bytes(r.json), full[:500] + full[-500:])
        self.assertEqual(r.json['truncated_bytes'], len(full) - 1000)
        self.expect(self.delete(w['id'], grace_ms=0), 200)

    def test_head_and_tail_across_many_chunks(self):
        # each echo is its own chunk: it is read before the next write
        w = self.create(cmd='cat')
        full = b''
        for i in range(60):
            line = b'line %02d\n' % i
            full += line
            self.stdin(w['id'], data=line)
            self.read_until(w['id'], full, tty=False)
        last = self.get(w['id'], cursor=0, max_bytes=0)
        self.assertGreater(last['last_chunk'], 20)
        r = self.get_raw(w['id'], cursor=0, max_bytes=101, head_tail='true')
        self.expect(r, 200)
        self.assertEqual(window_bytes(r.json), full[:50] + full[-51:])
        self.assertEqual(r.json['truncated_bytes'], len(full) - 101)
        self.assertGreater(len(r.json['output']), 10)
        self.expect(self.delete(w['id'], grace_ms=0), 200)

    def test_no_room_for_a_tail(self):
        w = self.create(cmd='seq 1 20000', yield_ms=30000, max_bytes=0,
                        head_tail=True)
        self.assertEqual(w['output'], [])
        self.assertEqual(w['truncated_bytes'], len(SEQ))
        self.assertEqual(w['cursor'], w['truncated_cursor'])
        self.assertEqual(w['cursor'], 0)
        self.assertTrue(w['more'])
        self.assertFalse(w['eof'])

    def test_raw_mode_headers(self):
        w = self.create(cmd='seq 1 20000', yield_ms=30000, max_bytes=0)
        r = self.req('GET', '/v1/sessions/%s%s' % (w['id'], query(
            cursor=0, max_bytes=1000, head_tail=1)),
            headers={'Accept': 'application/octet-stream'})
        self.expect(r, 200)
        self.assertEqual(r.body, SEQ[:500] + SEQ[-500:])
        self.assertEqual(r.header('X-Agentd-Truncated-Bytes'), str(len(SEQ) - 1000))
        self.assertEqual(r.header('X-Agentd-Truncated-At'), '500')
        self.assertIsNotNone(r.header('X-Agentd-Truncated-Cursor'))

    def test_bad_head_tail(self):
        self.assertError(self.create_raw(cmd='true', head_tail='yes'),
                         400, 'invalid_request', 'head_tail')
        w = self.create(cmd='true')
        self.assertError(self.get_raw(w['id'], head_tail='maybe'),
                         400, 'invalid_request', 'head_tail')


class IdleTest(AgentdTestCase):
    """idle_ms: answer once the output was quiet that long (or at the exit)."""

    def test_create_answers_when_quiet(self):
        t0 = time.monotonic()
        w = self.create(cmd='echo start; sleep 60', idle_ms=2000)
        self.assertLess(time.monotonic() - t0, 50)
        self.assertEqual(w['state'], 'running')
        self.assertEqual(window_bytes(w), b'start\n')
        self.expect(self.delete(w['id'], grace_ms=0), 200)

    def test_output_restarts_the_quiet_time(self):
        # 12 ticks 0.25 s apart outlast idle_ms: each one restarts it
        w = self.create(cmd='for i in 1 2 3 4 5 6 7 8 9 10 11 12; do '
                        'echo tick $i; sleep 0.25; done; echo done; sleep 60',
                        idle_ms=2000)
        self.assertEqual(w['state'], 'running')
        self.assertTrue(window_bytes(w).endswith(b'tick 12\ndone\n'), window_bytes(w))
        self.expect(self.delete(w['id'], grace_ms=0), 200)

    def test_exit_answers_at_once(self):
        t0 = time.monotonic()
        w = self.create(cmd='echo hi', idle_ms=60000)
        self.assertLess(time.monotonic() - t0, 30)
        self.assertEqual(w['state'], 'exited')
        self.assertEqual(window_bytes(w), b'hi\n')

    def test_yield_caps_it(self):
        w = self.create(cmd='while :; do echo busy; sleep 0.1; done', idle_ms=5000,
                        yield_ms=500)
        self.assertEqual(w['state'], 'running')
        self.expect(self.delete(w['id'], grace_ms=0), 200)

    def test_get_and_stdin(self):
        w = self.create(cmd='cat')
        r = self.req('POST', '/v1/sessions/%s/stdin' % w['id'],
                     {'text': 'hello\n', 'idle_ms': 1000})
        self.expect(r, 200)
        self.assertEqual(r.json['written'], 6)
        self.assertEqual(window_bytes(r.json), b'hello\n')
        # A GET's quiet time counts from the last output: cat has been
        # quiet for a second already, so the answer comes at once.
        t0 = time.monotonic()
        g = self.get_raw(w['id'], cursor=r.json['cursor'], idle_ms=1000)
        self.expect(g, 200)
        self.assertLess(time.monotonic() - t0, 0.9)
        self.assertEqual(g.json['output'], [])
        self.assertEqual(g.json['state'], 'running')
        # With wait_ms beside it too: idle_ms replaces its first output,
        # so a quiet session is not held for wait_ms.
        t0 = time.monotonic()
        g = self.get_raw(w['id'], cursor=r.json['cursor'], idle_ms=1000,
                         wait_ms=30000)
        self.expect(g, 200)
        self.assertLess(time.monotonic() - t0, 20)
        self.assertEqual(g.json['output'], [])
        self.expect(self.delete(w['id'], grace_ms=0), 200)

    def test_get_waits_while_output_flows(self):
        w = self.create(cmd='for i in 1 2 3 4 5 6 7 8 9 10 11 12; do '
                        'echo tick $i; sleep 0.25; done; echo done; sleep 60')
        g = self.get_raw(w['id'], cursor=0, idle_ms=2000)
        self.expect(g, 200)
        self.assertEqual(g.json['state'], 'running')
        self.assertTrue(window_bytes(g.json).endswith(b'tick 12\ndone\n'),
                        window_bytes(g.json))
        self.expect(self.delete(w['id'], grace_ms=0), 200)

    def test_raw_stdin_with_budget(self):
        w = self.create(cmd='cat')
        data = bytes(range(65, 91)) * 4
        r = self.stdin_octets(w['id'], data, idle_ms=2000, head_tail=1,
                              max_bytes=10)
        self.expect(r, 200)
        self.assertEqual(r.json['written'], len(data))
        self.assertEqual(window_bytes(r.json), data[:5] + data[-5:])
        self.assertEqual(r.json['truncated_bytes'], len(data) - 10)
        self.expect(self.delete(w['id'], grace_ms=0), 200)

    def test_bad_idle(self):
        self.assertError(self.create_raw(cmd='true', idle_ms=-1),
                         400, 'invalid_request', 'idle_ms')
        w = self.create(cmd='true')
        self.assertError(self.get_raw(w['id'], idle_ms='x'),
                         400, 'invalid_request', 'idle_ms')


if __name__ == '__main__':
    unittest.main()
