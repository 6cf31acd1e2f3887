"""Terminal behaviour: the line discipline of a session's PTY (IUTF8)."""

import unittest

from harness import AgentdTestCase


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


if __name__ == '__main__':
    unittest.main()
