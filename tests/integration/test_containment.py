"""Containment on a host without a writable cgroup v2 (issue 21): the
process-group fallback, its report, the limits it refuses, and DELETE's
answer coming only once the leader is reaped.  The cgroup side runs in the
VM (tests/e2e/e2e.py)."""

import os
import shutil
import time
import unittest

from harness import Agentd, AgentdTestCase, pid_gone


def kill0(pid):
    """What `kill -0 pid` says: True while the pid names a process (a
    zombie too)."""
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


class ContainmentTest(AgentdTestCase):

    def setUp(self):
        super().setUp()
        r = self.req('GET', '/healthz')
        self.expect(r, 200)
        if r.json.get('containment') == 'cgroup':
            raise unittest.SkipTest('cgroup containment here: the VM tests '
                                    'cover it')

    def test_reported_process_group(self):
        r = self.req('GET', '/healthz')
        self.assertEqual(r.json['containment'], 'process_group')
        w = self.create(cmd='echo hi', yield_ms=20000)
        self.assertIs(w['oom_killed'], False)
        self.assertEqual(w['usage'], {'cpu_ms': None,
                                      'memory_peak_bytes': None,
                                      'pids_peak': None})
        r = self.req('GET', '/metrics')
        self.expect(r, 200)
        body = r.body.decode()
        self.assertIn('\nagentd_sessions_oom_killed_total 0\n', body)
        self.assertIn('\nagentd_cgroup_kills_total 0\n', body)

    def test_limits_unavailable_names_the_limit(self):
        for name, value in (('memory_bytes', 64 << 20), ('pids', 10),
                            ('cpu_percent', 50)):
            r = self.create_raw(cmd='true', limits={name: value})
            self.assertError(r, 422, 'limits_unavailable')
            self.assertIn(name, r.json['error']['message'])
        # 0 means the default: accepted.
        w = self.create(cmd='true', yield_ms=20000,
                        limits={'memory_bytes': 0, 'pids': 0,
                                'cpu_percent': 0})
        self.assertEqual(w['state'], 'exited')
        self.assertEqual(self.list_sessions()[0]['id'], w['id'])

    def test_bad_limits_are_400(self):
        for limits in ({'memory_bytes': -1}, {'pids': 'ten'},
                       {'cpu_percent': 1.5}, {'memory_bytes': 4096},
                       {'memory_bytes': (1 << 20) - 1}, {'swap': 1},
                       [], 'x'):
            r = self.create_raw(cmd='true', limits=limits)
            self.assertError(r, 400, 'invalid_request')

    def test_delete_answers_once_the_leader_is_reaped(self):
        # Today's ~1 s zombie window: the answer came at the exit, the
        # leader was reaped by a sweep later.  Several rounds, since the
        # window is a race.
        for i in range(5):
            w = self.create(cmd='sleep 100')
            self.expect(self.delete(w['id'], grace_ms=2000), 200)
            self.assertFalse(kill0(w['pid']),
                             'leader %d still there after DELETE (round %d)'
                             % (w['pid'], i))

    def test_delete_of_an_exited_session_waits_for_its_leftover(self):
        # The leftover keeps the session's leader pinned; DELETE answers
        # once the leftover ended (its SIGTERM) and the leader is reaped.
        w = self.create(cmd='sleep 100 & echo $! >left.pid; echo started',
                        yield_ms=20000)
        self.assertEqual(w['state'], 'exited')
        path = os.path.join(self.agentd.workdir, 'left.pid')
        left = int(open(path).read())
        self.assertTrue(kill0(left))
        t0 = time.monotonic()
        self.expect(self.delete(w['id'], grace_ms=5000), 200)
        self.assertLess(time.monotonic() - t0, 4.0)
        self.assertFalse(kill0(w['pid']))
        self.assertTrue(pid_gone(left) or not kill0(left))


class OomScoreFloorTest(AgentdTestCase):
    """A container started with a raised oom_score_adj and without
    CAP_SYS_RESOURCE: a session may not go lower than agentd's value.  It
    keeps agentd's, where every create used to fail with 422."""
    autostart = False

    def test_session_lower_than_allowed_keeps_ours(self):
        if os.geteuid() != 0 or shutil.which('setpriv') is None:
            self.skipTest('needs root and setpriv')
        a = Agentd(['--session-oom-score-adj', '-7'])
        argv = a.argv
        a.argv = lambda: (['setpriv', '--bounding-set', '-sys_resource',
                           '--', 'sh', '-c',
                           'echo 300 > /proc/self/oom_score_adj && exec "$@"',
                           'sh'] + argv())
        self._all_agentd.append(a)
        a.start()
        self.agentd = a
        self.c = a.tcp_client()
        with open('/proc/%d/oom_score_adj' % a.proc.pid) as f:
            self.assertEqual(f.read().strip(), '300')
        w, ck = self.run_cmd('cat /proc/self/oom_score_adj')
        self.assertEqual(w['exit_code'], 0)
        self.assertEqual(ck.data().strip(), b'300')
        self.assertIn('oom_score_adj -1000', a.stderr())


if __name__ == '__main__':
    unittest.main()
