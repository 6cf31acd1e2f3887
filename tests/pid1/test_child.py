"""agentd as a plain child (not PID 1): subreaper, and started with fds 0-2
closed, as a child and as PID 1."""

import os
from pid1lib import (LONG_GRACE_MS, QUICK, Pid1TestCase, children_of,
                     pid_gone, proc_stat, wait_for)


class ChildTest(Pid1TestCase):

    def test_orphans_are_reparented_and_reaped(self):
        a = self.start(pid1=False)
        self.assertNotEqual(a.health['pid'], 1)
        self.assertEqual(a.host_pid, a.proc.pid)
        # The orphan lives until we remove its file (not for a time: the
        # machine may be slow to let us look at it).
        hold = os.path.join(a.dir, 'hold')
        open(hold, 'w').close()
        code, out = a.run("(while [ -e %s ]; do sleep 0.05; done) "
                          "> /dev/null 2>&1 & echo $!" % hold)
        self.assertEqual(code, 0)
        orphan = int(out.strip())
        st = proc_stat(orphan)
        self.assertIsNotNone(st, 'the orphan is gone already')
        self.assertEqual(st[1], a.host_pid, 'orphan not re-parented to agentd')
        os.unlink(hold)
        wait_for(lambda: proc_stat(orphan) is None, 10,
                 what='the orphan to be reaped')

    def test_100_orphans_leave_no_zombie(self):
        a = self.start(pid1=False)
        code, _ = a.run('for i in $(seq 100); do (sleep 0.2 &) ; done')
        self.assertEqual(code, 0)
        wait_for(lambda: not children_of(a.host_pid), 20, interval=0.1,
                 what='every orphan reaped: %r' % children_of(a.host_pid))
        self.assertGreaterEqual(
            a.metrics().get('agentd_zombies_reaped_total', 0), 100)

    def test_sigterm_ends_orphans_too_and_exits_0(self):
        a = self.start(pid1=False, grace_ms=LONG_GRACE_MS)
        marker = os.path.join(a.dir, 'daemon.term')
        # A daemon in its own session: no session's group holds it.
        a.run("setsid sh -c \"trap 'echo t > %s; exit 0' TERM; echo up; "
              "while :; do sleep 0.05; done\" > %s.up 2>&1 < /dev/null &"
              % (marker, marker))
        wait_for(lambda: os.path.exists(marker + '.up') and
                 os.path.getsize(marker + '.up') > 0, 10, what='the daemon')
        # The session's leader (the shell) is reaped once no process of
        # its group is left: a sweep after its exit, not at once.
        wait_for(lambda: len(children_of(a.host_pid)) == 1, 10,
                 what='the daemon as the only child: %r'
                 % children_of(a.host_pid))
        kids = children_of(a.host_pid)
        self.assertNotIn('Z', kids.values(), kids)
        daemon = list(kids)[0]
        rc, took = a.stop(expect_within=QUICK)
        self.assertEqual(rc, 0, a.stderr())
        self.assertTrue(os.path.exists(marker), 'the orphan saw no SIGTERM')
        self.assertTrue(pid_gone(daemon))

    def test_sigterm_reaches_the_children_of_an_adopted_daemon(self):
        # The daemon (adopted: its session's shell is gone) waits for a
        # child of its own.  SIGTERM to the daemon alone ends it and leaves
        # the child to agentd without a SIGTERM: it would wait the whole
        # grace for the SIGKILL.  Every descendant gets SIGTERM at once.
        a = self.start(pid1=False, grace_ms=LONG_GRACE_MS)
        m = os.path.join(a.dir, 'child.term')
        script = os.path.join(a.dir, 'child.sh')
        with open(script, 'w') as f:
            f.write("trap 'echo t > %s; exit 0' TERM; echo up > %s.up; "
                    "while :; do sleep 0.05; done\n" % (m, m))
        a.run('setsid sh -c "sh %s & wait" > /dev/null 2>&1 < /dev/null &'
              % script)
        wait_for(lambda: os.path.exists(m + '.up'), 10, what='the child')
        rc, took = a.stop(expect_within=QUICK)
        self.assertEqual(rc, 0, a.stderr())
        self.assertTrue(os.path.exists(m), "the daemon's child saw no "
                        "SIGTERM")

    def test_term_proof_orphan_is_killed_after_the_grace(self):
        a = self.start(pid1=False, grace_ms=1000)
        up = os.path.join(a.dir, 'up')
        code, out = a.run("setsid sh -c \"trap '' TERM; echo up; while :; do "
                          "sleep 0.05; done\" > %s 2>&1 < /dev/null & "
                          "echo $!" % up)
        daemon = int(out.strip())
        wait_for(lambda: os.path.exists(up) and os.path.getsize(up) > 0, 10,
                 what='the daemon')
        self.assertEqual(proc_stat(daemon)[1], a.host_pid)
        rc, took = a.stop()
        self.assertEqual(rc, 0, a.stderr())
        self.assertGreaterEqual(took, 0.9, a.stderr())
        wait_for(lambda: pid_gone(daemon), 5, what='the daemon killed')


class ClosedStdioTest(Pid1TestCase):

    def check_works(self, a):
        self.assertEqual(a.request('GET', '/healthz')[0], 200)
        code, out = a.run_streams('echo out; echo err >&2; ls /proc/self/fd')
        self.assertEqual(code, 0)
        self.assertEqual(out.get('stderr'), b'err\n')
        self.assertEqual(out.get('stdout', b'').split(),
                         [b'out', b'0', b'1', b'2', b'3'])
        code, out = a.run('tty; echo hi', tty=True)
        self.assertEqual(code, 0)
        self.assertIn(b'/dev/pts/', out)
        # agentd's own 0-2 are /dev/null, not a socket or a PTY.
        for fd in (0, 1, 2):
            self.assertEqual(os.readlink('/proc/%d/fd/%d' % (a.host_pid, fd)),
                             '/dev/null')
        j = a.create('sleep 100')
        rc, took = a.stop(expect_within=QUICK)
        self.assertEqual(rc, 0)
        self.assertTrue(pid_gone(j['pid']) if not a.pid1 else True)

    def test_as_child(self):
        a = self.start(pid1=False, closed_stdio=True,
                       grace_ms=LONG_GRACE_MS)
        # The wrapper shell exec'd agentd: our child, our pid.
        self.check_works(a)

    def test_as_pid1(self):
        a = self.start(pid1=True, closed_stdio=True, grace_ms=LONG_GRACE_MS)
        self.assertEqual(a.health['pid'], 1)
        self.check_works(a)
