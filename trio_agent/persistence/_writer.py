"""The live write-behind shared by every backend: :class:`PersistenceService`.

A backend (:class:`~trio_agent.persistence.Backend`) reads and writes logs; this module does the
rest: id validation, the ``session/*`` listeners, per-session buffering, serialised flushes,
retries, claims, and the bookkeeping that makes a resumed session write only what is new.

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
  A failed write keeps the buffer and raises; since an I/O failure may have stored part of the
  batch, the next attempt first reads the log back and continues after what it holds.
* ``session/disposed`` schedules a final flush in this plugin's nursery, then stops tracking and
  releases the session's claim (:meth:`PersistenceService.acquire`). The final flush is
  shielded, so unloading the plugin waits for it.

Claims: nothing is written without one. :meth:`PersistenceService.acquire` claims a session
before it is published (``ctx.agents.create/resume`` do); a session published without one (the
synchronous ``ctx.sessions.create``, ``fork``, ``agent_loop.create``) is claimed by its first
write, whose flush then raises :class:`SessionBusyError` if another writer holds it.

Tampering: when the backend finds a live log changed by someone else
(:class:`SessionTamperedError`), writing that session stops for good: its events stay buffered
in memory (and in ``session.events``), every later flush raises the error again without touching
the storage, and the count of what is unwritten is logged. Detaching such a session (also when
its final write is the one that finds the change) drops those events and gives the claim back at
once: there is nothing to retry at unload, and the session can be claimed again.

Cancellation: the backend contract makes a write either complete or not started when a cancel
arrives; the books are updated with no checkpoint after the write returns, so a write is either
complete and accounted for, or not done.
"""

from __future__ import annotations

import logging
from typing import Any

import attrs
import trio

from .._locking import held
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
    SessionStore,
)
from ._backend import Backend, Position, ReadResult
from ._errors import (
    PersistenceError,
    SessionTamperedError,
    SessionWriteError,
    StoredSessionNotFoundError,
    stored_session_exists,
)
from ._types import SessionInfo, StoredSession

__all__ = ["PersistenceService"]

logger = logging.getLogger("trio_agent.persistence")


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
    #: The last write failed with an OSError, so it may have stored part of its batch.
    uncertain: bool = False
    #: The backend found the log changed by someone else: writing stopped for good.
    tampered: SessionTamperedError | None = None

    @property
    def stored(self) -> int:
        return 0 if self.position is None else self.position.count


@attrs.frozen
class _Loaded:
    """What a read saw, kept so a session that continues it writes only what is new."""

    header: SessionHeader
    last: tuple[int, str, float] | None
    position: Position

    @classmethod
    def of(cls, read: ReadResult) -> _Loaded:
        last = read.events[-1] if read.events else None
        key = None if last is None else (last.seq, last.type, last.time)
        return cls(read.header, key, read.position)

    def continued_by(self, session: Session) -> bool:
        """Whether ``session``'s log starts with the log this read saw."""
        count = self.position.count
        events = session.events
        if session.header != self.header or len(events) < count:
            return False
        if self.last is None:
            return True
        last = events[count - 1]
        return (last.seq, last.type, last.time) == self.last


class PersistenceService(Service, name="session_persistence"):
    """``ctx.session_persistence`` over any :class:`~trio_agent.persistence.Backend`: the
    :class:`~trio_agent.persistence.SessionPersistence` protocol plus the shared write-behind
    writer (see :mod:`trio_agent.persistence` for its semantics).

    Mount it with a backend instance::

        await ctx.plugin(PersistenceService, PersistenceService.Config(backend=MyBackend()))

    or subclass it to give a backend its own config, as
    :class:`~trio_agent.persistence.JsonlPersistence` does::

        class MyPersistence(PersistenceService):
            @attrs.frozen
            class Config:
                url: str

            def __init__(self, ctx: Context, config: MyPersistence.Config) -> None:
                super().__init__(ctx, config, MyBackend(config.url))

    The service owns the backend: it closes it (``aclose``) when it unloads.
    """

    @attrs.frozen
    class Config:
        """``backend``: the storage this service writes through (it takes ownership)."""

        backend: Backend

    def __init__(self, ctx: Context, config: Any, backend: Backend | None = None) -> None:
        """``backend`` is the storage; a subclass passes the one it built, a directly mounted
        service takes ``config.backend``."""
        super().__init__(ctx, config)
        self._backend: Backend = config.backend if backend is None else backend
        # Containers made here and never rebound: views share them (see Service).
        self._tracked: dict[SessionId, _Tracked] = {}
        self._loaded: dict[SessionId, _Loaded] = {}
        #: Detached sessions whose id a new session took before their last events were written;
        #: the unload retries them.
        self._leftovers: list[_Tracked] = []
        #: Ids this service claimed from the backend (``acquire``) and has not released.
        self._claims: set[SessionId] = set()
        #: Claims taken by :meth:`acquire` whose session is not tracked yet (not published):
        #: kept until it is, or until :meth:`release` gives them up.
        self._pinned: set[SessionId] = set()
        #: Serialises the backend's acquire and release calls.
        self._claiming = trio.Lock()
        ctx.on("session/created", self._on_created)
        ctx.on("session/event", self._on_event)
        ctx.on("session/flush", self._on_flush)
        ctx.on("session/disposed", self._on_disposed)
        ctx.defer(self._shutdown, label="flush and close session persistence")

    async def start(self) -> None:
        """Track sessions that were live before this plugin loaded."""
        sessions = self.ctx.get(SessionStore)
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
                self._loaded[session.id] = _Loaded.of(read)
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
                await self._stop_tracking(tracked)
        if read is None:
            raise StoredSessionNotFoundError(
                f"no stored session {sid!r} (looked in {self._backend.location(sid)}); check the "
                "id against the stored sessions",
                session_id=sid,
            )
        if sid not in self._tracked:
            self._loaded[sid] = _Loaded.of(read)
        return StoredSession(read.header, read.events)

    async def list(self) -> tuple[SessionInfo, ...]:
        """Every stored session, oldest first. See
        :class:`~trio_agent.persistence.SessionPersistence`."""
        infos = await self._backend.infos()
        return tuple(sorted(infos, key=lambda info: (info.created_at, info.session_id)))

    async def exists(self, session_id: str) -> bool:
        """Whether a log is stored under ``session_id``."""
        return await self._backend.exists(validate_session_id(session_id))

    async def acquire(self, session_id: str) -> None:
        """Claim ``session_id`` for this service's writer; see
        :class:`~trio_agent.persistence.SessionPersistence`.

        The claim is passed to the backend (:meth:`Backend.acquire
        <trio_agent.persistence.Backend.acquire>`) once. It is kept for the session published
        with that id and released when this service stops tracking it (after its final write),
        by :meth:`release` if no session is published after all, or when the service unloads.
        Claiming an id this service already holds returns at once.

        Raises:
            ValueError: the id is not a valid session id.
            SessionBusyError: another writer (process) holds the session.
        """
        sid = validate_session_id(session_id)
        await self._claim(sid)
        # Kept for the session about to be published, even if a detached one with this id is
        # still finishing its final write (its end must not release the claim).
        self._pinned.add(sid)

    async def release(self, session_id: str) -> None:
        """Give up a claim :meth:`acquire` took for a session that was not published after all
        (its set-up failed). A claim a live session still needs is kept; the writer releases it
        after that session's final write. Always a checkpoint."""
        sid = validate_session_id(session_id)
        self._pinned.discard(sid)
        await self._release_unless_needed(sid)

    async def _claim(self, sid: SessionId) -> None:
        async with self._claiming:
            if sid not in self._claims:
                await self._backend.acquire(sid)
                self._claims.add(sid)

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
        self._pinned.discard(session.id)  # the claim is the session's now
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
        # Free, the lock is taken without a schedule point (#13): the store's flush is the
        # checkpoint.
        async with held(tracked.lock):
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
        if tracked.tampered is not None:
            raise self._still_tampered(tracked)
        session = tracked.session
        if session.id not in self._claims:  # published without a claim: its first write claims
            await self._claim(session.id)
        try:
            await self._write_claimed(tracked)
        except SessionTamperedError as exc:
            tracked.tampered = exc
            pending = tracked.pending
            logger.error(
                "session %r: %s; writing it stopped, and its %d unwritten events (seq %d-%d) "
                "are kept in this process only",
                session.id,
                exc,
                len(pending),
                pending[0].seq,
                pending[-1].seq,
            )
            raise

    def _still_tampered(self, tracked: _Tracked) -> SessionTamperedError:
        first = tracked.tampered
        assert first is not None
        return SessionTamperedError(
            f"session {tracked.session.id!r}: not written, because writing it stopped when its "
            f"stored log was found changed by another program or its claim lost ({first}); "
            f"{len(tracked.pending)} events are kept in this "
            "process only: export them (session.events) or start a new session",
            session_id=first.session_id,
            path=first.path,
        )

    async def _write_claimed(self, tracked: _Tracked) -> None:
        if tracked.uncertain:
            await self._reconcile(tracked)
            if not tracked.pending:
                return
        batch = tracked.pending[:]
        session = tracked.session
        try:
            position = await self._backend.write(session.header, tracked.position, batch)
        except OSError as exc:
            tracked.uncertain = True
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

    async def _reconcile(self, tracked: _Tracked) -> None:
        """After a write failed with an OSError, which may have stored part or all of its
        batch: read the log back and continue after what it holds."""
        session = tracked.session
        where = self._backend.location(session.id)
        read = await self._backend.read(session.id)
        if read is None:
            if tracked.position is not None:
                raise SessionTamperedError(
                    f"session {session.id!r}: its stored log at {where} is gone; another "
                    "program removed it",
                    session_id=session.id,
                    path=where,
                )
            position = None
        elif not _Loaded.of(read).continued_by(session) or read.position.count < tracked.stored:
            if tracked.position is None:
                raise stored_session_exists(session.id, where)
            raise SessionTamperedError(
                f"session {session.id!r}: the stored log at {where} no longer holds what this "
                "process wrote; another program changed it",
                session_id=session.id,
                path=where,
            )
        else:
            position = read.position
        tracked.position = position
        tracked.pending[:] = session.events[tracked.stored :]
        tracked.uncertain = False

    async def _final_flush(self, tracked: _Tracked) -> None:
        if tracked.tampered is None:
            with trio.move_on_after(self.ctx.teardown_timeout) as budget:
                budget.shield = True
                try:
                    async with tracked.lock:
                        await self._write_locked(tracked)
                except SessionTamperedError:
                    pass  # writing stopped for good (logged): handled below, like a known one
                except Exception as exc:
                    logger.error(
                        "session %r: the final write after it was detached failed; %d events "
                        "stay buffered and are retried when session persistence unloads",
                        tracked.session.id,
                        len(tracked.pending),
                        exc_info=exc,
                    )
                    return
            if budget.cancelled_caught:
                logger.error(
                    "session %r: the final write did not finish within %.1f s",
                    tracked.session.id,
                    self.ctx.teardown_timeout,
                )
                return
        if tracked.tampered is not None:
            # Nothing can be retried at unload: the claim goes back now, so the session can be
            # claimed again (by this process too, once its lost claim is given up).
            logger.error(
                "session %r was detached with %d events never written (its stored log was "
                "changed by another program, or its claim was lost); they are gone now",
                tracked.session.id,
                len(tracked.pending),
            )
            await self._stop_tracking(tracked)
            return
        if not tracked.pending:
            await self._stop_tracking(tracked)

    async def _stop_tracking(self, tracked: _Tracked) -> None:
        """Forget a detached session whose log is complete, and release its claim unless
        another session with its id still needs it."""
        sid = tracked.session.id
        if self._tracked.get(sid) is tracked:
            del self._tracked[sid]
        await self._release_unless_needed(sid)

    async def _release_unless_needed(self, sid: SessionId) -> None:
        """Release the claim of ``sid`` unless a session (live, detached with writes pending, or
        about to be published) still needs it."""
        if (
            sid in self._tracked
            or sid in self._pinned
            or any(t.session.id == sid for t in self._leftovers)
        ):
            await trio.lowlevel.checkpoint()
            return
        await self._release(sid)

    async def _release(self, sid: SessionId) -> None:
        with trio.move_on_after(self.ctx.teardown_timeout) as budget:
            budget.shield = True
            async with self._claiming:
                if sid not in self._claims:
                    return
                self._claims.discard(sid)
                try:
                    await self._backend.release(sid)
                except Exception as exc:
                    logger.error("session %r: releasing its claim failed", sid, exc_info=exc)
        if budget.cancelled_caught:
            logger.error("session %r: releasing its claim did not finish in time", sid)

    async def _shutdown(self) -> None:
        """At unload: flush every session still buffered, release every claim, then close the
        backend."""
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
            self._pinned.clear()
            for sid in sorted(self._claims):
                await self._release(sid)
        finally:
            await self._backend.aclose()
