"""Out of memory for a client's request is a 503, never agentd's end.

As PID 1 the fatal path powers the machine off: a client that asks for a
64 MiB window while memory is short must get 503 out_of_memory, and agentd
must go on (over HTTP/1.0, rendered whole; over HTTP/1.1 it is sent as it
is rendered and needs little memory).  Memory runs short here by RLIMIT_AS, set on the running agentd
(prlimit) just above what it holds.
"""

import base64
import http.client
import json
import os
import resource
import unittest

from harness import AgentdTestCase, Response

RING = 64 << 20


def vm_size(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmSize:'):
                return int(line.split()[1]) * 1024
    raise AssertionError('no VmSize')


@unittest.skipIf(os.environ.get('AGENTD_SANITIZED') == '1',
                 'sanitizers reserve terabytes of address space')
class OomTest(AgentdTestCase):

    def get10(self, sid, **q):
        """A read over HTTP/1.0: its window rendered whole, never sent as
        it is rendered (agentd/api/winstream.c)."""
        c = http.client.HTTPConnection('127.0.0.1', self.agentd.port,
                                       timeout=60)
        c._http_vsn, c._http_vsn_str = 10, 'HTTP/1.0'
        c.request('GET', '/v1/sessions/%s?%s' % (sid, '&'.join(
            '%s=%s' % kv for kv in q.items())),
            headers=self.agentd.auth_headers())
        r = c.getresponse()
        resp = Response(r.status, r.reason, r.msg, r.read(), 0)
        c.close()
        return resp

    def test_window_without_memory(self):
        s = self.create(cmd='head -c %d /dev/zero' % (50 << 20),
                        ring_bytes=RING, tty=False)
        self.wait_state(s['id'], timeout=120)
        pid = self.agentd.proc.pid
        # Room for neither the 64 MiB window nor its rendering (+16 MiB),
        # then for the window but not its rendering (+72 MiB).
        for extra in (16 << 20, 72 << 20):
            limit = vm_size(pid) + extra
            hard = resource.prlimit(pid, resource.RLIMIT_AS)[1]
            resource.prlimit(pid, resource.RLIMIT_AS, (limit, hard))
            # HTTP/1.1: sent as it is rendered, it needs neither.
            r = self.get_raw(s['id'], cursor=0, max_bytes=RING)
            self.assertEqual(r.status, 200, r.body[:300])
            # All of it, or 4096 chunks as a whole window would hold.
            out = r.json['output']
            self.assertEqual([c['id'] for c in out],
                             list(range(1, len(out) + 1)))
            if len(out) < 4096:
                self.assertEqual(sum(len(base64.b64decode(c['data']))
                                     for c in out), 50 << 20)
            else:
                self.assertTrue(r.json['more'])
            r = self.get10(s['id'], cursor=0, max_bytes=RING)
            self.assertError(r, 503, 'out_of_memory')
            self.assertTrue(self.agentd.alive())
            self.assertEqual(self.healthz()['status'], 'ok')
            r = self.expect(self.get_raw(s['id'], cursor=0, max_bytes=65536),
                            200)
            self.assertTrue(r.json['output'])
            # The soft limit only: raising it back needs no privilege.
            resource.prlimit(pid, resource.RLIMIT_AS, (hard, hard))
        # The second was the rendering's (the window fit).
        self.assertIn('http_reply_oom', self.agentd.stderr())

    def test_head_tail_without_memory_for_the_tail(self):
        s = self.create(cmd='head -c %d /dev/zero' % (50 << 20),
                        ring_bytes=RING, tty=False)
        self.wait_state(s['id'], timeout=120)
        pid = self.agentd.proc.pid
        # A 40 MiB head_tail window of a pipe: its stdout's tail alone is
        # one 20 MiB buffer, which 8 MiB of room can never hold.  How far
        # the head gets first depends on the sizes of the chunks (the head
        # takes at most a share of the window's pieces), so the room is
        # left well under the tail: whichever buffer finds none, the
        # answer is the head_tail 503, never the rendering's.
        limit = vm_size(pid) + (8 << 20)
        hard = resource.prlimit(pid, resource.RLIMIT_AS)[1]
        resource.prlimit(pid, resource.RLIMIT_AS, (limit, hard))
        r = self.get_raw(s['id'], cursor=0, max_bytes=40 << 20,
                         head_tail='true')
        self.assertError(r, 503, 'out_of_memory', 'tail')
        self.assertTrue(self.agentd.alive())
        resource.prlimit(pid, resource.RLIMIT_AS, (hard, hard))
        r = self.expect(self.get_raw(s['id'], cursor=0, max_bytes=1 << 20,
                                     head_tail='true'), 200)
        self.assertGreater(r.json['truncated_bytes'], 0)


if __name__ == '__main__':
    unittest.main()
