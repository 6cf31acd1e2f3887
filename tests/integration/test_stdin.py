"""Stdin: data/text, binary, EOF on pipes and PTYs, wait_ms echo, raw bodies."""

import hashlib
import time
import unittest

from harness import AgentdTestCase, WindowChecker, b64, unb64


def pid_comm(pid):
    try:
        with open('/proc/%d/comm' % pid) as f:
            return f.read().strip()
    except OSError:
        return None


def window_data(w):
    return b''.join(unb64(c['data']) for c in w['output'])


class PipeStdinTest(AgentdTestCase):

    def test_binary_through_cat(self):
        w = self.create(cmd='cat')
        data = bytes(range(256)) * 4
        r = self.stdin(w['id'], data=data, eof=True, yield_ms=10000)
        self.assertEqual(r['written'], len(data))
        ck = self.read_all(w['id'], tty=False)
        self.assertEqual(ck.data('stdout'), data)
        self.assertEqual(ck.last['exit_code'], 0)

    def test_eof_makes_cat_exit(self):
        w = self.create(cmd='cat; echo "cat done $?"')
        self.stdin(w['id'], text='abc\n')
        r = self.stdin(w['id'], eof=True, yield_ms=10000)
        self.assertEqual(r['written'], 0)
        ck = self.read_all(w['id'], tty=False)
        self.assertEqual(ck.data(), b'abc\ncat done 0\n')

    def test_text_is_utf8(self):
        w = self.create(cmd='cat')
        self.stdin(w['id'], text='h\u00e9llo \u2603\n', eof=True)
        ck = self.read_all(w['id'], tty=False)
        self.assertEqual(ck.data(), 'h\u00e9llo \u2603\n'.encode('utf-8'))

    def test_order_of_many_writes(self):
        w = self.create(cmd='cat')
        expected = b''
        for i in range(50):
            part = b'part %d\n' % i
            expected += part
            self.stdin(w['id'], data=part)
        self.stdin(w['id'], eof=True)
        ck = self.read_all(w['id'], tty=False)
        self.assertEqual(ck.data(), expected)

    def test_large_stdin(self):
        # 3 MiB through sha256sum, written in 256 KiB requests; backpressure
        # answers are retried.
        w = self.create(cmd='sha256sum -b | cut -c1-64')
        block = bytes((i * 7 + 3) & 0xff for i in range(256 * 1024))
        h = hashlib.sha256()
        deadline = time.monotonic() + 60
        for i in range(12):
            while True:
                r = self.stdin_raw(w['id'], data=block)
                if r.status == 200:
                    self.assertEqual(r.json['written'], len(block))
                    break
                self.assertError(r, 429, 'stdin_backpressure')
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.05)
            h.update(block)
        self.stdin(w['id'], eof=True)
        ck = self.read_all(w['id'], tty=False)
        self.assertEqual(ck.data().strip().decode(), h.hexdigest())

    def test_yield_ms_answers_early_with_exit(self):
        w = self.create(cmd='read x; echo "got $x"; exit 4')
        t0 = time.monotonic()
        r = self.stdin(w['id'], text='a\n', yield_ms=20000)
        self.assertLess(time.monotonic() - t0, 8.0)
        self.assertEqual(r['state'], 'exited')
        self.assertEqual(r['exit_code'], 4)
        self.assertEqual(window_data(r), b'got a\n')

    def test_window_holds_only_output_after_the_write(self):
        w = self.create(cmd='echo before; read x; echo "after $x"; sleep 30', wait_ms=10000)
        self.read_until(w['id'], b'before\n', tty=False)
        before = self.get(w['id'])['last_chunk']
        r = self.stdin(w['id'], text='x\n', wait_ms=10000)
        self.assertEqual(window_data(r), b'after x\n')
        for c in r['output']:
            self.assertGreater(c['id'], before)
        self.expect(self.delete(w['id']), 200)

    def test_wait_ms_on_stdin_without_output_waits(self):
        w = self.create(cmd='cat >/dev/null')
        t0 = time.monotonic()
        r = self.stdin(w['id'], text='quiet\n', wait_ms=400)
        took = time.monotonic() - t0
        self.assertGreaterEqual(took, 0.3)
        self.assertLess(took, 5.0)
        self.assertEqual(r['output'], [])
        self.expect(self.delete(w['id']), 200)

    def test_raw_octet_stream(self):
        w = self.create(cmd='cat')
        data = bytes(range(256))[::-1] * 3
        r = self.stdin_octets(w['id'], data, eof='true', yield_ms=10000)
        self.expect(r, 200)
        self.assertEqual(r.json['written'], len(data))
        ck = self.read_all(w['id'], tty=False)
        self.assertEqual(ck.data(), data)

    def test_raw_octet_stream_with_wait_ms(self):
        w = self.create(cmd='cat')
        r = self.stdin_octets(w['id'], b'raw line\n', wait_ms=10000)
        self.expect(r, 200)
        self.assertEqual(r.json['written'], 9)
        self.assertEqual(window_data(r.json), b'raw line\n')
        r = self.stdin_octets(w['id'], b'', eof='true')
        self.expect(r, 200)
        self.assertEqual(r.json['written'], 0)
        s = self.wait_state(w['id'])
        self.assertEqual(s['exit_code'], 0)

    def test_stdin_after_eof_is_closed(self):
        w = self.create(cmd='cat >/dev/null; sleep 30')
        self.stdin(w['id'], text='x', eof=True)
        r = self.stdin_raw(w['id'], text='more')
        self.assertError(r, 409, 'stdin_closed')
        self.expect(self.delete(w['id']), 200)

    def test_stdin_false_is_closed(self):
        w = self.create(cmd='sleep 30', stdin=False)
        r = self.stdin_raw(w['id'], text='x')
        self.assertError(r, 409, 'stdin_closed')
        self.expect(self.delete(w['id']), 200)

    def test_stdin_to_exited_session(self):
        w = self.create(cmd='true', yield_ms=5000)
        self.assertEqual(w['state'], 'exited')
        r = self.stdin_raw(w['id'], text='x')
        self.assertError(r, 409, 'session_exited')

    def test_process_closing_stdin_does_not_hurt_agentd(self):
        # the reader goes away: writes must not kill agentd with SIGPIPE
        w = self.create(cmd='exec 0<&-; sleep 2; echo alive')
        for _ in range(3):
            r = self.stdin_raw(w['id'], data=b'x' * 1000)
            self.assertIn(r.status, (200, 409, 429), r.body)
            time.sleep(0.1)
        ck = self.read_all(w['id'], tty=False, timeout=20)
        self.assertEqual(ck.data(), b'alive\n')
        self.assertTrue(self.agentd.alive())
        self.healthz()


class PtyStdinTest(AgentdTestCase):

    def test_wait_ms_returns_the_echo(self):
        w = self.create(cmd='cat', tty=True)
        t0 = time.monotonic()
        r = self.stdin(w['id'], text='hello\n', wait_ms=10000)
        self.assertLess(time.monotonic() - t0, 8.0)
        self.assertIn(b'hello', window_data(r))
        for c in r['output']:
            self.assertEqual(c['stream'], 'pty')
        self.expect(self.delete(w['id']), 200)

    def test_tty_eof_char_ends_cat(self):
        w = self.create(cmd='cat; echo "rc=$?"', tty=True)
        self.stdin(w['id'], text='abc\n')
        self.stdin(w['id'], eof=True)
        ck = self.read_all(w['id'], tty=True, timeout=20)
        out = ck.data()
        self.assertIn(b'abc\r\n', out)
        self.assertIn(b'rc=0', out)
        self.assertEqual(ck.last['exit_code'], 0)

    def test_tty_eof_with_data(self):
        w = self.create(cmd='cat; echo "rc=$?"', tty=True)
        self.stdin(w['id'], text='xyz\n', eof=True)
        ck = self.read_all(w['id'], tty=True, timeout=20)
        self.assertIn(b'rc=0', ck.data())

    def test_tty_stdin_can_be_used_after_eof(self):
        # on a tty EOF is a character, not a close: the terminal still works
        w = self.create(cmd='cat; cat', tty=True)
        self.stdin(w['id'], eof=True)
        r = self.stdin(w['id'], text='second\n', wait_ms=10000)
        self.read_until(w['id'], b'second\r\n', tty=True)
        self.stdin(w['id'], eof=True)
        ck = self.read_all(w['id'], tty=True, timeout=20)
        self.assertEqual(ck.last['exit_code'], 0)
        del r

    def test_ctrl_c_through_stdin(self):
        # No shell in between: dash defers a SIGINT that lands between two
        # commands until the next foreground child ends.
        w = self.create(argv=['sleep', '30'], tty=True)
        pid = w['pid']
        self.wait_until(lambda: pid_comm(pid) == 'sleep', 10, 'sleep exec')
        self.stdin(w['id'], data=b'\x03')
        s = self.wait_state(w['id'], timeout=10)
        self.assertEqual(s['signal'], 'SIGINT')
        self.assertEqual(s['exit_code'], 130)

    def test_binary_input_raw_mode(self):
        w = self.create(cmd='stty raw -echo; echo ready; head -c 256 | od -An -tx1 -v',
                        tty=True)
        self.read_until(w['id'], b'ready', tty=True)
        self.stdin(w['id'], data=bytes(range(256)))
        ck = self.read_all(w['id'], tty=True, timeout=20)
        hexes = ck.data().split(b'ready', 1)[1].split()
        self.assertEqual([int(x, 16) for x in hexes], list(range(256)))


if __name__ == '__main__':
    unittest.main()
