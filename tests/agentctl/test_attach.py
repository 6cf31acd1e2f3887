"""agentctl attach and exec -t on a real terminal: tmux drives them.

Each test runs agentctl in a detached tmux session (a private tmux server)
through a wrapper that records the terminal's settings before agentctl and
compares them after it: "TERM-RESTORED" or "TERM-BROKEN", then agentctl's
exit code. Keys go in with send-keys; the screen is read with capture-pane.
"""

import os
import re
import shlex
import shutil
import signal
import subprocess

from ctlharness import CtlTestCase, binary, wait_until

WRAPPER = r'''#!/bin/sh
before=$(stty -g)
sh -c 'echo $$ > "$0"; exec "$@"' "$PIDFILE" "$@"
rc=$?
if [ "$before" = "$(stty -g)" ]; then echo TERM-RESTORED; else echo TERM-BROKEN; fi
echo "AGENTCTL-RC=$rc"
exec sleep 600
'''


class Tmux:
    """A private tmux server; one tmux session per terminal under test."""

    def __init__(self, dir, name):
        self.dir = dir
        self.sock = os.path.join(dir, 'tmux-%s.sock' % name)
        self.conf = os.path.join(dir, 'tmux.conf')
        with open(self.conf, 'w') as f:
            f.write('set -g status off\n'
                    'set -g default-shell /bin/sh\n'
                    'set -g history-limit 5000\n')
        self.wrapper = os.path.join(dir, 'wrap.sh')
        with open(self.wrapper, 'w') as f:
            f.write(WRAPPER)
        os.chmod(self.wrapper, 0o755)

    def tmux(self, *args):
        p = subprocess.run(['tmux', '-S', self.sock, '-f', self.conf]
                           + list(args), stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=30)
        if p.returncode != 0:
            raise AssertionError('tmux %s: exit %d: %s' % (
                ' '.join(args), p.returncode, p.stderr.decode()))
        return p.stdout.decode()

    def start(self, name, env, argv, x=100, y=30):
        """Run argv (agentctl ...) in the wrapper in a new tmux session."""
        pidfile = os.path.join(self.dir, name + '.pid')
        cmd = ' '.join(['env'] + ['%s=%s' % (k, shlex.quote(v))
                                  for k, v in sorted(env.items())]
                       + ['PIDFILE=' + shlex.quote(pidfile),
                          shlex.quote(self.wrapper)]
                       + [shlex.quote(a) for a in argv])
        self.tmux('new-session', '-d', '-s', name, '-x', str(x), '-y', str(y),
                  cmd)
        return pidfile

    def screen(self, name):
        return self.tmux('capture-pane', '-p', '-J', '-t', name, '-S', '-200')

    def wait(self, name, pattern, what=None):
        rx = re.compile(pattern, re.M)
        return wait_until(lambda: rx.search(self.screen(name)),
                          what=what or repr(pattern), interval=0.05)

    def keys(self, name, *keys):
        self.tmux('send-keys', '-t', name, *keys)

    def kill(self):
        subprocess.run(['tmux', '-S', self.sock, 'kill-server'],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30)


class TestAttach(CtlTestCase):

    def setUp(self):
        if shutil.which('tmux') is None:
            self.skipTest('tmux is not installed')
        self.tmux = Tmux(self.agentd.dir, self._testMethodName)
        self.env = {'AGENTD_SOCKET': self.agentd.socket}
        self.ctlbin = binary('AGENTCTL')

    def tearDown(self):
        self.tmux.kill()

    def shell_session(self):
        """A PTY shell whose newest chunk is its prompt."""
        sid = self.uid('sh')
        # The shell starts only once EARLY-MARK is captured (the test says
        # so on stdin): after a sleep, a busy machine could read the mark
        # and the prompt as one chunk, the newest one.
        self.agentd.create(id=sid, tty=True, env={'PS1': '$ '},
                           argv=['sh', '-c',
                                 'echo EARLY-MARK; read _; exec /bin/sh'])
        wait_until(lambda: b'EARLY-MARK' in self.agentd.output(sid),
                   what='the mark')
        st, _ = self.agentd.api('POST', '/v1/sessions/%s/stdin' % sid,
                                {'text': '\n'})
        self.assertEqual(st, 200)
        wait_until(lambda: self.agentd.output(sid).endswith(b'$ '),
                   what='the prompt')
        return sid

    def wait_size(self, sid, rows, cols):
        wait_until(lambda: (lambda s: s['rows'] == rows and s['cols'] == cols)(
            self.agentd.session(sid)), what='size %dx%d' % (rows, cols))

    def screen_failed(self, name):
        return '\n--- screen ---\n' + self.tmux.screen(name)

    def test_attach_type_resize_detach(self):
        sid = self.shell_session()
        t = self.tmux
        t.start('a1', self.env, [self.ctlbin, 'attach', sid])
        t.wait('a1', r'^\$ ?$', 'the prompt')
        # Output starts at the newest chunk: not what came long before.
        self.assertNotIn('EARLY-MARK', t.screen('a1'))

        t.keys('a1', 'echo hello-$((6*7))', 'Enter')
        t.wait('a1', r'^hello-42$')

        # Attaching sized the session like the terminal.
        self.wait_size(sid, 30, 100)
        t.keys('a1', 'stty size', 'Enter')
        t.wait('a1', r'^30 100$')

        # A window resize reaches the session through SIGWINCH.
        t.tmux('resize-window', '-t', 'a1', '-x', '120', '-y', '40')
        self.wait_size(sid, 40, 120)
        t.keys('a1', 'stty size', 'Enter')
        t.wait('a1', r'^40 120$')

        # Ctrl-C is a key for the session, not a signal for agentctl.
        t.keys('a1', 'sleep 30; echo not-interrupted', 'Enter')
        wait_until(lambda: b'sleep 30' in self.agentd.output(sid),
                   what='the sleep')
        t.keys('a1', 'C-c')
        t.keys('a1', 'echo after-$((1+1))', 'Enter')
        t.wait('a1', r'^after-2$')
        self.assertNotIn('AGENTCTL-RC', t.screen('a1'))

        # Ctrl-] detaches and leaves the session running.
        t.keys('a1', '-H', '1d')
        t.wait('a1', r'^AGENTCTL-RC=0$', 'the detach')
        screen = t.screen('a1')
        self.assertIn('[detached from session %s]' % sid, screen)
        self.assertIn('TERM-RESTORED', screen, self.screen_failed('a1'))
        self.assertNotRegex(screen, r'(?m)^not-interrupted$')
        self.assertEqual(self.agentd.session(sid)['state'], 'running')
        self.assertRc(self.ctl('send', sid, 'echo still-$((2+3))'), 0)
        wait_until(lambda: b'still-5' in self.agentd.output(sid),
                   what='the session after the detach')

        # Attach again; the session ends: its exit code comes back.
        t.start('a2', self.env, [self.ctlbin, 'attach', sid])
        t.wait('a2', r'^\$ ', 'the prompt again')
        t.keys('a2', 'exit 5', 'Enter')
        t.wait('a2', r'^AGENTCTL-RC=5$', 'the end of the session')
        screen = t.screen('a2')
        self.assertIn('[session %s exited with code 5]' % sid, screen)
        self.assertIn('TERM-RESTORED', screen)

    def test_attach_at_the_same_size_redraws(self):
        # A full-screen-ish program: it draws its screen (clear, then a line
        # saying its size) at start and on every SIGWINCH.  Once told to, it
        # moves the cursor home: the newest chunk holds no screen at all.
        sid = self.uid('fs')
        prog = ('stty -echo; draw() { clear; echo "SCREEN $(stty size)"; }; '
                'trap draw WINCH; draw; read go; printf "\\033[H"; '
                'while :; do sleep 0.05; done')
        self.agentd.create(id=sid, tty=True, rows=30, cols=100,
                           argv=['sh', '-c', prog])
        wait_until(lambda: b'SCREEN 30 100' in self.agentd.output(sid),
                   what='the first screen')
        self.assertRc(self.ctl('send', sid, 'go'), 0)
        wait_until(lambda: self.agentd.output(sid).endswith(b'\x1b[H'),
                   what='the cursor move')
        t = self.tmux
        t.start('e1', self.env, [self.ctlbin, 'attach', sid])   # 100x30
        t.wait('e1', r'^SCREEN 30 100$', 'the screen drawn again')
        self.wait_size(sid, 30, 100)
        t.keys('e1', '-H', '1d')
        t.wait('e1', r'^AGENTCTL-RC=0$', 'the detach')
        self.assertIn('TERM-RESTORED', t.screen('e1'))
        self.ctl('rm', '--grace', '0', sid)

    def test_attach_sigterm_restores_terminal(self):
        sid = self.shell_session()
        t = self.tmux
        pidfile = t.start('b1', self.env, [self.ctlbin, 'attach', sid])
        t.wait('b1', r'^\$ ?$', 'the prompt')
        with open(pidfile) as f:
            pid = int(f.read())
        os.kill(pid, signal.SIGTERM)
        t.wait('b1', r'^AGENTCTL-RC=\d+$', 'agentctl to end')
        screen = t.screen('b1')
        self.assertIn('AGENTCTL-RC=143', screen)
        self.assertIn('TERM-RESTORED', screen)
        self.assertEqual(self.agentd.session(sid)['state'], 'running')
        self.ctl('rm', '--grace', '0', sid)

    # What a full-screen program turns on: the alternate screen, application
    # cursor keys and keypad, mouse reporting, a hidden cursor, colours.
    MODES = ("printf '\\033[?1049h\\033[?1h\\033=\\033[?1000;1006h"
             "\\033[?25l\\033[1;31m'; echo; echo IN-MODES")
    FLAGS = ('#{alternate_on} #{keypad_cursor_flag} #{keypad_flag} '
             '#{mouse_any_flag} #{cursor_flag}')

    def modes_on(self, name, sid):
        t = self.tmux
        t.wait(name, r'^\$ ?$', 'the prompt')
        t.keys(name, self.MODES, 'Enter')
        t.wait(name, r'^IN-MODES$', 'the program in its modes')
        self.assertEqual(t.tmux('display', '-p', '-t', name, self.FLAGS),
                         '1 1 1 1 0\n')

    def test_detach_turns_the_programs_modes_off(self):
        sid = self.shell_session()
        t = self.tmux
        t.start('m1', self.env, [self.ctlbin, 'attach', sid])
        self.modes_on('m1', sid)
        t.keys('m1', '-H', '1d')
        t.wait('m1', r'^AGENTCTL-RC=0$', 'the detach')
        self.assertEqual(t.tmux('display', '-p', '-t', 'm1', self.FLAGS),
                         '0 0 0 0 1\n', self.screen_failed('m1'))
        self.assertIn('TERM-RESTORED', t.screen('m1'))
        self.assertEqual(self.agentd.session(sid)['state'], 'running')
        self.ctl('rm', '--grace', '0', sid)

    def test_killed_program_leaves_no_modes_on(self):
        sid = self.shell_session()
        t = self.tmux
        t.start('m2', self.env, [self.ctlbin, 'attach', sid])
        self.modes_on('m2', sid)
        self.assertRc(self.ctl('kill', sid, 'KILL'), 0)
        t.wait('m2', r'^AGENTCTL-RC=137$', 'the end of the session')
        self.assertEqual(t.tmux('display', '-p', '-t', 'm2', self.FLAGS),
                         '0 0 0 0 1\n', self.screen_failed('m2'))
        self.assertIn('TERM-RESTORED', t.screen('m2'))

    def test_attach_exited_session(self):
        sid = self.uid('gone')
        self.agentd.create(id=sid, cmd='exit 0')
        self.agentd.wait_exited(sid)
        t = self.tmux
        t.start('c1', self.env, [self.ctlbin, 'attach', sid])
        t.wait('c1', r'^AGENTCTL-RC=1$')
        screen = t.screen('c1')
        self.assertIn('has exited', screen)
        self.assertIn('TERM-RESTORED', screen)

    def test_exec_tty_in_terminal(self):
        sid = self.uid('ext')
        t = self.tmux
        t.start('d1', self.env, [self.ctlbin, 'exec', '-t', '-e', 'PS1=$ ',
                                 '--id', sid, '--', 'sh'], x=90, y=25)
        t.wait('d1', r'^\$ ?$', 'the prompt')
        t.keys('d1', 'stty size; test -t 0 && echo is-a-tty', 'Enter')
        t.wait('d1', r'^25 90$')
        t.wait('d1', r'^is-a-tty$')
        t.tmux('resize-window', '-t', 'd1', '-x', '70', '-y', '20')
        self.wait_size(sid, 20, 70)
        t.keys('d1', 'stty size', 'Enter')
        t.wait('d1', r'^20 70$')
        t.keys('d1', 'exit 3', 'Enter')
        t.wait('d1', r'^AGENTCTL-RC=3$')
        self.assertIn('TERM-RESTORED', t.screen('d1'))
