"""Harness for agentctl's tests: the real agentd and the real agentctl.

Each test class gets one agentd (env AGENTD) on a private unix socket and a
free 127.0.0.1 port with a random token; agentctl (env AGENTCTL) runs as a
subprocess against it, with AGENTD_SOCKET set and AGENTD_URL/AGENTD_TOKEN
unset unless a test asks for TCP. Everything waits by polling a condition
with a deadline; nothing sleeps a fixed time to let something happen.

Only the Python standard library is used.
"""

import base64
import http.client
import json
import os
import random
import shutil
import signal
import socket
import string
import subprocess
import tempfile
import time
import unittest

START_TIMEOUT = 15.0        # agentd must answer healthz within this
RUN_TIMEOUT = 90.0          # one agentctl run, generous for a loaded box
WAIT_TIMEOUT = 30.0         # a polled condition


def binary(var):
    path = os.environ.get(var)
    if not path:
        raise unittest.SkipTest('%s (path to the binary) is not set' % var)
    return os.path.abspath(path)


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]
    finally:
        s.close()


def wait_until(fn, timeout=WAIT_TIMEOUT, what='condition', interval=0.02):
    """Poll fn() until it returns a true value; return it, or fail."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError('timed out after %.0f s waiting for %s'
                                 % (timeout, what))
        time.sleep(interval)


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=60):
        super().__init__('localhost', timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


class Agentd:
    """One agentd with its temporary directory, socket, port and token."""

    def __init__(self, extra_args=()):
        self.extra_args = list(extra_args)
        self.binary = binary('AGENTD')
        self.dir = tempfile.mkdtemp(prefix='agentctl-it-')
        os.chmod(self.dir, 0o755)
        self.workdir = os.path.join(self.dir, 'work')
        os.mkdir(self.workdir)
        self.socket = os.path.join(self.dir, 'agentd.sock')
        self.token = ''.join(random.choice(string.ascii_letters)
                             for _ in range(32))
        self.token_file = os.path.join(self.dir, 'token')
        with open(self.token_file, 'w') as f:
            f.write(self.token)
        os.chmod(self.token_file, 0o600)
        self.stderr_path = os.path.join(self.dir, 'agentd.stderr')
        self.proc = None
        self.port = None

    def start(self):
        for _ in range(3):
            self.port = free_port()
            args = [self.binary, '--listen', '127.0.0.1:%d' % self.port,
                    '--socket', self.socket, '--token-file', self.token_file,
                    '--workdir', self.workdir, '--shutdown-grace', '1000'
                    ] + self.extra_args
            env = dict(os.environ)
            for k in ('AGENTD_TOKEN', 'AGENTD', 'AGENTCTL', 'AGENTD_URL',
                      'AGENTD_SOCKET'):
                env.pop(k, None)
            self.errf = open(self.stderr_path, 'ab')
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                         stdout=self.errf, stderr=self.errf,
                                         env=env, cwd=self.dir)
            deadline = time.monotonic() + START_TIMEOUT
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    status, _ = self.api('GET', '/healthz', timeout=2)
                    if status == 200:
                        return
                except OSError:
                    pass
                time.sleep(0.01)
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.errf.close()
            if 'in use' not in self.stderr().lower():
                break
        raise AssertionError('agentd did not start:\n' + self.stderr())

    def stop(self):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.errf.close()
        return self.proc.returncode

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def stderr(self):
        try:
            with open(self.stderr_path, 'rb') as f:
                return f.read().decode('utf-8', 'replace')
        except OSError:
            return ''

    # -- the API, directly ----------------------------------------------
    def api(self, method, path, body=None, tcp=False, headers=None,
            timeout=60):
        """(status, parsed JSON or raw bytes) of one request."""
        if tcp:
            conn = http.client.HTTPConnection('127.0.0.1', self.port,
                                              timeout=timeout)
        else:
            conn = UnixHTTPConnection(self.socket, timeout=timeout)
        hdrs = dict(headers or {})
        if tcp:
            hdrs.setdefault('Authorization', 'Bearer ' + self.token)
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            hdrs['Content-Type'] = 'application/json'
        try:
            conn.request(method, path, body=body, headers=hdrs)
            r = conn.getresponse()
            data = r.read()
        finally:
            conn.close()
        if r.getheader('Content-Type', '').startswith('application/json'):
            return r.status, json.loads(data.decode())
        return r.status, data

    def create(self, **req):
        status, j = self.api('POST', '/v1/sessions', req)
        assert status == 201, (status, j)
        return j

    def session(self, sid):
        status, j = self.api('GET', '/v1/sessions/%s?max_bytes=1' % sid)
        return j if status == 200 else None

    def output(self, sid):
        """All output held so far, every stream, as bytes."""
        data, cursor = b'', 0
        while True:
            status, j = self.api('GET', '/v1/sessions/%s?cursor=%d'
                                 % (sid, cursor))
            assert status == 200, (status, j)
            for c in j['output']:
                data += base64.b64decode(c['data'])
            cursor = j['cursor']
            if not j['more']:
                return data

    def wait_exited(self, sid, timeout=WAIT_TIMEOUT):
        return wait_until(lambda: (lambda s: s if s and s['state'] == 'exited'
                                   else None)(self.session(sid)),
                          timeout, 'session %s to exit' % sid)

    # -- agentctl --------------------------------------------------------
    def ctl_env(self, tcp=False, token=True, extra=None):
        env = dict(os.environ)
        for k in ('AGENTD_URL', 'AGENTD_TOKEN', 'AGENTD_SOCKET',
                  'AGENTD_VSOCK'):
            env.pop(k, None)
        if tcp:
            env['AGENTD_URL'] = 'http://127.0.0.1:%d' % self.port
            if token:
                env['AGENTD_TOKEN'] = self.token
        else:
            env['AGENTD_SOCKET'] = self.socket
        env.update(extra or {})
        return env

    def ctl(self, *args, input=None, tcp=False, token=True, env=None,
            timeout=RUN_TIMEOUT, stdin=None):
        """Run agentctl; a CompletedProcess with bytes stdout/stderr."""
        if input is None and stdin is None:
            stdin = subprocess.DEVNULL
        return subprocess.run([binary('AGENTCTL')] + list(args),
                              input=input, stdin=stdin,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=self.ctl_env(tcp, token, env),
                              timeout=timeout)


class CtlTestCase(unittest.TestCase):
    """One agentd per test class; its stderr is printed when a test fails."""

    agentd_args = ()            # extra flags for the class's agentd

    @classmethod
    def setUpClass(cls):
        cls.agentd = Agentd(cls.agentd_args)
        cls.agentd.start()

    @classmethod
    def tearDownClass(cls):
        rc = cls.agentd.stop()
        cls.agentd.cleanup()
        if rc != 0:
            raise AssertionError('agentd exited %s at the end' % rc)

    def run(self, result=None):
        failures = len(result.failures) + len(result.errors) if result else 0
        r = super().run(result)
        if result and len(result.failures) + len(result.errors) > failures:
            print('\n--- agentd stderr ---\n' + self.agentd.stderr()[-4000:])
        return r

    def ctl(self, *args, **kw):
        return self.agentd.ctl(*args, **kw)

    def assertRc(self, p, rc):
        self.assertEqual(p.returncode, rc, 'agentctl exited %d, want %d\n'
                         'stdout: %r\nstderr: %r' % (p.returncode, rc,
                                                     p.stdout[:2000],
                                                     p.stderr[:2000]))

    def uid(self, prefix='s'):
        return '%s%d-%d' % (prefix, os.getpid(), random.randrange(1 << 30))
