"""What a process in a session can and cannot do to agentd: the security
review's claims, checked from inside a session."""

import os
import unittest

from hostilelib import HostileTestCase

PROBE = r'''
import json, os, socket, sys
token, sock, pid, tokfile, port = sys.argv[1:6]
out = {}
out['env_has_token'] = any(token in v for v in os.environ.values())
out['env_keys'] = sorted(os.environ)
try:
    out['agentd_environ_has_token'] = token.encode() in open(
        '/proc/%s/environ' % pid, 'rb').read()
except OSError as e:
    out['agentd_environ_has_token'] = 'denied: %s' % e.strerror
try:
    open(tokfile).read()
    out['token_file'] = 'read'
except OSError as e:
    out['token_file'] = 'denied: %s' % e.strerror
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sock)
    s.sendall(b'GET /v1/sessions HTTP/1.1\r\nHost: localhost\r\n\r\n')
    out['unix'] = s.recv(100).decode(errors='replace').split('\r\n')[0]
except OSError as e:
    out['unix'] = 'denied: %s' % e.strerror
s = socket.create_connection(('127.0.0.1', int(port)))
s.sendall(b'GET /v1/sessions HTTP/1.1\r\nHost: localhost\r\n\r\n')
out['tcp'] = s.recv(100).decode(errors='replace').split('\r\n')[0]
fds = {}
for fd in os.listdir('/proc/self/fd'):
    try:
        fds[fd] = os.readlink('/proc/self/fd/' + fd)
    except OSError:
        pass
out['fds'] = fds
print(json.dumps(out))
'''


class SandboxTest(HostileTestCase):
    """agentd started with its token in the environment (the case that
    leaves a trace in /proc/PID/environ), probed from sessions."""

    autostart = False

    def setUp(self):
        super().setUp()
        self.start_agentd(token_in_env=True)
        self.probe_path = os.path.join(self.agentd.dir, 'probe.py')
        with open(self.probe_path, 'w') as f:
            f.write(PROBE)
        os.chmod(self.probe_path, 0o644)
        os.chmod(self.agentd.dir, 0o755)    # nobody may reach probe.py

    def probe(self, **fields):
        a = self.agentd
        tokfile = os.path.join(a.dir, 'token')
        with open(tokfile, 'w') as f:
            f.write(a.token)
        os.chmod(tokfile, 0o600)
        argv = ['/usr/bin/python3', self.probe_path, a.token, a.socket_path,
                str(a.proc.pid), tokfile, str(a.port)]
        _, ck = self.run_cmd(None, argv=argv, cwd='/', **fields)
        data = ck.data()
        self.assertEqual(ck.last['exit_code'], 0, data[-2000:])
        import json
        return json.loads(data.decode().strip().splitlines()[-1])

    def run_cmd(self, cmd, timeout=30.0, **fields):
        fields.setdefault('yield_ms', 10000)
        w = self.create(**fields)
        ck = self.read_all(w['id'], start=w, timeout=timeout,
                           tty=fields.get('tty', False))
        return ck.last, ck

    def test_as_agentds_user(self):
        out = self.probe()
        self.assertFalse(out['env_has_token'], out['env_keys'])
        self.assertNotIn('AGENTD_TOKEN', out['env_keys'])
        self.assertFalse(out['agentd_environ_has_token'],
                         'the token is readable in /proc/PID/environ')
        # The same user: the socket admits it (peer credentials), by design.
        self.assertIn(' 200 ', out['unix'])
        self.assertIn(' 401 ', out['tcp'])
        self.check_fds(out['fds'])

    @unittest.skipUnless(os.geteuid() == 0, 'needs root to run as nobody')
    def test_as_another_user(self):
        out = self.probe(user='nobody')
        self.assertFalse(out['env_has_token'])
        self.assertIsNot(out['agentd_environ_has_token'], True)
        self.assertTrue(out['token_file'].startswith('denied'), out)
        self.assertTrue(out['unix'].startswith('denied'), out)
        self.assertIn(' 401 ', out['tcp'])
        self.check_fds(out['fds'])

    def check_fds(self, fds):
        # 0-2 are the session's pipes; the one more is the listing's own.
        extra = {k: v for k, v in fds.items() if k not in ('0', '1', '2')}
        self.assertLessEqual(len(extra), 1, fds)
        for k in ('0', '1', '2'):
            self.assertNotIn('socket', fds.get(k, ''), fds)
