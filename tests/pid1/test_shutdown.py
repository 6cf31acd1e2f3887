"""The graceful shutdown of agentd as PID 1 of a PID namespace."""

import os
import signal
import time

from pid1lib import LONG_GRACE_MS, QUICK, Pid1TestCase, wait_for

TRAP = ("trap 'echo term > %s; exit 0' TERM; echo ready; "
        "while :; do sleep 0.05; done")


class ShutdownTest(Pid1TestCase):

    def test_sigterm_reaches_every_session_within_the_grace(self):
        grace = LONG_GRACE_MS
        a = self.start(grace_ms=grace, args=['--log-level', 'debug'])
        markers, sids = [], []
        for i in range(6):
            m = os.path.join(a.dir, 'term.%d' % i)
            markers.append(m)
            # Half on PTYs: they see SIGTERM too, before any SIGHUP.
            j = a.create(TRAP % m, tty=(i % 2 == 1))
            sids.append(j['id'])
        # A daemon outside every session's group: kill(-1) reaches it.
        daemon = os.path.join(a.dir, 'term.daemon')
        a.run("setsid sh -c \"%s\" > %s.ready 2>&1 < /dev/null &"
              % ((TRAP % daemon).replace('"', '\\"'), daemon))
        for sid in sids:
            a.read_until(sid, b'ready')
        wait_for(lambda: os.path.exists(daemon + '.ready') and
                 os.path.getsize(daemon + '.ready') > 0, 10,
                 what='the daemon')
        rc, took = a.stop(signal.SIGTERM, expect_within=QUICK)
        self.assertEqual(rc, 0, a.stderr())
        self.assertLess(took, grace / 1000.0,
                        'agentd did not end within the grace')
        for m in markers + [daemon]:
            self.assertTrue(os.path.exists(m), 'no SIGTERM seen by %s\n%s'
                            % (os.path.basename(m), a.stderr()))
        # The namespace is gone with its init.
        wait_for(lambda: not a.ns_pids() if a.host_pid else True, 5,
                 what='the namespace to empty')
        self.assertIn('shutting down', a.stderr())

    def test_term_proof_session_is_killed_after_the_grace(self):
        # The grace must outlast two requests on a loaded machine.
        grace = 5000
        a = self.start(grace_ms=grace)
        j = a.create("trap '' TERM HUP; echo ready; while :; do sleep 0.05; "
                     "done")
        a.read_until(j['id'], b'ready')
        # A keep-alive connection opened before the signal.
        c = a.conn()
        st, _ = a.request('GET', '/healthz', conn=c)
        self.assertEqual(st, 200)
        t0 = time.monotonic()
        a.send(signal.SIGTERM)
        # During the grace: 503 shutting_down, and no new session.
        st, body = wait_for(lambda: (lambda r: r[0] == 503 and r)(
            a.request('GET', '/healthz', conn=c)), grace / 1000.0,
            what='503')
        self.assertEqual(body['status'], 'shutting_down')
        st, body = a.request('POST', '/v1/sessions', {'cmd': 'true'}, conn=c)
        self.assertEqual(st, 503, body)
        self.assertEqual(body['error']['code'], 'shutting_down')
        c.close()
        rc = a.wait(grace / 1000.0 + 8)
        took = time.monotonic() - t0
        self.assertEqual(rc, 0, a.stderr())
        self.assertGreaterEqual(took, grace / 1000.0 - 0.1,
                                'the grace was not waited for')
        self.assertIn('grace over', a.stderr())

    def test_sigint_and_sigpwr_shut_down(self):
        for sig in (signal.SIGINT, signal.SIGPWR):
            a = self.start(grace_ms=LONG_GRACE_MS)
            m = os.path.join(a.dir, 'term')
            j = a.create(TRAP % m)
            a.read_until(j['id'], b'ready')
            rc, took = a.stop(sig, expect_within=QUICK)
            self.assertEqual(rc, 0, a.stderr())
            self.assertTrue(os.path.exists(m), signal.Signals(sig).name)

    def test_shutdown_with_nothing_running_is_quick(self):
        a = self.start(grace_ms=LONG_GRACE_MS)
        a.run('true')
        rc, took = a.stop(expect_within=QUICK)
        self.assertEqual(rc, 0)

    def test_stopped_session_is_continued_and_terminated(self):
        a = self.start(grace_ms=LONG_GRACE_MS)
        m = os.path.join(a.dir, 'term')
        j = a.create(TRAP % m)
        a.read_until(j['id'], b'ready')
        st, _ = a.request('POST', '/v1/sessions/%s/signal' % j['id'],
                          {'signal': 'SIGSTOP'})
        self.assertEqual(st, 200)
        time.sleep(0.2)
        rc, took = a.stop(expect_within=QUICK)
        self.assertEqual(rc, 0)
        self.assertTrue(os.path.exists(m), 'a stopped session missed SIGTERM')

    def test_stopped_orphan_is_continued_and_terminated(self):
        # A daemon outside every session's group, stopped: SIGTERM alone
        # stays pending until the grace's SIGKILL; with SIGCONT it runs
        # its trap and agentd ends at once.
        for pid1 in (True, False):
            a = self.start(pid1=pid1, grace_ms=LONG_GRACE_MS)
            m = os.path.join(a.dir, 'term')
            code, out = a.run("setsid sh -c \"%s\" > %s.ready 2>&1 "
                              "< /dev/null & echo $!"
                              % ((TRAP % m).replace('"', '\\"'), m))
            daemon = int(out.strip())
            wait_for(lambda: os.path.exists(m + '.ready') and
                     os.path.getsize(m + '.ready') > 0, 10,
                     what='the daemon')
            code, _ = a.run('kill -STOP %d' % daemon)
            self.assertEqual(code, 0)
            rc, took = a.stop(expect_within=QUICK)
            self.assertEqual(rc, 0, a.stderr())
            self.assertTrue(os.path.exists(m), 'a stopped orphan missed '
                            'SIGTERM (pid1 %s)' % pid1)
            a.cleanup()
