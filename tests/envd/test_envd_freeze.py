"""envd's pause routes on --envd-listen where agentd has no cgroup v2 of
its own (this host): POST /freeze, /unfreeze, /init's thaw, /fsfreeze,
/fsthaw and /collapse answer as envd's do with its no-cgroup-manager
path; bad queries get envd's generated wrapper's 400.  Nothing here may
freeze the host: the tests refuse to run where /sys/fs/cgroup is cgroup2,
and /fsfreeze is only called to see agentd refuse it outside PID 1.  The
freezes themselves, the lock and FIFREEZE are tests/e2e/platform_freeze.py's
(in qemu)."""

import http.client
import json
import unittest

from harness import AgentdTestCase, SLOW, free_port

RESULT_KEYS = ['mode', 'visited', 'allowlisted', 'truncated', 'preFrozen',
               'requested', 'frozen', 'notFrozen', 'failed', 'unobservable',
               'sweepMs', 'waitMs']


def cgroup2_at_sys_fs_cgroup():
    with open('/proc/self/mounts') as f:
        return any(l.split()[1:3] == ['/sys/fs/cgroup', 'cgroup2']
                   for l in f)


class FreezeNoCgroupTest(AgentdTestCase):
    autostart = False

    def setUp(self):
        if cgroup2_at_sys_fs_cgroup():
            self.skipTest('cgroup v2 here: no freeze of this machine')
        super().setUp()
        self.eport = free_port()
        self.start_agentd(['--envd-listen', '127.0.0.1:%d' % self.eport,
                           '--dual-stack', '0',
                           '--envd-freeze-cgroups', '100'])

    def raw(self, method, path, body=b''):
        c = http.client.HTTPConnection('127.0.0.1', self.eport,
                                       timeout=30 * SLOW)
        c.request(method, path, body, {'X-Access-Token': self.agentd.token})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, r, data

    def freeze(self, query):
        st, r, data = self.raw('POST', '/freeze' + query)
        self.assertEqual(st, 200, data)
        self.assertEqual(r.getheader('Content-Type'), 'application/json')
        self.assertEqual(r.getheader('Cache-Control'), 'no-store')
        return json.loads(data)

    def test_freeze_reports_unobservable(self):
        """envd's no-cgroup-manager answer: the legacy sweep whatever the
        mode asked, its cgroup requested and unobservable, no wait."""
        for q in ('?maxWaitMs=5000', '?mode=hierarchy&maxWaitMs=5000',
                  '?mode=legacy&maxCgroups=3&maxWaitMs=1'):
            res = self.freeze(q)
            self.assertEqual(list(res), RESULT_KEYS)
            self.assertEqual(res['mode'], 'legacy', q)
            self.assertEqual(
                (res['requested'], res['unobservable'], res['frozen'],
                 res['notFrozen'], res['failed'], res['visited'],
                 res['allowlisted'], res['preFrozen'], res['truncated']),
                (1, 1, 0, 0, 0, 0, 0, 0, False), q)
            self.assertLess(res['waitMs'], 1000, q)

    def test_freeze_without_wait_is_204(self):
        for q in ('', '?mode=hierarchy', '?maxWaitMs=0', '?maxWaitMs=-5',
                  '?mode=bogus', '?maxWaitMs=abc;x=1', '?junk&x'):
            st, r, data = self.raw('POST', '/freeze' + q)
            self.assertEqual((st, data), (204, b''), q)
        st, r, data = self.raw('GET', '/freeze')
        self.assertEqual(st, 405)

    def test_unknown_mode_is_legacy(self):
        """envd's handler takes any mode but hierarchy as legacy (its
        wrapper does not check the enum)."""
        self.assertEqual(self.freeze('?mode=bogus&maxWaitMs=10')['mode'],
                         'legacy')
        self.assertEqual(self.freeze('?mode=&maxWaitMs=10')['mode'],
                         'legacy')

    def test_bad_query_is_the_wrappers_400(self):
        for q, want in (
                ('maxWaitMs=abc', 'maxWaitMs: error binding string '
                 'parameter: strconv.ParseInt: parsing "abc": invalid '
                 'syntax'),
                ('maxWaitMs=', 'maxWaitMs: error binding string parameter: '
                 'strconv.ParseInt: parsing "": invalid syntax'),
                ('maxWaitMs=1.5', 'maxWaitMs: error binding string '
                 'parameter: strconv.ParseInt: parsing "1.5": invalid '
                 'syntax'),
                ('maxCgroups=x&maxWaitMs=10', 'maxCgroups: error binding '
                 'string parameter: strconv.ParseInt: parsing "x": '
                 'invalid syntax'),
                ('maxWaitMs=99999999999999999999', 'maxWaitMs: error '
                 'binding string parameter: strconv.ParseInt: parsing '
                 '"99999999999999999999": value out of range'),
                ('mode=legacy&mode=hierarchy', "mode: multiple values for "
                 "single value parameter 'mode'"),
                ('maxWaitMs=1&maxWaitMs=2', "maxWaitMs: multiple values "
                 "for single value parameter 'maxWaitMs'"),
                ('maxWaitMs', 'maxWaitMs: error binding string parameter: '
                 'strconv.ParseInt: parsing "": invalid syntax'),
                ('junk&max%57aitMs=%2B1x', 'maxWaitMs: error binding string '
                 'parameter: strconv.ParseInt: parsing "+1x": invalid '
                 'syntax')):
            st, r, data = self.raw('POST', '/freeze?' + q)
            self.assertEqual(st, 400, q)
            self.assertEqual(r.getheader('Content-Type'),
                             'text/plain; charset=utf-8')
            self.assertEqual(r.getheader('X-Content-Type-Options'),
                             'nosniff')
            self.assertEqual(data.decode(),
                             'Invalid format for parameter %s\n' % want)

    def test_unfreeze_and_init(self):
        st, r, data = self.raw('POST', '/unfreeze')
        self.assertEqual((st, data), (204, b''))
        self.assertEqual(r.getheader('Cache-Control'), 'no-store')
        self.freeze('?maxWaitMs=10')
        st, r, data = self.raw('POST', '/init', b'{}')
        self.assertEqual(st, 204, data)
        st, r, data = self.raw('POST', '/unfreeze')
        self.assertEqual(st, 204)

    def metrics(self):
        c = http.client.HTTPConnection('127.0.0.1', self.agentd.port,
                                       timeout=30 * SLOW)
        c.request('GET', '/metrics',
                  headers={'Authorization': 'Bearer ' + self.agentd.token})
        text = c.getresponse().read().decode()
        c.close()
        return dict(l.split() for l in text.splitlines()
                    if l.startswith('agentd_envd_f') or
                    l.startswith('agentd_envd_thaws'))

    def test_metrics(self):
        m = self.metrics()
        self.assertEqual(m['agentd_envd_freeze_cgroups_max'], '100')
        self.assertEqual((m['agentd_envd_freezes_total'],
                          m['agentd_envd_thaws_total'],
                          m['agentd_envd_frozen']), ('0', '0', '0'))
        self.freeze('?maxWaitMs=10')
        self.raw('POST', '/freeze')
        self.raw('POST', '/unfreeze')
        self.raw('POST', '/init', b'{}')
        m = self.metrics()
        self.assertEqual((m['agentd_envd_freezes_total'],
                          m['agentd_envd_thaws_total'],
                          m['agentd_envd_freeze_busy_total'],
                          m['agentd_envd_freeze_truncated_total']),
                         ('2', '2', '0', '0'))

    def test_fsfreeze_refused_outside_pid1(self):
        """FIFREEZE on this machine's / would stop it: agentd refuses it
        unless it is PID 1, with envd's 500."""
        st, r, data = self.raw('POST', '/fsfreeze')
        self.assertEqual(st, 500, data)
        err = json.loads(data)
        self.assertEqual(err['code'], 500)
        self.assertIn('not PID 1', err['message'])

    def test_collapse(self):
        st, r, data = self.raw('POST', '/collapse')
        self.assertEqual(st, 200, data)
        self.assertEqual(r.getheader('Content-Type'), 'application/json')
        res = json.loads(data)
        self.assertEqual(list(res)[:6], ['regions', 'chunks', 'collapsed',
                                         'alreadyHuge', 'skipped',
                                         'elapsedMs'])
        self.assertGreater(res['regions'], 0)
        self.assertEqual(res['chunks'], res['collapsed'] +
                         res['alreadyHuge'] + res['skipped'])
        if res['chunks'] == 0:
            self.assertIn('nothing to collapse', res['note'])
        elif res['collapsed'] + res['alreadyHuge'] == 0:
            self.assertIn('MADV_COLLAPSE', res['note'])
        else:
            self.assertNotIn('note', res)
        with open('/proc/%d/status' % self.agentd.proc.pid) as f:
            self.assertIn('State', f.read())    # alive and answering
        st, r, data = self.raw('GET', '/health')
        self.assertEqual(st, 204)


if __name__ == '__main__':
    unittest.main()
