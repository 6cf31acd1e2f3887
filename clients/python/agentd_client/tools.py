"""exec_command and write_stdin with Codex's unified-exec semantics.

A command runs until it ends or yield_time_ms passes; one still running
keeps its session id for write_stdin. The output handed back is cut to
max_output_tokens (about 4 bytes a token), keeping its head and its tail,
and says how many bytes were left out between them. write_stdin writes
at the session's stdin count (exactly-once stdin), assuming it is the
session's only stdin writer. Bound as methods of Client.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Dict, List, Optional

from .types import ExecResult, SessionWindow

if TYPE_CHECKING:
    from .client import Client

DEFAULT_EXEC_YIELD_MS = 10000
DEFAULT_STDIN_YIELD_MS = 250
MIN_YIELD_MS = 250
MAX_YIELD_MS = 30000
DEFAULT_MAX_OUTPUT_TOKENS = 10000
BYTES_PER_TOKEN = 4
POLL_PAUSE = 0.1
OMITTED_MARKER = '\n[... %d bytes omitted ...]\n'


class Collector:
    """The head and tail of a run of output within a byte budget. Pieces come
    in offset order; a piece that does not start where the last ended (a
    head_tail cut, an eviction) leaves a gap: the head stops growing at the
    first gap and the tail restarts after each one, so everything not kept
    lies between head and tail."""

    def __init__(self, budget: int, next_offset: int = 0) -> None:
        self.budget = budget
        self.head = bytearray()
        self.tail = bytearray()
        self.sealed = False
        self.total = 0
        self.next = next_offset

    def add(self, offset: int, data: bytes) -> None:
        if offset > self.next:
            self.total += offset - self.next
            self.sealed = True
            del self.tail[:]
        elif offset < self.next:
            skip = self.next - offset
            if skip >= len(data):
                return
            data, offset = data[skip:], self.next
        self.next = offset + len(data)
        self.total += len(data)
        hb = self.budget // 2
        if not self.sealed and len(self.head) < hb:
            n = min(hb - len(self.head), len(data))
            self.head += data[:n]
            data = data[n:]
            if not data:
                return
        self.sealed = True
        self.tail += data
        tb = self.budget - len(self.head)
        if len(self.tail) > tb:
            del self.tail[:len(self.tail) - tb]

    def feed(self, sw: SessionWindow) -> None:
        for ch in sw.window.output:
            self.add(ch.offset, ch.data)

    def render(self) -> 'tuple[str, int]':
        """The text (invalid UTF-8 replaced), the omitted amount said between
        head and tail; no cut splits a UTF-8 sequence (its bytes count)."""
        head, tail = bytes(self.head), bytes(self.tail)
        omitted = self.total - len(head) - len(tail)
        if omitted == 0:
            return (head + tail).decode('utf-8', 'replace'), 0
        head = _trim_end(head)
        for _ in range(3):
            if tail and (tail[0] & 0xC0) == 0x80:
                tail = tail[1:]
        omitted = self.total - len(head) - len(tail)
        return (head.decode('utf-8', 'replace') + OMITTED_MARKER % omitted +
                tail.decode('utf-8', 'replace')), omitted


def _trim_end(b: bytes) -> bytes:
    """b without an incomplete UTF-8 sequence at its end."""
    for back in range(1, min(4, len(b)) + 1):
        c = b[-back]
        if c & 0xC0 == 0x80:
            continue            # a continuation byte: look further back
        need = 1 if c < 0x80 else 2 if c >> 5 == 6 else 3 if c >> 4 == 14 else \
            4 if c >> 3 == 30 else 1
        return b[:-back] if need > back else b
    return b


class _StdinCount:
    """What write_stdin knows of a session's stdin: its stdin_bytes (None:
    to be read before the next write), and a lock that keeps the tools'
    writes to the session one at a time."""

    def __init__(self, count: Optional[int] = None) -> None:
        self.count = count
        self.lock = threading.Lock()


def _yield(ms: Optional[int], default: int) -> int:
    ms = default if not ms or ms <= 0 else ms
    return max(MIN_YIELD_MS, min(MAX_YIELD_MS, ms))


def _budget(tokens: Optional[int]) -> int:
    return (tokens if tokens and tokens > 0 else DEFAULT_MAX_OUTPUT_TOKENS) * BYTES_PER_TOKEN


def _result(session_id: str, sw: SessionWindow, col: Collector, t0: float) -> ExecResult:
    out, omitted = col.render()
    running = sw.session.running
    return ExecResult(session_id, running, None if running else sw.session.exit_code,
                      out, omitted, col.total, time.monotonic() - t0)


def exec_command(self: 'Client', cmd: str, workdir: Optional[str] = None,
                 tty: bool = False, yield_time_ms: Optional[int] = None,
                 max_output_tokens: Optional[int] = None, shell: Optional[str] = None,
                 login: bool = False, env: Optional[Dict[str, str]] = None,
                 session_id: Optional[str] = None) -> ExecResult:
    """exec_command: start cmd and wait up to yield_time_ms for it. If the
    connection fails, the call goes on by the session's id (chosen here)."""
    from .client import AgentdError, ConnectionLost
    t0 = time.monotonic()
    yield_ms = _yield(yield_time_ms, DEFAULT_EXEC_YIELD_MS)
    budget = _budget(max_output_tokens)
    sid = session_id or 'exec-' + os.urandom(6).hex()
    fields = dict(id=sid, cwd=workdir, tty=tty or None, shell=shell,
                  login=login or None, env=env, yield_ms=yield_ms,
                  head_tail=True, max_bytes=budget)
    sw: Optional[SessionWindow] = None
    for attempt in range(self.retries + 1):
        try:
            sw = self.create(cmd, **fields)
            break
        except ConnectionLost:
            if attempt >= self.retries:
                raise
        # The answer was lost: did the create arrive? Read it by its id.
        try:
            sw = self.read(sid, 0, max_bytes=budget, head_tail=True)
            break
        except AgentdError as e:
            if e.code != 'not_found':
                raise
    assert sw is not None
    col = Collector(budget)
    col.feed(sw)
    with self._tools_lock:
        self._tools[sid] = (sw.window.cursor, col.next)
        self._stdin[sid] = _StdinCount(sw.session.stdin_bytes)
    deadline = t0 + yield_ms / 1000.0
    if sw.session.running and time.monotonic() < deadline:
        sw = _poll(self, sid, col, deadline, budget)
    return _result(sid, sw, col, t0)


def write_stdin(self: 'Client', session_id: str, chars: str = '',
                yield_time_ms: Optional[int] = None,
                max_output_tokens: Optional[int] = None) -> ExecResult:
    """write_stdin: write chars (none: only poll), then the output since the
    last call, waiting up to yield_time_ms or until the command ends.

    chars go exactly once (API.md's exactly-once stdin): the write carries
    the session's stdin count as its offset and is sent again after a
    connection failure. The count comes from a session object (exec_command's
    create, or a read before the first write to a session the tools did not
    start), then from each answer. After a failed write (StdinUncertain:
    every try's connection broke, its outcome unknown) the count is read
    again before the next write; a 409 stdin_offset_mismatch is raised once,
    and the next call writes at agentd's count. The tools assume they are
    the session's only stdin writer: bytes written by others (stdin(),
    another client) while the tools' count is known make the tools' next
    write look like a repeat, and agentd drops it (or its first bytes)."""
    t0 = time.monotonic()
    yield_ms = _yield(yield_time_ms, DEFAULT_STDIN_YIELD_MS)
    budget = _budget(max_output_tokens)
    with self._tools_lock:
        nxt = self._tools.setdefault(session_id, (0, 0))[1]
        st = self._stdin.setdefault(session_id, _StdinCount())
    if chars:
        _write(self, session_id, st, chars)
    col = Collector(budget, nxt)
    sw = _poll(self, session_id, col, t0 + yield_ms / 1000.0, budget)
    return _result(session_id, sw, col, t0)


def _write(self: 'Client', sid: str, st: _StdinCount, chars: str) -> None:
    """Write chars at st's count (read first when not known); keep the count."""
    from .client import AgentdError
    with st.lock:
        if st.count is None:
            st.count = self.read(sid, max_bytes=0).session.stdin_bytes
        try:
            # No count (an agentd without stdin_bytes): no offset.
            # max_bytes 0: the window (a chunk at most) is not used, and a
            # small one would make the session publish a chunk per read.
            sw = self.stdin(sid, text=chars, offset=st.count, max_bytes=0)
        except AgentdError as e:
            # agentd's count after a mismatch; after another error (perhaps
            # to a resend whose first try arrived) read it again.
            st.count = e.stdin_bytes if e.code == 'stdin_offset_mismatch' else None
            raise
        except BaseException:
            st.count = None     # StdinUncertain, an interrupt: unknown
            raise
        st.count = sw.session.stdin_bytes


def _poll(self: 'Client', sid: str, col: Collector, deadline: float,
          budget: int) -> SessionWindow:
    """Read from the session's cursor into col until it has ended and its
    output is read, or the deadline."""
    while True:
        with self._tools_lock:
            cursor = self._tools.get(sid, (0, 0))[0]
        wait = max(0, int((deadline - time.monotonic()) * 1000))
        sw = self.read(sid, cursor, wait_ms=wait, max_bytes=budget, head_tail=True)
        col.feed(sw)
        with self._tools_lock:
            self._tools[sid] = (sw.window.cursor, col.next)
        w = sw.window
        left = deadline - time.monotonic()
        if w.eof or (not sw.session.running and not w.output) or left <= 0:
            return sw
        if w.output:
            time.sleep(min(POLL_PAUSE, left))   # let output gather


__all__: List[str] = ['exec_command', 'write_stdin', 'Collector']
