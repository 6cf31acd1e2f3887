"""Output as text (issue 33): encoding=text gives "text" for chunks of valid
UTF-8 and keeps "data" (base64) for the others, so every byte comes back
exactly; cuts agentd chooses fall on UTF-8 boundaries.  Written from API.md."""

import json
import time

from harness import AgentdTestCase, chunk_bytes, query
from test_sse import SSEReader

EMOJI = '\U0001F600'.encode()   # 4 bytes: f0 9f 98 80


def wbytes(w):
    return b''.join(chunk_bytes(c) for c in w['output'])


def kinds(w):
    return ['text' if 'text' in c else 'data' for c in w['output']]


class TextTest(AgentdTestCase):

    def get_text(self, sid, **q):
        q.setdefault('encoding', 'text')
        r = self.get_raw(sid, **q)
        self.expect(r, 200)
        return r.json

    def read_through(self, sid, max_bytes, encoding='text'):
        """Every window from cursor 0 to eof; (bytes, windows)."""
        got, cursor, wins = b'', 0, []
        for _ in range(100000):
            g = self.get_text(sid, cursor=cursor, max_bytes=max_bytes,
                              encoding=encoding)
            for c in g['output']:
                self.assertEqual(c['offset'], len(got), (max_bytes, g))
                got += chunk_bytes(c)
            wins.append(g)
            cursor = g['cursor']
            if g['eof']:
                return got, wins
        self.fail('no eof')

    def test_readme_example(self):
        w = self.create(cmd='echo hello; exit 3', yield_ms=5000,
                        encoding='text')
        self.assertEqual(w['exit_code'], 3)
        self.assertEqual(w['output'][0]['text'], 'hello\n')
        self.assertNotIn('data', w['output'][0])
        # base64 stays the default
        g = self.get(w['id'], cursor=0)
        self.assertEqual(g['output'][0]['data'], 'aGVsbG8K')

    def test_valid_and_invalid_utf8(self):
        w = self.create(cmd="printf 'h\\303\\251llo \\342\\234\\223\\n'; sleep 0.3;"
                            " printf '\\377\\376bad\\n'", wait_ms=5000)
        self.wait_state(w['id'])
        g = self.get_text(w['id'], cursor=0)
        self.assertEqual(wbytes(g), 'héllo ✓\n'.encode() + b'\xff\xfebad\n')
        texts = [c['text'] for c in g['output'] if 'text' in c]
        self.assertIn('héllo ✓\n', ''.join(texts))
        # the invalid bytes went as base64
        self.assertIn('data', kinds(g))
        b = self.get(w['id'], cursor=0)
        self.assertEqual(wbytes(b), wbytes(g))
        self.assertEqual([c['id'] for c in b['output']],
                         [c['id'] for c in g['output']])

    def test_text_beside_invalid_bytes_stays_text(self):
        # Nobody looks: the three writes' reads would join into one chunk,
        # and the invalid bytes made all of it base64.  Reads are joined
        # only where the chunk stays UTF-8 (or stays not).
        w = self.create(cmd="printf 'caf\\303\\251 \\342\\202\\254\\n'; sleep 0.2; "
                            "printf '\\377\\376 bad\\n'; sleep 0.2; printf 'ok\\n'")
        self.wait_state(w['id'])
        g = self.get_text(w['id'], cursor=0)
        self.assertEqual(wbytes(g), 'café €\n'.encode() + b'\xff\xfe bad\n' +
                         b'ok\n')
        self.assertEqual([c.get('text') for c in g['output']],
                         ['café €\n', None, 'ok\n'], g['output'])
        # One read: the text before the first invalid byte is cut off.
        w = self.create(cmd="printf 'h\\303\\251llo\\377 x'", yield_ms=5000,
                        encoding='text')
        self.assertEqual(wbytes(w), 'héllo'.encode() + b'\xff x')
        self.assertEqual(w['output'][0]['text'], 'héllo')
        self.assertEqual(kinds(w), ['text', 'data'])

    def test_read_while_characters_arrive(self):
        # 3000 euro signs written 7 bytes at a time, a client reading while
        # they come: every read stops inside a character, and the chunks a
        # reader's look sealed there went as base64.  A chunk now holds a
        # character's first bytes back until the rest comes.
        cmd = ("python3 -c \"import os, time\n"
               "d = b'\\xe2\\x82\\xac' * 3000\n"
               "for i in range(0, len(d), 7):\n"
               "    os.write(1, d[i:i + 7]); time.sleep(0.001)\"")
        self.create(id='e', cmd=cmd)
        r = SSEReader(self, '/v1/sessions/e' + query(encoding='text'))
        frames = r.until('exit')
        r.close()
        chunks = [json.loads(f['data']) for f in frames if f['event'] == 'output']
        self.assertEqual(b''.join(chunk_bytes(c) for c in chunks),
                         '\u20ac'.encode() * 3000)
        self.assertGreater(len(chunks), 10)
        # A writer that paused past the hold (a loaded machine) leaves two
        # chunks that are not UTF-8: the bytes held, and the rest after.
        bad = [c for c in chunks if 'text' not in c]
        self.assertLess(len(bad), len(chunks) / 10, bad[:4])
        expired = self.metric('agentd_output_utf8_hold_expired_total')
        self.assertLessEqual(len(bad), 2 * expired, bad[:4])
        # JSON windows see the same chunks: text, but for such bytes.
        g = self.get_text('e', cursor=0, max_bytes=1 << 20)
        self.assertEqual(len(set(c['id'] for c in g['output'])), len(chunks))
        for c in g['output']:
            if 'data' in c:
                self.assertLessEqual(len(chunk_bytes(c)), 3, c)
        self.assertGreater(self.metric('agentd_output_utf8_held_total'), 0)

    def test_held_bytes_wait_no_longer_than_the_hold(self):
        # Half a character and nothing more for a while: a reader waits,
        # and gets it within the hold (10 ms) as it is; one that looks
        # later than that after the read, at once; and at the end of the
        # output.
        w = self.create(cmd="printf 'x\\342\\202'; sleep 1; printf '\\254\\n'",
                        wait_ms=3000, encoding='text')
        self.assertTrue(b'x\xe2\x82'.startswith(wbytes(w)), w)
        time.sleep(0.4)
        g = self.get_text(w['id'], cursor=0)
        self.assertEqual(wbytes(g), b'x\xe2\x82')
        self.wait_state(w['id'])
        g = self.get_text(w['id'], cursor=0)
        self.assertEqual(wbytes(g), 'x\u20ac\n'.encode())
        self.assertGreater(self.metric('agentd_output_utf8_hold_expired_total'), 0)
        w = self.create(cmd="printf 'y\\342\\202'", yield_ms=5000)
        self.assertEqual(w['state'], 'exited')
        self.assertEqual(wbytes(w), b'y\xe2\x82')

    def test_nul_and_control_bytes_and_ansi(self):
        raw = b'a\x00b\x01\x07\t\r\n\x1b[31mred\x1b[0m "q" \\ \x7f\n'
        w = self.create(cmd="printf 'a\\000b\\001\\007\\t\\r\\n\\033[31mred"
                            "\\033[0m \"q\" \\\\ \\177\\n'", yield_ms=5000,
                        encoding='text')
        self.assertEqual(w['state'], 'exited')
        self.assertEqual(kinds(w), ['text'])
        self.assertEqual(wbytes(w), raw)
        g = self.get_text(w['id'], cursor=0, strip_ansi='true')
        self.assertEqual(wbytes(g), raw.replace(b'\x1b[31m', b'')
                         .replace(b'\x1b[0m', b''))
        self.assertEqual(kinds(g), ['text'])

    def test_multibyte_split_across_reads(self):
        # Nobody looks between the two writes, 300 ms apart: reads are
        # joined only while at most 100 ms apart (so that each chunk keeps
        # its time), and the character's first bytes wait --utf8-hold for
        # the rest: "x" is text, and every byte is there.
        w = self.create(cmd="sleep 0.3; printf 'x\\342\\234'; sleep 0.3; "
                            "printf '\\223y\\n'")
        time.sleep(1.5)
        g = self.get_text(w['id'], cursor=0)
        self.assertEqual(wbytes(g), 'x✓y\n'.encode())
        self.assertEqual(g['output'][0].get('text'), 'x')
        self.assertEqual(g['output'][-1].get('text'), 'y\n')
        # A reader waits between them, and the rest comes after the hold
        # (--utf8-hold, 10 ms): two chunks, the split ones in base64, and
        # still every byte.
        w = self.create(cmd="printf 'x\\342\\234'; sleep 0.5; printf '\\223y\\n'",
                        wait_ms=3000, encoding='text')
        self.wait_state(w['id'])
        got, _ = self.read_through(w['id'], 1 << 20)
        self.assertEqual(got, 'x✓y\n'.encode())

    def test_joined_chunks_end_on_a_character(self):
        # 'a' then 3000 emoji: a joined chunk full at 4 KiB would end
        # inside one; agentd hands its first bytes to the next chunk.
        w = self.create(cmd="printf a; i=0; while [ $i -lt 3000 ]; do "
                            "printf '\\360\\237\\230\\200'; i=$((i+1)); done")
        time.sleep(3)       # nobody looks meanwhile: reads are joined
        g = self.get_text(w['id'], cursor=0, max_bytes=1 << 20)
        self.assertEqual(wbytes(g), b'a' + EMOJI * 3000)
        self.assertGreater(len(g['output']), 1)
        self.assertEqual(set(kinds(g)), {'text'}, [len(chunk_bytes(c)) for c in g['output']])

    def test_tty_chunks_end_on_a_character(self):
        # A PTY hands out 4095 bytes a read: the chunk a read does not fit
        # in is published, a split character handed to the next.
        w = self.create(tty=True, cmd="stty -onlcr; printf a; i=0; while [ $i -lt 3000 ]; do "
                            "printf '\\303\\251'; i=$((i+1)); done")
        time.sleep(3)       # nobody looks meanwhile: reads are joined
        g = self.get_text(w['id'], cursor=0, max_bytes=1 << 20)
        self.assertEqual(wbytes(g), b'a' + '\u00e9'.encode() * 3000)
        # A read that stops inside a character holds its first bytes back
        # for the next chunk (at most --utf8-hold): on a loaded machine
        # the rest may come later, such chunks go as base64; the rest is
        # text.
        self.assertIn('text', kinds(g))
        for c in g['output']:
            if 'data' in c:
                self.assertLessEqual(len(chunk_bytes(c)), 3, g['output'])

    def test_emoji_at_every_cut_position(self):
        out = b'ab' + EMOJI + b'c' + EMOJI + EMOJI + b'de' + EMOJI
        w = self.create(cmd="printf 'ab\\360\\237\\230\\200c\\360\\237\\230\\200"
                            "\\360\\237\\230\\200de\\360\\237\\230\\200'",
                        yield_ms=5000, max_bytes=0)
        self.assertEqual(w['state'], 'exited')
        for mb in range(1, len(out) + 2):
            got, wins = self.read_through(w['id'], mb)
            self.assertEqual(got, out, mb)
            for g in wins:
                self.assertLessEqual(len(wbytes(g)), mb)
                # from 4 bytes on, every cut falls between characters
                if mb >= 4:
                    self.assertEqual(set(kinds(g)) - {'text'}, set(), (mb, g))
            b64, _ = self.read_through(w['id'], mb, encoding='base64')
            self.assertEqual(b64, out)

    def test_head_tail_with_text(self):
        w = self.create(cmd="i=0; while [ $i -lt 500 ]; do printf '\\342\\234\\223%d\\n' $i;"
                            " i=$((i+1)); done", yield_ms=10000, max_bytes=101,
                        head_tail=True, encoding='text')
        self.assertEqual(w['state'], 'exited')
        self.assertEqual(set(kinds(w)), {'text'})
        data = wbytes(w)
        data.decode('utf-8')
        self.assertTrue(data.startswith('✓0\n✓1\n'.encode()))
        self.assertTrue(data.endswith('✓499\n'.encode()))
        self.assertEqual(w['truncated_bytes'] + len(data), w['bytes_out'])

    def test_stdin_answer_and_bad_encoding(self):
        r = self.create_raw(cmd='cat', encoding='bogus')
        self.expect(r, 400)
        self.assertEqual(r.json['error']['code'], 'invalid_request')
        r = self.get_raw('nope', encoding='utf8')
        self.assertIn(r.status, (400, 404))
        w = self.create(cmd='cat')
        r = self.req('POST', '/v1/sessions/%s/stdin' % w['id'],
                     {'text': 'héllo\n', 'wait_ms': 5000, 'encoding': 'text'})
        self.expect(r, 200)
        self.assertEqual(wbytes(r.json), 'héllo\n'.encode())
        self.assertEqual(kinds(r.json), ['text'])
        r = self.get_raw(w['id'], cursor=0, encoding='bogus')
        self.expect(r, 400)
        self.expect(self.delete(w['id'], grace_ms=0), 200)

    def test_sse_text(self):
        self.create(id='s', cmd="printf 'h\\303\\251\\n'; sleep 0.2; printf '\\377\\n'")
        r = SSEReader(self, '/v1/sessions/s' + query(encoding='text'))
        frames = r.until('exit')
        r.close()
        chunks = [json.loads(f['data']) for f in frames if f['event'] == 'output']
        self.assertEqual(b''.join(chunk_bytes(c) for c in chunks),
                         'hé\n'.encode() + b'\xff\n')
        self.assertIn('text', chunks[0])


class DefaultTextTest(AgentdTestCase):
    """--encoding text: the default of requests that name none."""

    agentd_args = ('--encoding', 'text')

    def test_default(self):
        w = self.create(cmd='echo hi', yield_ms=5000)
        self.assertEqual(w['output'][0]['text'], 'hi\n')
        g = self.get_raw(w['id'], cursor=0, encoding='base64')
        self.assertEqual(g.json['output'][0]['data'], 'aGkK')


class CursorInsideTest(AgentdTestCase):
    """A cursor inside a chunk goes on from there in SSE and raw mode too."""

    def test_sse_and_raw_from_inside_a_chunk(self):
        w = self.create(id='c', cmd="printf 'h\\303\\251llo w\\303\\266rld'",
                        yield_ms=5000, max_bytes=0)
        self.assertEqual(w['last_chunk'], 1)
        g = self.get_raw('c', cursor=0, max_bytes=2, encoding='text')
        # 'h' and half of 'é' would split it: the cut goes back to 'h'
        self.assertEqual(g.json['output'][0]['text'], 'h')
        cur = g.json['cursor']
        self.assertEqual(cur, (1 << 32) | 1)
        r = SSEReader(self, '/v1/sessions/c' + query(cursor=cur, encoding='text'))
        frames = r.until('exit')
        r.close()
        chunks = [json.loads(f['data']) for f in frames if f['event'] == 'output']
        self.assertEqual(chunks[0]['text'], '\u00e9llo w\u00f6rld')
        self.assertEqual(chunks[0]['offset'], 1)
        r = self.req('GET', '/v1/sessions/c' + query(cursor=cur),
                     headers={'Accept': 'application/octet-stream'})
        self.expect(r, 200)
        self.assertEqual(r.body, '\u00e9llo w\u00f6rld'.encode())
        self.assertEqual(r.headers.get('X-Agentd-Offset'), '1')
        # strip_ansi and head_tail from inside the chunk
        g = self.get_raw('c', cursor=cur, strip_ansi='1', encoding='text')
        self.assertEqual(g.json['output'][0]['text'], '\u00e9llo w\u00f6rld')
        g = self.get_raw('c', cursor=cur, head_tail='1', max_bytes=4,
                         encoding='text')
        self.assertEqual(wbytes(g.json), '\u00e9ld'.encode())
        self.assertEqual(g.json['truncated_cursor'], cur)
