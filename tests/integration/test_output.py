"""Output: windows, cursors, long-poll, streams, PTY, binary, gaps, drain race."""

import os
import time
import unittest

from harness import (AgentdTestCase, Background, WindowChecker, pid_gone, pid_state,
                     short, unb64, SLOW)


def printf_all_bytes():
    """A printf format printing the 256 byte values 0..255 once each."""
    return ''.join('\\%03o' % b for b in range(256))


class CursorTest(AgentdTestCase):

    def test_cursor_progression(self):
        cmd = 'for i in $(seq 1 60); do echo line$i; sleep 0.005; done'
        w = self.create(cmd=cmd)
        ck = self.read_all(w['id'], start=w, tty=False, wait_ms=500)
        expected = b''.join(b'line%d\n' % i for i in range(1, 61))
        self.assertEqual(ck.data(), expected)
        self.assertEqual(ck.dropped, 0)
        ids = [c[0] for c in ck.chunks]
        self.assertEqual(ids, list(range(1, len(ids) + 1)))
        self.assertEqual(ck.last['last_chunk'], ids[-1])
        self.assertEqual(ck.last['bytes_out'], len(expected))
        # offset of each chunk is the sum of the lengths before it
        total = 0
        for (_, _, off, data) in ck.chunks:
            self.assertEqual(off, total)
            total += len(data)

    def test_reading_does_not_consume(self):
        w = self.create(cmd='echo one; echo two >&2', yield_ms=5000)
        a = self.read_all(w['id'], tty=False)
        b = self.read_all(w['id'], tty=False)
        self.assertEqual(a.chunks, b.chunks)
        # and from a middle cursor
        if len(a.chunks) > 1:
            g = self.get(w['id'], cursor=a.chunks[0][0])
            self.assertEqual(g['output'][0]['id'], a.chunks[1][0])

    def test_cursor_at_last_chunk_of_exited_session_is_eof(self):
        w = self.create(cmd='echo x', yield_ms=5000)
        self.assertEqual(w['state'], 'exited')
        g = self.get(w['id'], cursor=w['last_chunk'])
        self.assertEqual(g['output'], [])
        self.assertTrue(g['eof'])
        self.assertEqual(g['cursor'], w['last_chunk'])
        # wait_ms on a closed output answers at once
        t0 = time.monotonic()
        g = self.get(w['id'], cursor=w['last_chunk'], wait_ms=60000)
        self.assertLess(time.monotonic() - t0, 20)   # not the minute
        self.assertTrue(g['eof'])

    def test_eof_false_while_chunks_remain(self):
        w = self.create(cmd='for i in 1 2 3 4 5; do echo $i; sleep 0.05; done', yield_ms=10000)
        w = self.wait_state(w['id'])
        if w['last_chunk'] >= 2:
            g = self.get(w['id'], cursor=0, max_bytes=1)
            self.assertEqual(len(g['output']), 1)
            self.assertTrue(g['more'])
            self.assertFalse(g['eof'])

    def test_max_bytes_windows(self):
        # Many chunks: one line each, with a pause so reads stay separate,
        # and a reader waiting for each (else agentd joins them in a chunk).
        w = self.create(cmd='for i in $(seq 1 40); do echo 0123456789abcdef$i; sleep 0.01; done')
        self.read_all(w['id'], tty=False, wait_ms=5000)
        ck = WindowChecker(self, tty=False)
        while not ck.eof:
            g = self.get(w['id'], cursor=ck.cursor, max_bytes=50)
            self.assertTrue(g['output'], 'a window must hold at least one chunk when any is available')
            ck.feed(g, max_bytes=50)
            if not g['eof']:
                self.assertTrue(g['more'] or g['cursor'] == g['last_chunk'])
        expected = b''.join(b'0123456789abcdef%d\n' % i for i in range(1, 41))
        self.assertEqual(ck.data(), expected)
        self.assertGreater(ck.windows, 1)

    def test_max_bytes_smaller_than_a_chunk_still_gives_one_chunk(self):
        w = self.create(cmd='printf "%0100d" 0', yield_ms=5000)
        self.wait_state(w['id'])
        g = self.get(w['id'], cursor=0, max_bytes=10)
        self.assertGreaterEqual(len(g['output']), 1)
        self.assertEqual(len(g['output']), 1)

    def test_max_bytes_on_create(self):
        w = self.create(cmd='for i in $(seq 1 20); do echo line$i; sleep 0.01; done',
                        yield_ms=20000, max_bytes=10)
        self.assertLessEqual(len(w['output']), 1)
        ck = self.read_all(w['id'], start=w, tty=False, max_bytes=10)
        self.assertEqual(ck.data(), b''.join(b'line%d\n' % i for i in range(1, 21)))


class StreamTest(AgentdTestCase):

    def test_stream_separation_on_pipes(self):
        last, ck = self.run_cmd('echo out1; echo err1 >&2; echo out2; echo err2 >&2')
        st = ck.streams()
        self.assertEqual(st.get('stdout'), b'out1\nout2\n')
        self.assertEqual(st.get('stderr'), b'err1\nerr2\n')
        self.assertEqual(set(st), {'stdout', 'stderr'})

    def test_stream_order_shares_one_id_sequence(self):
        # Each write waits, on stdin, until the test has seen the previous
        # chunk captured (after a sleep it may not be, on a busy machine:
        # then both pipes are ready at once, in no set order); so the
        # chunks come in the order written, in one id sequence.
        w = self.create(cmd='read x; echo a; read x; echo b >&2; '
                        'read x; echo c; read x; echo d >&2')
        for i in range(4):
            self.stdin(w['id'], text='\n')
            self.wait_until(lambda: len(self.get(w['id'])['output']) > i,
                            30, 'chunk %d captured' % (i + 1))
        ck = self.read_all(w['id'], tty=False)
        seq = [(s, d) for (_, s, _, d) in ck.chunks]
        self.assertEqual(seq, [('stdout', b'a\n'), ('stderr', b'b\n'),
                               ('stdout', b'c\n'), ('stderr', b'd\n')])

    def test_binary_output(self):
        last, ck = self.run_cmd("printf '%s'" % printf_all_bytes())
        self.assertEqual(ck.data('stdout'), bytes(range(256)))

    def test_large_output_exact(self):
        n = 300000
        last, ck = self.run_cmd('head -c %d /dev/zero | tr "\\0" z; exit 5' % n)
        self.assertEqual(last['exit_code'], 5)
        self.assertEqual(ck.data(), b'z' * n)
        self.assertEqual(last['bytes_out'], n)


class TtyTest(AgentdTestCase):

    def test_tty_basics(self):
        cmd = ('stty size; echo "TERM=$TERM"; '
               'test -t 0 && test -t 1 && test -t 2 && echo alltty; echo err >&2')
        last, ck = self.run_cmd(cmd, tty=True, rows=33, cols=101)
        self.assertTrue(last['tty'])
        self.assertEqual(last['rows'], 33)
        self.assertEqual(last['cols'], 101)
        out = ck.data()
        self.assertEqual(set(s for (_, s, _, _) in ck.chunks), {'pty'})
        self.assertIn(b'33 101\r\n', out)
        self.assertIn(b'TERM=xterm-256color\r\n', out)
        self.assertIn(b'alltty\r\n', out)
        self.assertIn(b'err\r\n', out)

    def test_tty_default_size(self):
        last, ck = self.run_cmd('stty size', tty=True)
        self.assertEqual(ck.data(), b'24 80\r\n')
        self.assertEqual((last['rows'], last['cols']), (24, 80))

    def test_tty_term_can_be_overridden(self):
        last, ck = self.run_cmd('echo "$TERM"', tty=True, env={'TERM': 'dumb'})
        self.assertEqual(ck.data(), b'dumb\r\n')

    def test_tty_is_controlling_terminal(self):
        last, ck = self.run_cmd('tty; (exec 3</dev/tty) && echo ctty', tty=True)
        out = ck.data().decode()
        self.assertIn('/dev/pts/', out)
        self.assertIn('ctty', out)

    def test_pipes_are_not_a_tty(self):
        last, ck = self.run_cmd('test -t 0 || test -t 1 || test -t 2 || echo notty; '
                                '(exec 3</dev/tty) 2>/dev/null || echo noctty')
        self.assertEqual(ck.data('stdout'), b'notty\nnoctty\n')
        self.assertFalse(last['tty'])


class LongPollTest(AgentdTestCase):

    def test_idle_long_poll_waits(self):
        w = self.create(cmd='sleep 30')
        t0 = time.monotonic()
        g = self.get(w['id'], cursor=0, wait_ms=300)
        took = time.monotonic() - t0
        self.assertGreaterEqual(took, 0.25, 'long-poll answered too early')
        # Late only on a busy machine; never would be the HTTP timeout.
        self.assertLess(took, 20, 'long-poll answered too late')
        self.assertEqual(g['output'], [])
        self.assertEqual(g['cursor'], 0)
        self.assertFalse(g['eof'])
        self.assertEqual(g['state'], 'running')
        self.expect(self.delete(w['id']), 200)

    def test_long_poll_returns_early_on_output(self):
        w = self.create(cmd='read x; echo "got $x"; sleep 30')
        reader = self.agentd.tcp_client()
        t0 = time.monotonic()
        bg = Background(self.get, w['id'], 0, 20000, None, reader)
        time.sleep(0.3)
        self.stdin(w['id'], text='ping\n')
        g = bg.join_result(30)
        took = bg.done_at - t0
        self.assertLess(took, 8.0, 'long-poll did not return early on output')
        self.assertEqual(b''.join(unb64(c['data']) for c in g['output']), b'got ping\n')
        self.expect(self.delete(w['id']), 200)

    def test_long_poll_returns_when_output_closes(self):
        w = self.create(cmd='sleep 0.5')
        t0 = time.monotonic()
        g = self.get(w['id'], cursor=0, wait_ms=20000)
        took = time.monotonic() - t0
        self.assertLess(took, 8.0)
        if not g['eof']:
            # the output closed; the exit status may follow a moment later
            g = self.read_all(w['id'], tty=False).last
        self.assertEqual(g['state'], 'exited')
        self.assertTrue(g['eof'])

    def test_long_poll_after_output_closed_answers_soon(self):
        # A process that closed its output and runs on (a daemon's
        # "exec >&-"): the close is the answer (API.md), after the short
        # grace for an exit status, never the long-poll's wait_ms.
        w = self.create(cmd='echo x; exec >&- 2>&-; read y', wait_ms=20000)
        self.assertEqual(b''.join(unb64(c['data']) for c in w['output']),
                         b'x\n')
        for _ in range(3):
            t0 = time.monotonic()
            g = self.get(w['id'], cursor=w['cursor'], wait_ms=30000)
            self.assertLess(time.monotonic() - t0, 15)   # not the 30 s
            self.assertEqual((g['state'], g['eof'], g['output']),
                             ('running', False, []))
        self.stdin(w['id'], text='go\n')
        for _ in range(100):
            g = self.get(w['id'], cursor=w['cursor'], wait_ms=30000)
            if g['state'] == 'exited':
                break
        self.assertEqual((g['state'], g['eof'], g['exit_code']),
                         ('exited', True, 0))

    def test_long_poll_with_chunks_after_cursor_answers_at_once(self):
        w = self.create(cmd='echo x; sleep 60', wait_ms=10000)
        self.assertTrue(w['output'])
        t0 = time.monotonic()
        g = self.get(w['id'], cursor=0, wait_ms=60000)
        self.assertLess(time.monotonic() - t0, 20)   # not the minute
        self.assertEqual(len(g['output']), len(w['output']))
        self.expect(self.delete(w['id']), 200)

    def test_many_concurrent_long_polls(self):
        w = self.create(cmd='read x; echo "got $x"; sleep 30')
        readers = [Background(self.get, w['id'], 0, 20000, None, self.agentd.tcp_client())
                   for _ in range(8)]
        time.sleep(0.3)
        self.stdin(w['id'], text='all\n')
        for r in readers:
            g = r.join_result(30)
            self.assertEqual(b''.join(unb64(c['data']) for c in g['output']), b'got all\n')
        self.expect(self.delete(w['id']), 200)

    def test_abandoned_long_polls_are_freed(self):
        # Clients that give up on a long-poll must not leave connections behind
        # until the poll's deadline (libevent does not notice the close by itself).
        import http.client
        import os
        w = self.create(cmd='sleep 1000')
        pid = self.agentd.proc.pid

        def nfds():
            return len(os.listdir('/proc/%d/fd' % pid))
        base = nfds()
        conns = []
        for _ in range(40):
            c = http.client.HTTPConnection('127.0.0.1', self.agentd.port, timeout=30)
            c.putrequest('GET', '/v1/sessions/%s?cursor=0&wait_ms=60000' % w['id'])
            for k, v in self.agentd.auth_headers().items():
                c.putheader(k, v)
            c.endheaders()
            conns.append(c)
        self.wait_until(lambda: nfds() >= base + 40, 10, '40 long-polls accepted')
        for c in conns:
            c.close()
        self.wait_until(lambda: nfds() <= base + 2, 15,
                        'connections of abandoned long-polls closed (fds %d before closing, base %d)'
                        % (nfds(), base))
        self.healthz()
        self.expect(self.delete(w['id']), 200)

    def test_two_readers_see_the_same_bytes(self):
        cmd = ('i=0; while [ $i -lt 200 ]; do echo "line $i"; echo "err $i" >&2; '
               'i=$((i+1)); [ $((i % 20)) = 0 ] && sleep 0.05; done')
        w = self.create(cmd=cmd)
        c1, c2 = self.agentd.tcp_client(), self.agentd.tcp_client()
        r1 = Background(self.read_all, w['id'], None, 60, 1000, None, c1, None, False)
        r2 = Background(self.read_all, w['id'], None, 60, 1000, 100, c2, None, False)
        a, b = r1.join_result(90), r2.join_result(90)
        # max_bytes 100 may end a window inside a chunk: the same bytes at
        # the same offsets, in pieces
        self.assertEqual(a.data(), b.data())
        self.assertEqual([c[0] for c in a.chunks], sorted(set(c[0] for c in b.chunks)))
        self.assertEqual(a.streams()['stdout'],
                         b''.join(b'line %d\n' % i for i in range(200)))
        self.assertEqual(a.streams()['stderr'],
                         b''.join(b'err %d\n' % i for i in range(200)))


class RawWindowTest(AgentdTestCase):
    """Raw windows (read straight into the answer) and PTY floods (read
    without FIONREAD) carry the same bytes, offsets and ids as JSON."""

    def raw_window(self, sid, cursor, max_bytes):
        r = self.req('GET', '/v1/sessions/%s?cursor=%d&max_bytes=%d'
                     % (sid, cursor, max_bytes),
                     headers={'Accept': 'application/octet-stream'})
        self.expect(r, 200, 'raw GET')
        return r

    def read_raw(self, sid, max_bytes):
        """Follow raw windows to eof; returns (bytes, number of windows)."""
        cursor, data, n = 0, b'', 0
        while True:
            r = self.raw_window(sid, cursor, max_bytes)
            self.assertEqual(r.header('X-Agentd-Dropped-Chunks'), '0')
            self.assertEqual(int(r.header('X-Agentd-Offset')), len(data))
            self.assertLessEqual(len(r.body), max(max_bytes, 65536))
            data += r.body
            n += 1
            cursor = int(r.header('X-Agentd-Cursor'))
            if r.header('X-Agentd-Eof') == 'true':
                return data, n
            self.assertLess(n, 10000, 'no eof')

    def test_raw_windows_are_the_json_windows(self):
        seq = b''.join(b'%d\n' % i for i in range(1, 200001))
        w = self.create(cmd='seq 1 200000', yield_ms=30000, max_bytes=0,
                        ring_bytes=4 << 20)
        self.wait_state(w['id'])
        data, n = self.read_raw(w['id'], 100000)
        self.assertEqual(data, seq)
        self.assertGreater(n, len(seq) // 100000)
        # window by window, raw and JSON agree on bytes, cursor and more
        for cursor in (0, 3, 10):
            r = self.raw_window(w['id'], cursor, 30000)
            g = self.get(w['id'], cursor=cursor, max_bytes=30000)
            self.assertEqual(r.body, b''.join(unb64(c['data']) for c in g['output']))
            self.assertEqual(int(r.header('X-Agentd-Cursor')), g['cursor'])
            self.assertEqual(int(r.header('X-Agentd-Offset')), g['output'][0]['offset'])
            self.assertEqual(r.header('X-Agentd-More'), 'true' if g['more'] else 'false')

    def test_raw_window_after_the_last_chunk_is_empty(self):
        w = self.create(cmd='echo hi', yield_ms=30000)
        self.wait_state(w['id'])
        r = self.raw_window(w['id'], w['cursor'], 1 << 20)
        self.assertEqual(r.body, b'')
        self.assertEqual(r.header('X-Agentd-Eof'), 'true')
        self.assertEqual(int(r.header('X-Agentd-Offset')), 3)

    def test_raw_window_of_a_lapped_reader_reports_the_gap(self):
        n = 100000
        w = self.create(cmd="yes 0123456789abcde | head -c %d" % n, ring_bytes=4096,
                        yield_ms=10000)
        self.wait_state(w['id'])
        r = self.raw_window(w['id'], 0, 1 << 20)
        g = self.get(w['id'], cursor=0, max_bytes=1 << 20)
        self.assertGreater(int(r.header('X-Agentd-Dropped-Chunks')), 0)
        self.assertEqual(int(r.header('X-Agentd-Dropped-Chunks')), g['dropped_chunks'])
        expected = (b'0123456789abcde\n' * (n // 16 + 1))[:n]
        self.assertLessEqual(len(r.body), 4096)
        self.assertEqual(r.body, expected[n - len(r.body):])
        self.assertEqual(int(r.header('X-Agentd-Offset')), n - len(r.body))

    def test_pty_flood_is_read_whole(self):
        seq = b''.join(b'%d\r\n' % i for i in range(1, 100001))
        w = self.create(cmd='seq 1 100000', tty=True, yield_ms=30000, max_bytes=0)
        self.wait_state(w['id'])
        data, _ = self.read_raw(w['id'], 1 << 20)
        self.assertEqual(data, seq)
        g = self.get(w['id'], cursor=0, max_bytes=1 << 20)
        # chunks of a flood are n_tty's 4 KiB reads, joined up to 4 KiB
        for c in g['output']:
            self.assertLessEqual(len(unb64(c['data'])), 4096)

    def test_pty_small_writes_are_joined(self):
        # 300 writes of 3 bytes while nobody looks: a few chunks, not 300
        w = self.create(cmd='for i in $(seq 1 300); do echo x; done', tty=True,
                        yield_ms=30000, max_bytes=0)
        self.wait_state(w['id'])
        g = self.get(w['id'], cursor=0, max_bytes=1 << 20)
        self.assertEqual(b''.join(unb64(c['data']) for c in g['output']), b'x\r\n' * 300)
        self.assertLessEqual(len(g['output']), 3, short(g))


class GapTest(AgentdTestCase):

    def test_gap_report_with_small_ring(self):
        n = 100000
        w = self.create(cmd="yes 0123456789abcde | head -c %d" % n, ring_bytes=4096,
                        yield_ms=10000)
        self.wait_state(w['id'])
        g = self.get(w['id'], cursor=0)
        self.assertGreater(g['dropped_chunks'], 0, short(g))
        self.assertTrue(g['output'])
        self.assertEqual(g['output'][0]['id'], 1 + g['dropped_chunks'])
        self.assertEqual(g['bytes_out'], n)
        ck = self.read_all(w['id'], tty=False)
        data = ck.data()
        self.assertLessEqual(len(data), 4096, 'ring of 4096 bytes holds %d' % len(data))
        self.assertGreater(len(data), 0)
        # what is held is the tail of the output, at its true offset
        expected = (b'0123456789abcde\n' * (n // 16 + 1))[:n]
        self.assertEqual(data, expected[n - len(data):])
        self.assertEqual(ck.chunks[0][2], n - len(data))
        self.assertEqual(ck.chunks[0][0], 1 + ck.dropped)

    def test_no_chunk_twice_while_output_flows(self):
        # A slow reader with small windows behind a fast writer and a tiny ring:
        # gaps are reported, every chunk comes at most once, in order.
        w = self.create(cmd='i=0; while [ $i -lt 3000 ]; do echo "line $i"; i=$((i+1)); done',
                        ring_bytes=4096)
        ck = WindowChecker(self, tty=False)
        deadline = time.monotonic() + 60
        while not ck.eof:
            self.assertLess(time.monotonic(), deadline)
            g = self.get(w['id'], cursor=ck.cursor, wait_ms=1000, max_bytes=64)
            ck.feed(g, max_bytes=64)
        ids = [c[0] for c in ck.chunks]
        self.assertEqual(ids, sorted(ids))   # a chunk may come in pieces
        offs = [c[2] for c in ck.chunks]
        self.assertEqual(offs, sorted(set(offs)))
        lines = [l for l in ck.data().split(b'\n') if l]
        # every line seen intact belongs to the output (chunks may split lines)
        self.assertEqual(ck.last['bytes_out'],
                         sum(len(b'line %d\n' % i) for i in range(3000)))
        self.assertTrue(lines)

    def test_ring_bytes_flag_default(self):
        self.start_agentd(['--ring-bytes', '4096'])
        w = self.create(cmd='head -c 50000 /dev/zero', yield_ms=10000)
        self.wait_state(w['id'])
        g = self.get(w['id'], cursor=0)
        self.assertGreater(g['dropped_chunks'], 0)
        ck = self.read_all(w['id'], tty=False)
        self.assertLessEqual(len(ck.data()), 4096)


class DrainRaceTest(AgentdTestCase):
    """Output written right before exit is never lost, on pipes and on a PTY."""

    N = 150000
    RUNS = 30

    def drain(self, tty):
        cmd = 'head -c %d /dev/zero | tr "\\0" x; exit 7' % self.N
        for i in range(self.RUNS):
            w = self.create(cmd=cmd, tty=tty, yield_ms=10000, max_bytes=1 << 20)
            if w['state'] == 'exited':
                self.assertEqual(w['bytes_out'], self.N,
                                 'tty=%s run %d: exited with %d bytes captured'
                                 % (tty, i, w['bytes_out']))
            ck = self.read_all(w['id'], start=w, tty=tty, max_bytes=1 << 20)
            data = ck.data()
            self.assertEqual(len(data), self.N, 'tty=%s run %d: %d bytes' % (tty, i, len(data)))
            self.assertEqual(data.count(b'x'), self.N)
            self.assertEqual(ck.last['exit_code'], 7)
            self.assertEqual(ck.last['bytes_out'], self.N)
            self.expect(self.delete(w['id']), 200)

    def test_drain_pipes(self):
        self.drain(False)

    def test_drain_pty(self):
        self.drain(True)


class DescendantsTest(AgentdTestCase):

    def test_descendants_holding_output(self):
        # The descendant holds the output until the test removes its file
        # (not for a time: a busy machine may be slower than any): the
        # session is exited while it runs, and its eof comes after.
        hold = os.path.join(self.agentd.dir, 'hold')
        open(hold, 'w').close()
        w = self.create(cmd='(while [ -e %s ]; do sleep 0.05; done) & '
                        'echo done' % hold, wait_ms=5000)
        sid = w['id']
        s = self.wait_state(sid, 'exited', timeout=20 * SLOW)
        self.assertEqual(s['exit_code'], 0)
        ck = WindowChecker(self, tty=False)
        ck.feed(self.get(sid, cursor=0))
        self.assertEqual(ck.data(), b'done\n')
        self.assertFalse(ck.eof, 'eof while a descendant holds the output')
        g = self.get(sid, cursor=ck.cursor, wait_ms=300)
        self.assertFalse(g['eof'])
        ck.feed(g)
        os.unlink(hold)
        self.read_all(sid, checker=ck, timeout=20 * SLOW)
        self.assertEqual(ck.data(), b'done\n')

    def test_late_output_of_descendants_is_captured(self):
        w = self.create(cmd='(sleep 1; echo late) & echo early; exit 6', yield_ms=5000)
        sid = w['id']
        s = self.wait_state(sid, 'exited', timeout=10)
        self.assertEqual(s['exit_code'], 6)
        ck = self.read_all(sid, timeout=20, tty=False)
        self.assertEqual(ck.data(), b'early\nlate\n')
        self.assertEqual(ck.last['exit_code'], 6)

    def test_delete_exited_session_with_descendants(self):
        w = self.create(cmd='sleep 1000 & echo $!', yield_ms=3000)
        sid = w['id']
        s = self.wait_state(sid, 'exited', timeout=10)
        ck = self.read_until(sid, b'\n', tty=False)
        child = int(ck.data().split()[0])
        r = self.delete(sid)
        self.expect(r, 200)
        self.assertEqual(r.json['id'], sid)
        self.assertEqual(self.get_raw(sid).status, 404)
        # the session's group is cleaned up with it
        self.wait_until(lambda: pid_gone(child), 10,
                        'descendant %d of a deleted session gone (state %s)'
                        % (child, pid_state(child)))
        del s


if __name__ == '__main__':
    unittest.main()
