"""Process-group reuse: once a session's leader is reaped, its pid (the
group's id) may go to another process, and agentd must never signal it.

The reuse is made deterministic with /proc/sys/kernel/ns_last_pid, which root
may write in agentd's own PID namespace: session A's leader exits while a
setsid'ed descendant holds its output; the next pid is set to A's, and
session C gets it and leads its own group there.  Removing A (DELETE or its
TTL) then used to SIGKILL C.

A session's leader is reaped as it ends; a live process left in its session
holds the id then (the kernel frees a pid only when no process has it as
its pid, group or session id), and agentd holds that process through a
pidfd.  Once that one ended too, the id is free: a session that took it over
must never get A's signals."""

import time

from pid1lib import Pid1TestCase, wait_for


class GroupReuseTest(Pid1TestCase):

    def setup_reuse(self, a):
        # A: the leader exits, a setsid'ed sleep holds the output open.
        j = a.create('setsid sleep 1000 & echo started', yield_ms=10000)
        a.read_until(j['id'], b'started')
        wait_for(lambda: a.get(j['id'])['state'] == 'exited', 20,
                 what='session A to exit')
        g = j['pid']
        # The next pid in the namespace is A's.
        code, out = a.run('echo %d >/proc/sys/kernel/ns_last_pid' % (g - 1))
        self.assertEqual((code, out), (0, b''))
        c = a.create('sleep 1000')
        if c['pid'] != g:
            self.skipTest('pid %d was not reused (C got %d)' % (g, c['pid']))
        return j, c

    def assert_alive(self, a, c, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            s = a.get(c['id'])
            self.assertEqual(s['state'], 'running',
                             'session C (pid %d, the reused one) ended: %r'
                             % (c['pid'], s))
            time.sleep(0.1)

    def test_delete_never_signals_a_reused_group(self):
        a = self.start()
        j, c = self.setup_reuse(a)
        st, _ = a.request('DELETE', '/v1/sessions/%s?grace_ms=0' % j['id'])
        self.assertEqual(st, 200)
        self.assert_alive(a, c, 2.0)

    def test_ttl_never_signals_a_reused_group(self):
        a = self.start(['--exited-ttl', '3s'])
        j, c = self.setup_reuse(a)
        # A expires (SIGTERM, then SIGKILL 2 s later, in the old code at once).
        wait_for(lambda: a.request('GET', '/v1/sessions/%s' % j['id'])[0]
                 == 404, 20, what='session A to expire')
        self.assert_alive(a, c, 3.0)

    def test_pinned_id_never_signals_a_reuse(self):
        a = self.start()
        # A: the leader exits, a sleep of its own session (no setsid) is left.
        j = a.create('sleep 1000 </dev/null >/dev/null 2>&1 & echo left $!',
                     yield_ms=10000)
        wait_for(lambda: a.get(j['id'])['state'] == 'exited', 20,
                 what='session A to exit')
        g = j['pid']
        left = int(a.read_until(j['id'], b'left').split(b'left ')[1].split()[0])
        # The leader is reaped already; the leftover holds its id.
        self.assertEqual(a.run('test -e /proc/%d' % g)[0], 1)
        self.assertEqual(a.metrics().get('agentd_session_groups_pinned'), 1)
        # The leftover ends: nothing holds A's id any more.
        self.assertEqual(a.run('kill -9 %d' % left), (0, b''))
        wait_for(lambda: a.run('test -e /proc/%d' % left)[0] == 1, 20,
                 what='the leftover to end')
        code, out = a.run('echo %d >/proc/sys/kernel/ns_last_pid' % (g - 1))
        self.assertEqual((code, out), (0, b''))
        c = a.create('sleep 1000')
        if c['pid'] != g:
            self.skipTest('pid %d was not reused (C got %d)' % (g, c['pid']))
        st, _ = a.request('DELETE', '/v1/sessions/%s?grace_ms=0' % j['id'])
        self.assertEqual(st, 200)
        self.assert_alive(a, c, 2.0)
