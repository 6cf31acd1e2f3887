"""Output budgets for agent tools (issue 24, items 1 and 2): head_tail with
a budget per stream, strip_ansi, and max_bytes below the size at which reads
are joined into chunks.  Written from API.md."""

import time

from harness import AgentdTestCase, chunk_bytes, query, unb64


def stream_bytes(w, stream):
    return b''.join(unb64(c['data']) for c in w['output']
                    if c['stream'] == stream)


def window_bytes(w):
    return b''.join(chunk_bytes(c) for c in w['output'])


# Output of `seq 1 N` as bytes.
def seq(a, b):
    return b''.join(b'%d\n' % i for i in range(a, b + 1))


class PerStreamTest(AgentdTestCase):
    """A chatty stdout never cuts away the last lines of stderr."""

    # stdout floods before and after the error: one budget for both would
    # leave the error out (it lies in the middle of the output).
    CMD = ('seq 1 5000; echo "error: x.c:12: undefined" >&2; seq 5001 9000;'
           ' echo "make: *** failed" >&2; exit 2')

    def test_each_stream_its_own_head_and_tail(self):
        w = self.create(cmd=self.CMD, yield_ms=30000, max_bytes=200,
                        head_tail=True)
        self.assertEqual(w['exit_code'], 2)
        out, err = seq(1, 9000), b'error: x.c:12: undefined\nmake: *** failed\n'
        self.assertEqual(stream_bytes(w, 'stderr'), err)
        self.assertEqual(stream_bytes(w, 'stdout'), out[:100] + out[-100:])
        self.assertEqual(w['truncated_bytes_stdout'], len(out) - 200)
        self.assertEqual(w['truncated_bytes_stderr'], 0)
        self.assertEqual(w['truncated_bytes'], len(out) - 200)
        self.assertEqual(w['cursor'], w['last_chunk'])
        self.assertFalse(w['more'])
        # offsets are the ring's: each piece's bytes lie where it says
        g = self.get(w['id'], cursor=0, max_bytes=1 << 20)
        ring = window_bytes(g)
        for c in w['output']:
            data = unb64(c['data'])
            self.assertEqual(ring[c['offset']:c['offset'] + len(data)], data)
        # the left-out middle reads from truncated_cursor on
        g = self.get(w['id'], cursor=w['truncated_cursor'], max_bytes=1 << 20)
        self.assertLessEqual(g['output'][0]['offset'],
                             w['output'][0]['offset'] + 100)

    def test_budgets_set_apart(self):
        w = self.create(cmd=self.CMD, yield_ms=30000, head_tail=True,
                        max_bytes_stdout=40, max_bytes_stderr=10)
        out, err = seq(1, 9000), b'error: x.c:12: undefined\nmake: *** failed\n'
        self.assertEqual(stream_bytes(w, 'stdout'), out[:20] + out[-20:])
        self.assertEqual(stream_bytes(w, 'stderr'), err[:5] + err[-5:])
        self.assertEqual(w['truncated_bytes_stdout'], len(out) - 40)
        self.assertEqual(w['truncated_bytes_stderr'], len(err) - 10)
        self.assertEqual(w['truncated_bytes'], len(out) + len(err) - 50)
        # the same from GET's query, and in raw mode
        q = dict(cursor=0, head_tail=1, max_bytes_stdout=40,
                 max_bytes_stderr=10)
        g = self.get_raw(w['id'], **q)
        self.expect(g, 200)
        self.assertEqual(g.json['output'], w['output'])
        r = self.req('GET', '/v1/sessions/%s%s' % (w['id'], query(**q)),
                     headers={'Accept': 'application/octet-stream'})
        self.expect(r, 200)
        self.assertEqual(r.body, window_bytes(w))
        self.assertEqual(r.header('X-Agentd-Truncated-Bytes-Stdout'),
                         str(len(out) - 40))
        self.assertEqual(r.header('X-Agentd-Truncated-Bytes-Stderr'),
                         str(len(err) - 10))
        at = [int(x) for x in r.header('X-Agentd-Truncated-At').split(',')]
        self.assertEqual(len(at), 2)
        self.assertEqual(at[0], 20)     # after stdout's head

    def test_stdin_takes_them(self):
        w = self.create(cmd='cat; seq 1 3000; echo oops >&2; sleep 60')
        r = self.req('POST', '/v1/sessions/%s/stdin' % w['id'],
                     {'text': 'hi\n', 'eof': True, 'idle_ms': 1500,
                      'yield_ms': 20000, 'head_tail': True, 'max_bytes': 64,
                      'max_bytes_stderr': 100})
        self.expect(r, 200)
        self.assertEqual(stream_bytes(r.json, 'stderr'), b'oops\n')
        out = b'hi\n' + seq(1, 3000)
        self.assertEqual(stream_bytes(r.json, 'stdout'), out[:32] + out[-32:])
        self.assertEqual(r.json['truncated_bytes_stdout'], len(out) - 64)
        self.expect(self.delete(w['id'], grace_ms=0), 200)

    def test_no_cut_inside_a_character(self):
        # 3000 two-byte characters, and an odd budget on each side
        w = self.create(cmd="printf 'é%.0s' $(seq 1 3000)", yield_ms=30000,
                        max_bytes=101, head_tail=True)
        data = stream_bytes(w, 'stdout')
        head = unb64(w['output'][0]['data'])
        self.assertEqual(len(head), 50)         # 50 bytes: 25 whole 'é'
        tail = data[len(head):]
        self.assertEqual(len(tail), 50)         # 51 asked: one byte skipped
        head.decode('utf-8')
        tail.decode('utf-8')
        self.assertEqual(w['truncated_bytes'], 6000 - 100)
        self.assertEqual(w['truncated_bytes_stdout'], 6000 - 100)

    def test_tty_keeps_one_budget(self):
        w = self.create(cmd='seq 1 5000; echo done >&2', tty=True,
                        yield_ms=30000, max_bytes=100, head_tail=True)
        self.assertNotIn('truncated_bytes_stdout', w)
        self.assertEqual(len(window_bytes(w)), 100)
        self.assertTrue(window_bytes(w).endswith(b'done\r\n'))

    def test_bad_budgets(self):
        for f, v in (('max_bytes_stdout', -1), ('max_bytes_stderr', 'x'),
                     ('strip_ansi', 'yes')):
            self.assertError(self.create_raw(cmd='true', **{f: v}), 400,
                             'invalid_request', f)
        w = self.create(cmd='true')
        self.assertError(self.get_raw(w['id'], max_bytes_stdout='x'), 400,
                         'invalid_request', 'max_bytes_stdout')


class StripAnsiTest(AgentdTestCase):
    """strip_ansi leaves escape sequences out of the window, not the ring."""

    RAW = (b'\x1b[1;31merror\x1b[0m: \x1b]0;title\x07bad\x1b]8;;http://x/'
           b'\x1b\\link\x1b]8;;\x1b\\ \x1bPq#0\x1b\\\x1b(B\x1b=done\n')

    def test_create_get_raw(self):
        cmd = "printf '%s'" % ''.join('\\%03o' % c for c in self.RAW)
        w = self.create(cmd=cmd, yield_ms=10000, strip_ansi=True)
        self.assertEqual(window_bytes(w), b'error: badlink done\n')
        self.assertEqual(w['bytes_out'], len(self.RAW))
        # the ring keeps the bytes
        g = self.get(w['id'], cursor=0)
        self.assertEqual(window_bytes(g), self.RAW)
        g = self.get_raw(w['id'], cursor=0, strip_ansi=1)
        self.expect(g, 200)
        self.assertEqual(window_bytes(g.json), b'error: badlink done\n')
        self.assertEqual(g.json['output'][0]['offset'], 0)
        r = self.req('GET', '/v1/sessions/%s%s' % (w['id'], query(
            cursor=0, strip_ansi='true')),
            headers={'Accept': 'application/octet-stream'})
        self.expect(r, 200)
        self.assertEqual(r.body, b'error: badlink done\n')

    def test_sequence_split_across_reads(self):
        # Two writes, read as two chunks (a reader waits between them):
        # the CSI begun in the first ends in the second.
        w = self.create(cmd="printf 'a\\033[1;3'; sleep 1; "
                            "printf '1mred\\033[0m\\n'", wait_ms=5000)
        self.read_all(w['id'], start=w)
        g = self.get(w['id'], cursor=0)
        self.assertGreaterEqual(len(g['output']), 2, g['output'])
        g = self.get_raw(w['id'], cursor=0, strip_ansi='1')
        self.assertEqual(window_bytes(g.json), b'ared\n')
        # a window that starts after the first read: primed by it
        first = g.json['output'][0]['id']
        g = self.get_raw(w['id'], cursor=first, strip_ansi='1')
        self.assertEqual(window_bytes(g.json), b'red\n')

    def test_with_head_tail(self):
        w = self.create(cmd="for i in $(seq 1 400); do "
                            "printf '\\033[32mline %d\\033[0m\\n' $i; done",
                        yield_ms=30000, max_bytes=200, head_tail=True,
                        strip_ansi=True)
        data = window_bytes(w)
        self.assertNotIn(b'\x1b', data)
        self.assertTrue(data.startswith(b'line 1\nline 2\n'), data)
        self.assertTrue(data.endswith(b'line 400\n'), data)
        # counts in ring bytes: the budget was the escapes' too
        total = w['bytes_out']
        self.assertEqual(w['truncated_bytes'], total - 200)


class MaxBytesPiecesTest(AgentdTestCase):
    """A window's data exceeds max_bytes only when one read was larger."""

    def test_issue_example(self):
        w = self.create(cmd='for i in $(seq 1 200); do echo $i; sleep 0.002;'
                            ' done', yield_ms=15000, max_bytes=100)
        self.assertEqual(w['state'], 'exited')
        got, win = b'', w
        while True:
            data = window_bytes(win)
            self.assertLessEqual(len(data), 100, win['output'])
            got += data
            if win['eof']:
                break
            self.assertTrue(win['more'] or win['output'], win)
            win = self.get(w['id'], cursor=win['cursor'], max_bytes=100)
        self.assertEqual(got, seq(1, 200))
        self.assertTrue(w['more'])

    def test_get_asks_less_later(self):
        # Joined while nobody looked (a line a write, the writes well
        # within the 100 ms that joins reads): one chunk of 292 bytes, or
        # a few.  A GET with max_bytes 40 then gets it in pieces of 40
        # bytes, the cursor inside a chunk between them; each piece's
        # offset is that of its first byte.
        w = self.create(cmd='for i in $(seq 1 100); do echo $i; done;'
                            ' sleep 60')
        time.sleep(3)
        got, cursor, ids = b'', 0, []
        while len(got) < len(seq(1, 100)):
            g = self.get(w['id'], cursor=cursor, max_bytes=40, wait_ms=2000)
            self.assertLessEqual(len(window_bytes(g)), 40, g['output'])
            for c in g['output']:
                self.assertEqual(c['offset'], len(got))
                got += chunk_bytes(c)
            ids += [c['id'] for c in g['output']]
            cursor = g['cursor']
        self.assertEqual(got, seq(1, 100))
        self.assertEqual(ids, sorted(ids))
        self.assertLess(len(set(ids)), len(ids))   # a chunk in pieces
        # the chunk was not cut in the ring: a reader that asks more gets
        # it whole
        g = self.get(w['id'], cursor=0, max_bytes=1 << 20)
        self.assertEqual(len(g['output']), len(set(ids)))
        self.expect(self.delete(w['id'], grace_ms=0), 200)


class MaxBytesStorageTest(AgentdTestCase):
    """max_bytes shapes answers, never storage (issue 32, item 2): a ring
    holds output up to its bytes whatever max_bytes any reader asked."""

    LINES = 'for i in $(seq 1 50000); do echo "Line $i"; done'
    EXPECTED = b''.join(b'Line %d\n' % i for i in range(1, 50001))

    def test_max_bytes_1_keeps_every_line(self):
        # It was one chunk per read from then on: 8,640 of 16,832 chunks
        # evicted from the 1 MiB ring, 13% of its bytes used.
        w = self.create(cmd=self.LINES, shell='/bin/bash', max_bytes=1)
        self.assertLessEqual(len(window_bytes(w)), 1)
        w = self.wait_state(w['id'])
        g = self.get(w['id'], cursor=0, max_bytes=1)
        self.assertEqual(g['dropped_chunks'], 0)
        self.assertEqual(g['output'][0]['offset'], 0)
        self.assertEqual(len(window_bytes(g)), 1)
        self.assertTrue(g['more'])
        ck = self.read_all(w['id'], tty=False, max_bytes=1 << 20)
        self.assertEqual(ck.dropped, 0)
        self.assertEqual(ck.data(), self.EXPECTED)
        # far fewer chunks than reads: joining went on
        self.assertLess(ck.last['last_chunk'], 1000)

    def test_windows_of_1_byte_read_every_byte_once(self):
        # A window may end inside a chunk: its cursor says where, and the
        # next window goes on from there, in raw mode and SSE too.
        w = self.create(cmd='printf "abc"; sleep 0.3; printf "defgh"',
                        yield_ms=10000, max_bytes=0)
        self.assertEqual(w['state'], 'exited')
        got, cursor, n = b'', 0, 0
        while True:
            g = self.get(w['id'], cursor=cursor, max_bytes=2)
            self.assertLessEqual(len(window_bytes(g)), 2)
            got += window_bytes(g)
            cursor = g['cursor']
            n += 1
            if g['eof']:
                break
        self.assertEqual(got, b'abcdefgh')
        self.assertGreaterEqual(n, 4)
        # a cursor inside chunk 1 read raw, and one past its end refused
        g = self.get(w['id'], cursor=0, max_bytes=1)
        self.assertEqual(g['cursor'], (1 << 32) | 1)
        r = self.get_raw(w['id'], cursor=g['cursor'], max_bytes=1 << 20)
        self.assertEqual(window_bytes(r.json), b'bcdefgh')
        self.assertEqual(r.json['output'][0]['offset'], 1)
        r = self.get_raw(w['id'], cursor=(100 << 32) | 1)
        self.expect(r, 400)
        self.assertEqual(r.json['error']['code'], 'invalid_cursor')
