"""Sessions: create, exit codes, argv/cmd/shell/env/cwd/user, ids, list, healthz."""

import os
import time
import unittest

from harness import (AgentdTestCase, ID_RE, WindowChecker, short, unb64)


class CreateTest(AgentdTestCase):

    def test_short_command_one_round_trip(self):
        cmd = 'echo hi; exit 3'
        r = self.create_raw(cmd=cmd, yield_ms=5000)
        self.expect(r, 201)
        w = r.json
        self.assertEqual(r.header('Location'), '/v1/sessions/' + w['id'])
        self.assertSession(w)
        self.assertEqual(w['state'], 'exited')
        self.assertEqual(w['exit_code'], 3)
        self.assertIsNone(w['signal'])
        self.assertFalse(w['timed_out'])
        self.assertFalse(w['tty'])
        self.assertEqual(w['argv'], ['/bin/sh', '-c', cmd])
        self.assertEqual(w['bytes_out'], 3)
        ck = WindowChecker(self, tty=False)
        ck.feed(w)
        self.assertEqual(ck.streams(), {'stdout': b'hi\n'})
        self.assertEqual(w['cursor'], w['last_chunk'])
        self.assertTrue(w['eof'], 'all output in one answer should give eof: %s' % short(w))
        self.assertEqual(w['dropped_chunks'], 0)
        self.assertFalse(w['more'])

    def test_exit_zero(self):
        w = self.create(cmd='true', yield_ms=5000)
        self.assertEqual(w['state'], 'exited')
        self.assertEqual(w['exit_code'], 0)
        self.assertEqual(w['output'], [])
        self.assertEqual(w['last_chunk'], 0)
        self.assertEqual(w['bytes_out'], 0)

    def test_killed_by_signal(self):
        w = self.create(cmd='kill -9 $$', yield_ms=5000)
        self.assertEqual(w['state'], 'exited')
        self.assertEqual(w['exit_code'], 137)
        self.assertEqual(w['signal'], 'SIGKILL')
        self.assertFalse(w['timed_out'])

    def test_killed_by_sigterm(self):
        w = self.create(cmd='kill -TERM $$', yield_ms=5000)
        self.assertEqual(w['state'], 'exited')
        self.assertEqual(w['exit_code'], 143)
        self.assertEqual(w['signal'], 'SIGTERM')

    def test_killed_by_sigsegv_in_tty(self):
        w = self.create(cmd='kill -SEGV $$', tty=True, yield_ms=5000)
        self.assertEqual(w['state'], 'exited')
        self.assertEqual(w['exit_code'], 128 + 11)
        self.assertEqual(w['signal'], 'SIGSEGV')

    def test_argv_exec_with_path_search(self):
        w = self.create(argv=['printf', '%s|', 'a b', 'c', '$HOME'], yield_ms=5000)
        ck = self.read_all(w['id'], start=w, tty=False)
        self.assertEqual(ck.last['exit_code'], 0)
        self.assertEqual(ck.data(), b'a b|c|$HOME|')
        self.assertEqual(w['argv'], ['printf', '%s|', 'a b', 'c', '$HOME'])

    @unittest.skipUnless(os.path.exists('/bin/bash'), 'no /bin/bash')
    def test_shell(self):
        cmd = '[[ 1 == 1 ]] && echo "$BASH_VERSION" | cut -c1'
        last, ck = self.run_cmd(cmd, shell='/bin/bash')
        self.assertEqual(last['exit_code'], 0)
        self.assertRegex(ck.data('stdout'), rb'^\d\n$')
        self.assertEqual(last['argv'], ['/bin/bash', '-c', cmd])

    def test_env_added_over_base(self):
        last, ck = self.run_cmd('echo "$FOO|$BAR"; test -n "$PATH" && echo path',
                                env={'FOO': 'bar baz', 'BAR': ''})
        self.assertEqual(ck.data(), b'bar baz|\npath\n')

    def test_cwd_default_is_workdir(self):
        last, ck = self.run_cmd('pwd -P')
        self.assertEqual(ck.data().decode().strip(), os.path.realpath(self.agentd.workdir))
        self.assertEqual(os.path.realpath(last['cwd']), os.path.realpath(self.agentd.workdir))

    def test_cwd(self):
        last, ck = self.run_cmd('pwd -P', cwd='/usr')
        self.assertEqual(ck.data(), b'/usr\n')
        self.assertEqual(last['cwd'], '/usr')

    def test_user(self):
        if os.getuid() != 0:
            last, ck = self.run_cmd('id -u', user=str(os.getuid()))
            self.assertEqual(ck.data(), b'%d\n' % os.getuid())
            return
        last, ck = self.run_cmd('id -u; id -g; id -G', user='nobody', cwd='/')
        lines = ck.data().decode().split('\n')
        self.assertEqual(lines[0], '65534', ck.data())
        self.assertEqual(lines[1], '65534', ck.data())
        self.assertNotIn('0', lines[2].split(), 'supplementary group 0 kept: %r' % lines)
        self.assertEqual(last['user'], 'nobody')

    def test_user_numeric(self):
        if os.getuid() != 0:
            self.skipTest('needs root')
        last, ck = self.run_cmd('id -u', user='65534', cwd='/')
        self.assertEqual(ck.data(), b'65534\n')

    def test_stdin_false_gives_dev_null(self):
        last, ck = self.run_cmd('wc -c; readlink /proc/self/fd/0 || true', stdin=False)
        out = ck.data().decode()
        self.assertEqual(out.split('\n')[0].strip(), '0')
        self.assertIn('/dev/null', out)

    def test_new_session_and_group(self):
        # fields 5 and 6 of /proc/PID/stat: process group and session
        for tty in (False, True):
            last, ck = self.run_cmd(
                'set -- $(cut -d" " -f5,6 /proc/$$/stat); echo "$$ $1 $2"', tty=tty)
            pid, pgrp, sid = ck.data().split()
            self.assertEqual(pid, pgrp, 'tty=%s: not a group leader' % tty)
            self.assertEqual(pid, sid, 'tty=%s: not a session leader' % tty)
            self.assertEqual(int(pid), last['pid'])

    def test_closes_other_fds(self):
        # the shell lists its own fds by a glob: no child process involved
        last, ck = self.run_cmd('for f in /proc/$$/fd/*; do echo "${f##*/}"; done')
        # one fd above 2 is the directory the glob itself reads
        fds = ck.data().split()
        extra = sorted(int(x) for x in fds if int(x) > 2)
        self.assertLessEqual(len(extra), 1, 'leaked fds into the session: %r' % fds)

    def test_signal_dispositions_reset(self):
        # blocked and ignored signal masks of the child are empty
        last, ck = self.run_cmd(
            "grep -E '^Sig(Blk|Ign)' /proc/self/status")
        lines = dict(l.split(':') for l in ck.data().decode().split('\n') if l)
        self.assertEqual(int(lines['SigBlk'].strip(), 16), 0, lines)
        self.assertEqual(int(lines['SigIgn'].strip(), 16), 0, lines)


class IdTest(AgentdTestCase):

    def test_generated_id(self):
        r = self.create_raw(cmd='true', yield_ms=5000)
        self.expect(r, 201)
        sid = r.json['id']
        self.assertRegex(sid, ID_RE)
        self.assertEqual(r.header('Location'), '/v1/sessions/' + sid)
        r2 = self.create_raw(cmd='true')
        self.assertNotEqual(r2.json['id'], sid)
        self.assertEqual(self.get(sid)['id'], sid)

    def test_client_id_and_session_exists(self):
        w = self.create(id='job-1.a_B', cmd='sleep 30')
        self.assertEqual(w['id'], 'job-1.a_B')
        r = self.create_raw(id='job-1.a_B', cmd='echo other', yield_ms=2000)
        err = self.assertError(r, 409, 'session_exists')
        body = r.json
        self.assertIn('session', body, 'session_exists without "session": %r' % body)
        self.assertEqual(body['session']['id'], 'job-1.a_B')
        self.assertEqual(body['session']['pid'], w['pid'])
        self.assertEqual(body['session']['argv'], ['/bin/sh', '-c', 'sleep 30'])
        # nothing of the second request ran
        self.assertEqual(len([s for s in self.list_sessions() if s['id'] == 'job-1.a_B']), 1)
        self.expect(self.delete('job-1.a_B'), 200)

    def test_exited_id_still_taken(self):
        self.create(id='done', cmd='true', yield_ms=5000)
        r = self.create_raw(id='done', cmd='true')
        self.assertError(r, 409, 'session_exists')
        self.assertEqual(r.json['session']['state'], 'exited')

    def test_id_64_chars(self):
        sid = 'a' * 64
        w = self.create(id=sid, cmd='true', yield_ms=5000)
        self.assertEqual(w['id'], sid)

    def test_id_percent_encoded_in_the_path(self):
        # RFC 3986 2.3: "%2E" in a path is ".", and a client that escapes
        # every byte (or only some) names the same session.
        self.create(id='job.1-a', cmd='cat')
        for seg in ('job%2E1-a', 'job%2e1%2Da', '%6a%6f%62%2e%31%2d%61'):
            with self.subTest(seg=seg):
                r = self.req('GET', '/v1/sessions/' + seg)
                self.expect(r, 200, seg)
                self.assertEqual(r.json['id'], 'job.1-a')
        r = self.req('POST', '/v1/sessions/job%2E1-a/stdin',
                     {'text': 'hi\n', 'wait_ms': 5000})
        self.expect(r, 200)
        self.assertEqual(r.json['written'], 3)
        # What decodes to no id stays unknown: 64 chars at most, no NUL or /.
        self.create(id='b' * 64, cmd='true', yield_ms=5000)
        self.expect(self.req('GET', '/v1/sessions/' + '%62' * 64), 200)
        for seg in ('%62' * 65, 'job%001-a', 'job%2F1-a', 'job%2'):
            self.assertError(self.req('GET', '/v1/sessions/' + seg), 404,
                             'not_found')
        self.expect(self.delete('job.1-a'), 200)


class TimingTest(AgentdTestCase):

    def test_yield_ms_answers_early_when_process_ends(self):
        t0 = time.monotonic()
        w = self.create(cmd='sleep 0.3; echo x', yield_ms=30000)
        took = time.monotonic() - t0
        self.assertEqual(w['state'], 'exited')
        self.assertLess(took, 10.0)
        self.assertEqual(b''.join(unb64(c['data']) for c in w['output']), b'x\n')

    def test_yield_ms_expires_on_a_running_process(self):
        t0 = time.monotonic()
        w = self.create(cmd='echo started; sleep 30', yield_ms=400)
        took = time.monotonic() - t0
        self.assertEqual(w['state'], 'running')
        self.assertGreaterEqual(took, 0.35)
        self.assertLess(took, 5.0)
        self.expect(self.delete(w['id']), 200)

    def test_yield_ms_larger_is_clamped(self):
        w = self.create(cmd='exit 4', yield_ms=600000)
        self.assertEqual(w['state'], 'exited')
        self.assertEqual(w['exit_code'], 4)

    def test_wait_ms_answers_on_first_output(self):
        t0 = time.monotonic()
        w = self.create(cmd='echo first; sleep 30', wait_ms=20000)
        took = time.monotonic() - t0
        self.assertLess(took, 8.0, 'wait_ms did not answer on the first output')
        self.assertEqual(w['state'], 'running')
        self.assertEqual(b''.join(unb64(c['data']) for c in w['output']), b'first\n')
        self.assertGreaterEqual(w['cursor'], 1)
        self.expect(self.delete(w['id']), 200)

    def test_wait_ms_answer_carries_the_exit_of_a_silent_command(self):
        # The output closes a moment before the exit status comes in:
        # wait_ms's answer "when the process ends" waits that moment (100
        # ms at most) and carries the exit, not "running" with no code.
        # Any of five: the status has 100 ms to come on a loaded machine.
        got = []
        for _ in range(5):
            w = self.create(cmd='exit 3', wait_ms=20000)
            self.assertEqual(w['output'], [])
            got.append((w['state'], w['exit_code'], w['eof']))
        self.assertIn(('exited', 3, True), got)
        for g in got:
            self.assertIn(g, (('exited', 3, True), ('running', None, False)))

    def test_wait_ms_answers_when_process_ends_silently(self):
        t0 = time.monotonic()
        w = self.create(cmd='sleep 0.3', wait_ms=20000)
        took = time.monotonic() - t0
        self.assertLess(took, 8.0)
        self.assertEqual(w['output'], [])
        if w['state'] != 'exited':
            w = self.wait_state(w['id'], 'exited', timeout=5)
        self.assertEqual(w['exit_code'], 0)

    def test_wait_ms_without_output_waits(self):
        t0 = time.monotonic()
        w = self.create(cmd='sleep 30', wait_ms=400)
        took = time.monotonic() - t0
        self.assertGreaterEqual(took, 0.35)
        self.assertLess(took, 5.0)
        self.assertEqual(w['output'], [])
        self.assertEqual(w['state'], 'running')
        self.expect(self.delete(w['id']), 200)


class ListAndHealthTest(AgentdTestCase):

    def test_session_list(self):
        self.assertEqual(self.list_sessions(), [])
        a = self.create(id='a', cmd='sleep 30')
        b = self.create(id='b', cmd='exit 2', yield_ms=5000)
        ss = {s['id']: s for s in self.list_sessions()}
        self.assertEqual(set(ss), {'a', 'b'})
        for s in ss.values():
            self.assertSession(s)
        self.assertEqual(ss['a']['state'], 'running')
        self.assertEqual(ss['a']['pid'], a['pid'])
        self.assertEqual(ss['b']['state'], 'exited')
        self.assertEqual(ss['b']['exit_code'], 2)
        self.expect(self.delete('a'), 200)
        self.assertEqual({s['id'] for s in self.list_sessions()}, {'b'})

    def test_healthz(self):
        r = self.req('GET', '/healthz', auth=False)
        self.expect(r, 200)
        self.assertIn('application/json', r.header('Content-Type') or '')
        h = r.json
        self.assertEqual(h['status'], 'ok')
        self.assertIsInstance(h['version'], str)
        self.assertTrue(h['version'])
        self.assertEqual(h['sessions'], 0)
        self.assertIsInstance(h['uptime_ms'], int)
        self.assertGreaterEqual(h['uptime_ms'], 0)
        self.assertEqual(h['pid'], self.agentd.proc.pid)
        w = self.create(cmd='sleep 30')
        self.create(cmd='true', yield_ms=5000)          # exited: not counted
        h2 = self.healthz()
        self.assertEqual(h2['sessions'], 1)
        self.assertGreaterEqual(h2['uptime_ms'], h['uptime_ms'])
        self.expect(self.delete(w['id']), 200)
        self.assertEqual(self.healthz()['sessions'], 0)

    def test_version_flag(self):
        import subprocess
        p = subprocess.run([self.agentd.binary, '--version'], capture_output=True,
                           timeout=10)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(self.healthz()['version'].encode(), p.stdout + p.stderr)

    def test_help_flag(self):
        import subprocess
        p = subprocess.run([self.agentd.binary, '--help'], capture_output=True, timeout=10)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(b'--listen', p.stdout + p.stderr)

    def test_keep_alive(self):
        c = self.agentd.tcp_client()
        for i in range(20):
            self.expect(self.req('GET', '/v1/sessions', client=c), 200)
            self.expect(self.req('GET', '/healthz', client=c), 200)
        self.create(client=c, cmd='true', yield_ms=2000)
        self.assertEqual(c.connects, 1, 'keep-alive: %d connections for 41 requests'
                         % c.connects)
        self.assertEqual(c.reconnects, 0)

    def test_unix_socket_serves_the_api(self):
        u = self.agentd.unix_client()
        st = os.stat(self.agentd.socket_path)
        self.assertEqual(st.st_mode & 0o777, 0o600, 'socket mode %o' % st.st_mode)
        w = self.create(client=u, cmd='echo unix', yield_ms=5000)
        self.assertEqual(w['state'], 'exited')
        self.assertEqual(b''.join(unb64(c['data']) for c in w['output']), b'unix\n')
        self.assertEqual([s['id'] for s in self.list_sessions(client=u)], [w['id']])


class LoadTest(AgentdTestCase):

    def test_output_flood_does_not_starve_the_api(self):
        w = self.create(cmd='cat /dev/zero', ring_bytes=1 << 20)
        try:
            self.wait_until(lambda: self.get(w['id'])['bytes_out'] > (1 << 20), 10,
                            'the flood started')
            worst = 0.0
            t0 = time.monotonic()
            n = 0
            while time.monotonic() - t0 < 2.0 or n < 20:
                r = self.req('GET', '/healthz', auth=False)
                self.expect(r, 200)
                worst = max(worst, r.elapsed)
                g = self.get(w['id'], max_bytes=4096)
                self.assertEqual(g['state'], 'running')
                n += 1
            # Starved would be never (the flood is endless); how fast: bench/.
            self.assertLess(worst, 10.0, 'healthz took %.2fs during an output flood' % worst)
        finally:
            self.expect(self.delete(w['id'], grace_ms=500), 200)

    def test_many_sessions_at_once(self):
        ids = []
        for i in range(60):
            w = self.create(cmd='echo "session %d"; echo "err %d" >&2' % (i, i),
                            tty=(i % 3 == 0))
            ids.append((i, w['id'], i % 3 == 0))
        for i, sid, tty in ids:
            ck = self.read_all(sid, tty=tty, timeout=30)
            if tty:
                self.assertEqual(ck.data(), b'session %d\r\nerr %d\r\n' % (i, i))
            else:
                self.assertEqual(ck.streams(), {'stdout': b'session %d\n' % i,
                                                'stderr': b'err %d\n' % i})
            self.assertEqual(ck.last['exit_code'], 0)
        self.assertEqual(len(self.list_sessions()), 60)
        self.assertEqual(self.healthz()['sessions'], 0)


class ExitedAfterOutputTest(AgentdTestCase):
    """`exited` is reported only once all output written before exit is captured."""

    def test_exited_means_all_output_captured(self):
        n = 50000
        for i in range(15):
            w = self.create(cmd='yes abcdefghi | head -c %d; exit 2' % n, yield_ms=10000)
            sid = w['id']
            if w['state'] == 'exited':
                self.assertEqual(w['bytes_out'], n, 'run %d: exited with bytes_out %d'
                                 % (i, w['bytes_out']))
            ck = WindowChecker(self, tty=False)
            ck.feed(w)
            while not ck.eof:
                g = self.get(sid, cursor=ck.cursor, wait_ms=1000)
                if g['state'] == 'exited':
                    self.assertEqual(g['bytes_out'], n)
                    self.assertEqual(g['exit_code'], 2)
                ck.feed(g)
            self.assertEqual(len(ck.data()), n)
            self.expect(self.delete(sid), 200)


if __name__ == '__main__':
    unittest.main()


class LazySpawnerTest(AgentdTestCase):
    """Issue 41 item 4: agentd starts with no spawn thread; the first create
    makes one, and a create that finds every thread busy makes one more, up
    to --spawn-threads, so that creates still run at once."""

    agentd_args = ('--spawn-threads', '3', '--spawn-timeout', '4000')

    def tasks(self):
        return len(os.listdir('/proc/%d/task' % self.agentd.proc.pid))

    def test_no_thread_before_the_first_create(self):
        self.assertEqual(self.metric('agentd_spawn_threads'), 0)
        self.assertEqual(self.tasks(), 1)
        s = self.create(cmd='echo first', yield_ms=5000)
        self.assertEqual((s['exit_code'], unb64(s['output'][0]['data'])),
                         (0, b'first\n'))
        # One create at a time: the one thread does them all.
        for _ in range(3):
            self.assertEqual(self.create(argv=['true'], yield_ms=5000)
                             ['exit_code'], 0)
        self.assertEqual(self.metric('agentd_spawn_threads'), 1)
        self.assertEqual(self.tasks(), 2)

    def test_busy_threads_make_more_up_to_the_pool(self):
        import sys
        import tempfile
        from harness import Background
        sys.path.insert(0, os.path.join(os.path.dirname(
            os.path.abspath(__file__)), '..', 'files'))
        import slowfs
        if not slowfs.available():
            raise unittest.SkipTest('needs root and /dev/fuse')
        if os.environ.get('AGENTD_MEMCHECK_REAL'):
            # valgrind runs one thread at a time and carries out the
            # spawn's clone itself: a child stalled in a FUSE chdir holds
            # the whole process, the loop too.
            raise unittest.SkipTest('under valgrind (tests/hostile/'
                                    'memcheck.sh)')
        mnt = tempfile.mkdtemp(prefix='agentd-lazy-')
        fs = slowfs.SlowFS(mnt, stall=True)
        try:
            # Two spawns stuck in chdir hold two threads ...
            stuck = [Background(self.create_raw,
                                client=self.agentd.tcp_client(),
                                argv=['true'], cwd=os.path.join(mnt, 'sub'))
                     for _ in range(2)]
            self.wait_until(lambda: self.metric('agentd_spawn_threads') == 2,
                            what='two spawn threads')
            # ... a third create makes the third thread, and is answered
            # while they are stuck (without it, it would wait for their
            # --spawn-timeout of 4 s).
            t0 = time.monotonic()
            s = self.create(argv=['echo', 'third'], yield_ms=3000)
            self.assertEqual(s['exit_code'], 0)
            self.assertLess(time.monotonic() - t0, 3.0)
            self.assertTrue(all(b.is_alive() for b in stuck))
            self.assertEqual(self.metric('agentd_spawn_threads'), 3)
            for b in stuck:
                self.assertError(b.join_result(), 504, 'spawn_timeout')
            # The pool is full: no fourth thread, the threads are back.
            self.assertEqual(self.create(argv=['true'], yield_ms=3000)
                             ['exit_code'], 0)
            self.assertEqual(self.metric('agentd_spawn_threads'), 3)
        finally:
            fs.close()
            os.rmdir(mnt)
