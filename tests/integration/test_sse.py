"""Server-Sent Events: session output and the event feed as streams, with
Python's http.client, curl -N and the npm eventsource client; slow and
abandoned readers."""

import http.client
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import unittest

from harness import AgentdTestCase, SLOW, UnixHTTPConnection, unb64

HERE = os.path.dirname(os.path.abspath(__file__))
ES_CLIENT = os.path.join(HERE, '..', 'sse', 'es_client.mjs')


class SSEReader:
    """One stream read with http.client: frames as dicts, comments counted."""

    def __init__(self, tc, path, headers=None, timeout=30 * SLOW, unix=False):
        if unix:
            self.conn = UnixHTTPConnection(tc.agentd.socket_path, timeout)
        else:
            self.conn = http.client.HTTPConnection('127.0.0.1', tc.agentd.port,
                                                   timeout=timeout)
        h = {'Accept': 'text/event-stream'}
        if not unix:
            h.update(tc.agentd.auth_headers())
        h.update(headers or {})
        self.conn.request('GET', path, headers=h)
        self.resp = self.conn.getresponse()
        self.comments = 0
        self.ended = False

    def frame(self):
        """The next frame, or None at the end of the stream."""
        f = {}
        while True:
            line = self.resp.readline()
            if not line:
                self.ended = True
                return None
            line = line.decode().rstrip('\n')
            if line == '':
                if f:
                    return f
                continue
            if line.startswith(':'):
                self.comments += 1
                continue
            k, _, v = line.partition(': ')
            f[k] = v

    def until(self, event, limit=10000):
        out = []
        for _ in range(limit):
            f = self.frame()
            if f is None:
                break
            out.append(f)
            if f.get('event') == event:
                break
        return out

    def close(self):
        self.conn.close()


def output_of(frames):
    return b''.join(unb64(json.loads(f['data'])['data'])
                    for f in frames if f['event'] == 'output')


class SessionStreamTest(AgentdTestCase):

    def test_output_then_exit_then_end(self):
        self.create(id='s', cmd='for i in 1 2 3 4 5; do echo line$i; sleep 0.05; done')
        r = SSEReader(self, '/v1/sessions/s')
        self.assertEqual(r.resp.status, 200)
        self.assertEqual(r.resp.getheader('Content-Type'), 'text/event-stream')
        frames = r.until('exit')
        self.assertEqual(frames[-1]['event'], 'exit')
        self.assertEqual(output_of(frames),
                         b''.join(b'line%d\n' % i for i in range(1, 6)))
        ids = [int(f['id']) for f in frames if f['event'] == 'output']
        self.assertEqual(ids, list(range(1, len(ids) + 1)))
        for f in frames:
            if f['event'] == 'output':
                c = json.loads(f['data'])
                self.assertEqual(sorted(c), ['data', 'id', 'offset', 'stream'])
                self.assertEqual(c['id'], int(f['id']))
                self.assertEqual(c['stream'], 'stdout')
        ex = json.loads(frames[-1]['data'])
        self.assertEqual(ex['state'], 'exited')
        self.assertEqual(ex['id'], 's')
        self.assertEqual(ex['exit_code'], 0)
        self.assertEqual(int(frames[-1]['id']), ids[-1])
        self.assertIsNone(r.frame())    # the stream ends after its exit
        self.assertTrue(r.ended)
        r.close()

    def test_unix_socket(self):
        self.create(id='u', cmd='echo over-unix')
        r = SSEReader(self, '/v1/sessions/u', unix=True)
        frames = r.until('exit')
        self.assertEqual(output_of(frames), b'over-unix\n')
        r.close()
        r = SSEReader(self, '/v1/events?session=u', unix=True)
        self.assertEqual(r.frame()['event'], 'session.created')
        r.close()

    def test_resume_by_cursor_and_last_event_id(self):
        # a stream watches: each read of output is its own chunk
        self.create(id='r', cmd='sleep 0.3; for i in 1 2 3 4 5; do echo $i; sleep 0.05; done')
        SSEReader(self, '/v1/sessions/r').until('exit')
        n = self.get('r')['last_chunk']
        self.assertGreaterEqual(n, 3)
        r = SSEReader(self, '/v1/sessions/r?cursor=2')
        frames = r.until('exit')
        self.assertEqual(int(frames[0]['id']), 3)
        r.close()
        # Last-Event-ID (a reconnect) wins over the URL's cursor
        r = SSEReader(self, '/v1/sessions/r?cursor=1',
                      headers={'Last-Event-ID': str(n - 1)})
        frames = r.until('exit')
        self.assertEqual([f['event'] for f in frames], ['output', 'exit'])
        self.assertEqual(int(frames[0]['id']), n)
        r.close()
        # at the end already: only the exit
        r = SSEReader(self, '/v1/sessions/r', headers={'Last-Event-ID': str(n)})
        self.assertEqual([f['event'] for f in r.until('exit')], ['exit'])
        r.close()

    def test_bad_cursors(self):
        self.create(id='b', cmd='echo x', yield_ms=5000)
        for path, hdrs in (('/v1/sessions/b?cursor=99', {}),
                           ('/v1/sessions/b?cursor=x', {}),
                           ('/v1/sessions/b', {'Last-Event-ID': 'abc'}),
                           ('/v1/sessions/b', {'Last-Event-ID': '99'}),
                           ('/v1/events?cursor=99', {}),
                           ('/v1/events', {'Last-Event-ID': '-1'})):
            h = {'Accept': 'text/event-stream'}
            h.update(hdrs)
            r = self.req('GET', path, headers=h)
            self.assertError(r, 400, 'invalid_cursor')
        r = self.req('GET', '/v1/sessions/nope',
                     headers={'Accept': 'text/event-stream'})
        self.assertError(r, 404, 'not_found')

    def test_no_cursor_starts_at_oldest_held(self):
        # 4 KiB ring: the first chunks are gone
        self.create(id='o', ring_bytes=4096, cmd='sleep 0.3; for i in $(seq 1 150);'
                    ' do printf "%040d\\n" $i; sleep 0.003; done')
        SSEReader(self, '/v1/sessions/o?cursor=0').until('exit')
        r = SSEReader(self, '/v1/sessions/o')
        frames = r.until('exit')
        self.assertEqual(frames[0]['event'], 'output')
        self.assertGreater(int(frames[0]['id']), 1)
        r.close()
        # from cursor 0: a gap first, naming what was dropped
        r = SSEReader(self, '/v1/sessions/o?cursor=0')
        frames = r.until('exit')
        self.assertEqual(frames[0]['event'], 'gap')
        gap = json.loads(frames[0]['data'])
        self.assertEqual(list(gap), ['dropped_chunks'])
        self.assertEqual(int(frames[1]['id']), gap['dropped_chunks'] + 1)
        r.close()

    def test_keepalive_and_idle_timeout(self):
        a = self.start_agentd(['--sse-keepalive', '200', '--idle-timeout', '500'])
        self.create(id='k', cmd='sleep 1.5; echo late')
        r = SSEReader(self, '/v1/sessions/k')
        frames = r.until('exit')
        # the silent client outlived --idle-timeout, and got the output
        self.assertEqual(output_of(frames), b'late\n')
        self.assertGreaterEqual(r.comments, 3)
        r.close()

    def test_idle_timeout_shorter_than_the_keepalive(self):
        # Before its first frame a silent stream was cut by --idle-timeout
        # when that came before the first keepalive comment.
        self.start_agentd(['--sse-keepalive', '5000', '--idle-timeout', '500'])
        self.create(id='q', cmd='sleep 1.5; echo late')
        r = SSEReader(self, '/v1/sessions/q')
        frames = r.until('exit')
        self.assertEqual(output_of(frames), b'late\n')
        self.assertEqual(frames[-1]['event'], 'exit')
        r.close()

    def test_removed_session_ends_its_stream(self):
        self.create(id='d', cmd='sleep 30')
        r = SSEReader(self, '/v1/sessions/d')
        self.expect(self.delete('d', grace_ms=100), 200)
        frames = r.until('exit')
        self.assertEqual(frames[-1]['event'], 'exit')
        self.assertEqual(json.loads(frames[-1]['data'])['signal'], 'SIGTERM')
        self.assertIsNone(r.frame())
        r.close()

    def test_curl(self):
        curl = shutil.which('curl')
        if curl is None:
            self.skipTest('no curl')
        self.create(id='c', cmd='echo one; sleep 0.2; echo two')
        p = subprocess.run([curl, '-sN', '--max-time', '30',
                            '-H', 'Accept: text/event-stream',
                            '-H', 'Authorization: Bearer ' + self.agentd.token,
                            'http://127.0.0.1:%d/v1/sessions/c' % self.agentd.port],
                           capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)    # the stream ended
        text = p.stdout.decode()
        self.assertIn('event: output\n', text)
        self.assertTrue(text.endswith('\n\n'))
        self.assertIn('event: exit\n', text)
        frames = [dict(l.split(': ', 1) for l in block.split('\n'))
                  for block in text.strip().split('\n\n')]
        self.assertEqual(output_of(frames), b'one\ntwo\n')

    def test_eventsource_reconnects(self):
        node = shutil.which('node')
        if node is None:
            self.skipTest('no node')
        self.create(id='n', cmd='for i in 1 2 3; do echo n$i; sleep 0.1; done')
        url = 'http://127.0.0.1:%d/v1/sessions/n' % self.agentd.port
        p = subprocess.run([node, ES_CLIENT, url, self.agentd.token, 'session'],
                           capture_output=True, timeout=90)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        out = json.loads(p.stdout.decode().strip().splitlines()[-1])
        self.assertEqual(out['output'], 'n1\nn2\nn3\n')
        # the client reconnected by itself after the end, with
        # Last-Event-ID: only the exit again, no output twice
        self.assertEqual(out['opens'], 2)
        self.assertEqual(out['exits'], 2)
        self.assertEqual(out['ids'], list(range(1, len(out['ids']) + 1)))
        self.assertEqual(out['session']['state'], 'exited')


    def test_big_ring_read_through_a_small_buffer(self):
        # Issue 41: a stream reads the ring through a buffer that grows on
        # demand, not one of the ring's capacity (64 MiB of address space).
        self.create(id='big', ring_bytes=64 << 20,
                    cmd='echo first; read x; echo second; exec sleep 600')
        self.read_until('big', b'first')
        before = vm_kib(self.agentd.proc.pid, 'VmSize')
        r = SSEReader(self, '/v1/sessions/big')
        frames = [r.frame()]
        self.stdin('big', text='go\n')
        while b'second' not in output_of(frames):
            frames.append(r.frame())
        grown = vm_kib(self.agentd.proc.pid, 'VmSize') - before
        self.assertEqual(output_of(frames), b'first\nsecond\n')
        self.assertLess(grown, 16 << 10, 'a stream of a 64 MiB ring took '
                        '%d KiB of address space' % grown)
        r.close()


def vm_kib(pid, field):
    """A VmSize/VmRSS line of /proc/PID/status, in KiB."""
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1])
    raise AssertionError('no %s in /proc/%d/status' % (field, pid))


class EventStreamTest(AgentdTestCase):
    # The host's sockets come and go: no port events among the counted ones.
    agentd_args = ('--ports-feed-interval', '0')

    def test_live_events_and_filter(self):
        r = SSEReader(self, '/v1/events?types=session.exited')
        self.create(id='e1', cmd='exit 7', yield_ms=5000)
        f = r.frame()
        self.assertEqual(f['event'], 'session.exited')
        ev = json.loads(f['data'])
        self.assertEqual(ev['id'], int(f['id']))
        self.assertEqual(ev['session'], 'e1')
        self.assertEqual(ev['exit_code'], 7)
        r.close()
        # no cursor: from the oldest held; ?cursor=: after it
        r = SSEReader(self, '/v1/events')
        got = [(f['event'], int(f['id'])) for f in (r.frame(), r.frame())]
        self.assertEqual(got, [('session.created', 1), ('session.exited', 2)])
        r.close()
        r = SSEReader(self, '/v1/events?cursor=1')
        self.assertEqual(r.frame()['id'], '2')
        r.close()

    def test_gap_of_dropped_events(self):
        self.start_agentd(['--max-events', '4'])
        for i in range(3):
            self.create(id='g%d' % i, cmd='true', yield_ms=5000)
        r = SSEReader(self, '/v1/events?cursor=0')
        f = r.frame()
        self.assertEqual(f['event'], 'gap')
        self.assertEqual(json.loads(f['data']), {'dropped_events': 2})
        self.assertEqual(r.frame()['id'], '3')
        r.close()

    def test_eventsource_events(self):
        node = shutil.which('node')
        if node is None:
            self.skipTest('no node')
        url = 'http://127.0.0.1:%d/v1/events' % self.agentd.port
        p = subprocess.Popen([node, ES_CLIENT, url, self.agentd.token,
                              'events', '6'], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        time.sleep(1.0 * SLOW)
        for i in range(2):
            self.create(id='j%d' % i, cmd='true', yield_ms=5000)
            self.expect(self.delete('j%d' % i), 200)
        out, err = p.communicate(timeout=90)
        self.assertEqual(p.returncode, 0, out + err)
        res = json.loads(out.decode().strip().splitlines()[-1])
        self.assertEqual(res['ids'], [1, 2, 3, 4, 5, 6])
        self.assertEqual([e['type'] for e in res['events']],
                         ['session.created', 'session.exited', 'session.removed'] * 2)

    def test_shutdown_ends_streams(self):
        self.create(id='long', cmd='sleep 60')
        rs = SSEReader(self, '/v1/sessions/long')
        re_ = SSEReader(self, '/v1/events?types=session.exited')
        self.assertEqual(metric(self, 'agentd_sse_streams'), 2)
        # open streams hold nothing up: agentd exits 0 within the grace
        self.stop_agentd()
        # and they end (what was queued when the loop ended may be cut,
        # as a long-poll's answer is)
        for r in (rs, re_):
            try:
                while r.frame() is not None:
                    pass
            except (http.client.IncompleteRead, ConnectionError):
                pass
            r.close()


def metric(tc, name):
    r = tc.req('GET', '/metrics')
    for line in r.body.decode().splitlines():
        if line.startswith(name + ' '):
            return float(line.split()[1])
    raise AssertionError('no metric %s' % name)


def fd_count(pid):
    return len(os.listdir('/proc/%d/fd' % pid))


def rss_kib(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return 0


class SlowReaderTest(AgentdTestCase):

    agentd_args = ('--sse-buffer', '65536')

    def open_raw(self, path):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(('127.0.0.1', self.agentd.port))
        hdrs = ''.join('%s: %s\r\n' % kv for kv in self.agentd.auth_headers().items())
        s.sendall(('GET %s HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n%s\r\n'
                   % (path, hdrs)).encode())
        return s

    def test_slow_reader_during_flood(self):
        pid = self.agentd.proc.pid
        # healthz when idle
        idle = []
        for _ in range(50):
            t0 = time.monotonic()
            self.expect(self.req('GET', '/healthz'), 200)
            idle.append(time.monotonic() - t0)
        rss0 = rss_kib(pid)
        self.create(id='flood', cmd='cat /dev/zero')
        s = self.open_raw('/v1/sessions/flood')
        s.recv(1024)            # the head and a little: then it stops reading
        busy = []
        t_end = time.monotonic() + 3 * SLOW
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            self.expect(self.req('GET', '/healthz'), 200)
            busy.append(time.monotonic() - t0)
            time.sleep(0.01)
        rss1 = rss_kib(pid)
        busy.sort()
        idle.sort()
        p95 = busy[int(len(busy) * 0.95)]
        sys_note = 'healthz p95 idle %.2f ms, flood + slow reader %.2f ms' % (
            idle[int(len(idle) * 0.95)] * 1000, p95 * 1000)
        print(sys_note)
        # liveness: healthz kept answering, quickly enough on a loaded box
        self.assertGreater(len(busy), 20)
        self.assertLess(p95, 0.5 * SLOW, sys_note)
        # boundedness: the stream holds --sse-buffer, not the flood
        self.assertLess(rss1 - rss0, 16 * 1024,
                        'RSS grew %d KiB' % (rss1 - rss0))
        # read on: the reader that fell behind gets a gap and skips ahead
        s.setblocking(True)
        s.settimeout(10 * SLOW)
        buf = b''
        deadline = time.monotonic() + 20 * SLOW
        gap = b'event: gap\ndata: {"dropped_chunks":'
        while gap not in buf and time.monotonic() < deadline:
            data = s.recv(65536)
            if not data:
                break
            buf = buf[-200:] + data
        self.assertIn(gap, buf)
        self.assertGreater(metric(self, 'agentd_sse_gaps_total'), 0)
        s.close()
        self.expect(self.delete('flood', grace_ms=100), 200)

    def test_abandoned_streams_free_their_fds(self):
        pid = self.agentd.proc.pid
        self.create(id='idle', cmd='sleep 60')
        self.expect(self.req('GET', '/healthz'), 200)
        base = fd_count(pid)
        socks = []
        for i in range(200):
            socks.append(self.open_raw('/v1/sessions/idle' if i % 2 else
                                       '/v1/events?types=port.opened'))
        for s in socks:
            s.settimeout(10 * SLOW)
            self.assertIn(b'200 OK', s.recv(4096))
        self.assertEqual(metric(self, 'agentd_sse_streams'), 200)
        self.assertGreaterEqual(fd_count(pid), base + 200)
        for s in socks:
            s.close()
        deadline = time.monotonic() + 30
        while fd_count(pid) > base:
            self.assertLess(time.monotonic(), deadline,
                            '%d fds, %d before' % (fd_count(pid), base))
            time.sleep(0.1)
        self.assertEqual(metric(self, 'agentd_sse_streams'), 0)
        self.expect(self.delete('idle', grace_ms=100), 200)


if __name__ == '__main__':
    unittest.main()
