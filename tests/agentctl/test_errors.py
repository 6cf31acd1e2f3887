"""agentctl's errors: unreachable agentd, unknown ids, usage; TCP and tokens."""

import os
import shutil
import socket
import subprocess
import tempfile

from ctlharness import Agentd, CtlTestCase, binary, RUN_TIMEOUT

ALL_ID_COMMANDS = (
    ('inspect', '{id}'), ('attach', '{id}'), ('kill', '{id}'),
    ('send', '{id}', 'x'), ('tail', '{id}'), ('rm', '{id}'),
)


def run(args, env):
    return subprocess.run([binary('AGENTCTL')] + list(args),
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=env, timeout=RUN_TIMEOUT)


def bare_env(**extra):
    env = dict(os.environ)
    for k in ('AGENTD_URL', 'AGENTD_TOKEN', 'AGENTD_SOCKET'):
        env.pop(k, None)
    env.update(extra)
    return env


class TestReach(CtlTestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix='agentctl-err-')
        os.chmod(self.tmp, 0o755)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_socket_missing(self):
        path = os.path.join(self.tmp, 'nothing.sock')
        for args, env in ((['-s', path, 'ls'], bare_env()),
                          (['ls', '-s', path], bare_env()),
                          (['ls'], bare_env(AGENTD_SOCKET=path))):
            with self.subTest(args=args):
                p = run(args, env)
                self.assertEqual(p.returncode, 1)
                self.assertEqual(p.stdout, b'')
                self.assertEqual(
                    p.stderr.decode(),
                    'agentctl: cannot reach agentd at %s: No such file or '
                    'directory\n' % path)

    def test_default_socket(self):
        p = run(['--help'], bare_env())
        self.assertIn(b'/run/agentd.sock', p.stdout)
        if not os.path.exists('/run/agentd.sock'):
            p = run(['ls'], bare_env())
            self.assertEqual(p.returncode, 1)
            self.assertIn(b'cannot reach agentd at /run/agentd.sock',
                          p.stderr)

    def test_connection_refused(self):
        path = os.path.join(self.tmp, 'dead.sock')
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)            # bound, never listening: refused
        try:
            p = run(['-s', path, 'ls'], bare_env())
        finally:
            s.close()
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr.decode(),
                         'agentctl: cannot reach agentd at %s: Connection '
                         'refused\n' % path)

    def test_permission_denied(self):
        if os.geteuid() != 0 or shutil.which('setpriv') is None:
            self.skipTest('needs root and setpriv')
        # agentd's socket is 0600: another user may not connect.
        ctl = binary('AGENTCTL')
        p = subprocess.run(['setpriv', '--reuid=65534', '--regid=65534',
                            '--clear-groups', ctl, '-s', self.agentd.socket,
                            'ls'],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=bare_env(),
                           timeout=RUN_TIMEOUT)
        if p.returncode == 126 or b'Permission denied' in p.stderr and \
                b'agentctl:' not in p.stderr:
            self.skipTest('agentctl is not executable by nobody here')
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(p.stderr.decode(),
                         'agentctl: cannot reach agentd at %s: Permission '
                         'denied\n' % self.agentd.socket)

    def test_agentd_gone(self):
        other = Agentd()
        other.start()
        try:
            p = run(['-s', other.socket, 'ls'], bare_env())
            self.assertEqual(p.returncode, 0)
            self.assertEqual(other.stop(), 0)
            p = run(['-s', other.socket, 'ls'], bare_env())
            self.assertEqual(p.returncode, 1)
            self.assertTrue(p.stderr.startswith(
                b'agentctl: cannot reach agentd at %s: '
                % other.socket.encode()), p.stderr)
        finally:
            other.stop()
            other.cleanup()

    def test_unknown_id(self):
        for cmd in ALL_ID_COMMANDS:
            with self.subTest(cmd=cmd[0]):
                p = self.ctl(*[a.format(id='nope') for a in cmd])
                self.assertRc(p, 1)
                self.assertEqual(p.stdout, b'')
                self.assertEqual(p.stderr, b"agentctl: no session 'nope'\n")

    def test_usage(self):
        for args in ([], ['bogus'], ['ls', 'extra'], ['kill'],
                     ['attach'], ['send', 'x'], ['tail'], ['rm'],
                     ['--bogus', 'ls'], ['-s'], ['logs', '-n', 'x']):
            with self.subTest(args=args):
                p = self.ctl(*args)
                self.assertRc(p, 2)
                self.assertIn(b'agentctl', p.stderr)
                self.assertIn(b'--help', p.stderr)

    def test_help(self):
        p = self.ctl('--help')
        self.assertRc(p, 0)
        for word in (b'ls', b'exec', b'attach', b'send', b'kill', b'rm',
                     b'tail', b'stat', b'logs', b'AGENTD_URL', b'AGENTD_TOKEN',
                     b'AGENTD_SOCKET', b'Ctrl-]', b'-s, --socket'):
            self.assertIn(word, p.stdout)
        self.assertEqual(self.ctl('exec', '--help').stdout, p.stdout)
        p = self.ctl('--version')
        self.assertRc(p, 0)
        self.assertTrue(p.stdout.startswith(b'agentctl '))


class TestTcp(CtlTestCase):

    def test_tcp_with_token(self):
        p = self.ctl('exec', '--', 'sh', '-c', 'echo tcp; echo e >&2; exit 5',
                     tcp=True)
        self.assertRc(p, 5)
        self.assertEqual((p.stdout, p.stderr), (b'tcp\n', b'e\n'))
        p = self.ctl('ls', tcp=True)
        self.assertRc(p, 0)
        self.assertIn(b'COMMAND', p.stdout)
        data = os.urandom(2 * 1000 * 1000)
        p = self.ctl('exec', '--', 'cat', input=data, tcp=True)
        self.assertRc(p, 0)
        self.assertEqual(p.stdout, data)

    def test_vsock_address(self):
        """--vsock CID:PORT is parsed before anything is opened; -s wins
        over it (no vsock socket is ever made here: the host's vsock is
        not the tests')."""
        for spec, why in (('1:0', b'a vsock port is a number in '
                           b'1..4294967294'),
                          ('x', b'want CID:PORT'),
                          ('4294967295:5', b'the CID is a number'),
                          ('host:', b'a vsock port')):
            p = self.ctl('--vsock', spec, 'ls')
            self.assertRc(p, 1)
            self.assertIn(b'--vsock ' + spec.encode() + b': ' + why, p.stderr)
        p = self.ctl('ls', env={'AGENTD_VSOCK': 'nope'})
        self.assertRc(p, 1)
        self.assertIn(b'--vsock nope: want CID:PORT', p.stderr)
        # -s wins over --vsock and AGENTD_VSOCK.
        p = self.ctl('-s', self.agentd.socket, '--vsock', '1:0', 'ls',
                     env={'AGENTD_VSOCK': 'nope'})
        self.assertRc(p, 0)
        # --url wins over AGENTD_VSOCK.
        p = self.ctl('--url', 'http://127.0.0.1:%d' % self.agentd.port, 'ls',
                     env={'AGENTD_VSOCK': 'nope',
                          'AGENTD_TOKEN': self.agentd.token})
        self.assertRc(p, 0)

    def test_pipe(self):
        """agentctl pipe: raw bytes both ways, until agentd closes."""
        req = (b'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n'
               b'GET /v1/sessions HTTP/1.1\r\nHost: localhost\r\n'
               b'Connection: close\r\n\r\n')
        p = self.ctl('pipe', input=req)
        self.assertRc(p, 0)
        self.assertEqual(p.stdout.count(b'HTTP/1.1 200 OK\r\n'), 2, p.stdout)
        p = self.ctl('pipe', 'extra', input=b'')
        self.assertRc(p, 2)

    def test_tcp_url_forms(self):
        for url in ('http://127.0.0.1:%d' % self.agentd.port,
                    'http://127.0.0.1:%d/' % self.agentd.port,
                    '127.0.0.1:%d' % self.agentd.port):
            with self.subTest(url=url):
                p = self.ctl('--url', url, 'ls', tcp=True)
                self.assertRc(p, 0)
        p = self.ctl('--url', 'https://127.0.0.1:1', 'ls', tcp=True)
        self.assertRc(p, 1)
        self.assertIn(b'https', p.stderr)

    def test_tcp_token_wrong_or_missing(self):
        p = self.ctl('ls', tcp=True, token=False)
        self.assertRc(p, 1)
        self.assertIn(b'AGENTD_TOKEN', p.stderr)
        p = self.ctl('ls', tcp=True, env={'AGENTD_TOKEN': 'wrong'})
        self.assertRc(p, 1)
        self.assertIn(b'token', p.stderr)

    def test_tcp_refused(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
        try:
            p = self.ctl('ls', tcp=True,
                         env={'AGENTD_URL': 'http://127.0.0.1:%d' % port})
        finally:
            s.close()
        self.assertRc(p, 1)
        self.assertEqual(p.stderr.decode(),
                         'agentctl: cannot reach agentd at http://127.0.0.1:%d: '
                         'Connection refused\n' % port)

    def test_socket_option_wins_over_url(self):
        p = self.ctl('-s', self.agentd.socket, 'stat', tcp=True)
        self.assertRc(p, 0)

    def test_debug_not_over_tcp(self):
        for cmd in ('stat', 'logs'):
            with self.subTest(cmd=cmd):
                p = self.ctl(cmd, tcp=True)
                self.assertRc(p, 1)
                self.assertIn(b'unix socket', p.stderr)
                status, _ = self.agentd.api('GET', '/debug/' + cmd, tcp=True)
                self.assertEqual(status, 404)
                status, _ = self.agentd.api('GET', '/debug/' + cmd)
                self.assertEqual(status, 200)
