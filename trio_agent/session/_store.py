"""``ctx.sessions``: the live sessions of a runtime, their ownership and their store events."""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Sequence
from typing import Any, final

import attrs
import trio

from ..ids import SESSION_ID_PATTERN, SessionId, validate_session_id
from ..runtime import Context, Disposer, Service
from ._errors import (
    ForkBoundaryError,
    SessionDetachedError,
    SessionExistsError,
    SessionNotFoundError,
)
from ._events import SessionEvent, SessionHeader
from ._json import snapshot_json
from ._session import Session

__all__ = ["SessionCreated", "SessionDisposed", "SessionFlush", "SessionStore"]

logger = logging.getLogger("trio_agent.session")


@attrs.frozen(eq=False)
class SessionCreated:
    """Payload of ``session/created`` (emit): ``session`` is live in the store.

    ``session.events`` may already hold events (a seed, a fork prefix, a resumed log, each
    followed by ``session/end-seed``); they are not re-published as ``session/event``, so a
    persistence listener writes the header and ``session.events[:]`` here.
    """

    session: Session


@attrs.frozen(eq=False)
class SessionFlush:
    """Payload of ``session/flush`` (parallel, awaited by :meth:`SessionStore.flush`): make every
    event of ``session`` published so far durable before returning."""

    session: Session


@attrs.frozen(eq=False)
class SessionDisposed:
    """Payload of ``session/disposed`` (emit): ``session`` was detached; it accepts no more
    events. A persistence listener schedules its final write here (in its own nursery)."""

    session: Session


@final
class SessionStore(Service, name="sessions"):
    """The ``ctx.sessions`` service: creates, finds, forks, flushes and detaches sessions.

    A session belongs to the fiber of the context that created it and is detached when that
    fiber unloads (or when the store itself unloads). Every store event is aimed at the scope
    of that creating context, so listeners registered through ``agent.ctx`` hear only their
    agent's sessions while global listeners hear all of them:

    ========================  ================  ======================================
    event                     mode              payload
    ========================  ================  ======================================
    ``session/created``       emit              :class:`SessionCreated`
    ``session/event``         emit              :class:`SessionAppended`
    ``session/flush``         parallel, awaited :class:`SessionFlush`
    ``session/disposed``      emit              :class:`SessionDisposed`
    ========================  ================  ======================================
    """

    def __init__(self, ctx: Context, config: Any = None) -> None:
        super().__init__(ctx, config)
        self._live: dict[SessionId, Session] = {}
        ctx.defer(self._detach_all, label="detach live sessions")

    # --- lookup ---------------------------------------------------------------------------

    def get(self, session_id: str) -> Session | None:
        """The live session ``session_id``, or ``None``."""
        return self._live.get(SessionId(session_id))

    def list(self) -> tuple[Session, ...]:
        """Every live session, in creation order."""
        return tuple(self._live.values())

    # --- creation -------------------------------------------------------------------------

    def create(
        self,
        session_id: str,
        meta: dict[str, Any] | None = None,
        seed: Sequence[SessionEvent] | None = None,
        cwd: str | None = None,
        *,
        header: SessionHeader | None = None,
        parent_session: str | None = None,
    ) -> Session:
        """Create a live session owned by the calling context's fiber; emit ``session/created``.

        Same as ``publish(prepare(...))``; see :meth:`prepare` for the arguments.
        """
        return self.publish(
            self.prepare(session_id, meta, seed, cwd, header=header, parent_session=parent_session)
        )

    def prepare(
        self,
        session_id: str,
        meta: dict[str, Any] | None = None,
        seed: Sequence[SessionEvent] | None = None,
        cwd: str | None = None,
        *,
        header: SessionHeader | None = None,
        parent_session: str | None = None,
    ) -> Session:
        """Build a session without publishing it: it is not live, has no owner, and no
        ``session/created`` is emitted. :meth:`publish` it, or simply drop it (nothing to undo).
        Its store events will be aimed at the calling context's scope.

        Args:
            session_id: ``^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`` (it doubles as a file name).
            meta: free-form lossless-JSON metadata, kept (copied) in the header.
            seed: events to start from (copied and validated; seqs contiguous from 0). A
                ``session/end-seed`` is added unless the seed already ends with one;
                ``header.seed_length`` records ``len(seed)``.
            cwd: the working directory the session is for (stored absolute).
            header: restore this header verbatim instead (resuming a persisted session);
                ``meta``, ``cwd`` and ``parent_session`` must then be ``None`` and its id must
                be ``session_id``.
            parent_session: the session this one was derived from (a sub-agent's fork of its
                parent's log), recorded in the header as :meth:`fork` does.

        Raises:
            ValueError: ``session_id`` is not a valid id.
            SessionExistsError: a live session already has this id.
            JsonValueError: ``meta`` or a seed event is not lossless JSON.
            InvalidSeedError, EventPayloadError: a seed event is malformed.
            InactiveContextError: the calling context's fiber is unloading.
        """
        sid = self._new_id(session_id)
        if header is not None:
            if meta is not None or cwd is not None or parent_session is not None:
                raise ValueError(
                    "create(header=...) restores a header verbatim; pass meta, cwd and "
                    "parent_session inside it, not as arguments"
                )
            if not isinstance(header, SessionHeader) or header.session_id != sid:
                raise ValueError(
                    f"create(header=...) needs a SessionHeader whose session_id is {sid!r}, "
                    f"got {header!r}"
                )
            header = attrs.evolve(header, meta=_snapshot_meta(header.meta))
        else:
            header = SessionHeader(
                session_id=sid,
                created_at=time.time(),
                cwd=_absolute(cwd),
                parent_session=None
                if parent_session is None
                else validate_session_id(parent_session),
                seed_length=None if seed is None else len(seed),
                meta=_snapshot_meta(meta),
            )
        return self._prepare(header, seed, copy=True)

    def fork(
        self,
        source: Session | str,
        boundary: int | None = None,
        child_session_id: str | None = None,
    ) -> Session:
        """Create a live child session holding ``source``'s events ``0..boundary`` (inclusive).

        ``boundary`` defaults to the last event. It must be an existing seq outside any open
        turn: the last ``turn/start`` at or before it must have its ``turn/end`` at or before
        it too. The child's header records ``parent_session`` and ``seed_length`` (boundary + 1)
        and keeps the source's ``cwd``; its id defaults to ``f"{source.id}-fork-<12 hex>"``
        (random, so it cannot collide with a log a previous run persisted). The child shares
        the (immutable) event objects of the prefix and belongs to the calling context.

        Raises:
            SessionNotFoundError: no live session ``source`` in this store.
            SessionDetachedError: ``source`` was detached.
            ForkBoundaryError: the boundary does not exist or falls inside an open turn.
            SessionExistsError: ``child_session_id`` is live already.
        """
        parent = self._require(source)
        events = parent.events
        last = len(events) - 1
        if boundary is None:
            end = last
        else:
            if isinstance(boundary, bool) or not isinstance(boundary, int):
                raise ForkBoundaryError(
                    f"fork boundary must be an int seq, got {boundary!r}",
                    session_id=parent.id,
                    boundary=boundary,
                )
            if not 0 <= boundary <= last:
                raise ForkBoundaryError(
                    f"fork boundary {boundary} does not exist in session {parent.id!r} (last seq: "
                    f"{last if last >= 0 else 'none'}); pick a seq of an existing event",
                    session_id=parent.id,
                    boundary=boundary,
                )
            end = boundary
        open_turn = _turn_open_at(events, end)
        if open_turn is not None:
            raise ForkBoundaryError(
                f"fork boundary {end} of session {parent.id!r} ends inside open turn "
                f"{open_turn}; fork at or after that turn's turn/end, or before its turn/start",
                session_id=parent.id,
                boundary=end,
            )
        if child_session_id is None:
            child_session_id = f"{parent.id}-fork-{uuid.uuid4().hex[:12]}"
            if SESSION_ID_PATTERN.fullmatch(child_session_id) is None:
                child_session_id = f"fork-{uuid.uuid4().hex}"
        header = SessionHeader(
            session_id=self._new_id(child_session_id),
            created_at=time.time(),
            cwd=parent.header.cwd,
            parent_session=parent.id,
            seed_length=end + 1,
        )
        return self.publish(self._prepare(header, events[: end + 1], copy=False))

    def _new_id(self, session_id: str) -> SessionId:
        sid = validate_session_id(session_id)
        if sid in self._live:
            raise SessionExistsError(
                f"session {sid!r} already exists (it is live in this store); pick another id, "
                "or detach the live session first",
                session_id=sid,
            )
        return sid

    def _prepare(
        self, header: SessionHeader, seed: Sequence[SessionEvent] | None, *, copy: bool
    ) -> Session:
        self.caller.fiber.check_active("create a session on")
        # The listener table's own membership test: ctx.hears without a Python call per event.
        hears = self.ctx.runtime.bus.table.__contains__
        session = Session(header, emit=self.ctx.emit, hears=hears, scope=self.caller.scope)
        if seed is not None:
            session.load_seed(seed, copy=copy)
        return session

    def publish(self, session: Session) -> Session:
        """Make a :meth:`prepare` d session live, owned by the calling context's fiber, and emit
        ``session/created``. Returns ``session``.

        Raises:
            SessionExistsError: a live session already has its id (or it was published before).
            InactiveContextError: the calling context's fiber is unloading.
        """
        owner_ctx = self.caller
        owner_ctx.fiber.check_active("publish a session on")
        if self._live.get(session.id) is not session:
            self._new_id(session.id)  # raises when another live session has this id
        # The owner's fiber detaches the session when it unloads. attach() refuses a session
        # published before, so nothing is registered for it.
        owner = Disposer(session.detach, label=f"session {session.id}")
        session.attach(owner, self._forget)
        owner_ctx.fiber.add(owner)
        self._live[session.id] = session
        self.ctx.emit("session/created", SessionCreated(session), target=session.scope)
        return session

    # --- flush and detach -----------------------------------------------------------------

    async def flush(self, session: Session) -> None:
        """Run the ``session/flush`` listeners (concurrently) and wait for all of them.

        Persistence writes and syncs here. If listeners fail, the first failure is raised as
        is (not in a group) once every listener has finished; the others are logged.

        Raises:
            SessionDetachedError: the session was detached.
            SessionNotFoundError: the session is not this store's.
            Exception: the first failing listener's exception.
        """
        self._require(session)
        # The parallel dispatch does not yield when no listener is registered; flush is always
        # a checkpoint (and a cancel that arrives here leaves nothing half-run).
        await trio.lowlevel.checkpoint()
        failure: Exception | None = None
        try:
            await self.ctx.parallel("session/flush", SessionFlush(session), target=session.scope)
        except ExceptionGroup as group:
            failure, *rest = group.exceptions
            for exc in rest:
                logger.error(
                    "session %r: another session/flush listener failed too",
                    session.id,
                    exc_info=exc,
                )
        if failure is not None:
            # Raised outside the except block: the listener's own __cause__ stays intact and
            # the group does not become its __context__.
            raise failure

    def detach(self, session: Session) -> None:
        """Detach ``session``: it leaves the store, refuses appends, its subscribers end, and
        ``session/disposed`` is emitted. Idempotent. Called from a ``session/event`` listener,
        it takes effect right after that dispatch.

        Raises:
            SessionNotFoundError: ``session`` is not live in this store.
        """
        if session.detached:
            return
        if self._live.get(session.id) is not session:
            raise SessionNotFoundError(
                f"session {session.id!r} is not live in this store; detach it through the store "
                "that created it"
            )
        session.detach()

    def _forget(self, session: Session) -> None:
        """``session`` detached itself: drop it from the table and announce it."""
        if self._live.get(session.id) is session:
            del self._live[session.id]
        self.ctx.emit("session/disposed", SessionDisposed(session), target=session.scope)

    def _detach_all(self) -> None:
        for session in reversed(list(self._live.values())):
            self.detach(session)

    def _require(self, session: Session | str) -> Session:
        if isinstance(session, Session):
            if session.detached:
                raise SessionDetachedError(
                    f"session {session.id!r} is detached; use a live session"
                )
            if self._live.get(session.id) is not session:
                raise SessionNotFoundError(
                    f"session {session.id!r} is not live in this store (another runtime's "
                    "session?); use a session created by this ctx.sessions"
                )
            return session
        found = self._live.get(SessionId(session)) if isinstance(session, str) else None
        if found is None:
            live = ", ".join(repr(s) for s in list(self._live)[:10]) or "none"
            raise SessionNotFoundError(
                f"no live session {session!r} (live: {live}); create it first or check the id"
            )
        return found


def _turn_open_at(events: Sequence[SessionEvent], end: int) -> int | None:
    """The turn open right after event ``end``, if any (scans back to the last turn mark)."""
    for index in range(end, -1, -1):
        kind = events[index].type
        if kind == "turn/end":
            return None
        if kind == "turn/start":
            turn = events[index].data.get("turn")
            return turn if isinstance(turn, int) else -1
    return None


def _snapshot_meta(meta: dict[str, Any] | None) -> dict[str, Any]:
    if meta is None:
        return {}
    copied = snapshot_json(meta, "meta")
    if type(copied) is not dict:
        raise TypeError(f"meta must be a dict, got {type(meta).__name__}")
    return copied


def _absolute(cwd: str | None) -> str | None:
    if cwd is None:
        return None
    if not isinstance(cwd, str):
        raise TypeError(f"cwd must be a str path, got {type(cwd).__name__}")
    return os.path.abspath(cwd)
