"""`agentd -- CMD`: the supervised companion, as PID 1 and as a child."""

import calendar
import os
import re
import threading
import time

from pid1lib import LONG_GRACE_MS, QUICK, Pid1TestCase, wait_for

LINE = re.compile(r'^agentd: (\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d+)Z '
                  r'(\w+) (.*)$')


def parse_log(lines):
    """[(seconds since the epoch, level, text)] of agentd's log lines."""
    out = []
    for ln in lines:
        m = LINE.match(ln)
        if not m:
            continue
        y, mo, d, h, mi, s, frac = m.groups()[:7]
        t = calendar.timegm((int(y), int(mo), int(d), int(h), int(mi),
                             int(s))) + int(frac) / 10.0 ** len(frac)
        out.append((t, m.group(8), m.group(9)))
    return out


class CompanionTest(Pid1TestCase):

    def hammer(self, a, stop, failures):
        """healthz over and over until stop is set; record failures."""
        while not stop.is_set():
            try:
                st, _ = a.request('GET', '/healthz', timeout=10)
                if st != 200:
                    failures.append(st)
            except Exception as e:      # reported by the test
                failures.append(repr(e))
            time.sleep(0.05)

    def test_flapping_companion_backs_off_and_api_stays_up(self):
        a = self.start(pid1=True, companion=['sh', '-c', 'echo flap; exit 3'])
        stop, failures = threading.Event(), []
        t = threading.Thread(target=self.hammer, args=(a, stop, failures))
        t.start()
        try:
            delays = wait_for(lambda: (lambda d: len(d) >= 4 and d)(
                [int(m.group(1)) for m in
                 (re.search(r'restarting the companion in (\d+) ms', x[2])
                  for x in parse_log(a.log_lines())) if m]),
                30, interval=0.1, what='four restarts of the companion')
            # Sessions work meanwhile.
            self.assertEqual(a.run('exit 7')[0], 7)
        finally:
            stop.set()
            t.join(30)
        self.assertEqual(failures, [], 'healthz failed while the companion '
                         'flapped')
        # The delay doubles.
        self.assertEqual(delays[:4], [delays[0] * 2 ** i for i in range(4)],
                         delays)
        self.assertGreater(delays[0], 0)
        # And the starts do spread out that way: each restart waited at
        # least its delay (a timer may fire late on a loaded machine, never
        # early; so only the lower bound is a test).
        log = parse_log(a.log_lines())
        starts = [t for t, lvl, x in log if 'companion sh started' in x]
        self.assertGreaterEqual(len(starts), 4, a.stderr())
        gaps = [b - a_ for a_, b in zip(starts, starts[1:])]
        for i in range(3):
            self.assertGreaterEqual(gaps[i], delays[i] / 1000.0 - 0.05,
                                    (gaps, delays))
        # Its output and its exit status are in agentd's log.
        text = a.stderr()
        self.assertIn('companion stdout: flap', text)
        self.assertIn('companion exited 3', text)
        self.assertEqual(a.health['pid'], 1)
        rc, _ = a.stop(expect_within=QUICK)
        self.assertEqual(rc, 0)

    def test_companion_that_cannot_start(self):
        a = self.start(pid1=False, companion=['/nonexistent/envd', '--x'])
        delays = wait_for(lambda: (lambda d: len(d) >= 3 and d)(
            [int(m.group(1)) for m in
             (re.search(r'retrying in (\d+) ms', x[2])
              for x in parse_log(a.log_lines())) if m]),
            20, interval=0.1, what='three failed starts')
        self.assertEqual(delays[:3], [delays[0], delays[0] * 2, delays[0] * 4])
        self.assertEqual(a.run('echo ok')[1], b'ok\n')
        rc, _ = a.stop(expect_within=QUICK)
        self.assertEqual(rc, 0)

    def test_companion_gets_sigterm_at_shutdown(self):
        marker = '/tmp/agentd-pid1-companion-%d' % os.getpid()
        if os.path.exists(marker):
            os.unlink(marker)
        try:
            a = self.start(pid1=True, grace_ms=LONG_GRACE_MS, companion=[
                'sh', '-c', "trap 'echo t > %s; exit 0' TERM; echo up; "
                "while :; do sleep 0.05; done" % marker])
            wait_for(lambda: 'companion stdout: up' in a.stderr(), 10,
                     what='the companion up')
            # It is running, and it is not restarted.
            time.sleep(0.3)
            self.assertNotIn('restarting the companion', a.stderr())
            rc, took = a.stop(expect_within=QUICK)
            self.assertEqual(rc, 0, a.stderr())
            self.assertTrue(os.path.exists(marker),
                            'the companion saw no SIGTERM\n' + a.stderr())
            self.assertNotIn('restarting the companion', a.stderr())
        finally:
            if os.path.exists(marker):
                os.unlink(marker)

    def test_companion_is_clean_and_has_no_token(self):
        out = '/tmp/agentd-pid1-companion-env-%d' % os.getpid()
        env = {k: v for k, v in os.environ.items()
               if not k.startswith('AGENTD_')}
        env['AGENTD_TOKEN'] = 'tok-%d-secret' % os.getpid()
        try:
            a = self.start(pid1=True, env=env, companion=[
                'sh', '-c', "{ grep -E '^Sig(Blk|Ign)' /proc/self/status; "
                "ls /proc/self/fd | tr '\\n' ' '; echo; "
                "env | grep -c AGENTD_TOKEN; "
                "tr '\\0' '\\n' < /proc/1/environ | grep -c secret; } > %s.tmp;"
                " mv %s.tmp %s; sleep 100" % (out, out, out)])
            wait_for(lambda: os.path.exists(out), 10, what='the companion')
            with open(out) as f:
                lines = f.read().split('\n')
            self.assertEqual(lines[0].split()[1], '0' * 16)
            self.assertEqual(lines[1].split()[1], '0' * 16)
            self.assertEqual(lines[2].split(), ['0', '1', '2', '3'])
            self.assertEqual(lines[3], '0', 'AGENTD_TOKEN in its environment')
            self.assertEqual(lines[4], '0', 'the token in /proc/1/environ')
            self.assertEqual(a.run('tr "\\0" "\\n" < /proc/1/environ | '
                                   'grep -c secret')[1], b'0\n')
        finally:
            if os.path.exists(out):
                os.unlink(out)

    def test_daemon_of_a_restarted_companion_keeps_its_output(self):
        # The companion forks a daemon that holds its stdout and exits.  At
        # the restart, the last run's pipes stay open until their end: the
        # daemon goes on, and so does its output in the log (closing them
        # killed it with SIGPIPE at its next line).
        a = self.start(pid1=True, grace_ms=LONG_GRACE_MS, companion=[
            'sh', '-c', 'echo start; (while :; do echo tick-$$; sleep 0.2; '
            'done) & exit 0'])
        started = re.compile(r'companion sh started, pid (\d+)')

        def runs():
            return [int(m.group(1)) for m in
                    (started.search(x) for x in a.log_lines()) if m]
        first = wait_for(lambda: (lambda r: len(r) >= 3 and r)(runs()), 30,
                         interval=0.1, what='three runs')[0]

        def ticks_after_third_start():
            lines = a.log_lines()
            third = [i for i, x in enumerate(lines) if started.search(x)][2]
            return any('companion stdout: tick-%d' % first in x
                       for x in lines[third:])
        wait_for(ticks_after_third_start, 10, interval=0.1,
                 what="the first run's daemon after two restarts")
        rc, _ = a.stop(expect_within=QUICK)
        self.assertEqual(rc, 0, a.stderr())
