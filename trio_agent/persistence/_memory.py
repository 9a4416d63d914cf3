"""The memory backend: the protocol on plain dicts, for tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, final

import attrs
import trio

from ..ids import SessionId
from ..runtime import Context
from ..session import SessionEvent, SessionHeader, snapshot_json
from ._errors import PersistenceError, StoredSessionExistsError
from ._format import (
    InfoBuilder,
    event_from_json,
    event_to_json,
    header_from_json,
    header_to_json,
)
from ._types import SessionInfo
from ._writer import PersistenceService, Position, ReadResult

__all__ = ["MemoryPersistence", "MemoryStorage"]


@final
class MemoryStorage:
    """The logs a :class:`MemoryPersistence` keeps: the JSON form of each header and event,
    deep-copied in and out, so nothing a caller holds is shared with the store.

    Pass one storage to several runtimes (``MemoryPersistence.Config(storage=...)``) to test
    what a restart sees.
    """

    __slots__ = ("logs",)

    def __init__(self) -> None:
        #: session id → (header JSON, [event JSON, ...]).
        self.logs: dict[SessionId, tuple[dict[str, Any], list[dict[str, Any]]]] = {}

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
        storage = config.storage if config.storage is not None else MemoryStorage()
        super().__init__(ctx, config, _MemoryBackend(storage))
        #: The logs this instance writes.
        self.storage = storage


@final
class _MemoryBackend:
    def __init__(self, storage: MemoryStorage) -> None:
        self.storage = storage

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
                raise PersistenceError(f"{where}: event {seq} is malformed: {event}")
            events.append(event)  # type: ignore[arg-type]
        return ReadResult(header, tuple(events), Position(len(events)))

    async def exists(self, session_id: SessionId) -> bool:
        await trio.lowlevel.checkpoint()
        return session_id in self.storage.logs

    async def infos(self) -> list[SessionInfo]:
        await trio.lowlevel.checkpoint()
        infos = []
        for sid, (head, rows) in self.storage.logs.items():
            header = header_from_json(head, path=self.location(sid), line=None, session_id=sid)
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
                raise StoredSessionExistsError(
                    f"session {sid!r} already has a stored log in memory; a new session never "
                    "overwrites one: resume it (ctx.agents.resume) or pick another id",
                    session_id=sid,
                )
            logs[sid] = (snapshot_json(header_to_json(header)), rows)
            return Position(len(rows))
        stored = logs.get(sid)
        if stored is None or len(stored[1]) < position.count:
            raise PersistenceError(
                f"session {sid!r}: the memory log lost events since it was loaded; load it again"
            )
        del stored[1][position.count :]
        stored[1].extend(rows)
        return Position(position.count + len(rows))

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()
