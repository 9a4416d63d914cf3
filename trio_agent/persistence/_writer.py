"""The live write-behind shared by every backend, and the service base the backends extend.

Each backend supplies a :class:`Backend` (read / write / list / exists); this module supplies
the rest: id validation, the ``session/*`` listeners, per-session buffering, serialised flushes,
and the bookkeeping that makes a resumed session write only what is new.

Write-behind, per live session (a :class:`_Tracked`):

* ``session/created`` starts tracking. If the session continues a log this service just
  loaded (a resume: same header, the stored events as its prefix), the stored length and the
  backend's position are remembered and only the events after them are buffered (the repair
  closers and the ``session/end-seed`` the seed added); otherwise the session is fresh and its
  whole log is buffered, but nothing is written yet.
* ``session/event`` appends the event to the buffer (synchronous, no I/O).
* ``session/flush`` writes the buffer and makes it durable. Flushes of one session are
  serialised by a lock; a flush that finds the buffer already written returns at once. The
  first write of a fresh session creates its log (so an unused session leaves nothing behind).
  A failed write keeps the buffer and raises; the next flush retries it.
* ``session/disposed`` schedules a final flush in this plugin's nursery, then stops tracking.
  The final flush is shielded, so unloading the plugin waits for it.

Cancellation: the blocking part of a write runs in a worker thread that is never abandoned, so
a cancel that arrives mid-write waits for the thread; its outcome (written, or failed and rolled
back) is recorded before the cancel is delivered. A write is therefore either complete and
accounted for, or not done.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

import attrs
import trio

from ..ids import SessionId, validate_session_id
from ..runtime import Context, InactiveContextError, Service
from ..session import (
    Session,
    SessionAppended,
    SessionCreated,
    SessionDisposed,
    SessionEvent,
    SessionFlush,
    SessionHeader,
)
from ._errors import PersistenceError, SessionWriteError, StoredSessionNotFoundError
from ._types import SessionInfo, StoredSession

__all__ = ["Backend", "Position", "ReadResult"]

logger = logging.getLogger("trio_agent.persistence")


@attrs.frozen
class Position:
    """What a backend holds of one log: ``count`` events, plus a backend-specific ``token``
    (the JSONL backend keeps the byte length of the intact part of the file there)."""

    count: int
    token: Any = None


@attrs.frozen
class ReadResult:
    """A stored log as a backend read it, and the position to append after it."""

    header: SessionHeader
    events: tuple[SessionEvent, ...]
    position: Position


class Backend(Protocol):
    """The storage a persistence service writes through (one per service instance)."""

    def location(self, session_id: SessionId) -> str:
        """Where the log of ``session_id`` lives, for messages (a path, or ``memory``)."""
        ...

    async def read(self, session_id: SessionId) -> ReadResult | None:
        """The stored log, or ``None`` when there is none."""
        ...

    async def exists(self, session_id: SessionId) -> bool:
        """Whether a log is stored."""
        ...

    async def infos(self) -> list[SessionInfo]:
        """Facts about every stored log (any order)."""
        ...

    async def write(
        self, header: SessionHeader, position: Position | None, events: Sequence[SessionEvent]
    ) -> Position:
        """Durably append ``events`` after ``position``; create the log when it is ``None``.

        On failure nothing new is stored (a partial append is rolled back, or cut off by the
        next write, which starts from ``position`` again).

        Raises:
            StoredSessionExistsError: creating a log whose id is already stored.
            OSError: the write or the sync failed (the writer wraps it).
        """
        ...

    async def aclose(self) -> None:
        """Release what the backend holds (connections). Called once, at unload."""
        ...


@attrs.define(eq=False)
class _Tracked:
    """Write-behind state of one live session."""

    session: Session
    #: What the store holds; ``None`` until the first write creates the log.
    position: Position | None
    #: Events appended but not yet durable, in seq order, starting at ``stored``.
    pending: list[SessionEvent]
    lock: trio.Lock = attrs.field(factory=trio.Lock)
    disposed: bool = False

    @property
    def stored(self) -> int:
        return 0 if self.position is None else self.position.count


@attrs.frozen
class _Loaded:
    """What a ``load`` saw, kept so a session resumed from it writes only what is new."""

    header: SessionHeader
    last: tuple[int, str, float] | None
    position: Position

    def continued_by(self, session: Session) -> bool:
        count = self.position.count
        events = session.events
        if session.header != self.header or len(events) < count:
            return False
        if self.last is None:
            return True
        last = events[count - 1]
        return (last.seq, last.type, last.time) == self.last


class PersistenceService(Service):
    """Base of the ``session_persistence`` services: the protocol plus the live writer.

    Subclasses build their :class:`Backend` and pass it to ``__init__``. Internal: use
    :class:`~trio_agent.persistence.JsonlPersistence`, ``SqlitePersistence`` or
    ``MemoryPersistence``.
    """

    def __init__(self, ctx: Context, config: Any, backend: Backend) -> None:
        super().__init__(ctx, config)
        self._backend = backend
        # Containers made here and never rebound: views share them (see Service).
        self._tracked: dict[SessionId, _Tracked] = {}
        self._loaded: dict[SessionId, _Loaded] = {}
        #: Detached sessions whose id a new session took before their last events were written;
        #: the unload retries them.
        self._leftovers: list[_Tracked] = []
        ctx.on("session/created", self._on_created)
        ctx.on("session/event", self._on_event)
        ctx.on("session/flush", self._on_flush)
        ctx.on("session/disposed", self._on_disposed)
        ctx.defer(self._shutdown, label="flush and close session persistence")

    async def start(self) -> None:
        """Track sessions that were live before this plugin loaded."""
        sessions = self.ctx.get("sessions")
        if sessions is None:
            return
        for session in sessions.list():
            if session.id in self._tracked or not session.live:
                continue
            try:
                read = await self._backend.read(session.id)
            except PersistenceError as exc:
                logger.warning("session %r: cannot read its stored log (%s)", session.id, exc)
                read = None
            if session.id in self._tracked or not session.live:
                continue
            if read is not None:
                last = read.events[-1] if read.events else None
                self._loaded[session.id] = _Loaded(
                    read.header,
                    None if last is None else (last.seq, last.type, last.time),
                    read.position,
                )
            self._track(session)

    # --- the protocol -----------------------------------------------------------------------

    async def load(self, session_id: str) -> StoredSession:
        """The stored log of ``session_id``; see
        :class:`~trio_agent.persistence.SessionPersistence`.

        For a session this service is writing (live, or detached with its final write pending)
        the buffer is flushed first, so the log returned holds every event appended so far; a
        failed flush raises :class:`SessionWriteError`.
        """
        sid = validate_session_id(session_id)
        tracked = self._tracked.get(sid)
        if tracked is None:
            read = await self._backend.read(sid)
        else:
            async with tracked.lock:
                await self._write_locked(tracked)
                read = await self._backend.read(sid)
            if tracked.disposed and not tracked.pending:
                self._untrack(tracked)
        if read is None:
            raise StoredSessionNotFoundError(
                f"no stored session {sid!r} (looked in {self._backend.location(sid)}); check the "
                "id with session_persistence.list()",
                session_id=sid,
            )
        if sid not in self._tracked:
            last = read.events[-1] if read.events else None
            self._loaded[sid] = _Loaded(
                read.header,
                None if last is None else (last.seq, last.type, last.time),
                read.position,
            )
        return StoredSession(read.header, read.events)

    async def list(self) -> tuple[SessionInfo, ...]:
        """Every stored session, oldest first. See
        :class:`~trio_agent.persistence.SessionPersistence`."""
        infos = await self._backend.infos()
        return tuple(sorted(infos, key=lambda info: (info.created_at, info.session_id)))

    async def exists(self, session_id: str) -> bool:
        """Whether a log is stored under ``session_id``."""
        return await self._backend.exists(validate_session_id(session_id))

    # --- listeners --------------------------------------------------------------------------

    def _on_created(self, payload: SessionCreated) -> None:
        self._track(payload.session)

    def _track(self, session: Session) -> _Tracked:
        old = self._tracked.get(session.id)
        if old is not None:
            if old.session is session:
                return old
            if old.pending:
                self._leftovers.append(old)
        loaded = self._loaded.pop(session.id, None)
        position = loaded.position if loaded is not None and loaded.continued_by(session) else None
        stored = 0 if position is None else position.count
        tracked = _Tracked(session, position, list(session.events[stored:]))
        self._tracked[session.id] = tracked
        return tracked

    def _on_event(self, payload: SessionAppended) -> None:
        tracked = self._tracked.get(payload.session.id)
        if tracked is None or tracked.session is not payload.session:
            return
        event = payload.event
        expected = tracked.stored + len(tracked.pending)
        if event.seq == expected:
            tracked.pending.append(event)
        elif event.seq > expected:  # never expected; resynchronise from the log itself
            tracked.pending.extend(tracked.session.events[expected : event.seq + 1])

    async def _on_flush(self, payload: SessionFlush) -> None:
        session = payload.session
        tracked = self._tracked.get(session.id)
        if tracked is None or tracked.session is not session:
            tracked = self._track(session)
        async with tracked.lock:
            await self._write_locked(tracked)

    def _on_disposed(self, payload: SessionDisposed) -> None:
        tracked = self._tracked.get(payload.session.id)
        if tracked is None or tracked.session is not payload.session:
            return
        tracked.disposed = True
        try:
            self.ctx.start_soon(
                self._final_flush, tracked, name=f"final flush {tracked.session.id}"
            )
        except InactiveContextError:
            pass  # this plugin is unloading: _shutdown flushes what is left

    # --- writing ----------------------------------------------------------------------------

    async def _write_locked(self, tracked: _Tracked) -> None:
        """Write ``tracked``'s buffer; the caller holds ``tracked.lock``."""
        if not tracked.pending:
            return
        batch = tracked.pending[:]
        session = tracked.session
        try:
            position = await self._backend.write(session.header, tracked.position, batch)
        except OSError as exc:
            raise SessionWriteError(
                f"session {session.id!r}: writing {len(batch)} events to "
                f"{self._backend.location(session.id)} failed ({exc}); they stay buffered and "
                "the next flush retries them (check free space and permissions)",
                error=exc,
            ) from exc
        # No checkpoint between the write returning and this bookkeeping: a cancel delivered
        # now cannot leave the buffer out of step with what is stored.
        tracked.position = position
        del tracked.pending[: len(batch)]
        self._loaded.pop(session.id, None)

    async def _final_flush(self, tracked: _Tracked) -> None:
        with trio.move_on_after(self.ctx.runtime.teardown_timeout) as budget:
            budget.shield = True
            try:
                async with tracked.lock:
                    await self._write_locked(tracked)
            except Exception as exc:
                logger.error(
                    "session %r: the final write after it was detached failed; %d events stay "
                    "buffered and are retried when session persistence unloads",
                    tracked.session.id,
                    len(tracked.pending),
                    exc_info=exc,
                )
                return
        if budget.cancelled_caught:
            logger.error(
                "session %r: the final write did not finish within %.1f s",
                tracked.session.id,
                self.ctx.runtime.teardown_timeout,
            )
            return
        if not tracked.pending:
            self._untrack(tracked)

    def _untrack(self, tracked: _Tracked) -> None:
        if self._tracked.get(tracked.session.id) is tracked:
            del self._tracked[tracked.session.id]

    async def _shutdown(self) -> None:
        """At unload: flush every session still buffered, then close the backend."""
        try:
            for tracked in [*self._leftovers, *self._tracked.values()]:
                try:
                    async with tracked.lock:
                        await self._write_locked(tracked)
                except Exception as exc:
                    logger.error(
                        "session %r: %d events could not be written before session persistence "
                        "unloaded and are lost",
                        tracked.session.id,
                        len(tracked.pending),
                        exc_info=exc,
                    )
            self._tracked.clear()
            self._loaded.clear()
            self._leftovers.clear()
        finally:
            await self._backend.aclose()
