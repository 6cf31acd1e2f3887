"""A slow file system (a FUSE server that stalls) holds only its own calls.

GET, PUT and stat of /v1/files run on worker threads: /healthz and other
calls keep answering while one waits for a stuck open or read; the stuck
ones answer when the file system comes back (or goes away); --max-file-jobs
bounds them.
"""

import http.client
import json
import os
import re
import signal
import tempfile
import threading
import time
import unittest

import slowfs
from filesutil import FilesCase, q

HEALTHZ_TIMEOUT = 20    # s: far more than an answer takes; the bug: never


class Call(threading.Thread):
    """One request on a connection of its own, in the background."""

    def __init__(self, agentd, method, path, body=None):
        super().__init__(daemon=True)
        self.agentd, self.method, self.path, self.body = agentd, method, path, body
        self.status = None
        self.data = None
        self.headers = {}
        self.start()

    def run(self):
        c = http.client.HTTPConnection('127.0.0.1', self.agentd.port, timeout=120)
        try:
            c.request(self.method, self.path, body=self.body,
                      headers=self.agentd.auth_headers())
            r = c.getresponse()
            self.headers = dict(r.getheaders())
            self.data = r.read()
            self.status = r.status
        except (OSError, http.client.HTTPException) as e:
            self.status = repr(e)
        finally:
            c.close()


@unittest.skipUnless(slowfs.available(), 'needs root and /dev/fuse')
class SlowFSTest(FilesCase):

    def setUp(self):
        super().setUp()
        self.mounts = []

    def tearDown(self):
        # Unmount first: agentd's stop must not wait on the file system.
        for fs in self.mounts:
            fs.close()
            os.rmdir(fs.folder)
        super().tearDown()

    def mount(self, **kw):
        folder = tempfile.mkdtemp(prefix='agentd-slowfs-')
        self.mounts.append(slowfs.SlowFS(folder, **kw))
        return self.mounts[-1]

    def file_calls(self):
        """agentd_file_calls of /metrics: GET, PUT and stat running."""
        r = self.expect(self.req('GET', '/metrics'), 200)
        return int(re.search(rb'\nagentd_file_calls (\d+)\n', r.body).group(1))

    def healthz_answers(self):
        c = http.client.HTTPConnection('127.0.0.1', self.agentd.port,
                                       timeout=HEALTHZ_TIMEOUT)
        try:
            c.request('GET', '/healthz')
            r = c.getresponse()
            r.read()
            self.assertEqual(r.status, 200)
        finally:
            c.close()

    def test_stuck_open(self):
        fs = self.mount(stall=True)
        f = os.path.join(fs.folder, 'f')
        calls = [Call(self.agentd, 'GET', '/v1/files' + q(path=f)),
                 Call(self.agentd, 'PUT', '/v1/files' + q(path=f), b'x'),
                 Call(self.agentd, 'POST', '/v1/files/stat',
                      json.dumps({'paths': [f]}).encode())]
        for _ in range(3):
            self.healthz_answers()
        # Other files calls too.
        self.expect(self.put(self.p('ok'), b'ok'), 200)
        self.assertEqual(self.expect(self.get_file(self.p('ok')), 200).body, b'ok')
        for c in calls:
            self.assertIsNone(c.status, 'answered while the file system hangs')
        fs.close()
        for c in calls:
            c.join(60)
        self.assertEqual([c.status for c in calls], [500, 500, 200])
        res = json.loads(calls[2].data)['results'][0]
        self.assertIs(res['exists'], False)
        self.assertTrue(self.agentd.alive())

    def test_stuck_read(self):
        data = os.urandom(3 << 20)
        fs = self.mount(data=data)
        f = os.path.join(fs.folder, 'f')
        get = Call(self.agentd, 'GET', '/v1/files' + q(path=f, offset=5))
        self.assertTrue(fs.reading.wait(30), 'no READ reached the file system')
        for _ in range(3):
            self.healthz_answers()
        self.assertIsNone(get.status)
        fs.release()
        get.join(60)
        self.assertEqual(get.status, 200)
        self.assertEqual(int(get.headers['Content-Length']), len(data) - 5)
        self.assertEqual(get.data, data[5:])

    def test_stuck_read_client_gone(self):
        """A client that leaves a stuck read: the worker ends when it can."""
        fs = self.mount(data=os.urandom(1 << 20))
        f = os.path.join(fs.folder, 'f')
        c = http.client.HTTPConnection('127.0.0.1', self.agentd.port, timeout=60)
        c.request('GET', '/v1/files' + q(path=f), headers=self.agentd.auth_headers())
        self.assertTrue(fs.reading.wait(30), 'no READ reached the file system')
        c.close()
        self.healthz_answers()
        fs.release()
        self.wait_for(lambda: self.file_calls() == 0, timeout=30,
                      what='the worker gone')
        self.healthz_answers()

    def test_shutdown_with_stuck_calls(self):
        """SIGTERM with 10 calls stuck: one 2 s wait for all, not 2 s each."""
        fs = self.mount(stall=True)
        f = os.path.join(fs.folder, 'f')
        calls = [Call(self.agentd, 'GET', '/v1/files' + q(path=f))
                 for _ in range(10)]
        self.wait_for(lambda: self.file_calls() == 10, timeout=30,
                      what='ten calls stuck')
        a = self.agentd
        t0 = time.monotonic()
        a.proc.send_signal(signal.SIGTERM)
        self.wait_for(lambda: 'main: stopped' in a.stderr(), timeout=60,
                      what='agentd stopped')
        took = time.monotonic() - t0
        # Now let the stuck threads go (a sanitizer's exit waits for them).
        fs.close()
        self.assertEqual(a.proc.wait(60), 0)
        a.stopped = True
        self.assertLess(took, 12, 'shutdown took %.1f s' % took)
        for c in calls:
            c.join(10)
            self.assertIsNotNone(c.status)

    def test_job_limit(self):
        self.stop_agentd()
        self.start_agentd(['--max-file-jobs', '2'])
        fs = self.mount(stall=True)
        f = os.path.join(fs.folder, 'f')
        calls = [Call(self.agentd, 'GET', '/v1/files' + q(path=f))
                 for _ in range(2)]
        # Both stuck in their workers (no other call runs meanwhile).
        self.wait_for(lambda: self.file_calls() == 2, timeout=30,
                      what='two workers')
        self.assertError(self.get_file(self.p('missing')), 429,
                         'too_many_file_jobs')
        r = self.expect(self.req('GET', '/metrics'), 200)
        self.assertIn(b'\nagentd_file_calls 2\n', r.body)
        self.assertIn(b'\nagentd_file_calls_max 2\n', r.body)
        self.assertIn(b'\nagentd_fetch_bytes_max 4294967296\n', r.body)
        self.assertError(self.stat([self.p('missing')]), 429,
                         'too_many_file_jobs')
        fs.close()
        for c in calls:
            c.join(60)
        self.wait_for(lambda: self.get_file(self.p('missing')).status == 404,
                      timeout=30, what='a 404 once the calls ended')


if __name__ == '__main__':
    unittest.main()
