"""Fixtures: a real agentd (env AGENTD) per test, and a proxy that cuts answers."""

import os
import queue
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Agentd:
    def __init__(self, tmp):
        self.dir = str(tmp)
        self.work = os.path.join(self.dir, 'work')
        os.mkdir(self.work)
        self.socket = os.path.join(self.dir, 'agentd.sock')
        self.token = 'tok%d' % random.randrange(1 << 60)
        self.token_file = os.path.join(self.dir, 'token')
        with open(self.token_file, 'w') as f:
            f.write(self.token)
        self.stderr_path = os.path.join(self.dir, 'stderr')
        self.proc = None
        self.addr = None

    def start(self, binary):
        for _ in range(3):
            self.addr = '127.0.0.1:%d' % free_port()
            env = dict(os.environ)
            env.pop('AGENTD_TOKEN', None)
            with open(self.stderr_path, 'ab') as err:
                self.proc = subprocess.Popen(
                    [binary, '--listen', self.addr, '--socket', self.socket,
                     '--token-file', self.token_file, '--workdir', self.work,
                     '--shutdown-grace', '1000', '--clock-step', '0'],
                    stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=env)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    with urllib.request.urlopen('http://%s/healthz' % self.addr, timeout=2) as r:
                        if r.status == 200:
                            return
                except OSError:
                    time.sleep(0.02)
            self.proc.kill()
            self.proc.wait()
        raise AssertionError('agentd did not start:\n' + self.stderr())

    def stderr(self):
        with open(self.stderr_path, 'rb') as f:
            return f.read().decode('utf-8', 'replace')

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None

    @property
    def url(self):
        return 'http://' + self.addr


@pytest.fixture
def agentd(tmp_path):
    binary = os.environ.get('AGENTD')
    if not binary:
        pytest.skip('AGENTD (path to the agentd binary) is not set')
    a = Agentd(tmp_path)
    a.start(os.path.abspath(binary))
    yield a
    rc = a.stop()
    assert rc == 0, 'agentd exited with %r after SIGTERM:\n%s' % (rc, a.stderr())


def _read_message(f):
    """One HTTP message read whole from the file f: its head and its
    Content-Length bytes of body (requests and answers here have no other
    framing); None at the end."""
    head = b''
    length = 0
    while True:
        line = f.readline()
        if not line:
            return None
        head += line
        if line.lower().startswith(b'content-length:'):
            length = int(line.split(b':', 1)[1])
        if line == b'\r\n':
            return head + f.read(length)


def _forward_up(c, u, half_close, on_request=None):
    """Copy the requests the client c sends to the upstream u, each whole and
    first handed to on_request (when given), on a thread of its own; with
    half_close, shut u's write side when c is done."""
    def up():
        f = c.makefile('rb')
        try:
            while True:
                req = _read_message(f)
                if req is None:
                    break
                if on_request is not None:
                    on_request(req)
                u.sendall(req)
        except OSError:
            pass
        f.close()
        if half_close:
            try:
                u.shutdown(socket.SHUT_WR)
            except OSError:
                pass
    threading.Thread(target=up, daemon=True).start()


class Cutter:
    """A TCP proxy that reads each answer of agentd whole (Content-Length)
    and, with probability 1/every (0: never; or when `force` is set, the
    next one), passes on a random part of it and closes both connections.

    With stdin_every n > 0 it also drops the whole answer of every n-th
    stdin request (the first, the n+1-th, ...) and closes both connections:
    agentd took the bytes, the client never hears so."""

    def __init__(self, upstream, every=3, stdin_every=0):
        host, port = upstream.rsplit(':', 1)
        self.upstream = (host, int(port))
        self.every = every
        self.force = False
        self.cuts = 0
        self.stdin_every = stdin_every
        self.stdin_reqs = 0
        self.stdin_cuts = 0
        self.conns = 0
        self.lock = threading.Lock()
        self.rng = random.Random()
        self.sock = socket.socket()
        self.sock.bind(('127.0.0.1', 0))
        self.sock.listen(64)
        self.url = 'http://127.0.0.1:%d' % self.sock.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.closed = True
        self.sock.close()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.conns += 1
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _cut_at(self, n):
        with self.lock:
            if n >= 2 and (self.force or (self.every > 0 and
                                          self.rng.randrange(self.every) == 0)):
                self.force = False
                self.cuts += 1
                return self.rng.randrange(1, n)
            return None

    def _drop_answer(self, req):
        """Whether the answer to the request req is to be dropped (stdin_every)."""
        words = req.split(b'\r\n', 1)[0].split(b' ')
        if len(words) < 2 or words[0] != b'POST' or \
                not words[1].split(b'?', 1)[0].endswith(b'/stdin'):
            return False
        with self.lock:
            if self.stdin_every <= 0:
                return False
            self.stdin_reqs += 1
            return (self.stdin_reqs - 1) % self.stdin_every == 0

    def _serve(self, c):
        u = socket.create_connection(self.upstream)

        # Whether a request's answer is to be dropped, queued before agentd
        # has the request.
        drops = queue.Queue()
        _forward_up(c, u, half_close=True,
                    on_request=lambda req: drops.put(self._drop_answer(req)))
        f = u.makefile('rb')
        try:
            while True:
                answer = _read_message(f)
                if answer is None:
                    return
                try:
                    drop = drops.get_nowait()
                except queue.Empty:
                    drop = False        # an answer to no request (agentd closing)
                if drop:
                    with self.lock:
                        self.stdin_cuts += 1
                    return
                at = self._cut_at(len(answer))
                if at is not None:
                    c.sendall(answer[:at])
                    return
                c.sendall(answer)
        except OSError:
            pass
        finally:
            for s in (c, u):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            f.close()
            c.close()
            u.close()


@pytest.fixture
def cutter(agentd):
    p = Cutter(agentd.addr)
    yield p
    p.close()


@pytest.fixture
def stdin_cutter(agentd):
    """Drops the answer of every other stdin request (each write's first try)."""
    p = Cutter(agentd.addr, every=0, stdin_every=2)
    yield p
    p.close()


class StreamCutter:
    """A TCP proxy that closes each connection after a random number of
    bytes from agentd (lo..hi): a stream cut anywhere."""

    def __init__(self, upstream, lo=300, hi=20000):
        host, port = upstream.rsplit(':', 1)
        self.upstream = (host, int(port))
        self.lo, self.hi = lo, hi
        self.cuts = 0
        self.rng = random.Random()
        self.sock = socket.socket()
        self.sock.bind(('127.0.0.1', 0))
        self.sock.listen(64)
        self.url = 'http://127.0.0.1:%d' % self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.sock.close()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c, self.rng.randint(self.lo, self.hi)),
                             daemon=True).start()

    def _serve(self, c, budget):
        u = socket.create_connection(self.upstream)

        _forward_up(c, u, half_close=False)
        try:
            while budget > 0:
                b = u.recv(min(65536, budget))
                if not b:
                    break
                c.sendall(b)
                budget -= len(b)
            if budget <= 0:
                self.cuts += 1
        except OSError:
            pass
        for s in (c, u):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


@pytest.fixture
def stream_cutter(agentd):
    p = StreamCutter(agentd.addr)
    yield p
    p.close()
