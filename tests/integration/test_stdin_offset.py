"""Exactly-once stdin (issue 24, item 3): a retried write carries the offset
the client believes was accepted before it, and agentd writes each byte once.
Written from API.md."""

from harness import AgentdTestCase, b64


class StdinOffsetTest(AgentdTestCase):

    def write(self, sid, body):
        return self.req('POST', '/v1/sessions/%s/stdin' % sid, body)

    def test_retry_is_a_duplicate(self):
        w = self.create(cmd='cat')
        self.assertEqual(w['stdin_bytes'], 0)
        r = self.expect(self.write(w['id'], {'text': 'ls\n', 'offset': 0}), 200)
        self.assertEqual(r.json['written'], 3)
        self.assertNotIn('duplicate', r.json)
        self.assertEqual(r.json['stdin_bytes'], 3)
        # the connection was reset before the answer: the same write again
        r = self.expect(self.write(w['id'], {'text': 'ls\n', 'offset': 0}), 200)
        self.assertEqual(r.json['written'], 0)
        self.assertIs(r.json['duplicate'], True)
        self.assertEqual(r.json['stdin_bytes'], 3)
        r = self.expect(self.write(w['id'], {'text': 'pwd\n', 'offset': 3,
                                             'eof': True, 'yield_ms': 5000}),
                        200)
        self.assertEqual(r.json['written'], 4)
        ck = self.read_all(w['id'])
        self.assertEqual(ck.data(), b'ls\npwd\n')   # each byte once
        # the eof went with data accepted before: a retry is a duplicate too
        r = self.expect(self.write(w['id'], {'text': 'pwd\n', 'offset': 3,
                                             'eof': True}), 200)
        self.assertIs(r.json['duplicate'], True)

    def test_gap_is_409_with_the_count(self):
        w = self.create(cmd='cat')
        self.stdin(w['id'], text='abc')
        r = self.write(w['id'], {'text': 'x', 'offset': 5})
        err = self.assertError(r, 409, 'stdin_offset_mismatch')
        self.assertEqual(err['stdin_bytes'], 3)
        self.assertEqual(self.get(w['id'])['stdin_bytes'], 3)
        self.expect(self.delete(w['id'], grace_ms=0), 200)

    def test_overlap_writes_the_new_bytes_only(self):
        w = self.create(cmd='cat')
        self.stdin(w['id'], text='hello ')
        r = self.expect(self.write(w['id'], {'data': b64(b'lo world\n'),
                                             'offset': 3}), 200)
        self.assertEqual(r.json['written'], 6)      # 'world\n'
        self.assertEqual(r.json['stdin_bytes'], 12)
        ck = self.read_until(w['id'], b'hello world\n', tty=False)
        self.assertEqual(ck.data(), b'hello world\n')
        self.expect(self.delete(w['id'], grace_ms=0), 200)

    def test_raw_body_takes_offset_in_the_query(self):
        w = self.create(cmd='cat')
        for _ in range(2):
            r = self.expect(self.stdin_octets(w['id'], b'\x00\x01raw',
                                              offset=0), 200)
        self.assertEqual(r.json['written'], 0)
        self.assertIs(r.json['duplicate'], True)
        r = self.stdin_octets(w['id'], b'z', offset=9)
        self.assertEqual(self.assertError(r, 409, 'stdin_offset_mismatch')
                         ['stdin_bytes'], 5)
        self.assertError(self.stdin_octets(w['id'], b'z', offset='x'), 400,
                         'invalid_request', 'offset')
        self.expect(self.delete(w['id'], grace_ms=0), 200)

    def test_without_offset_as_before(self):
        w = self.create(cmd='cat')
        self.stdin(w['id'], text='a')
        self.stdin(w['id'], text='a')
        self.assertEqual(self.get(w['id'])['stdin_bytes'], 2)
        self.assertError(self.write(w['id'], {'text': 'a', 'offset': -1}),
                         400, 'invalid_request', 'offset')
        self.expect(self.delete(w['id'], grace_ms=0), 200)
