"""The API's objects as dataclasses (API.md; api/openapi.yaml)."""

from __future__ import annotations

import base64
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Type, TypeVar

T = TypeVar('T')


def from_dict(cls: Type[T], d: Dict[str, Any]) -> T:
    """cls built from the members of d that it names (others are ignored:
    agentd may add fields)."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class Usage:
    cpu_ms: Optional[int] = None
    memory_peak_bytes: Optional[int] = None
    pids_peak: Optional[int] = None


@dataclass
class Session:
    """API.md's session object."""
    id: str
    pid: int
    tty: bool
    rows: int
    cols: int
    argv: List[str]
    cwd: str
    user: str
    state: str                      # "running" | "exited"
    exit_code: Optional[int]
    signal: Optional[str]
    timed_out: bool
    started_at: str
    ended_at: Optional[str]
    last_chunk: int
    bytes_out: int
    oom_killed: Optional[bool] = None     # issue 21
    usage: Optional[Usage] = None         # issue 21
    stdin_bytes: Optional[int] = None     # issue 24

    @property
    def running(self) -> bool:
        return self.state == 'running'

    @classmethod
    def parse(cls, d: Dict[str, Any]) -> 'Session':
        s = from_dict(cls, d)
        if isinstance(s.usage, dict):
            s.usage = from_dict(Usage, s.usage)
        return s


@dataclass
class Chunk:
    """One piece of output; data holds its bytes whichever field the answer
    carried: "data" (base64, decoded) or, with encoding="text", "text" (then
    is_text is True).  .text gives them as a str."""
    id: int
    stream: str                     # "pty" | "stdout" | "stderr"
    offset: int
    data: bytes
    is_text: bool = False           # issue 33: the answer carried "text"

    @property
    def text(self) -> str:
        """The bytes as text (invalid UTF-8, from "data", as U+FFFD)."""
        return self.data.decode('utf-8', errors='replace')

    @classmethod
    def parse(cls, d: Dict[str, Any]) -> 'Chunk':
        if 'text' in d:
            return cls(d['id'], d['stream'], d['offset'],
                       d['text'].encode('utf-8', errors='surrogatepass'), True)
        return cls(d['id'], d['stream'], d['offset'],
                   base64.b64decode(d['data'], validate=True))


@dataclass
class Window:
    """The output window of answers that carry output."""
    output: List[Chunk]
    cursor: int
    dropped_chunks: int
    more: bool
    eof: bool
    truncated_bytes: Optional[int] = None     # head_tail only
    truncated_cursor: Optional[int] = None

    @property
    def data(self) -> bytes:
        """Every chunk's bytes, in order."""
        return b''.join(c.data for c in self.output)

    @property
    def text(self) -> str:
        """Every chunk's bytes as text."""
        return self.data.decode('utf-8', errors='replace')

    @classmethod
    def parse(cls, d: Dict[str, Any]) -> 'Window':
        return cls([Chunk.parse(c) for c in d['output']], d['cursor'],
                   d['dropped_chunks'], d['more'], d['eof'],
                   d.get('truncated_bytes'), d.get('truncated_cursor'))


@dataclass
class SessionWindow:
    """A session object with its output window."""
    session: Session
    window: Window
    written: Optional[int] = None      # stdin answers
    duplicate: bool = False            # issue 24: the same write again

    @classmethod
    def parse(cls, d: Dict[str, Any]) -> 'SessionWindow':
        return cls(Session.parse(d), Window.parse(d), d.get('written'),
                   bool(d.get('duplicate', False)))


@dataclass
class RawWindow:
    """A raw-mode read: the bytes, and the window from the headers."""
    data: bytes
    cursor: int
    offset: int
    dropped_chunks: int
    more: bool
    eof: bool
    state: str
    exit_code: Optional[int]


@dataclass
class Health:
    status: str
    version: str
    sessions: int
    uptime_ms: int
    pid: int
    containment: Optional[str] = None   # issue 21
    generation: Optional[int] = None    # issue 22


@dataclass
class FileWritten:
    path: str
    size: int
    sha256: str


@dataclass
class StatResult:
    path: str
    exists: bool
    type: Optional[str] = None
    size: Optional[int] = None
    mode: Optional[str] = None
    mtime: Optional[str] = None
    uid: Optional[int] = None
    gid: Optional[int] = None
    target: Optional[str] = None
    error: Optional[str] = None


@dataclass
class Event:
    """An event of the feed (issue 23); its own fields are in `fields`."""
    id: int
    type: str
    at: str
    session: Optional[str]
    fields: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, d: Dict[str, Any]) -> 'Event':
        rest = {k: v for k, v in d.items() if k not in ('id', 'type', 'at', 'session')}
        return cls(d['id'], d['type'], d['at'], d.get('session'), rest)


@dataclass
class EventPage:
    events: List[Event]
    cursor: int
    dropped_events: int


@dataclass
class Port:
    address: str
    port: int
    protocol: str
    pid: Optional[int]
    session: Optional[str]


@dataclass
class Resumed:
    generation: int
    clock_step_ms: int
    same_restore: bool = False
    clock: str = 'none'                 # "unix_ms" | "rtc" | "none"
    clock_error: Optional[str] = None
    entropy_bytes: int = 0
    entropy_error: Optional[str] = None
    connections_probed: int = 0


@dataclass
class ExecResult:
    """What exec_command and write_stdin hand back to the model."""
    session_id: str
    running: bool
    exit_code: Optional[int]          # None while running
    output: str
    omitted_bytes: int                # left out between head and tail
    original_bytes: int               # output bytes of this call
    wall_time: float                  # seconds

    def text(self) -> str:
        """The session id, then "exit code N" or "still running", then
        "N bytes omitted" when the output was cut, then the output."""
        lines = ['session %s' % self.session_id]
        if self.running or self.exit_code is None:
            lines.append('still running')
        else:
            lines.append('exit code %d' % self.exit_code)
        if self.omitted_bytes:
            lines.append('%d bytes omitted' % self.omitted_bytes)
        return '\n'.join(lines) + '\n' + self.output
