"""A client of agentd's HTTP API: one method per route, and the two agent
tools exec_command and write_stdin (tools.py). Standard library only.

Reads follow a cursor: a read whose connection fails is sent again with the
same parameters, so no output is lost or repeated. A write to stdin that
carries an offset (exactly-once stdin, API.md) is sent again the same way,
and agentd takes each byte once however often it arrives; one without an
offset is never sent again. A stdin write whose connection stays broken
raises StdinUncertain.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.parse
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional,
                    Sequence, Tuple, Union)

from .tools import _StdinCount
from .types import (Chunk, EventPage, Event, FileWritten, Health, Port,
                    RawWindow, Resumed, Session, SessionWindow, StatResult,
                    from_dict)

JSON = 'application/json'
OCTETS = 'application/octet-stream'


class AgentdError(Exception):
    """A non-2xx answer: {"error": {"code", "message"}}."""

    def __init__(self, status: int, code: str, message: str, method: str = '',
                 path: str = '', session: Optional[Session] = None,
                 stdin_bytes: Optional[int] = None) -> None:
        super().__init__('agentd %s %s: %d %s: %s' % (method, path, status, code, message))
        self.status = status
        self.code = code
        self.message = message
        self.session = session            # 409 session_exists: the existing one
        self.stdin_bytes = stdin_bytes    # 409 stdin_offset_mismatch (issue 24)


class ConnectionLost(Exception):
    """The connection failed before a whole answer arrived."""


class StdinUncertain(ConnectionLost):
    """The connection failed during a stdin write: it may or may not have
    reached the session. A write without an offset is never sent again; one
    with an offset was sent again (retries) and every try failed."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__('localhost', timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


_Answer = Tuple[int, http.client.HTTPMessage, bytes]
_CONN_ERRORS = (OSError, http.client.HTTPException)


def _budget(q: Dict[str, Any], wait_ms: Optional[int] = None,
            max_bytes: Optional[int] = None, head_tail: bool = False,
            idle_ms: Optional[int] = None, strip_ansi: bool = False,
            yield_ms: Optional[int] = None,
            encoding: Optional[str] = None) -> Dict[str, Any]:
    for k, v in (('wait_ms', wait_ms), ('max_bytes', max_bytes),
                 ('idle_ms', idle_ms), ('yield_ms', yield_ms)):
        if v is not None:
            q[k] = v
    if head_tail:
        q['head_tail'] = True
    if strip_ansi:
        q['strip_ansi'] = True
    if encoding is not None:
        q['encoding'] = encoding
    return q


def _query(params: Mapping[str, Any]) -> str:
    items = []
    for k, v in params.items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = 'true' if v else 'false'
        items.append((k, str(v)))
    return ('?' + urllib.parse.urlencode(items)) if items else ''


def _sid(session_id: str, action: str = '') -> str:
    p = '/v1/sessions/' + urllib.parse.quote(session_id, safe='')
    return p + '/' + action if action else p


class Client:
    """A client of one agentd: endpoint is "http://HOST:PORT" or
    "unix:///run/agentd.sock". Safe to share between threads (a connection
    per thread)."""

    def __init__(self, endpoint: str, token: Optional[str] = None,
                 timeout: float = 90.0, retries: int = 5,
                 backoff: float = 0.05) -> None:
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._local = threading.local()
        self._tools: Dict[str, Tuple[int, int]] = {}   # id -> (cursor, next offset)
        self._stdin: Dict[str, _StdinCount] = {}         # id -> write_stdin's count
        self._tools_lock = threading.Lock()
        if endpoint.startswith('unix://'):
            path = endpoint[len('unix://'):]
            if not path.startswith('/'):
                raise ValueError('unix socket path %r is not absolute' % path)
            self._factory: Callable[[], http.client.HTTPConnection] = \
                lambda: _UnixConnection(path, timeout)
        elif endpoint.startswith('http://'):
            u = urllib.parse.urlsplit(endpoint)
            if not u.hostname:
                raise ValueError('bad endpoint %r' % endpoint)
            host, port = u.hostname, u.port or 80
            self._factory = lambda: http.client.HTTPConnection(host, port, timeout=timeout)
        else:
            raise ValueError('endpoint %r is neither http:// nor unix://' % endpoint)

    def close(self) -> None:
        conn = getattr(self._local, 'conn', None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def __enter__(self) -> 'Client':
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- transport -----------------------------------------------------------
    def _once(self, method: str, path: str, body: Optional[bytes],
              headers: Dict[str, str]) -> _Answer:
        conn = getattr(self._local, 'conn', None)
        fresh = conn is None
        for attempt in (0, 1):
            if conn is None:
                conn = self._local.conn = self._factory()
            try:
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                # Every answer of agentd carries Content-Length: without it
                # (a head cut short) or with fewer bytes, it was cut.
                length = resp.getheader('Content-Length')
                if method != 'HEAD' and (length is None or not length.isdigit() or
                                         int(length) != len(data)):
                    raise http.client.IncompleteRead(data)
            except _CONN_ERRORS as e:
                conn.close()
                conn = self._local.conn = None
                # A kept connection the server closed meanwhile: once more.
                if attempt == 0 and not fresh and isinstance(
                        e, (http.client.RemoteDisconnected, BrokenPipeError,
                            ConnectionResetError)) and method == 'GET':
                    fresh = True
                    continue
                raise ConnectionLost('agentd %s %s: connection failed: %r'
                                     % (method, path, e)) from e
            if resp.will_close:
                conn.close()
                self._local.conn = None
            return resp.status, resp.msg, data
        raise AssertionError('unreachable')

    def _do(self, method: str, path: str, body: Optional[bytes] = None,
            headers: Optional[Dict[str, str]] = None, retry: bool = False) -> _Answer:
        hdrs = dict(headers or {})
        if self.token:
            hdrs['Authorization'] = 'Bearer ' + self.token
        if body is None and method in ('POST', 'PUT'):
            body = b''
        pause = self.backoff
        for attempt in range(self.retries + 1):
            try:
                return self._once(method, path, body, hdrs)
            except ConnectionLost:
                if not retry or attempt >= self.retries:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 2.0)
        raise AssertionError('unreachable')

    def _call(self, method: str, path: str, body: Any = None, want: int = 200,
              retry: bool = False) -> Any:
        data = None
        headers = {}
        if body is not None:
            data = json.dumps(body).encode('utf-8')
            headers['Content-Type'] = JSON
        status, hdrs, raw = self._do(method, path, data, headers, retry)
        if status != want:
            raise _error(method, path, status, raw)
        return json.loads(raw.decode('utf-8')) if raw else None

    # -- routes ---------------------------------------------------------------
    def health(self) -> Health:
        return from_dict(Health, self._call('GET', '/healthz', retry=True))

    def metrics(self) -> str:
        status, _, raw = self._do('GET', '/metrics', retry=True)
        if status != 200:
            raise _error('GET', '/metrics', status, raw)
        return raw.decode('utf-8')

    def list_sessions(self) -> List[Session]:
        return [Session.parse(s) for s in
                self._call('GET', '/v1/sessions', retry=True)['sessions']]

    def list_sessions_page(self, limit: int, after: Optional[str] = None
                           ) -> Tuple[List[Session], Optional[str]]:
        """GET /v1/sessions?limit=N&after=NEXT: at most limit sessions, and
        the position of the next page (None when none follow)."""
        d = self._call('GET', '/v1/sessions' + _query({'limit': limit, 'after': after}),
                       retry=True)
        return [Session.parse(s) for s in d['sessions']], d.get('next')

    def create(self, cmd: Optional[str] = None, argv: Optional[Sequence[str]] = None,
               **fields: Any) -> SessionWindow:
        """POST /v1/sessions; fields as API.md names them (id, tty, cwd, env,
        yield_ms, head_tail, ...). Not sent again after a connection failure."""
        body = {k: v for k, v in fields.items() if v is not None}
        if cmd is not None:
            body['cmd'] = cmd
        if argv is not None:
            body['argv'] = list(argv)
        return SessionWindow.parse(self._call('POST', '/v1/sessions', body, want=201))

    def read(self, session_id: str, cursor: int = 0, wait_ms: Optional[int] = None,
             max_bytes: Optional[int] = None, head_tail: bool = False,
             idle_ms: Optional[int] = None, strip_ansi: bool = False,
             encoding: Optional[str] = None) -> SessionWindow:
        """GET /v1/sessions/{id}: the chunks after cursor; sent again with the
        same cursor after a connection failure.  encoding="text": chunks of
        valid UTF-8 come as text (Chunk.text works with either)."""
        q = _budget({'cursor': cursor}, wait_ms, max_bytes, head_tail, idle_ms, strip_ansi,
                    encoding=encoding)
        return SessionWindow.parse(self._call('GET', _sid(session_id) + _query(q), retry=True))

    def read_raw(self, session_id: str, cursor: int = 0,
                 max_bytes: Optional[int] = None) -> RawWindow:
        path = _sid(session_id) + _query({'cursor': cursor, 'max_bytes': max_bytes})
        status, h, raw = self._do('GET', path, headers={'Accept': OCTETS}, retry=True)
        if status != 200:
            raise _error('GET', path, status, raw)
        code = h.get('X-Agentd-Exit-Code')
        return RawWindow(raw, int(h.get('X-Agentd-Cursor', 0)), int(h.get('X-Agentd-Offset', 0)),
                         int(h.get('X-Agentd-Dropped-Chunks', 0)),
                         h.get('X-Agentd-More') == 'true', h.get('X-Agentd-Eof') == 'true',
                         h.get('X-Agentd-State', ''), int(code) if code is not None else None)

    def stdin(self, session_id: str, text: Optional[str] = None,
              data: Optional[bytes] = None, eof: bool = False,
              offset: Optional[int] = None, **budget: Any) -> SessionWindow:
        """POST /v1/sessions/{id}/stdin (JSON); budget: yield_ms, wait_ms,
        max_bytes, head_tail, idle_ms. With offset (the stdin bytes believed
        accepted before this write; exactly-once stdin, API.md) it is sent
        again after a connection failure, as reads are: agentd writes only
        what it has not accepted yet and answers a repeat with duplicate.
        Without it, it is never sent again. Raises StdinUncertain when the
        connection stays broken."""
        import base64
        body: Dict[str, Any] = {k: v for k, v in budget.items() if v is not None}
        if text is not None:
            body['text'] = text
        if data is not None:
            body['data'] = base64.b64encode(data).decode('ascii')
        if eof:
            body['eof'] = True
        if offset is not None:
            body['offset'] = offset
        try:
            return SessionWindow.parse(self._call('POST', _sid(session_id, 'stdin'), body,
                                                  retry=offset is not None))
        except StdinUncertain:
            raise
        except ConnectionLost as e:
            raise StdinUncertain(str(e)) from e

    def stdin_raw(self, session_id: str, data: bytes, eof: bool = False,
                  offset: Optional[int] = None, **budget: Any) -> SessionWindow:
        """stdin() with a raw body, the options as query parameters
        (?offset=N); sent again after a connection failure as stdin() is."""
        q = dict(budget)
        if eof:
            q['eof'] = True
        if offset is not None:
            q['offset'] = offset
        path = _sid(session_id, 'stdin') + _query(q)
        try:
            status, _, raw = self._do('POST', path, data, {'Content-Type': OCTETS},
                                      retry=offset is not None)
        except ConnectionLost as e:
            raise StdinUncertain(str(e)) from e
        if status != 200:
            raise _error('POST', path, status, raw)
        return SessionWindow.parse(json.loads(raw.decode('utf-8')))

    def resize(self, session_id: str, rows: int, cols: int) -> Session:
        return Session.parse(self._call('POST', _sid(session_id, 'resize'),
                                        {'rows': rows, 'cols': cols}, retry=True))

    def signal(self, session_id: str, sig: Union[str, int],
               target: Optional[str] = None) -> Session:
        body: Dict[str, Any] = {'signal': sig}
        if target:
            body['target'] = target
        return Session.parse(self._call('POST', _sid(session_id, 'signal'), body))

    def delete(self, session_id: str, grace_ms: Optional[int] = None) -> Session:
        s = Session.parse(self._call('DELETE', _sid(session_id) + _query({'grace_ms': grace_ms})))
        with self._tools_lock:
            self._tools.pop(session_id, None)
            self._stdin.pop(session_id, None)
        return s

    def read_file(self, path: str, offset: Optional[int] = None,
                  length: Optional[int] = None, user: Optional[str] = None) -> bytes:
        p = '/v1/files' + _query({'path': path, 'offset': offset, 'length': length, 'user': user})
        status, _, raw = self._do('GET', p, retry=True)
        if status != 200:
            raise _error('GET', p, status, raw)
        return raw

    def write_file(self, path: str, data: bytes, mode: Optional[str] = None,
                   mkdir: bool = False, user: Optional[str] = None) -> FileWritten:
        """PUT /v1/files (atomic); sent again after a connection failure."""
        p = '/v1/files' + _query({'path': path, 'mode': mode, 'mkdir': mkdir or None,
                                  'user': user})
        status, _, raw = self._do('PUT', p, data, {'Content-Type': OCTETS}, retry=True)
        if status != 200:
            raise _error('PUT', p, status, raw)
        return from_dict(FileWritten, json.loads(raw.decode('utf-8')))

    def stat(self, paths: Sequence[str], user: Optional[str] = None) -> List[StatResult]:
        body: Dict[str, Any] = {'paths': list(paths)}
        if user is not None:
            body['user'] = user
        return [from_dict(StatResult, r) for r in
                self._call('POST', '/v1/files/stat', body, retry=True)['results']]

    def fetch(self, url: str, path: str, **fields: Any) -> FileWritten:
        body = {k: v for k, v in fields.items() if v is not None}
        body.update(url=url, path=path)
        return from_dict(FileWritten, self._call('POST', '/v1/files/fetch', body))

    def events(self, cursor: int = 0, wait_ms: Optional[int] = None,
               session: Optional[str] = None,
               types: Optional[Sequence[str]] = None) -> EventPage:
        """GET /v1/events (issue 23)."""
        q = {'cursor': cursor, 'wait_ms': wait_ms, 'session': session,
             'types': ','.join(types) if types else None}
        d = self._call('GET', '/v1/events' + _query(q), retry=True)
        return EventPage([Event.parse(e) for e in d['events']], d['cursor'], d['dropped_events'])

    def ports(self, port: Optional[int] = None, wait_ms: Optional[int] = None) -> List[Port]:
        """GET /v1/ports (issue 23)."""
        d = self._call('GET', '/v1/ports' + _query({'port': port, 'wait_ms': wait_ms}), retry=True)
        return [from_dict(Port, p) for p in d['ports']]

    def sandbox_resumed(self, unix_ms: Optional[int] = None,
                        entropy: Optional[bytes] = None) -> Resumed:
        """POST /v1/sandbox/resumed (issue 22)."""
        import base64
        body: Dict[str, Any] = {}
        if unix_ms is not None:
            body['unix_ms'] = unix_ms
        if entropy is not None:
            body['entropy'] = base64.b64encode(entropy).decode('ascii')
        return from_dict(Resumed, self._call('POST', '/v1/sandbox/resumed', body))

    def sandbox_pause(self) -> int:
        """POST /v1/sandbox/pause (issue 22): the generation."""
        return int(self._call('POST', '/v1/sandbox/pause', retry=True)['generation'])

    def debug_stat(self) -> Dict[str, Any]:
        """GET /debug/stat (the unix socket only)."""
        return dict(self._call('GET', '/debug/stat', retry=True))

    def debug_logs(self) -> str:
        status, _, raw = self._do('GET', '/debug/logs?format=text', retry=True)
        if status != 200:
            raise _error('GET', '/debug/logs', status, raw)
        return raw.decode('utf-8', 'replace')

    def follow(self, session_id: str, cursor: int = 0,
               wait_ms: int = 30000) -> Iterator[Union[Chunk, int]]:
        """Every chunk from cursor to the end of the output, each once and in
        order, across connection failures; an int in the stream is a gap (the
        number of chunks evicted before they were read)."""
        while True:
            w = self.read(session_id, cursor, wait_ms=wait_ms).window
            if w.dropped_chunks:
                yield w.dropped_chunks
            for ch in w.output:
                yield ch
            cursor = w.cursor
            if w.eof:
                return

    def stream(self, session_id: str, cursor: int = 0) -> Iterator[Union[Chunk, int, Session]]:
        """A session's output as Server-Sent Events from cursor: each chunk
        once and in order, an int for a gap (chunks dropped before they were
        sent), and last the session object of the exit event. A broken stream
        is opened again after the last event id seen (Last-Event-ID)."""
        path = _sid(session_id) + _query({'cursor': cursor})
        last: Optional[str] = None
        pause = self.backoff
        for attempt in range(self.retries + 1):
            conn = self._factory()
            try:
                hdrs = {'Accept': 'text/event-stream'}
                if self.token:
                    hdrs['Authorization'] = 'Bearer ' + self.token
                if last is not None:
                    hdrs['Last-Event-ID'] = last
                try:
                    conn.request('GET', path, headers=hdrs)
                    resp = conn.getresponse()
                    if resp.status != 200:
                        raise _error('GET', path, resp.status, resp.read())
                    event = ''
                    ident: Optional[str] = None
                    data: List[str] = []
                    while True:
                        raw = resp.readline()
                        if not raw:
                            break
                        line = raw.decode('utf-8').rstrip('\r\n')
                        if line == '':
                            if event == 'output':
                                yield Chunk.parse(json.loads('\n'.join(data)))
                            elif event == 'gap':
                                yield int(json.loads('\n'.join(data))['dropped_chunks'])
                            elif event == 'exit':
                                yield Session.parse(json.loads('\n'.join(data)))
                                return
                            if ident is not None:
                                last = ident
                            event, ident, data = '', None, []
                        elif line.startswith(':'):
                            continue
                        else:
                            k, _, v = line.partition(':')
                            v = v[1:] if v.startswith(' ') else v
                            if k == 'id':
                                ident = v
                            elif k == 'event':
                                event = v
                            elif k == 'data':
                                data.append(v)
                except _CONN_ERRORS:
                    pass
            finally:
                conn.close()
            if attempt >= self.retries:
                raise ConnectionLost('agentd GET %s: the stream broke %d times'
                                     % (path, attempt + 1))
            time.sleep(pause)
            pause = min(pause * 2, 2.0)

    # the tools live in tools.py; bound here
    from .tools import exec_command, write_stdin  # noqa: E402


def _error(method: str, path: str, status: int, raw: bytes) -> AgentdError:
    try:
        d = json.loads(raw.decode('utf-8'))
        e = d['error']
        sess = Session.parse(d['session']) if isinstance(d.get('session'), dict) else None
        return AgentdError(status, e['code'], e['message'], method, path, sess,
                           e.get('stdin_bytes'))
    except (ValueError, KeyError, TypeError):
        return AgentdError(status, 'http_%d' % status, raw[:200].decode('utf-8', 'replace'),
                           method, path)
