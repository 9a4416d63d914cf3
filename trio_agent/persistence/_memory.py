"""The memory backend: the protocol on plain dicts, for tests and examples."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any, final

import attrs
import trio

from ..ids import SessionId
from ..runtime import Context
from ..session import SessionEvent, SessionHeader, snapshot_json
from ._backend import Backend, Position, ReadResult
from ._errors import (
    PersistenceError,
    SessionCorruptError,
    SessionTamperedError,
    stored_session_exists,
)
from ._format import (
    InfoBuilder,
    event_from_json,
    event_to_json,
    header_from_json,
    header_to_json,
)
from ._locks import busy_error
from ._types import SessionInfo
from ._writer import PersistenceService

__all__ = ["MemoryBackend", "MemoryPersistence", "MemoryStorage"]

logger = logging.getLogger("trio_agent.persistence")


@final
class MemoryStorage:
    """The logs a :class:`MemoryPersistence` keeps: the JSON form of each header and event,
    deep-copied in and out, so nothing a caller holds is shared with the store.

    Pass one storage to several runtimes (``MemoryPersistence.Config(storage=...)``, or one
    :class:`MemoryBackend` each) to test what a restart, or a second process, sees: each backend
    over it is one writer, and a session claimed by one is busy for the others.
    """

    __slots__ = ("claims", "logs")

    def __init__(self) -> None:
        #: session id → (header JSON, [event JSON, ...]).
        self.logs: dict[SessionId, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
        #: session id → the backend holding its claim (the in-process claim table).
        self.claims: dict[SessionId, MemoryBackend] = {}

    def __repr__(self) -> str:
        return f"<MemoryStorage of {len(self.logs)} sessions>"


@final
class MemoryPersistence(PersistenceService, name="session_persistence"):
    """``ctx.session_persistence`` in memory, with the same semantics as the file backends.

    ``storage`` defaults to a fresh :class:`MemoryStorage` per plugin instance.
    """

    @attrs.frozen
    class Config:
        """``storage``: where the logs live (share one between runtimes to simulate a restart)."""

        storage: MemoryStorage | None = None

    config: MemoryPersistence.Config

    def __init__(self, ctx: Context, config: MemoryPersistence.Config) -> None:
        backend = MemoryBackend(config.storage)
        super().__init__(ctx, config, backend)
        #: The logs this instance writes.
        self.storage = backend.storage


@final
class MemoryBackend(Backend):
    """The :class:`~trio_agent.persistence.Backend` of :class:`MemoryPersistence`: logs kept in
    a :class:`MemoryStorage` (a fresh one when ``storage`` is ``None``).

    Every write is atomic and "durable" at once: there is no cache between the process and the
    storage, so nothing a write returned can be lost. (Wrap it in
    :class:`trio_agent.testing.FaultyBackend` to model a lost sync.)
    """

    def __init__(self, storage: MemoryStorage | None = None) -> None:
        #: The logs this backend reads and writes.
        self.storage = MemoryStorage() if storage is None else storage

    def __repr__(self) -> str:
        return f"<MemoryBackend of {len(self.storage.logs)} sessions>"

    def location(self, session_id: SessionId) -> str:
        return f"memory:{session_id}"

    async def read(self, session_id: SessionId) -> ReadResult | None:
        await trio.lowlevel.checkpoint()
        stored = self.storage.logs.get(session_id)
        if stored is None:
            return None
        head, rows = stored
        where = self.location(session_id)
        header = header_from_json(snapshot_json(head), path=where, line=None, session_id=session_id)
        events: list[SessionEvent] = []
        for seq, row in enumerate(rows):
            event = event_from_json(snapshot_json(row), seq)
            if type(event) is str:
                raise SessionCorruptError(f"{where}: event {seq} is malformed: {event}", path=where)
            events.append(event)  # type: ignore[arg-type]
        return ReadResult(header, tuple(events), Position(len(events)))

    async def exists(self, session_id: SessionId) -> bool:
        await trio.lowlevel.checkpoint()
        return session_id in self.storage.logs

    async def infos(self) -> list[SessionInfo]:
        await trio.lowlevel.checkpoint()
        infos = []
        for sid, (head, rows) in self.storage.logs.items():
            try:
                header = header_from_json(head, path=self.location(sid), line=None, session_id=sid)
            except PersistenceError as exc:
                logger.warning("skipping unreadable session %s: %s", self.location(sid), exc)
                continue
            builder = InfoBuilder(header)
            for row in rows:
                builder.add(row["type"], row["time"], row["data"])
            infos.append(builder.info())
        return infos

    async def write(
        self, header: SessionHeader, position: Position | None, events: Sequence[SessionEvent]
    ) -> Position:
        await trio.lowlevel.checkpoint()
        return self._write(header, position, events)

    def _write(
        self, header: SessionHeader, position: Position | None, events: Sequence[SessionEvent]
    ) -> Position:
        logs = self.storage.logs
        rows = [snapshot_json(event_to_json(event)) for event in events]
        sid = header.session_id
        if position is None:
            if sid in logs:
                raise stored_session_exists(sid, self.location(sid))
            logs[sid] = (snapshot_json(header_to_json(header)), rows)
            return Position(len(rows))
        stored = logs.get(sid)
        if stored is None or len(stored[1]) != position.count:
            found = "gone" if stored is None else f"{len(stored[1])} events long"
            raise SessionTamperedError(
                f"session {sid!r}: the memory log is {found}, but {position.count} events were "
                "written or loaded here; another writer changed it, so nothing more is written "
                "to it",
                session_id=sid,
                path=self.location(sid),
            )
        stored[1].extend(rows)
        return Position(position.count + len(rows))

    async def acquire(self, session_id: SessionId) -> None:
        await trio.lowlevel.checkpoint()
        holder = self.storage.claims.setdefault(session_id, self)
        if holder is not self:
            raise busy_error(session_id, self.location(session_id), os.getpid(), None)

    async def release(self, session_id: SessionId) -> None:
        await trio.lowlevel.checkpoint()
        if self.storage.claims.get(session_id) is self:
            del self.storage.claims[session_id]

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()
        claims = self.storage.claims
        for session_id in [sid for sid, holder in claims.items() if holder is self]:
            del claims[session_id]
