"""The event feed: GET /v1/events, its cursor, filters, gaps and long-polls."""

import threading
import time
import unittest

from harness import AgentdTestCase, TS_RE, query, SLOW

EVENT_KEYS = ('id', 'type', 'at', 'session')


class EventsTestCase(AgentdTestCase):
    # The host's sockets come and go: no port events among the counted ones.
    agentd_args = ('--ports-feed-interval', '0')

    def events_raw(self, client=None, **params):
        return self.req('GET', '/v1/events' + query(**params), client=client)

    def events(self, client=None, **params):
        r = self.events_raw(client=client, **params)
        self.expect(r, 200, 'GET /v1/events')
        body = r.json
        self.assertEqual(sorted(body), ['cursor', 'dropped_events', 'events'])
        for e in body['events']:
            for k in EVENT_KEYS:
                self.assertIn(k, e)
            self.assertRegex(e['at'], TS_RE)
            self.assertRegex(e['at'], r'\.\d{3}Z$')
        return body


class FeedTest(EventsTestCase):

    def test_session_lifecycle_events(self):
        w = self.create(cmd='exit 3', id='life', yield_ms=5000)
        self.assertEqual(w['state'], 'exited')
        self.expect(self.delete('life'), 200)
        body = self.events()
        types = [(e['type'], e['session']) for e in body['events']]
        self.assertEqual(types, [('session.created', 'life'),
                                 ('session.exited', 'life'),
                                 ('session.removed', 'life')])
        ids = [e['id'] for e in body['events']]
        self.assertEqual(ids, [1, 2, 3])
        self.assertEqual(body['cursor'], 3)
        self.assertEqual(body['dropped_events'], 0)
        ex = body['events'][1]
        self.assertEqual(ex['exit_code'], 3)
        self.assertIsNone(ex['signal'])
        self.assertIs(ex['timed_out'], False)
        self.assertIs(ex['oom_killed'], False)
        self.assertEqual(body['events'][0]['pid'], w['pid'])

    def test_killed_and_timed_out(self):
        self.create(cmd='sleep 30', id='slow', timeout_ms=200)
        body = self.events(types='session.exited', wait_ms=10000)
        self.assertEqual(len(body['events']), 1)
        ex = body['events'][0]
        self.assertEqual(ex['signal'], 'SIGTERM')
        self.assertEqual(ex['exit_code'], 143)
        self.assertIs(ex['timed_out'], True)

    def test_cursor_rules(self):
        self.create(cmd='true', id='a', yield_ms=5000)
        body = self.events()
        n = body['cursor']
        self.assertEqual(n, 2)
        self.assertEqual(self.events(cursor=n)['events'], [])
        self.assertEqual([e['id'] for e in self.events(cursor=1)['events']], [2])
        for bad in (n + 1, 'x', '-1', '1.5', ''):
            r = self.events_raw(cursor=bad)
            self.assertError(r, 400, 'invalid_cursor')

    def test_bad_filters(self):
        self.assertError(self.events_raw(types='Session.Created'), 400,
                         'invalid_request', 'types')
        self.assertError(self.events_raw(types='a,,b'), 400, 'invalid_request',
                         'types')
        self.assertError(self.events_raw(types=','.join(['t%d' % i for i in range(33)])),
                         400, 'invalid_request', 'types')
        self.assertError(self.events_raw(session='a/b'), 400, 'invalid_request',
                         'session')
        r = self.req('POST', '/v1/events', {})
        self.assertError(r, 405, 'method_not_allowed')
        r = self.req('GET', '/v1/eventsx')
        self.assertError(r, 404, 'not_found')

    def test_filter_cursor_is_last_looked_at(self):
        self.create(cmd='true', id='x', yield_ms=5000)
        self.create(cmd='true', id='y', yield_ms=5000)
        body = self.events(session='x')
        self.assertEqual([e['session'] for e in body['events']], ['x', 'x'])
        self.assertEqual(body['cursor'], 4)     # y's two events looked at
        body = self.events(types='session.exited,session.removed')
        self.assertEqual([e['type'] for e in body['events']],
                         ['session.exited', 'session.exited'])
        self.assertEqual(body['cursor'], 4)
        body = self.events(types='port.opened')
        self.assertEqual(body['events'], [])
        self.assertEqual(body['cursor'], 4)

    def test_long_poll_answers_on_exit(self):
        self.create(cmd='sleep 0.5', id='w')
        cur = self.events()['cursor']
        t0 = time.monotonic()
        body = self.events(cursor=cur, types='session.exited', wait_ms=10000)
        took = time.monotonic() - t0
        self.assertEqual([e['type'] for e in body['events']], ['session.exited'])
        self.assertLess(took, 5 * SLOW)
        self.assertGreater(took, 0.2)

    def test_long_poll_deadline(self):
        t0 = time.monotonic()
        body = self.events(wait_ms=300)
        took = time.monotonic() - t0
        self.assertEqual(body['events'], [])
        self.assertEqual(body['cursor'], 0)
        self.assertGreaterEqual(took, 0.25)

    def test_filtered_long_poll_not_woken_by_others(self):
        cur = self.events()['cursor']
        out = {}

        def poll():
            c = self.agentd.tcp_client()
            t0 = time.monotonic()
            out['body'] = self.events(client=c, cursor=cur, session='mine',
                                      wait_ms=1500)
            out['took'] = time.monotonic() - t0
            c.close()
        t = threading.Thread(target=poll)
        t.start()
        time.sleep(0.2)
        for i in range(5):
            self.create(cmd='true', id='other%d' % i, yield_ms=5000)
        t.join(30)
        self.assertEqual(out['body']['events'], [])
        self.assertGreaterEqual(out['took'], 1.4)
        # the others were looked at: the cursor is past them
        self.assertEqual(out['body']['cursor'], 10)

    def test_abandoned_long_poll_is_freed(self):
        import http.client
        import socket
        s = socket.create_connection(('127.0.0.1', self.agentd.port))
        s.sendall(b'GET /v1/events?wait_ms=60000 HTTP/1.1\r\nHost: x\r\n'
                  + b''.join(b'%s: %s\r\n' % (k.encode(), v.encode())
                             for k, v in self.agentd.auth_headers().items())
                  + b'\r\n')
        time.sleep(0.3)
        self.assertIn('agentd_event_waiters 1', self.metrics())
        s.close()
        deadline = time.monotonic() + 5
        while 'agentd_event_waiters 0' not in self.metrics():
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)

    def metrics(self):
        r = self.req('GET', '/metrics')
        self.expect(r, 200)
        return r.body.decode()


class ResumedTest(EventsTestCase):

    agentd_args = ('--clock-step', '0', '--restore-window', '300ms')

    def test_sandbox_resumed(self):
        r = self.req('POST', '/v1/sandbox/resumed', {'unix_ms': 1})
        self.expect(r, 200)
        # a later signal of the same restore is no new event
        self.expect(self.req('POST', '/v1/sandbox/resumed', {}), 200)
        body = self.events(types='sandbox.resumed')
        self.assertEqual(len(body['events']), 1)
        ev = body['events'][0]
        self.assertIsNone(ev['session'])
        self.assertEqual(ev['generation'], 1)
        self.assertEqual(ev['by'], 'platform')
        self.assertEqual(ev['clock'], 'none')
        self.assertEqual(ev['clock_step_ms'], 0)
        time.sleep(0.4)
        self.expect(self.req('POST', '/v1/sandbox/resumed', {}), 200)
        body = self.events(types='sandbox.resumed')
        self.assertEqual([e['generation'] for e in body['events']], [1, 2])


class RingTest(EventsTestCase):

    agentd_args = ('--max-events', '5', '--ports-feed-interval', '0')

    def test_gap_is_dropped_events(self):
        for i in range(3):
            self.create(cmd='true', id='s%d' % i, yield_ms=5000)
        body = self.events()
        self.assertEqual(body['dropped_events'], 1)
        self.assertEqual([e['id'] for e in body['events']], [2, 3, 4, 5, 6])
        self.assertEqual(body['cursor'], 6)
        body = self.events(cursor=3)
        self.assertEqual(body['dropped_events'], 0)
        m = self.req('GET', '/metrics').body.decode()
        self.assertIn('agentd_events_max 5\n', m)
        self.assertIn('agentd_events_held 5\n', m)
        self.assertIn('agentd_events_dropped_total 1\n', m)
        self.assertIn('agentd_events_total 6\n', m)
        # a filtered read says the gap too
        body = self.events(types='session.exited')
        self.assertEqual(body['dropped_events'], 1)


class ManySessionsTest(EventsTestCase):

    agentd_args = ('--max-sessions', '1100', '--ports-feed-interval', '0')

    def test_feed_under_1000_sessions(self):
        n = 1000
        for i in range(n):
            self.create(cmd='true', id='m%d' % i)
        deadline = time.monotonic() + 60 * SLOW
        cursor, exited = 0, set()
        while len(exited) < n:
            self.assertLess(time.monotonic(), deadline, '%d exited' % len(exited))
            body = self.events(cursor=cursor, types='session.exited', wait_ms=5000)
            exited.update(e['session'] for e in body['events'])
            cursor = body['cursor']
        self.assertEqual(exited, set('m%d' % i for i in range(n)))
        body = self.events()
        ids = [e['id'] for e in body['events']]
        self.assertEqual(ids, list(range(1, len(ids) + 1)))
        self.assertEqual(len(ids), 2 * n)
        # one filtered read of one session among 2000 events
        t0 = time.monotonic()
        body = self.events(session='m500')
        self.assertLess(time.monotonic() - t0, 2 * SLOW)
        self.assertEqual([e['type'] for e in body['events']],
                         ['session.created', 'session.exited'])


if __name__ == '__main__':
    unittest.main()
