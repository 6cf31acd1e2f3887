"""agentctl ls, send, kill, rm, tail, inspect."""

import json
import os
import subprocess
import time

from ctlharness import CtlTestCase, binary, wait_until, RUN_TIMEOUT


class TestCommands(CtlTestCase):

    def test_ls(self):
        run_id, done_id, tty_id = self.uid('run'), self.uid('done'), self.uid('tty')
        self.agentd.create(id=run_id, argv=['sleep', '60'])
        self.agentd.create(id=done_id, cmd='printf 12345; exit 3')
        self.agentd.create(id=tty_id, tty=True, argv=['sh', '-c', 'sleep 60'])
        self.agentd.wait_exited(done_id)
        wait_until(lambda: self.agentd.session(done_id)['bytes_out'] == 5,
                   what='output captured')
        p = self.ctl('ls')
        self.assertRc(p, 0)
        lines = p.stdout.decode().splitlines()
        self.assertEqual(lines[0].split(),
                         ['ID', 'PID', 'STATE', 'EXIT', 'TTY', 'AGE', 'OUT',
                          'COMMAND'])
        rows = {l.split()[0]: l.split() for l in lines[1:]}
        for sid in (run_id, done_id, tty_id):
            self.assertIn(sid, rows)
        r = rows[run_id]
        self.assertEqual(r[1], str(self.agentd.session(run_id)['pid']))
        self.assertEqual(r[2:5], ['running', '-', 'no'])
        self.assertRegex(r[5], r'^\d+[smhd]')
        self.assertEqual(r[6], '0')
        self.assertEqual(r[7:], ['sleep', '60'])
        r = rows[done_id]
        self.assertEqual(r[2:5], ['exited', '3', 'no'])
        self.assertEqual(r[6], '5')
        self.assertEqual(' '.join(r[7:]), "/bin/sh -c 'printf 12345; exit 3'")
        r = rows[tty_id]
        self.assertEqual(r[2:5], ['running', '-', 'yes'])

        p = self.ctl('ls', '-q')
        self.assertRc(p, 0)
        ids = p.stdout.decode().split()
        for sid in (run_id, done_id, tty_id):
            self.assertIn(sid, ids)
        p = self.ctl('ls', '--json')
        self.assertRc(p, 0)
        got = {s['id'] for s in json.loads(p.stdout)['sessions']}
        self.assertTrue({run_id, done_id, tty_id} <= got)
        for sid in (run_id, tty_id):
            self.assertRc(self.ctl('rm', '--grace', '0', sid), 0)

    def test_send(self):
        sid = self.uid('send')
        self.agentd.create(id=sid, argv=['sh', '-c',
                                         'read a; echo "got:$a"; read b; '
                                         'echo "got2:$b"; cat; echo END'])
        p = self.ctl('send', sid, 'hello', 'world')
        self.assertRc(p, 0)
        wait_until(lambda: b'got:hello world\n' in self.agentd.output(sid),
                   what='the first line')
        self.assertRc(self.ctl('send', '-n', sid, 'par'), 0)
        self.assertRc(self.ctl('send', sid, 'tial\n'), 0)
        wait_until(lambda: b'got2:partial\n' in self.agentd.output(sid),
                   what='the second line')
        self.assertRc(self.ctl('send', '-e', '--eof', sid, 'a\\tb\\x41'), 0)
        s = self.agentd.wait_exited(sid)
        self.assertEqual(s['exit_code'], 0)
        self.assertTrue(self.agentd.output(sid).endswith(b'a\tbA\nEND\n'))
        p = self.ctl('send', sid, 'late')
        self.assertRc(p, 1)
        self.assertIn(b'exited', p.stderr)

    def test_send_tty_ctrl_c(self):
        sid = self.uid('sendc')
        self.agentd.create(id=sid, tty=True, argv=['sh', '-c',
                                                   'echo ready; sleep 60'])
        wait_until(lambda: b'ready' in self.agentd.output(sid), what='ready')
        self.assertRc(self.ctl('send', '-n', '-e', sid, '\\x03'), 0)
        s = self.agentd.wait_exited(sid)
        self.assertEqual(s['exit_code'], 130)

    def test_kill(self):
        for sig, code in ((None, 143), ('KILL', 137), ('9', 137),
                          ('SIGINT', 130), ('-HUP', 129)):
            with self.subTest(sig=sig):
                sid = self.uid('kill')
                self.agentd.create(id=sid, argv=['sleep', '60'])
                args = ['kill', sid] + ([sig] if sig else [])
                self.assertRc(self.ctl(*args), 0)
                self.assertEqual(self.agentd.wait_exited(sid)['exit_code'],
                                 code)
        p = self.ctl('kill', sid)
        self.assertRc(p, 1)
        self.assertIn(b'exited', p.stderr)
        # kill(1)'s spelling: the signal first.
        for sig, code in (('-9', 137), ('-INT', 130)):
            sid = self.uid('kill')
            self.agentd.create(id=sid, argv=['sleep', '60'])
            self.assertRc(self.ctl('kill', sig, sid), 0)
            self.assertEqual(self.agentd.wait_exited(sid)['exit_code'], code)
        sid = self.uid('kill')
        self.agentd.create(id=sid, argv=['sleep', '60'])
        p = self.ctl('kill', sid, 'NOSUCHSIG')
        self.assertRc(p, 1)
        self.assertIn(b'agentctl: ', p.stderr)
        self.assertRc(self.ctl('rm', '--grace', '0', sid), 0)

    def test_kill_foreground(self):
        # An interactive shell runs each job in a group of its own and
        # ignores SIGINT: kill INT reaches the shell's group only, kill -f
        # INT the job in the foreground, as Ctrl-C would.
        sid = self.uid('killf')
        self.agentd.create(id=sid, tty=True, env={'PS1': '$ '},
                           argv=['bash', '--norc', '--noprofile', '-i'])
        wait_until(lambda: b'$ ' in self.agentd.output(sid), what='prompt')
        self.assertRc(self.ctl('send', sid, 'sleep 60'), 0)
        wait_until(lambda: self._sleeping(sid), what='the sleep')
        self.assertRc(self.ctl('kill', sid, 'INT'), 0)
        time.sleep(0.5)
        self.assertTrue(self._sleeping(sid))    # the shell's group only
        self.assertRc(self.ctl('kill', '-f', sid, 'INT'), 0)
        wait_until(lambda: not self._sleeping(sid), what='the job to end')
        self.assertRc(self.ctl('send', sid, 'echo after=$?'), 0)
        wait_until(lambda: b'after=130' in self.agentd.output(sid),
                   what='the status of the interrupted job')
        self.assertRc(self.ctl('send', sid, 'exit 7'), 0)
        self.assertEqual(self.agentd.wait_exited(sid)['exit_code'], 7)
        p = self.ctl('kill', '--foreground', self.agentd.create(
            argv=['sleep', '60'])['id'], 'INT')
        self.assertRc(p, 1)
        self.assertIn(b'tty', p.stderr)

    def _sleeping(self, sid):
        """Whether a 'sleep 60' runs in the session (by its leader's sid)."""
        leader = self.agentd.session(sid)['pid']
        for d in os.listdir('/proc'):
            if not d.isdigit():
                continue
            try:
                with open('/proc/%s/cmdline' % d, 'rb') as f:
                    cmd = f.read()
                if cmd == b'sleep\x0060\x00' and os.getsid(int(d)) == leader:
                    return True
            except (OSError, ProcessLookupError):
                pass
        return False

    def test_rm(self):
        a, b = self.uid('rma'), self.uid('rmb')
        self.agentd.create(id=a, argv=['sleep', '60'])
        self.agentd.create(id=b, cmd='exit 0')
        self.agentd.wait_exited(b)
        p = self.ctl('rm', a, b)
        self.assertRc(p, 0)
        self.assertIsNone(self.agentd.session(a))
        self.assertIsNone(self.agentd.session(b))
        p = self.ctl('ls', '-q')
        self.assertNotIn(a.encode(), p.stdout)
        p = self.ctl('rm', a)
        self.assertRc(p, 1)
        self.assertEqual(p.stderr, b"agentctl: no session '%s'\n" % a.encode())

    def test_tail_follows(self):
        sid = self.uid('tail')
        self.agentd.create(id=sid, argv=['sh', '-c',
                                         'echo a; read x; echo b; echo c >&2; '
                                         'read y; echo d; exit 9'])
        wait_until(lambda: self.agentd.output(sid) == b'a\n', what='a')
        proc = subprocess.Popen([binary('AGENTCTL'), 'tail', sid],
                                stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=self.agentd.ctl_env())
        try:
            self.assertEqual(proc.stdout.readline(), b'a\n')
            self.assertRc(self.ctl('send', sid, ''), 0)
            self.assertEqual(proc.stdout.readline(), b'b\n')
            self.assertEqual(proc.stderr.readline(), b'c\n')
            self.assertIsNone(proc.poll())      # still following
            self.assertRc(self.ctl('send', sid, ''), 0)
            self.assertEqual(proc.stdout.read(), b'd\n')
            self.assertEqual(proc.wait(RUN_TIMEOUT), 0)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        p = self.ctl('tail', '-n', '2', sid)
        self.assertRc(p, 0)
        self.assertEqual(p.stdout, b'd\n')
        self.assertEqual(p.stderr, b'c\n')
        p = self.ctl('tail', '-n', '1', sid)
        self.assertEqual((p.stdout, p.stderr), (b'd\n', b''))

    def test_tail_no_follow(self):
        sid = self.uid('tailnf')
        self.agentd.create(id=sid, argv=['sh', '-c',
                                         'for i in 1 2 3 4 5; do echo l$i; '
                                         'done; sleep 60'])
        wait_until(lambda: b'l5\n' in self.agentd.output(sid), what='l5')
        p = self.ctl('tail', '--no-follow', sid)
        self.assertRc(p, 0)
        self.assertEqual(p.stdout, b'l1\nl2\nl3\nl4\nl5\n')
        p = self.ctl('tail', '--no-follow', '-n', '2', sid)
        self.assertEqual(p.stdout, b'l4\nl5\n')
        self.assertRc(self.ctl('rm', '--grace', '0', sid), 0)

    def test_inspect(self):
        sid = self.uid('insp')
        self.agentd.create(id=sid, cmd='echo hi; exit 2')
        self.agentd.wait_exited(sid)
        p = self.ctl('inspect', sid)
        self.assertRc(p, 0)
        j = json.loads(p.stdout)
        self.assertEqual((j['id'], j['state'], j['exit_code']),
                         (sid, 'exited', 2))
        self.assertNotIn('output', j)
