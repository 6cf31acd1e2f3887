"""A session's process lifecycle: the PTY hang-up race, cwd, leftovers of
exited sessions on DELETE and TTL, the foreground target of /signal, and
grace_ms's bound."""

import base64
import os
import shutil
import signal
import threading
import time

from harness import SLOW, AgentdTestCase, Background, pid_gone, pid_state


def read_file(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ''


class HangupTest(AgentdTestCase):
    """A tty program that closes fds 0-2 and keeps running must not be hung
    up (SIGHUP) by agentd closing the master on EIO."""

    RUNS = 200
    THREADS = 8

    def test_closing_stdio_then_exiting_is_never_sighup(self):
        path = os.path.join(self.agentd.workdir, 'lines')
        with open(path, 'w') as f:
            f.write('one\ntwo\n')
        # The shell closes 0-2 and lives on a while (agentd sees EIO while
        # it runs: before the fix it died of SIGHUP every time); tac does
        # the same at exit (close_stdout), the race of the issue.
        programs = [
            {'cmd': 'echo start; exec 0<&- 1>&- 2>&-; sleep 0.05; exit 0'},
            {'argv': ['tac', path]},
        ]
        expect = [b'start', b'two\r\none']
        results = [None] * self.RUNS
        errors = []

        def worker(k):
            c = self.agentd.tcp_client()
            try:
                for i in range(k, self.RUNS, self.THREADS):
                    fields = dict(programs[i % 2], tty=True, yield_ms=20000,
                                  ring_bytes=4096)
                    r = c.request('POST', '/v1/sessions', json_body=fields)
                    if r.status != 201:
                        errors.append('run %d: %s' % (i, r))
                        return
                    s = r.json
                    deadline = time.monotonic() + 30
                    while s['state'] != 'exited' and time.monotonic() < deadline:
                        s = c.request('GET', '/v1/sessions/%s?wait_ms=1000'
                                      % s['id']).json
                    out = b''
                    for ch in s.get('output', []):
                        out += base64.b64decode(ch['data'])
                    results[i] = (s['state'], s['exit_code'], s['signal'], out)
                    c.request('DELETE', '/v1/sessions/%s' % s['id'])
            except Exception as e:      # reported below
                errors.append('worker %d: %r' % (k, e))

        threads = [threading.Thread(target=worker, args=(k,))
                   for k in range(self.THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        self.assertEqual(errors, [])
        hup = [i for i, r in enumerate(results) if r and r[2] == 'SIGHUP']
        self.assertEqual(hup, [], '%d of %d runs died of SIGHUP'
                         % (len(hup), self.RUNS))
        for i, r in enumerate(results):
            self.assertIsNotNone(r, 'run %d has no result' % i)
            self.assertEqual(r[:3], ('exited', 0, None), 'run %d: %r' % (i, r))
            self.assertIn(expect[i % 2], r[3], 'run %d: %r' % (i, r))

    def test_reopened_tty_is_read_after_a_hangup(self):
        # The slave is closed (EIO), then reopened through /dev/tty with more
        # output than a PTY buffers: agentd must read it while the leader
        # lives, or the writer blocks forever.
        cmd = ("exec 0<&- 1>&- 2>&-; sleep 0.2; "
               "head -c 200000 /dev/zero | tr '\\0' x >/dev/tty; "
               "echo END >/dev/tty; exit 0")
        w = self.create(cmd=cmd, tty=True)
        ck = self.read_until(w['id'], b'END', timeout=30, tty=True)
        self.assertEqual(ck.data().count(b'x'), 200000)
        s = self.wait_state(w['id'], timeout=20)
        self.assertEqual((s['exit_code'], s['signal']), (0, None))

    def test_exit_is_still_prompt_after_a_hangup(self):
        # Closed 0-2, then the exit: exited, status 0, with everything
        # written before the close.
        w = self.create(cmd='echo before; exec 0<&- 1>&- 2>&-; sleep 0.3',
                        tty=True, yield_ms=20000)
        if w['state'] != 'exited':
            w = self.wait_state(w['id'], timeout=20)
        self.assertEqual((w['exit_code'], w['signal']), (0, None))
        ck = self.read_all(w['id'], tty=True)
        self.assertIn(b'before', ck.data())


class CwdTest(AgentdTestCase):

    def test_relative_cwd_is_taken_from_workdir(self):
        work = self.agentd.workdir
        os.makedirs(os.path.join(work, 'sub', 'deeper'))
        for rel, want in (('sub', 'sub'), ('./sub/deeper', 'sub/deeper'),
                          ('.', '')):
            path = os.path.join(work, want) if want else work
            last, ck = self.run_cmd('pwd', cwd=rel)
            self.assertEqual(last['exit_code'], 0, rel)
            self.assertEqual(ck.data().decode().strip(), path, rel)
            self.assertEqual(last['cwd'], path, rel)
            self.assertTrue(os.path.isabs(last['cwd']))

    def test_default_cwd_is_reported_absolute(self):
        last, ck = self.run_cmd('pwd')
        self.assertEqual(last['cwd'], self.agentd.workdir)

    def test_relative_cwd_missing(self):
        r = self.create_raw(cmd='pwd', cwd='nope')
        err = self.assertError(r, 422, 'spawn_failed', 'cwd')
        self.assertIn(os.path.join(self.agentd.workdir, 'nope'), err['message'])


class LeftoverTest(AgentdTestCase):
    """An exited session's leftover background processes get SIGTERM, the
    grace, then SIGKILL: on DELETE and on TTL expiry."""

    # A leftover that holds the output (so the session exits by the 250 ms
    # cap) and cleans up for 0.3 s on SIGTERM.
    CLEAN = ("sh -c 'trap \"echo TERM >>left.log; sleep 0.3; "
             "echo CLEAN >>left.log; exit 0\" TERM; echo $$ >left.pid; "
             "while :; do sleep 0.05; done' & "
             "while [ ! -s left.pid ]; do sleep 0.01; done; echo started")
    # One that ignores SIGTERM.
    STUBBORN = ("sh -c 'trap \"\" TERM; echo $$ >left.pid; "
                "while :; do sleep 0.05; done' & "
                "while [ ! -s left.pid ]; do sleep 0.01; done; echo started")

    def leftover(self, cmd):
        w = self.create(cmd=cmd, yield_ms=20000)
        if w['state'] != 'exited':
            w = self.wait_state(w['id'], timeout=20)
        self.assertEqual(w['exit_code'], 0)
        pid = int(read_file(os.path.join(self.agentd.workdir, 'left.pid')))
        self.assertFalse(pid_gone(pid))
        return w, pid

    def test_delete_exited_gives_leftovers_the_grace(self):
        w, pid = self.leftover(self.CLEAN)
        self.expect(self.delete(w['id'], grace_ms=10000), 200)
        log = os.path.join(self.agentd.workdir, 'left.log')
        self.wait_until(lambda: 'CLEAN' in read_file(log), 15,
                        'the leftover cleaning up (log %r, state %s)'
                        % (read_file(log), pid_state(pid)))
        self.assertEqual(read_file(log), 'TERM\nCLEAN\n')
        self.wait_until(lambda: pid_gone(pid), 10, 'leftover %d gone' % pid)

    def metric_now(self, name):
        r = self.req('GET', '/metrics')
        self.expect(r, 200)
        for line in r.body.decode().splitlines():
            if line.startswith(name + ' '):
                return int(line.split()[1])
        self.fail('no %s in /metrics' % name)

    def test_leader_is_reaped_at_once_its_group_held_by_pins(self):
        # No leftover: the leader is reaped with its exit, nothing pinned.
        w = self.create(cmd='echo hi', yield_ms=20000)
        self.assertEqual(w['state'], 'exited')
        self.assertTrue(pid_gone(w['pid']))
        self.assertEqual(self.metric_now('agentd_session_groups_pinned'), 0)
        # A leftover in the group: the leader is reaped all the same (it
        # was kept a zombie until the group's SIGKILL); the leftover, a
        # live process of the session, holds its id through a pidfd.
        w, pid = self.leftover(self.STUBBORN)
        self.assertTrue(pid_gone(w['pid']),
                        'leader %d: %s' % (w['pid'], pid_state(w['pid'])))
        time.sleep(0.5)
        self.assertEqual(self.metric_now('agentd_session_leaders_unreaped'),
                         0)
        self.assertEqual(self.metric_now('agentd_session_groups_pinned'), 1)
        self.assertGreaterEqual(self.metric_now('agentd_session_pins'), 1)
        self.expect(self.delete(w['id'], grace_ms=200), 200)
        self.wait_until(lambda: pid_gone(pid), 15,
                        'leftover %d gone' % pid)
        self.wait_until(lambda: self.metric_now(
            'agentd_session_groups_pinned') == 0, 10, 'no group pinned')
        self.assertEqual(self.metric_now('agentd_session_pins'), 0)

    def test_leftover_whose_main_thread_exited_is_killed(self):
        # A zombie main thread, threads still running: /proc says 'Z' for
        # the process, yet it is alive and its group must get the SIGKILL.
        prog = ('import ctypes, os, threading, time\n'
                'threading.Thread(target=time.sleep, args=(60,)).start()\n'
                'open("left.pid", "w").write(str(os.getpid()))\n'
                'ctypes.CDLL(None).pthread_exit(None)\n')
        with open(os.path.join(self.agentd.workdir, 'left.py'), 'w') as f:
            f.write(prog)
        w, pid = self.leftover('python3 left.py & '
                               'while [ ! -s left.pid ]; do sleep 0.01; done; '
                               'echo started')
        self.wait_until(lambda: pid_state(pid) == 'Z', 10,
                        'main thread of %d exited' % pid)
        time.sleep(1.5)     # sweeps (backed off to 1 s) see it meanwhile
        self.assertFalse(pid_gone(pid))
        self.expect(self.delete(w['id'], grace_ms=200), 200)
        self.wait_until(lambda: pid_gone(pid), 15,
                        'leftover %d, its threads running, killed' % pid)

    def test_delete_exited_sigkills_after_the_grace(self):
        w, pid = self.leftover(self.STUBBORN)
        # SIGTERM is ignored and SIGKILL waits for the grace; the answer
        # waits for the leftover's end and the leader's reaping.
        done = Background(self.delete, w['id'], grace_ms=3000)
        time.sleep(1.0)
        self.assertIsNone(done.done_at)
        self.assertFalse(pid_gone(pid))
        self.assertNotIn(pid_state(pid), ('Z', 'X'))
        self.expect(done.join_result(), 200)
        self.assertTrue(pid_gone(w['pid']))
        self.wait_until(lambda: pid_gone(pid), 15,
                        'leftover %d killed after the grace' % pid)

    def delete_running_stubborn(self, cmd):
        # A running session whose job ignores SIGTERM: the leader ends on
        # the SIGTERM, the job at the grace's SIGKILL.  The answer comes
        # then, not at the wait's cap (6.25 s): the exit of the leader
        # used to cancel that SIGKILL.
        w = self.create(cmd=cmd + ' & while [ ! -s left.pid ]; do '
                        'sleep 0.01; done; exec sleep 1000')
        self.wait_until(lambda: read_file(os.path.join(
            self.agentd.workdir, 'left.pid')).strip(), 20, 'left.pid')
        pid = int(read_file(os.path.join(self.agentd.workdir, 'left.pid')))
        t0 = time.monotonic()
        self.expect(self.delete(w['id'], grace_ms=1000), 200)
        took = time.monotonic() - t0
        # 1.03-1.06 s here; the bound is for a loaded machine (6.25 s before).
        self.assertLess(took, 2.5 * SLOW, 'DELETE took %.2f s' % took)
        self.assertTrue(pid_gone(w['pid']), 'leader %d left (state %s)'
                        % (w['pid'], pid_state(w['pid'])))
        return pid, took

    def test_delete_running_sigkills_a_job_ignoring_term(self):
        pid, took = self.delete_running_stubborn(
            "sh -c 'trap \"\" TERM; echo $$ >left.pid; "
            "while :; do sleep 1; done' </dev/null >/dev/null 2>&1")
        self.assertGreater(took, 0.9)
        self.assertIn(pid_state(pid), (None, 'Z', 'X'))

    def test_delete_running_with_a_setsid_daemon_ignoring_term(self):
        # With process_group, the daemon left the session: beyond agentd's
        # signals (API.md), and the answer comes with the leader's end.
        pid, took = self.delete_running_stubborn(
            "setsid sh -c 'trap \"\" TERM; echo $$ >left.pid; "
            "while :; do sleep 1; done' </dev/null >/dev/null 2>&1")
        self.assertNotIn(pid_state(pid), (None, 'Z', 'X'))
        os.kill(pid, signal.SIGKILL)

    def test_ttl_expiry_gives_leftovers_the_grace(self):
        self.start_agentd(['--exited-ttl', '1s'])
        w, pid = self.leftover(self.CLEAN)
        log = os.path.join(self.agentd.workdir, 'left.log')
        self.wait_until(lambda: 'CLEAN' in read_file(log), 20,
                        'the leftover cleaning up after the TTL (log %r)'
                        % read_file(log))
        self.assertEqual(read_file(log), 'TERM\nCLEAN\n')
        self.wait_until(lambda: pid_gone(pid), 10, 'leftover %d gone' % pid)
        self.assertEqual(self.get_raw(w['id']).status, 404)

    # A job-control shell on a tty runs each job in a group of its own; this
    # one ignores SIGHUP and SIGTERM, as `nohup job &` and a trap would.
    JOB = ("set -m; sh -c 'trap \"\" HUP TERM; echo $$ >left.pid; "
           "while :; do sleep 0.05; done' & "
           "while [ ! -s left.pid ]; do sleep 0.01; done; echo started")

    def job(self, cmd, **fields):
        w = self.create(cmd=cmd, tty=True, **fields)
        self.read_until(w['id'], b'started', tty=True)
        pid = int(read_file(os.path.join(self.agentd.workdir, 'left.pid')))
        with open('/proc/%d/stat' % pid) as f:
            stat = f.read()
        pgrp, sid = stat[stat.rindex(')') + 2:].split()[2:4]
        self.assertEqual(int(sid), w['pid'])
        self.assertNotEqual(int(pgrp), w['pid'])
        return w, pid

    def test_delete_running_kills_jobs_of_other_groups(self):
        w, pid = self.job(self.JOB + '; sleep 600')
        self.expect(self.delete(w['id'], grace_ms=200), 200)
        self.wait_until(lambda: pid_gone(pid), 15,
                        'job %d of its own group killed (state %s)'
                        % (pid, pid_state(pid)))

    def test_delete_exited_kills_jobs_of_other_groups(self):
        w, pid = self.job(self.JOB)
        w = self.wait_state(w['id'], timeout=20)
        self.assertFalse(pid_gone(pid))
        self.expect(self.delete(w['id'], grace_ms=200), 200)
        self.wait_until(lambda: pid_gone(pid), 15,
                        'job %d of its own group killed (state %s)'
                        % (pid, pid_state(pid)))

    def test_timeout_kills_jobs_of_other_groups(self):
        w, pid = self.job(self.JOB + '; sleep 600', timeout_ms=5000)
        w = self.wait_state(w['id'], timeout=20)
        self.assertTrue(w['timed_out'])
        self.wait_until(lambda: pid_gone(pid), 15,
                        'job %d of its own group killed (state %s)'
                        % (pid, pid_state(pid)))


class ReapTest(AgentdTestCase):
    """A leader is reaped as it ends (issue 42 item 1): once its session
    says exited, its pid names no process, not even a zombie."""

    def test_killed_or_exited_leader_is_gone_at_once(self):
        for i in range(100):
            w = self.create(cmd='sleep 100')
            self.expect(self.signal_raw(w['id'], 'SIGKILL'), 200)
            self.wait_state(w['id'], timeout=10)
            self.assertTrue(pid_gone(w['pid']), 'round %d: leader %d is %s'
                            % (i, w['pid'], pid_state(w['pid'])))
            self.expect(self.delete(w['id']), 200)
        for i in range(20):
            w = self.create(cmd='exit 3', yield_ms=10000)
            self.assertEqual(w['state'], 'exited')
            self.assertTrue(pid_gone(w['pid']), 'round %d: leader %d is %s'
                            % (i, w['pid'], pid_state(w['pid'])))
            self.expect(self.delete(w['id']), 200)


class ForegroundSignalTest(AgentdTestCase):

    def signal_target(self, sid, sig, target):
        return self.req('POST', '/v1/sessions/%s/signal' % sid,
                        {'signal': sig, 'target': target})

    def bash(self):
        if shutil.which('bash') is None:
            self.skipTest('no bash')
        w = self.create(argv=['bash', '--norc', '--noprofile', '-i'], tty=True,
                        env={'PS1': '$ '})
        return w

    def test_interrupt_reaches_the_foreground_job_under_bash(self):
        w = self.bash()
        # The job itself says when it runs (bash has made it the
        # foreground group before exec).
        self.stdin(w['id'], text="sh -c 'echo in-$((2+3)); exec sleep 1000'\n")
        ck = self.read_until(w['id'], b'in-5', tty=True)
        r = self.signal_target(w['id'], 'SIGINT', 'foreground')
        self.expect(r, 200)
        self.assertEqual(r.json['state'], 'running')
        self.stdin(w['id'], text='echo alive-$((6*7))\n')
        self.read_until(w['id'], b'alive-42', ck=ck, timeout=20, tty=True)
        self.assertEqual(self.get(w['id'])['state'], 'running')
        self.expect(self.delete(w['id'], grace_ms=500), 200)

    def test_other_signals_reach_the_foreground_job(self):
        w = self.bash()
        self.stdin(w['id'], text="sh -c 'trap \"echo fg-$((1+1)); exit 0\" "
                   "TERM; echo in-$((2+3)); while :; do sleep 0.05; done'\n")
        ck = self.read_until(w['id'], b'in-5', tty=True)
        self.expect(self.signal_target(w['id'], 'SIGTERM', 'foreground'), 200)
        ck = self.read_until(w['id'], b'fg-2', ck=ck, timeout=20, tty=True)
        self.stdin(w['id'], text='echo alive-$((6*7))\n')
        self.read_until(w['id'], b'alive-42', ck=ck, timeout=20, tty=True)
        self.expect(self.delete(w['id'], grace_ms=500), 200)

    def test_kill_reaches_the_foreground_job_whose_leader_ended(self):
        # The pipeline's group is named after its first command, which
        # ends; the second ignores SIGINT and SIGTERM and runs on in the
        # foreground: SIGKILL must still reach it (it was 409 no_foreground).
        w = self.bash()
        self.stdin(w['id'], text="true | sh -c 'trap \"\" INT TERM; "
                   "echo in-$((2+3)); exec sleep 1000'\n")
        ck = self.read_until(w['id'], b'in-5', tty=True)
        r = self.signal_target(w['id'], 'SIGKILL', 'foreground')
        self.expect(r, 200)
        self.stdin(w['id'], text='echo alive-$((6*7))\n')
        self.read_until(w['id'], b'alive-42', ck=ck, timeout=20, tty=True)
        self.expect(self.delete(w['id'], grace_ms=500), 200)

    def test_group_stays_the_default(self):
        # A plain sh -c on a tty: the group is the shell's, as before.
        w = self.create(cmd="trap 'echo got INT; exit 5' INT; echo ready; "
                        "while :; do sleep 0.05; done", tty=True)
        ck = self.read_until(w['id'], b'ready', tty=True)
        self.expect(self.signal_target(w['id'], 'SIGINT', 'group'), 200)
        ck = self.read_all(w['id'], checker=ck, timeout=20)
        self.assertEqual(ck.last['exit_code'], 5)

    def test_foreground_errors(self):
        w = self.create(cmd='sleep 30')
        self.assertError(self.signal_target(w['id'], 'SIGINT', 'foreground'),
                         409, 'not_a_tty')
        self.assertError(self.signal_target(w['id'], 'SIGINT', 'job'),
                         400, 'invalid_request', 'target')
        self.assertError(self.signal_target(w['id'], 'SIGINT', 7),
                         400, 'invalid_request', 'target')
        self.assertEqual(self.get(w['id'])['state'], 'running')
        t = self.create(cmd='true', tty=True, yield_ms=10000)
        self.assertError(self.signal_target(t['id'], 'SIGINT', 'foreground'),
                         409, 'session_exited')


class GraceBoundTest(AgentdTestCase):

    def test_grace_ms_bounded(self):
        w = self.create(cmd='sleep 30')
        for g in ('9223372036854775807', '18446744073709551615',
                  '99999999999999999999999', '3600001'):
            r = self.req('DELETE', '/v1/sessions/%s?grace_ms=%s' % (w['id'], g))
            self.assertError(r, 400, 'invalid_request', 'grace_ms')
        self.assertEqual(self.get(w['id'])['state'], 'running')
        r = self.req('DELETE', '/v1/sessions/%s?grace_ms=3600000' % w['id'])
        self.expect(r, 200)
        self.assertEqual(r.json['signal'], 'SIGTERM')


if __name__ == '__main__':
    import unittest
    unittest.main()
