"""agentctl exec: exit codes, streams, stdin pipelines, options, signals."""

import hashlib
import os
import shlex
import signal
import subprocess
import time

from ctlharness import CtlTestCase, binary, wait_until, RUN_TIMEOUT

BIG = 5 * 1000 * 1000       # bytes through the pipelines


def sha(data):
    return hashlib.sha256(data).hexdigest()


def tree_digest(root):
    """{relative path: sha256} of every file under root."""
    out = {}
    for d, _, files in os.walk(root):
        for name in files:
            p = os.path.join(d, name)
            with open(p, 'rb') as f:
                out[os.path.relpath(p, root)] = sha(f.read())
    return out


class TestExec(CtlTestCase):

    def test_exit_codes(self):
        for script, rc in (('exit 0', 0), ('exit 3', 3), ('kill -9 $$', 137),
                           ('kill -TERM $$', 143), ('exit 255', 255)):
            with self.subTest(script=script):
                p = self.ctl('exec', '--', 'sh', '-c', script)
                self.assertRc(p, rc)

    def test_streams_apart(self):
        p = self.ctl('exec', '--', 'sh', '-c',
                     'echo out1; echo err1 >&2; echo out2; printf err2 >&2')
        self.assertRc(p, 0)
        self.assertEqual(p.stdout, b'out1\nout2\n')
        self.assertEqual(p.stderr, b'err1\nerr2')

    def test_binary_output(self):
        data = os.urandom(300 * 1000)
        path = os.path.join(self.agentd.dir, 'bin.out')
        with open(path, 'wb') as f:
            f.write(data)
        p = self.ctl('exec', '--', 'cat', path)
        self.assertRc(p, 0)
        self.assertEqual(sha(p.stdout), sha(data))
        self.assertEqual(p.stderr, b'')

    def test_stdin_large_binary_through_cat(self):
        data = os.urandom(BIG)
        p = self.ctl('exec', '--', 'cat', input=data)
        self.assertRc(p, 0)
        self.assertEqual(len(p.stdout), len(data))
        self.assertEqual(sha(p.stdout), sha(data))
        self.assertNotIn(b'lost', p.stderr)

    def test_stdin_large_binary_digest(self):
        data = os.urandom(BIG)
        p = self.ctl('exec', '--', 'sha256sum', input=data)
        self.assertRc(p, 0)
        self.assertEqual(p.stdout.split()[0].decode(), sha(data))

    def test_tar_pipeline_in(self):
        src = os.path.join(self.agentd.dir, 'tar-src')
        dst = os.path.join(self.agentd.dir, 'tar-dst')
        os.makedirs(os.path.join(src, 'sub', 'deeper'))
        os.mkdir(dst)
        with open(os.path.join(src, 'big.bin'), 'wb') as f:
            f.write(os.urandom(BIG))
        for i in range(20):
            with open(os.path.join(src, 'sub', 'f%d' % i), 'wb') as f:
                f.write(os.urandom(1000 * i))
        with open(os.path.join(src, 'sub', 'deeper', 'empty'), 'wb'):
            pass
        cmd = 'tar c -C %s . | %s exec -- tar x -C %s' % (
            shlex.quote(src), shlex.quote(binary('AGENTCTL')),
            shlex.quote(dst))
        p = subprocess.run(['/bin/sh', '-c', cmd], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=self.agentd.ctl_env(),
                           timeout=RUN_TIMEOUT)
        self.assertRc(p, 0)
        self.assertEqual(tree_digest(dst), tree_digest(src))

    def test_tar_pipeline_out(self):
        src = os.path.join(self.agentd.dir, 'tar-src2')
        dst = os.path.join(self.agentd.dir, 'tar-dst2')
        os.makedirs(src)
        os.mkdir(dst)
        with open(os.path.join(src, 'big.bin'), 'wb') as f:
            f.write(os.urandom(BIG))
        # Output is not back-pressured: a ring that holds all of it.
        cmd = '%s exec --ring-bytes 16M -- tar c -C %s . | tar x -C %s' % (
            shlex.quote(binary('AGENTCTL')), shlex.quote(src),
            shlex.quote(dst))
        p = subprocess.run(['/bin/sh', '-c', cmd], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=self.agentd.ctl_env(),
                           timeout=RUN_TIMEOUT)
        self.assertRc(p, 0)
        self.assertEqual(tree_digest(dst), tree_digest(src))

    def test_stdout_slower_than_input(self):
        # A filter whose reader is slow: stdin is held back, nothing is lost.
        data = os.urandom(3 * 1000 * 1000)
        cmd = ('%s exec -- cat | (read -r _x; sleep 1; cat) | sha256sum'
               % shlex.quote(binary('AGENTCTL')))
        payload = b'first line\n' + data
        p = subprocess.run(['/bin/bash', '-c', cmd], input=payload,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=self.agentd.ctl_env(), timeout=RUN_TIMEOUT)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.split()[0].decode(), sha(data))
        self.assertNotIn(b'lost', p.stderr)

    def test_env_workdir_id(self):
        wd = os.path.join(self.agentd.dir, 'wd')
        os.mkdir(wd)
        sid = self.uid('ex')
        p = self.ctl('exec', '--id', sid, '-e', 'FOO=bar baz', '-e', 'X=1',
                     '-w', wd, '--', 'sh', '-c', 'echo "$FOO/$X"; pwd')
        self.assertRc(p, 0)
        self.assertEqual(p.stdout.decode(), 'bar baz/1\n%s\n' % wd)
        s = self.agentd.session(sid)
        self.assertEqual(s['argv'], ['sh', '-c', 'echo "$FOO/$X"; pwd'])
        # The id is taken now.
        p = self.ctl('exec', '--id', sid, '--', 'true')
        self.assertRc(p, 1)
        self.assertIn(b'agentctl: ', p.stderr)
        self.assertIn(sid.encode(), p.stderr)

    def test_rm_after(self):
        sid = self.uid('rm')
        p = self.ctl('exec', '--rm', '--id', sid, '--', 'sh', '-c', 'exit 6')
        self.assertRc(p, 6)
        self.assertIsNone(self.agentd.session(sid))

    def test_without_double_dash(self):
        p = self.ctl('exec', 'echo', 'a', '-b')
        self.assertRc(p, 0)
        self.assertEqual(p.stdout, b'a -b\n')

    def test_tty(self):
        p = self.ctl('exec', '-t', '--', 'sh', '-c',
                     'test -t 0 && test -t 1 && echo TTY; stty size; '
                     'echo "$TERM"; echo err >&2')
        self.assertRc(p, 0)
        out = p.stdout.replace(b'\r\n', b'\n')
        self.assertEqual(out, b'TTY\n24 80\nxterm-256color\nerr\n')

    def test_tty_stdin(self):
        p = self.ctl('exec', '-t', '--', 'sh', '-c',
                     'stty -echo; read x; echo "got:$x"; exit 4',
                     input=b'hello\n')
        self.assertRc(p, 4)
        self.assertIn(b'got:hello', p.stdout)

    def test_tty_stdin_eof(self):
        p = self.ctl('exec', '-t', '--', 'sh', '-c', 'stty -echo; cat; echo END',
                     input=b'one\ntwo\n')
        self.assertRc(p, 0)
        # The input may be echoed when it beats `stty -echo` to the PTY.
        out = p.stdout.replace(b'\r\n', b'\n')
        self.assertTrue(out.endswith(b'one\ntwo\nEND\n'), out)

    def test_spawn_failed(self):
        p = self.ctl('exec', '--', '/nonexistent/program')
        self.assertRc(p, 1)
        self.assertTrue(p.stderr.startswith(b'agentctl: '), p.stderr)
        self.assertIn(b'/nonexistent/program', p.stderr)
        p = self.ctl('exec', '-w', '/nonexistent/dir', '--', 'true')
        self.assertRc(p, 1)
        self.assertIn(b'/nonexistent/dir', p.stderr)

    def test_no_stdin(self):
        # stdin stays open here, but -n gives the command /dev/null.
        proc = subprocess.Popen([binary('AGENTCTL'), 'exec', '-n', '--',
                                 'sh', '-c', 'cat; echo done'],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE,
                                env=self.agentd.ctl_env())
        try:
            out, err = proc.communicate(timeout=RUN_TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
        self.assertEqual(proc.returncode, 0, err)
        self.assertEqual(out, b'done\n')

    def test_stdin_closed_by_command(self):
        # head stops reading: agentctl stops forwarding and still exits.
        proc = subprocess.Popen([binary('AGENTCTL'), 'exec', '--', 'head',
                                 '-c', '10'],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE,
                                env=self.agentd.ctl_env())
        try:
            proc.stdin.write(b'0123456789abcdef' * 1000)
            proc.stdin.flush()
            out = proc.stdout.read()
            rc = proc.wait(RUN_TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.stdin.close()
        self.assertEqual(rc, 0, proc.stderr.read())
        self.assertEqual(out, b'0123456789')
        proc.stderr.close()
        proc.stdout.close()

    def test_closed_stdout_sigpipes_the_session(self):
        # As in a local pipeline: the writer gets SIGPIPE, nothing lingers.
        sid = self.uid('yes')
        cmd = '%s exec --id %s -- yes | head -n 2' % (
            shlex.quote(binary('AGENTCTL')), sid)
        p = subprocess.run(['/bin/bash', '-c', cmd + '; echo "${PIPESTATUS[0]}"'],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=self.agentd.ctl_env(),
                           timeout=RUN_TIMEOUT)
        self.assertEqual(p.stdout, b'y\ny\n141\n', p.stderr)
        s = self.agentd.wait_exited(sid)
        self.assertEqual((s['exit_code'], s['signal']), (141, 'SIGPIPE'))

    def test_signal_forwarded(self):
        proc = subprocess.Popen(
            [binary('AGENTCTL'), 'exec', '--', 'sh', '-c',
             'trap "echo caught; exit 7" INT; echo ready; '
             'while :; do sleep 0.05; done'],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=self.agentd.ctl_env())
        try:
            self.assertEqual(proc.stdout.readline(), b'ready\n')
            proc.send_signal(signal.SIGINT)
            out = proc.stdout.read()
            rc = proc.wait(RUN_TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.stdout.close()
            proc.stderr.close()
        self.assertEqual(out, b'caught\n')
        self.assertEqual(rc, 7)

    def test_many_quick(self):
        t0 = time.monotonic()
        for i in range(20):
            p = self.ctl('exec', '--', 'sh', '-c', 'echo %d; exit %d'
                         % (i, i % 5))
            self.assertRc(p, i % 5)
            self.assertEqual(p.stdout, b'%d\n' % i)
        # Not a benchmark: just no long-poll stall per run.
        self.assertLess(time.monotonic() - t0, 60)

    def test_usage(self):
        p = self.ctl('exec')
        self.assertRc(p, 2)
        p = self.ctl('exec', '-e', 'NOEQUALS', '--', 'true')
        self.assertRc(p, 2)
        p = self.ctl('exec', '--bogus', '--', 'true')
        self.assertRc(p, 2)


class TestExecText(CtlTestCase):
    """agentd's default is encoding=text: agentctl takes "text" or "data"."""

    agentd_args = ('--encoding', 'text')

    def test_text_and_binary_output(self):
        p = self.ctl('exec', '--', 'sh', '-c',
                     "printf 'h\\303\\251 \\000\\001\\033[0m\\n'; "
                     "printf '\\377\\376' >&2")
        self.assertRc(p, 0)
        self.assertEqual(p.stdout, 'hé \0\x01\x1b[0m\n'.encode())
        self.assertEqual(p.stderr, b'\xff\xfe')
        data = os.urandom(100 * 1000)
        path = os.path.join(self.agentd.dir, 'bin.out')
        with open(path, 'wb') as f:
            f.write(data)
        p = self.ctl('exec', '--', 'cat', path)
        self.assertRc(p, 0)
        self.assertEqual(sha(p.stdout), sha(data))
