"""Harness for agentd's integration tests: the real binary over HTTP.

Each test gets its own agentd (env AGENTD = path to the binary), listening on a
free 127.0.0.1 port and on a private unix socket in a temporary directory, with
a random token in a token file. tearDown stops it with SIGTERM and fails the
test when it does not exit 0 within the shutdown grace (plus slack), when it
died on its own during the test, or when session processes outlive it.
agentd's stderr goes to a file that is printed when a test fails.
AGENTD_IT_KEEP=1 keeps each test's temporary directory (token, socket, stderr).
Every answer a Client gets is checked against api/openapi.yaml
(openapi_check.py; AGENTD_OPENAPI_CHECK=0 turns that off, for debugging only).

Run: AGENTD=build/agentd/agentd /usr/bin/python3 -m unittest discover -s tests/integration -v
 or: meson test -C build --suite integration

Only the Python standard library is used. Written from API.md alone.
"""

import base64
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

import openapi_check

if openapi_check.enabled():
    openapi_check.state()   # load and check the document once, before any test

# Generous bounds for a loaded 2-core machine.  AGENTD_IT_SLOW=N multiplies
# the harness's own timeouts (agentd under valgrind is ~N times slower).
SLOW = max(1.0, float(os.environ.get('AGENTD_IT_SLOW') or 1))
START_TIMEOUT = 10.0 * SLOW   # healthz must answer 200 within this
HTTP_TIMEOUT = 90.0 * SLOW    # socket timeout of one request
DEFAULT_GRACE_MS = 1000       # --shutdown-grace given to agentd
EXIT_SLACK = 8.0 * SLOW       # on top of the grace, for agentd to exit

ID_RE = re.compile(r'^[A-Za-z0-9._-]{1,64}$')
TS_RE = re.compile(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)$')

SESSION_FIELDS = ('id', 'pid', 'tty', 'rows', 'cols', 'argv', 'cwd', 'user',
                  'state', 'exit_code', 'signal', 'timed_out', 'started_at',
                  'ended_at', 'last_chunk', 'bytes_out')
WINDOW_FIELDS = ('output', 'cursor', 'dropped_chunks', 'more', 'eof')


def agentd_path():
    path = os.environ.get('AGENTD')
    if not path:
        raise unittest.SkipTest('AGENTD (path to the agentd binary) is not set')
    return os.path.abspath(path)


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]
    finally:
        s.close()


def b64(data):
    return base64.b64encode(data).decode('ascii')


def unb64(text):
    return base64.b64decode(text.encode('ascii'), validate=True)


def chunk_bytes(ch):
    """A chunk's bytes: its "text" (encoding=text, UTF-8) or its "data"."""
    if 'text' in ch:
        assert 'data' not in ch, ch
        return ch['text'].encode('utf-8')
    return unb64(ch['data'])


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


class Response:
    """A complete HTTP answer: status, headers, raw body and its JSON."""

    def __init__(self, status, reason, headers, body, elapsed):
        self.status = status
        self.reason = reason
        self.headers = headers          # http.client.HTTPMessage
        self.body = body
        self.elapsed = elapsed          # seconds, request sent to body read
        self._json = None

    @property
    def json(self):
        if self._json is None:
            try:
                self._json = json.loads(self.body.decode('utf-8'))
            except ValueError as e:
                raise AssertionError('answer %d is not JSON (%s): %r'
                                     % (self.status, e, self.body[:500]))
        return self._json

    def header(self, name):
        return self.headers.get(name)

    def __repr__(self):
        return '<Response %d %r>' % (self.status, self.body[:300])


class Client:
    """A keep-alive HTTP client for one agentd endpoint.

    `auth` is a dict of headers added to every request (normally
    Authorization: Bearer TOKEN). One connection is kept and reused; when a
    reused connection turns out to be closed by the server before any answer,
    the request is sent once more on a new connection (`reconnects` counts it).
    """

    def __init__(self, factory, auth=None):
        self.factory = factory
        self.auth = dict(auth or {})
        self.conn = None
        self.used = False
        self.reconnects = 0
        self.connects = 0

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except OSError:
                pass
        self.conn = None
        self.used = False

    def _connection(self):
        if self.conn is None:
            self.conn = self.factory()
            self.used = False
            self.connects += 1
        return self.conn

    def request(self, method, path, body=None, headers=None, auth=True,
                json_body=None):
        hdrs = {}
        if auth:
            hdrs.update(self.auth)
        if json_body is not None:
            body = json.dumps(json_body).encode('utf-8')
            hdrs['Content-Type'] = 'application/json'
        if isinstance(body, str):
            body = body.encode('utf-8')
        if headers:
            hdrs.update(headers)
        if body is None and method in ('POST', 'PUT', 'PATCH'):
            body = b''
        for attempt in (0, 1):
            conn = self._connection()
            reused = self.used
            t0 = time.monotonic()
            try:
                conn.request(method, path, body=body, headers=hdrs)
                resp = conn.getresponse()
                data = resp.read()
            except (http.client.RemoteDisconnected, BrokenPipeError,
                    ConnectionResetError, http.client.CannotSendRequest,
                    http.client.BadStatusLine) as e:
                self.close()
                if attempt == 0 and reused:
                    self.reconnects += 1
                    continue
                raise AssertionError('%s %s: connection failed: %r'
                                     % (method, path, e))
            elapsed = time.monotonic() - t0
            self.used = True
            if resp.will_close:
                self.close()
            if openapi_check.enabled():
                # Every answer must be one that api/openapi.yaml describes.
                openapi_check.check(method, path, resp.status, resp.msg, data)
            return Response(resp.status, resp.reason, resp.msg, data, elapsed)
        raise AssertionError('unreachable')


def query(**params):
    """?a=1&b=2 from the params that are not None ('' when none)."""
    items = []
    for k, v in params.items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = 'true' if v else 'false'
        items.append((k, str(v)))
    return ('?' + urllib.parse.urlencode(items)) if items else ''


class Agentd:
    """One agentd process with its temporary directory, token and clients."""

    def __init__(self, extra_args=(), token=True, token_in_env=False,
                 socket_path=None, listen=True, env=None, grace_ms=None,
                 token_file_text=None):
        self.binary = agentd_path()
        self.dir = tempfile.mkdtemp(prefix='agentd-it-')
        self.workdir = os.path.join(self.dir, 'work')
        os.mkdir(self.workdir)
        self.extra_args = list(extra_args)
        self.token = None
        self.token_file = None
        self.token_in_env = token_in_env
        if token:
            self.token = ''.join(random.choice(string.ascii_letters + string.digits)
                                 for _ in range(32))
        self.token_file_text = token_file_text
        self.socket_path = (os.path.join(self.dir, 'agentd.sock')
                            if socket_path is None else socket_path)
        self.listen = listen
        self.port = None
        self.grace_ms = DEFAULT_GRACE_MS if grace_ms is None else grace_ms
        self.env = dict(env or {})
        self.marker = 'AGENTD_IT_MARKER_%d_%d' % (os.getpid(), random.randrange(1 << 30))
        self.proc = None
        self.stderr_path = os.path.join(self.dir, 'agentd.stderr')
        self.stdout_path = os.path.join(self.dir, 'agentd.stdout')
        self.clients = []
        self.stopped = False

    # -- process -----------------------------------------------------------
    def argv(self):
        args = [self.binary]
        if self.listen:
            args += ['--listen', '127.0.0.1:%d' % self.port]
        args += ['--socket', self.socket_path]
        if self.token is not None and not self.token_in_env:
            self.token_file = os.path.join(self.dir, 'token')
            fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            text = self.token if self.token_file_text is None else self.token_file_text
            os.write(fd, text.encode())
            os.close(fd)
            args += ['--token-file', self.token_file]
        args += ['--workdir', self.workdir]
        if not any(a == '--shutdown-grace' for a in self.extra_args):
            args += ['--shutdown-grace', str(self.grace_ms)]
        args += self.extra_args
        return args

    def start(self):
        last_error = None
        for attempt in range(3):
            self.port = free_port()
            env = dict(os.environ)
            env.pop('AGENTD_TOKEN', None)
            env.pop('AGENTD', None)
            env['AGENTD_IT_MARKER'] = self.marker
            if self.token is not None and self.token_in_env:
                env['AGENTD_TOKEN'] = self.token
            env.update(self.env)
            self.args = self.argv()
            self.stderr_file = open(self.stderr_path, 'ab')
            self.stdout_file = open(self.stdout_path, 'ab')
            self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL,
                                         stdout=self.stdout_file,
                                         stderr=self.stderr_file,
                                         env=env, cwd=self.dir)
            self.started_at = time.monotonic()
            try:
                self.wait_ready()
                return
            except AssertionError as e:
                last_error = e
                if self.proc.poll() is None:
                    self.proc.kill()
                self.proc.wait()
                # A lost race for the port: try another one.
                if 'in use' not in self.stderr().lower():
                    break
        raise AssertionError('agentd did not start: %s\nargv: %s\nstderr:\n%s'
                             % (last_error, self.args, self.stderr()))

    def wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise AssertionError('agentd exited with %s during start'
                                     % self.proc.returncode)
            try:
                if self.listen:
                    c = http.client.HTTPConnection('127.0.0.1', self.port, timeout=2)
                else:
                    c = UnixHTTPConnection(self.socket_path, timeout=2)
                try:
                    c.request('GET', '/healthz')
                    r = c.getresponse()
                    r.read()
                    if r.status == 200:
                        return
                finally:
                    c.close()
            except (OSError, http.client.HTTPException):
                pass
            if time.monotonic() > deadline:
                raise AssertionError('GET /healthz did not answer 200 within %ss'
                                     % START_TIMEOUT)
            time.sleep(0.01)

    def stderr(self):
        try:
            with open(self.stderr_path, 'rb') as f:
                return f.read().decode('utf-8', 'replace')
        except OSError:
            return ''

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=None):
        """SIGTERM agentd and wait; returns (returncode or None, seconds)."""
        for c in self.clients:
            c.close()
        if self.proc is None:
            return 0, 0.0
        if timeout is None:
            timeout = self.grace_ms / 1000.0 + EXIT_SLACK
        t0 = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            rc = None
        took = time.monotonic() - t0
        self.stopped = True
        return rc, took

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in (getattr(self, 'stderr_file', None), getattr(self, 'stdout_file', None)):
            if f:
                f.close()

    def leftover_processes(self):
        """Live (non-zombie) processes that inherited this agentd's marker."""
        found = []
        me = os.getpid()
        needle = ('AGENTD_IT_MARKER=' + self.marker).encode()
        for name in os.listdir('/proc'):
            if not name.isdigit() or int(name) == me:
                continue
            try:
                with open('/proc/%s/environ' % name, 'rb') as f:
                    if needle not in f.read():
                        continue
                with open('/proc/%s/stat' % name, 'rb') as f:
                    stat = f.read().decode('utf-8', 'replace')
                state = stat[stat.rindex(')') + 2:].split()[0]
                if state in ('Z', 'X'):
                    continue
                with open('/proc/%s/cmdline' % name, 'rb') as f:
                    cmd = f.read().replace(b'\0', b' ').decode('utf-8', 'replace')
                found.append((int(name), state, cmd.strip()))
            except (OSError, ValueError):
                continue
        return found

    def cleanup_dir(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- clients -----------------------------------------------------------
    def auth_headers(self):
        if self.token is None:
            return {}
        return {'Authorization': 'Bearer ' + self.token}

    def tcp_client(self, auth=True, port=None, host='127.0.0.1'):
        port = self.port if port is None else port
        c = Client(lambda: http.client.HTTPConnection(host, port, timeout=HTTP_TIMEOUT),
                   self.auth_headers() if auth else {})
        self.clients.append(c)
        return c

    def unix_client(self):
        path = self.socket_path
        c = Client(lambda: UnixHTTPConnection(path), {})
        self.clients.append(c)
        return c


class WindowChecker:
    """Follows one reader's cursor progression and checks every window.

    - chunk ids in a window are consecutive; the first is cursor+dropped+1;
    - `cursor` is the id of the last chunk returned (unchanged when none);
      a window that ends inside a chunk answers j * 2^32 + id (j bytes of
      it returned) and the next window starts with the rest of that chunk;
    - offsets: a chunk directly after the previous one starts where it ended;
      after a gap it starts at least `dropped` bytes later;
    - no chunk is ever returned twice; `eof` only with cursor == last_chunk
      and state exited; data is valid base64; streams are as expected.
    """

    def __init__(self, tc, tty=None, cursor=0):
        self.tc = tc
        self.tty = tty
        self.cursor = cursor
        self.chunks = []            # (id, stream, offset, bytes)
        self.seen = set()
        self.dropped = 0
        self.end_offset = None      # offset + len of the last chunk seen
        self.last = None            # last window (session object + window)
        self.eof = False
        self.windows = 0

    def feed(self, w, max_bytes=None):
        tc = self.tc
        for f in WINDOW_FIELDS + SESSION_FIELDS:
            tc.assertIn(f, w, 'field %r missing in %r' % (f, short(w)))
        out = w['output']
        tc.assertIsInstance(out, list)
        dropped = w['dropped_chunks']
        tc.assertIsInstance(dropped, int)
        tc.assertGreaterEqual(dropped, 0)
        low, skip = self.cursor & 0xffffffff, self.cursor >> 32
        after = low - 1 if skip else self.cursor
        if out:
            tc.assertEqual(out[0]['id'], after + dropped + 1,
                           'first chunk id %d after cursor %d with dropped_chunks %d'
                           % (out[0]['id'], self.cursor, dropped))
        else:
            tc.assertEqual(w['cursor'], self.cursor,
                           'cursor moved without chunks: %r' % short(w))
            tc.assertEqual(dropped, 0, 'a gap reported without the chunks after it: %r'
                           % short(w))
            tc.assertFalse(w['more'], 'more without chunks: %r' % short(w))
        total = 0
        prev_id = None
        for i, ch in enumerate(out):
            for f in ('id', 'stream', 'offset'):
                tc.assertIn(f, ch, 'chunk field %r missing: %r' % (f, ch))
            tc.assertTrue('data' in ch or 'text' in ch, ch)
            cid = ch['id']
            # the rest of a chunk a window ended inside may come again, and
            # with encoding=text a chunk may come as pieces (same id)
            piece = prev_id is not None and cid == prev_id
            if not (i == 0 and skip and dropped == 0 and cid == low) and not piece:
                tc.assertNotIn(cid, self.seen, 'chunk %d returned twice' % cid)
            if prev_id is not None and not piece:
                tc.assertEqual(cid, prev_id + 1, 'chunk ids not consecutive in a window')
            data = chunk_bytes(ch)
            tc.assertGreater(len(data), 0, 'empty chunk %d' % cid)
            if self.tty is True:
                tc.assertEqual(ch['stream'], 'pty')
            elif self.tty is False:
                tc.assertIn(ch['stream'], ('stdout', 'stderr'))
            gap = dropped if i == 0 else 0
            if self.end_offset is None:
                # First chunk this reader sees: if it starts at cursor 0 with
                # nothing dropped, it is the session's first byte.
                if self.cursor == 0 and gap == 0:
                    tc.assertEqual(ch['offset'], 0, 'chunk 1 offset')
                elif gap:
                    tc.assertGreaterEqual(ch['offset'], gap)
            else:
                if gap == 0:
                    tc.assertEqual(ch['offset'], self.end_offset,
                                   'offset of chunk %d is %d, previous ended at %d'
                                   % (cid, ch['offset'], self.end_offset))
                else:
                    tc.assertGreaterEqual(ch['offset'], self.end_offset + gap,
                                          'offset after a gap of %d chunks' % gap)
            self.end_offset = ch['offset'] + len(data)
            self.seen.add(cid)
            self.chunks.append((cid, ch['stream'], ch['offset'], data))
            total += len(data)
            prev_id = cid
        if out:
            tc.assertEqual(w['cursor'] & 0xffffffff, out[-1]['id'],
                           'cursor is not the last id returned')
        if max_bytes is not None and len(out) > 1:
            tc.assertLessEqual(total, max_bytes,
                               'window of %d chunks holds %d bytes > max_bytes %d'
                               % (len(out), total, max_bytes))
        tc.assertLessEqual(w['cursor'] & 0xffffffff, w['last_chunk'])
        if self.end_offset is not None:
            tc.assertGreaterEqual(w['bytes_out'], self.end_offset,
                                  'bytes_out below the end of returned data')
        if w['eof']:
            tc.assertEqual(w['state'], 'exited', 'eof while running')
            tc.assertEqual(w['cursor'], w['last_chunk'], 'eof with cursor != last_chunk')
            tc.assertFalse(w['more'], 'eof with more')
        if w['more'] and w['cursor'] >> 32 == 0:
            tc.assertLess(w['cursor'], w['last_chunk'], 'more but cursor == last_chunk')
        self.dropped += dropped
        self.cursor = w['cursor']
        self.last = w
        self.eof = bool(w['eof'])
        self.windows += 1
        return w

    def data(self, stream=None):
        return b''.join(d for (_, s, _, d) in self.chunks if stream is None or s == stream)

    def streams(self):
        res = {}
        for (_, s, _, d) in self.chunks:
            res[s] = res.get(s, b'') + d
        return res


def short(obj, n=600):
    s = json.dumps(obj) if not isinstance(obj, str) else obj
    return s if len(s) <= n else s[:n] + '...'


class AgentdTestCase(unittest.TestCase):
    """Base class: an agentd per test, with helpers for the API."""

    agentd_args = ()            # extra flags for this class's agentd
    agentd_token = True
    autostart = True

    def setUp(self):
        self.agentd = None
        self._all_agentd = []
        if self.autostart:
            self.start_agentd(self.agentd_args, token=self.agentd_token)

    def start_agentd(self, extra_args=(), **kw):
        """Start a (further) agentd; it becomes self.agentd and self.c."""
        a = Agentd(extra_args, **kw)
        self._all_agentd.append(a)
        try:
            a.start()
        except BaseException:
            a.kill()
            raise
        self.agentd = a
        self.c = a.tcp_client() if a.listen else a.unix_client()
        return a

    def stop_agentd(self, a=None):
        """Stop agentd like tearDown does; fails unless it exits 0 in time."""
        a = a or self.agentd
        if a.stopped:
            return
        problems = []
        if not a.alive():
            problems.append('agentd died during the test with status %s'
                            % a.proc.returncode)
            a.stopped = True
        else:
            rc, took = a.stop()
            if rc is None:
                problems.append('agentd did not exit within %.1fs of SIGTERM'
                                % (a.grace_ms / 1000.0 + EXIT_SLACK))
                a.kill()
            elif rc != 0:
                problems.append('agentd exited with status %s after SIGTERM' % rc)
        deadline = time.monotonic() + 3
        left = a.leftover_processes()
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = a.leftover_processes()
        if left:
            problems.append('session processes outlived agentd: %r' % left)
            for pid, _, _ in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        a.kill()
        if problems:
            raise AssertionError('; '.join(problems) + '\nagentd stderr:\n' + a.stderr())

    def tearDown(self):
        failed = not getattr(self._outcome, 'success', True)
        problems = []
        for a in self._all_agentd:
            try:
                self.stop_agentd(a)
            except AssertionError as e:
                problems.append(str(e))
        if failed and not problems:
            for a in self._all_agentd:
                sys.stderr.write('\n--- agentd stderr (%s) ---\n%s--- end ---\n'
                                 % (' '.join(a.args), a.stderr()))
        # The temporary directory goes unless AGENTD_IT_KEEP=1 (its stderr
        # was printed above when the test failed).
        for a in self._all_agentd:
            if os.environ.get('AGENTD_IT_KEEP') != '1':
                a.cleanup_dir()
            else:
                sys.stderr.write('kept %s\n' % a.dir)
        if problems:
            self.fail('\n'.join(problems))

    # -- raw requests --------------------------------------------------------
    def req(self, method, path, body=None, client=None, **kw):
        c = client or self.c
        if isinstance(body, (dict, list)):
            return c.request(method, path, json_body=body, **kw)
        return c.request(method, path, body=body, **kw)

    def metric(self, name):
        """A figure of /metrics (a line 'name value')."""
        r = self.req('GET', '/metrics')
        for line in r.body.decode().splitlines():
            if line.startswith(name + ' '):
                return float(line.split()[1])
        self.fail('no metric %s' % name)

    def expect(self, resp, status, what=''):
        if resp.status != status:
            self.fail('%sexpected %d, got %d: %r' % (what and what + ': ', status,
                                                    resp.status, resp.body[:1000]))
        return resp

    def assertError(self, resp, status, code, field=None):
        """The answer is `status` with {"error": {"code": code, "message": ...}}."""
        self.assertEqual(resp.status, status, 'expected %d %s, got %d: %r'
                         % (status, code, resp.status, resp.body[:500]))
        ct = resp.header('Content-Type') or ''
        self.assertIn('application/json', ct, 'error Content-Type %r' % ct)
        body = resp.json
        self.assertIsInstance(body, dict)
        self.assertIn('error', body, 'no "error" in %r' % body)
        err = body['error']
        self.assertIsInstance(err, dict)
        if isinstance(code, (tuple, list)):
            self.assertIn(err.get('code'), code, 'error code in %r' % body)
        else:
            self.assertEqual(err.get('code'), code, 'error code in %r' % body)
        self.assertIsInstance(err.get('message'), str)
        self.assertTrue(err['message'], 'empty error message')
        if field is not None:
            fields = field if isinstance(field, (tuple, list)) else (field,)
            self.assertTrue(any(f in err['message'] for f in fields),
                            'message %r does not name %r' % (err['message'], field))
        return err

    # -- sessions ------------------------------------------------------------
    def create_raw(self, client=None, **fields):
        return self.req('POST', '/v1/sessions', fields, client=client)

    def create(self, client=None, **fields):
        """POST /v1/sessions; expects 201; returns the body (session + window)."""
        r = self.create_raw(client=client, **fields)
        self.expect(r, 201, 'create %s' % short(fields, 200))
        body = r.json
        for f in SESSION_FIELDS + WINDOW_FIELDS:
            self.assertIn(f, body, 'create answer lacks %r: %s' % (f, short(body)))
        loc = r.header('Location')
        self.assertEqual(loc, '/v1/sessions/' + body['id'])
        return body

    def get_raw(self, sid, cursor=None, wait_ms=None, max_bytes=None, client=None, **extra):
        q = query(cursor=cursor, wait_ms=wait_ms, max_bytes=max_bytes, **extra)
        return self.req('GET', '/v1/sessions/%s%s' % (urllib.parse.quote(sid, safe=''), q),
                        client=client)

    def get(self, sid, cursor=None, wait_ms=None, max_bytes=None, client=None):
        r = self.get_raw(sid, cursor, wait_ms, max_bytes, client=client)
        self.expect(r, 200, 'GET session %s' % sid)
        return r.json

    def stdin_raw(self, sid, data=None, text=None, eof=None, yield_ms=None,
                  wait_ms=None, max_bytes=None, client=None):
        body = {}
        if data is not None:
            body['data'] = b64(data)
        if text is not None:
            body['text'] = text
        if eof is not None:
            body['eof'] = eof
        if yield_ms is not None:
            body['yield_ms'] = yield_ms
        if wait_ms is not None:
            body['wait_ms'] = wait_ms
        if max_bytes is not None:
            body['max_bytes'] = max_bytes
        return self.req('POST', '/v1/sessions/%s/stdin' % sid, body, client=client)

    def stdin(self, sid, data=None, text=None, eof=None, yield_ms=None,
              wait_ms=None, max_bytes=None, client=None):
        r = self.stdin_raw(sid, data, text, eof, yield_ms, wait_ms, max_bytes, client)
        self.expect(r, 200, 'stdin %s' % sid)
        body = r.json
        self.assertIn('written', body)
        n = len(data) if data is not None else len(text.encode()) if text is not None else 0
        self.assertEqual(body['written'], n, 'written')
        return body

    def stdin_octets(self, sid, data, client=None, **params):
        return self.req('POST', '/v1/sessions/%s/stdin%s' % (sid, query(**params)), data,
                        headers={'Content-Type': 'application/octet-stream'},
                        client=client)

    def delete(self, sid, grace_ms=None, client=None):
        return self.req('DELETE', '/v1/sessions/%s%s' % (sid, query(grace_ms=grace_ms)),
                        client=client)

    def signal_raw(self, sid, sig, client=None):
        return self.req('POST', '/v1/sessions/%s/signal' % sid, {'signal': sig}, client=client)

    def resize_raw(self, sid, rows, cols, client=None):
        return self.req('POST', '/v1/sessions/%s/resize' % sid, {'rows': rows, 'cols': cols},
                        client=client)

    def list_sessions(self, client=None):
        r = self.req('GET', '/v1/sessions', client=client)
        self.expect(r, 200, 'GET /v1/sessions')
        self.assertIn('sessions', r.json)
        return r.json['sessions']

    def healthz(self, client=None):
        r = self.req('GET', '/healthz', client=client, auth=False)
        self.expect(r, 200, 'healthz')
        return r.json

    def read_all(self, sid, start=None, timeout=60.0, wait_ms=2000, max_bytes=None,
                 client=None, checker=None, tty=None):
        """Follow the cursor until eof; returns the WindowChecker.

        `start` is a window already received (the create answer, say): it is
        checked and its data kept, and reading goes on from its cursor.
        """
        ck = checker or WindowChecker(self, tty=tty)
        if start is not None:
            ck.feed(start, max_bytes=max_bytes)
        deadline = time.monotonic() + timeout
        stuck = 0
        while not ck.eof:
            if time.monotonic() > deadline:
                self.fail('no eof within %.0fs for %s; last: %s'
                          % (timeout, sid, short(ck.last)))
            w = self.get(sid, cursor=ck.cursor, wait_ms=wait_ms, max_bytes=max_bytes,
                         client=client)
            ck.feed(w, max_bytes=max_bytes)
            # chunks exist after the cursor, yet none come back
            stuck = stuck + 1 if (not w['output'] and w['last_chunk'] > w['cursor']) else 0
            if stuck >= 20:
                self.fail('20 reads returned no chunk although last_chunk %d > cursor %d: %s'
                          % (w['last_chunk'], w['cursor'], short(w)))
        return ck

    def read_until(self, sid, needle, ck=None, timeout=30.0, client=None, tty=None):
        """Follow the cursor until the concatenated data contains `needle`."""
        ck = ck or WindowChecker(self, tty=tty)
        deadline = time.monotonic() + timeout
        while needle not in ck.data():
            if ck.eof:
                self.fail('eof before %r; got %r' % (needle, ck.data()[-500:]))
            if time.monotonic() > deadline:
                self.fail('%r not seen within %.0fs; got %r'
                          % (needle, timeout, ck.data()[-500:]))
            ck.feed(self.get(sid, cursor=ck.cursor, wait_ms=1000, client=client))
        return ck

    def wait_state(self, sid, state='exited', timeout=30.0, client=None):
        deadline = time.monotonic() + timeout
        while True:
            s = self.get(sid, cursor=None, max_bytes=None, client=client)
            if s['state'] == state:
                return s
            if time.monotonic() > deadline:
                self.fail('session %s not %s within %.0fs: %s'
                          % (sid, state, timeout, short(s)))
            time.sleep(0.02)

    def run_cmd(self, cmd, timeout=30.0, **fields):
        """Create, then read to eof; returns (final window, WindowChecker)."""
        fields.setdefault('yield_ms', 10000)
        w = self.create(cmd=cmd, **fields)
        ck = self.read_all(w['id'], start=w, timeout=timeout, tty=fields.get('tty', False))
        return ck.last, ck

    def assertSession(self, s):
        """Checks the session object's fields and their types."""
        for f in SESSION_FIELDS:
            self.assertIn(f, s, 'session lacks %r: %s' % (f, short(s)))
        self.assertIsInstance(s['id'], str)
        self.assertRegex(s['id'], ID_RE)
        self.assertIsInstance(s['pid'], int)
        self.assertIsInstance(s['tty'], bool)
        self.assertIsInstance(s['argv'], list)
        self.assertIn(s['state'], ('running', 'exited'))
        self.assertIsInstance(s['timed_out'], bool)
        self.assertRegex(s['started_at'], TS_RE)
        self.assertIsInstance(s['last_chunk'], int)
        self.assertIsInstance(s['bytes_out'], int)
        if s['state'] == 'running':
            self.assertIsNone(s['exit_code'])
            self.assertIsNone(s['ended_at'])
        else:
            self.assertIsInstance(s['exit_code'], int)
            self.assertRegex(s['ended_at'], TS_RE)

    def wait_until(self, pred, timeout=10.0, what='condition', interval=0.02):
        deadline = time.monotonic() + timeout
        while True:
            v = pred()
            if v:
                return v
            if time.monotonic() > deadline:
                self.fail('%s not true within %.0fs' % (what, timeout))
            time.sleep(interval)


def pid_gone(pid):
    """True when pid no longer exists (a zombie still counts as present)."""
    try:
        with open('/proc/%d/stat' % pid, 'rb') as f:
            f.read()
        return False
    except FileNotFoundError:
        return True
    except ProcessLookupError:
        return True


def pid_state(pid):
    try:
        with open('/proc/%d/stat' % pid, 'rb') as f:
            stat = f.read().decode('utf-8', 'replace')
        return stat[stat.rindex(')') + 2:].split()[0]
    except OSError:
        return None


class Background(threading.Thread):
    """Runs fn(*args) in a thread; .result/.error, .join_result()."""

    def __init__(self, fn, *args, **kw):
        super().__init__(daemon=True)
        self.fn, self.args, self.kw = fn, args, kw
        self.result = None
        self.error = None
        self.done_at = None
        self.start()

    def run(self):
        try:
            self.result = self.fn(*self.args, **self.kw)
        except BaseException as e:   # reported by join_result
            self.error = e
        self.done_at = time.monotonic()

    def join_result(self, timeout=60.0):
        self.join(timeout)
        if self.is_alive():
            raise AssertionError('background request did not finish in %.0fs' % timeout)
        if self.error is not None:
            raise self.error
        return self.result
