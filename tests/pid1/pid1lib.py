"""Harness of the PID 1 suite: agentd as the init of a PID namespace, or as a
plain child, driven over its unix socket (and TCP).

    AGENTD=build/agentd/agentd /usr/bin/python3 tests/run.py tests/pid1/test_MODULE.py ...

In a namespace agentd runs as
    unshare --pid --fork --mount-proc --kill-child AGENTD ...
so it is PID 1 there (healthz says "pid": 1); its host pid is found as the
child of unshare.  --kill-child: if the test dies, the namespace dies with it.
Needs root (unshare); every test skips otherwise.  Python standard library
only.  Every wait is bounded; bounds are generous for a loaded 2-core machine.
"""

import base64
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

START_TIMEOUT = 15.0    # agentd must answer healthz within this
HTTP_TIMEOUT = 60.0     # one request
EXIT_SLACK = 8.0        # on top of the shutdown grace, for agentd to end
# "At once" on a loaded 2-core machine: tests that agentd ends before its
# grace use a grace of LONG_GRACE_MS and expect the end within QUICK, so a
# slow machine is still far from the grace that a regression would wait.
LONG_GRACE_MS = 30000
QUICK = 15.0            # s

LOG_TS = re.compile(r'^agentd: (\d{4}-\d\d-\d\dT\d\d:\d\d:(\d\d\.\d+))Z ')


def agentd_path():
    path = os.environ.get('AGENTD')
    if not path:
        raise unittest.SkipTest('AGENTD (path to the agentd binary) is not set')
    return os.path.abspath(path)


def need_root():
    if os.geteuid() != 0:
        raise unittest.SkipTest('needs root (unshare, namespaces)')
    if shutil.which('unshare') is None:
        raise unittest.SkipTest('no unshare(1)')


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]
    finally:
        s.close()


def wait_for(pred, timeout, interval=0.02, what='condition'):
    """Poll pred until it returns a true value; return it, or fail."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError('timed out after %.1f s waiting for %s'
                                 % (timeout, what))
        time.sleep(interval)


def proc_stat(pid):
    """(state, ppid, pgrp) of a host pid, or None when it is gone."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            data = f.read()
    except OSError:
        return None
    rest = data[data.rindex(')') + 2:].split()
    return rest[0], int(rest[1]), int(rest[2])


def pid_gone(pid):
    st = proc_stat(pid)
    return st is None or st[0] in ('Z', 'X')


def all_pids():
    return [int(d) for d in os.listdir('/proc') if d.isdigit()]


def children_of(pid):
    """Host pids whose parent is pid, with their states."""
    out = {}
    for p in all_pids():
        st = proc_stat(p)
        if st is not None and st[1] == pid:
            out[p] = st[0]
    return out


def pidns_of(pid):
    try:
        return os.readlink('/proc/%d/ns/pid' % pid)
    except OSError:
        return None


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTPConnection over an AF_UNIX stream socket."""

    def __init__(self, path, timeout=HTTP_TIMEOUT):
        super().__init__('localhost', timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


class Agentd:
    """One agentd: in a fresh PID namespace (pid1=True) or as our child.

    wrap: a shell snippet run in the namespace before agentd, which is exec'd
    by that shell (so it stays PID 1); e.g. mounts.  closed_stdio: agentd
    starts with fds 0-2 closed.  unshare_extra: more unshare flags.
    """

    def __init__(self, args=(), pid1=True, grace_ms=2000, env=None,
                 wrap=None, closed_stdio=False, unshare_extra=(),
                 tcp=True, companion=None):
        self.dir = tempfile.mkdtemp(prefix='agentd-pid1-')
        os.chmod(self.dir, 0o755)
        self.sock = os.path.join(self.dir, 's.sock')
        self.log_path = os.path.join(self.dir, 'agentd.log')
        self.port = free_port() if tcp else None
        self.pid1 = pid1
        self.args = list(args)
        self.grace_ms = grace_ms
        if env is None:
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith('AGENTD_')}
        self.env = dict(env)
        self.wrap = wrap
        self.closed_stdio = closed_stdio
        self.unshare_extra = list(unshare_extra)
        self.companion = companion
        self.proc = None
        self.host_pid = None
        self.rc = None

    # -- life -------------------------------------------------------------

    def agentd_argv(self):
        argv = [agentd_path(), '--socket', self.sock,
                '--shutdown-grace', str(self.grace_ms)]
        if self.port is not None:
            argv += ['--listen', '127.0.0.1:%d' % self.port]
        argv += self.args
        if self.companion is not None:
            argv += ['--'] + list(self.companion)
        return argv

    def start(self):
        argv = self.agentd_argv()
        if self.wrap is not None or self.closed_stdio:
            snippet = (self.wrap or ':') + '\nexec "$@"'
            if self.closed_stdio:
                snippet += ' <&- >&- 2>&-'
            argv = ['/bin/sh', '-c', snippet, 'sh'] + argv
        if self.pid1:
            argv = (['unshare', '--pid', '--fork', '--kill-child',
                     '--mount-proc'] + self.unshare_extra + argv)
        self.log = open(self.log_path, 'ab')
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=self.log,
                                     env=self.env, cwd=self.dir)
        self.wait_ready()
        return self

    def wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError('agentd ended at start (rc %s):\n%s'
                                     % (self.proc.returncode, self.stderr()))
            try:
                r = self.request('GET', '/healthz', timeout=2)
                if r[0] == 200:
                    self.health = r[1]
                    break
                last = r
            except (OSError, http.client.HTTPException) as e:
                last = e
            time.sleep(0.02)
        else:
            raise AssertionError('agentd not ready in %.0f s (%r):\n%s'
                                 % (START_TIMEOUT, last, self.stderr()))
        if self.pid1:
            self.host_pid = wait_for(self.find_host_pid, 5,
                                     what='the host pid of PID 1')
        else:
            self.host_pid = self.health['pid']

    def find_host_pid(self):
        """The host pid of the namespace's PID 1: unshare's child."""
        kids = children_of(self.proc.pid)
        for pid in kids:
            try:
                with open('/proc/%d/status' % pid) as f:
                    for line in f:
                        if line.startswith('NSpid:'):
                            if line.split()[-1] == '1':
                                return pid
            except OSError:
                pass
        return None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def send(self, sig):
        os.kill(self.host_pid, sig)

    def wait(self, timeout):
        """Wait for the end (of unshare, which waits for PID 1); rc."""
        try:
            self.rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError('agentd did not end within %.1f s:\n%s'
                                 % (timeout, self.stderr()))
        return self.rc

    def stop(self, sig=signal.SIGTERM, timeout=None, expect_within=None):
        """Signal agentd, wait; (rc, seconds).  expect_within: seconds by
        which agentd should have ended, else fail with what is left."""
        t0 = time.monotonic()
        self.send(sig)
        if timeout is None:
            timeout = self.grace_ms / 1000.0 + EXIT_SLACK
        if expect_within is not None:
            try:
                self.proc.wait(expect_within)
            except subprocess.TimeoutExpired:
                left = self.describe()
                self.wait(timeout)
                raise AssertionError('agentd still up %.1f s after signal '
                                     '%d; left:\n%s\nlog:\n%s'
                                     % (expect_within, sig, left,
                                        self.stderr()))
        rc = self.wait(timeout)
        return rc, time.monotonic() - t0

    def describe(self):
        """The processes left in the namespace (or agentd's children)."""
        pids = self.ns_pids() if self.pid1 else children_of(self.host_pid)
        lines = []
        for p, s in sorted(pids.items()):
            try:
                with open('/proc/%d/cmdline' % p, 'rb') as f:
                    cmd = f.read().replace(b'\0', b' ').decode()
                with open('/proc/%d/status' % p) as f:
                    sig = [ln for ln in f.read().splitlines()
                           if ln.startswith(('SigPnd', 'ShdPnd', 'SigBlk',
                                             'SigIgn', 'SigCgt', 'NSpid',
                                             'PPid'))]
                with open('/proc/%d/wchan' % p) as f:
                    wchan = f.read()
            except OSError:
                continue
            lines.append('%d %s %s %s wchan=%s' % (p, s, cmd, sig, wchan))
        return '\n'.join(lines)

    def cleanup(self):
        if self.alive():
            try:
                self.proc.kill()        # --kill-child takes the namespace
            except OSError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        if self.host_pid and not self.pid1 and not pid_gone(self.host_pid):
            try:
                os.kill(self.host_pid, signal.SIGKILL)
            except OSError:
                pass
        if getattr(self, 'log', None):
            self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def stderr(self):
        try:
            with open(self.log_path, 'rb') as f:
                return f.read().decode('utf-8', 'replace')[-8000:]
        except OSError:
            return ''

    def log_lines(self):
        try:
            with open(self.log_path, 'rb') as f:
                return f.read().decode('utf-8', 'replace').splitlines()
        except OSError:
            return []

    # -- HTTP -------------------------------------------------------------

    def conn(self, tcp=False, timeout=HTTP_TIMEOUT):
        if tcp:
            return http.client.HTTPConnection('127.0.0.1', self.port,
                                              timeout=timeout)
        return UnixHTTPConnection(self.sock, timeout=timeout)

    def request(self, method, path, body=None, conn=None, timeout=HTTP_TIMEOUT,
                headers=None):
        """(status, json or bytes); over conn (kept open) or a new one."""
        own = conn is None
        c = conn or self.conn(timeout=timeout)
        try:
            hdrs = dict(headers or {})
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                hdrs['Content-Type'] = 'application/json'
            c.request(method, path, body=data, headers=hdrs)
            r = c.getresponse()
            raw = r.read()
        finally:
            if own:
                c.close()
        try:
            return r.status, json.loads(raw)
        except ValueError:
            return r.status, raw

    def create(self, cmd, **kw):
        body = dict(kw)
        body['cmd'] = cmd
        st, j = self.request('POST', '/v1/sessions', body)
        if st != 201:
            raise AssertionError('create %r: %s %r' % (cmd, st, j))
        return j

    def get(self, sid, cursor=0, wait_ms=0):
        st, j = self.request('GET', '/v1/sessions/%s?cursor=%d&wait_ms=%d'
                             % (sid, cursor, wait_ms))
        if st != 200:
            raise AssertionError('get %s: %s %r' % (sid, st, j))
        return j

    def run(self, cmd, timeout=30.0, **kw):
        """Run cmd to its end; (exit_code, output bytes of all streams).
        Only the order within one stream is kept: stdout and stderr are two
        pipes, read in whatever order the capture loop finds them ready."""
        code, streams = self.run_streams(cmd, timeout, **kw)
        return code, b''.join(streams.values())

    def run_streams(self, cmd, timeout=30.0, **kw):
        """Run cmd to its end; (exit_code, {stream: bytes}), e.g. 'stdout'
        and 'stderr' apart ('pty' for a tty session)."""
        kw.setdefault('yield_ms', int(min(timeout, 20.0) * 1000))
        j = self.create(cmd, **kw)
        streams = {}

        def take(chunks):
            for c in chunks:
                streams[c['stream']] = (streams.get(c['stream'], b'') +
                                        base64.b64decode(c['data']))
        take(j['output'])
        cursor = j['cursor']
        deadline = time.monotonic() + timeout
        while not (j['state'] == 'exited' and j['eof']):
            if time.monotonic() > deadline:
                raise AssertionError('session %r still %s after %.0f s'
                                     % (cmd, j['state'], timeout))
            j = self.get(j['id'], cursor, wait_ms=1000)
            take(j['output'])
            cursor = j['cursor']
        return j['exit_code'], streams

    def read_until(self, sid, needle, timeout=20.0):
        cursor, out = 0, b''
        deadline = time.monotonic() + timeout
        while needle not in out:
            if time.monotonic() > deadline:
                raise AssertionError('no %r from %s in %.0f s: %r'
                                     % (needle, sid, timeout, out[-200:]))
            j = self.get(sid, cursor, wait_ms=500)
            out += b''.join(base64.b64decode(c['data']) for c in j['output'])
            cursor = j['cursor']
        return out

    def metrics(self):
        st, raw = self.request('GET', '/metrics')
        out = {}
        for line in raw.decode().splitlines():
            if line and not line.startswith('#'):
                k, _, v = line.rpartition(' ')
                out[k] = float(v)
        return out

    # -- the namespace, seen from the host ---------------------------------

    def ns_pids(self):
        """Host pids in agentd's PID namespace: {pid: state}."""
        ns = pidns_of(self.host_pid)
        out = {}
        if ns is None:
            return out
        for p in all_pids():
            if pidns_of(p) == ns:
                st = proc_stat(p)
                if st is not None:
                    out[p] = st[0]
        return out


class Pid1TestCase(unittest.TestCase):
    """Cleans up every agentd a test started."""

    def setUp(self):
        agentd_path()
        need_root()
        self.agents = []

    def tearDown(self):
        for a in self.agents:
            a.cleanup()

    def start(self, *args, **kw):
        a = Agentd(*args, **kw)
        self.agents.append(a)
        return a.start()
