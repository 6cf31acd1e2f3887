"""agentd_client: a typed client of agentd's HTTP API (API.md,
api/openapi.yaml), standard library only, with the agent tools
exec_command and write_stdin (Codex's unified-exec semantics)."""

from .client import AgentdError, Client, ConnectionLost, StdinUncertain
from .tools import Collector
from .types import (Chunk, Event, EventPage, ExecResult, FileWritten, Health,
                    Port, RawWindow, Resumed, Session, SessionWindow,
                    StatResult, Usage, Window)

__all__ = ['AgentdError', 'Client', 'ConnectionLost', 'StdinUncertain',
           'Collector', 'Chunk', 'Event', 'EventPage', 'ExecResult',
           'FileWritten', 'Health', 'Port', 'RawWindow', 'Resumed', 'Session',
           'SessionWindow', 'StatResult', 'Usage', 'Window']
