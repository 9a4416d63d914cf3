"""A backend written against the public protocol only: the example of docs/persistence.md."""

from __future__ import annotations

from collections.abc import Sequence

import trio

from trio_agent.ids import SessionId
from trio_agent.persistence import (
    Backend,
    Position,
    ReadResult,
    SessionBusyError,
    SessionInfo,
    SessionTamperedError,
    StoredSessionExistsError,
    session_info,
)
from trio_agent.session import SessionEvent, SessionHeader


class DictStorage:
    """What the DictBackends of one "machine" share: the logs, and who claimed which."""

    def __init__(self) -> None:
        self.logs: dict[SessionId, tuple[SessionHeader, list[SessionEvent]]] = {}
        self.holders: dict[SessionId, DictBackend] = {}


class DictBackend(Backend):
    """Session logs in a dict: session id -> (header, events); each backend is one writer."""

    def __init__(self, storage: DictStorage) -> None:
        self.storage = storage

    def location(self, session_id: SessionId) -> str:
        return f"dict:{session_id}"

    async def read(self, session_id: SessionId) -> ReadResult | None:
        await trio.lowlevel.checkpoint()
        log = self.storage.logs.get(session_id)
        if log is None:
            return None
        header, events = log
        return ReadResult(header, tuple(events), Position(len(events)))

    async def exists(self, session_id: SessionId) -> bool:
        await trio.lowlevel.checkpoint()
        return session_id in self.storage.logs

    async def infos(self) -> list[SessionInfo]:
        await trio.lowlevel.checkpoint()
        return [session_info(header, events) for header, events in self.storage.logs.values()]

    async def write(
        self, header: SessionHeader, position: Position | None, events: Sequence[SessionEvent]
    ) -> Position:
        await trio.lowlevel.checkpoint()  # a cancel lands here, before anything is stored
        sid = header.session_id
        log = self.storage.logs.get(sid)
        if position is None:
            if log is not None:
                raise StoredSessionExistsError(
                    f"session {sid!r} already has a stored log", session_id=sid
                )
            self.storage.logs[sid] = (header, list(events))
            return Position(len(events))
        if log is None or len(log[1]) != position.count:  # never write over another's log
            raise SessionTamperedError(
                f"session {sid!r}: another writer changed the log",
                session_id=sid,
                path=self.location(sid),
            )
        log[1].extend(events)
        return Position(len(log[1]))

    async def acquire(self, session_id: SessionId) -> None:
        await trio.lowlevel.checkpoint()
        if self.storage.holders.setdefault(session_id, self) is not self:
            raise SessionBusyError(
                f"session {session_id!r} is held by another writer", session_id=session_id
            )

    async def release(self, session_id: SessionId) -> None:
        await trio.lowlevel.checkpoint()
        if self.storage.holders.get(session_id) is self:
            del self.storage.holders[session_id]

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()
        for session_id in [s for s, h in self.storage.holders.items() if h is self]:
            del self.storage.holders[session_id]
