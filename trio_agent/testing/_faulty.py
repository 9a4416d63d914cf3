"""``FaultyBackend``: a persistence backend that passes calls to another and injects faults."""

from __future__ import annotations

import errno
from collections.abc import Sequence
from typing import Literal, final

import attrs
import trio

from ..ids import SessionId
from ..persistence import Backend, Position, ReadResult, SessionInfo, session_info
from ..session import SessionEvent, SessionHeader

__all__ = ["BackendCall", "Fault", "FaultyBackend"]

#: The backend methods a :class:`FaultyBackend` records.
Method = Literal["read", "exists", "infos", "write", "acquire", "release", "aclose"]


@final
@attrs.frozen
class BackendCall:
    """One call a :class:`FaultyBackend` received, recorded when it started."""

    method: Method
    session_id: SessionId | None = None
    #: For a write: the seqs of its events.
    seqs: range = range(0)
    #: For a write: whether it creates the log (``position`` was ``None``).
    creates: bool = False
    #: For a write: whether another write of the same session was still in flight (the writer
    #: promises never to do that).
    overlapped: bool = False


@final
@attrs.define(eq=False)
class Fault:
    """A fault scheduled on one write of a :class:`FaultyBackend` (see its methods)."""

    kind: Literal["fail", "hold", "lose-sync"]
    #: The number of the write it targets (writes are numbered from 1 as they start).
    write: int
    #: Whether the inner backend stores the events before the fault strikes.
    stored: bool
    error: BaseException | None = None
    #: Set when the targeted write reaches the fault.
    hit: trio.Event = attrs.field(factory=trio.Event, init=False)
    _released: trio.Event = attrs.field(factory=trio.Event, init=False)

    def release(self) -> None:
        """Let a held write go on (see :meth:`FaultyBackend.hold_write`)."""
        self._released.set()


@attrs.frozen
class _Token:
    """A :class:`FaultyBackend` position's token: the inner backend's position, and the events
    written after it whose sync was lost (still only in the "page cache")."""

    inner: Position | None
    unsynced: tuple[SessionEvent, ...] = ()


@attrs.frozen
class _Unsynced:
    header: SessionHeader
    inner: Position | None
    events: tuple[SessionEvent, ...]


@final
class FaultyBackend(Backend):
    """A :class:`~trio_agent.persistence.Backend` that passes every call to ``inner`` and
    injects the faults a test schedules on its writes. Mount it with the shared writer::

        faulty = FaultyBackend(MemoryBackend())
        await ctx.plugin(PersistenceService, PersistenceService.Config(backend=faulty))
        faulty.fail_write(OSError(errno.ENOSPC, "No space left on device"))
        with pytest.raises(SessionWriteError):
            await ctx.sessions.flush(session)

    Writes are numbered from 1 in the order they start; a fault targets one write: ``nth``, or
    by default the next write no fault is scheduled on yet (so two ``fail_write()`` calls fail
    the next two writes). Every call is recorded in :attr:`calls` when it starts and in
    :attr:`ended` when it returns or raises (:meth:`wait_ended` waits for one).

    A lost sync is modelled as an operating system's page cache would hold it: the write is
    reported durable, and this backend's own reads see it, but the inner backend never
    receives it until a later write syncs it along with its own events. A crash is the end of
    this backend: unloading closes it without syncing, so a fresh backend over the same
    storage (the restart) reads the log without the lost events.
    """

    def __init__(self, inner: Backend) -> None:
        #: The backend the calls go to.
        self.inner = inner
        #: Every call received, in the order they started.
        self.calls: list[BackendCall] = []
        #: Every call that returned or raised, in the order they ended.
        self.ended: list[BackendCall] = []
        self._an_end = trio.Event()
        self._faults: dict[int, Fault] = {}
        self._started = 0
        self._in_flight: dict[SessionId, int] = {}
        self._unsynced: dict[SessionId, _Unsynced] = {}

    def __repr__(self) -> str:
        return f"<FaultyBackend over {self.inner!r}>"

    async def wait_ended(self, method: Method, session_id: str | None = None) -> BackendCall:
        """Wait until a call of ``method`` (of ``session_id``, if given) has returned or raised
        (a release runs in a worker thread for most backends: that it started says little);
        returns the first such call in :attr:`ended`. Returns at once if one already ended."""
        while True:
            for call in self.ended:
                if call.method == method and (session_id is None or call.session_id == session_id):
                    await trio.lowlevel.checkpoint()
                    return call
            await self._an_end.wait()

    def _record(self, call: BackendCall) -> BackendCall:
        self.calls.append(call)
        return call

    def _end(self, call: BackendCall) -> None:
        self.ended.append(call)
        self._an_end.set()
        self._an_end = trio.Event()

    @property
    def writes(self) -> list[BackendCall]:
        """The recorded writes, in the order they started."""
        return [call for call in self.calls if call.method == "write"]

    # --- scheduling faults ------------------------------------------------------------------

    def fail_write(
        self, error: BaseException | None = None, *, nth: int | None = None, stored: bool = False
    ) -> Fault:
        """Make a write raise ``error`` (default: an ``EIO`` :class:`OSError`).

        With ``stored=False`` the error comes first (after a checkpoint) and nothing is
        stored. With ``stored=True`` the inner backend stores the events, then the error is
        raised: a write whose outcome the caller cannot know, such as a lost acknowledgement.
        """
        if error is None:
            error = OSError(errno.EIO, "Input/output error (injected by FaultyBackend)")
        return self._schedule(Fault("fail", self._target(nth), stored, error))

    def hold_write(self, *, nth: int | None = None, stored: bool = False) -> Fault:
        """Hold a write until :meth:`Fault.release`; ``Fault.hit`` is set once it is held.

        With ``stored=False`` it is held before the inner backend sees it, in a cancellable
        wait: a cancel then stops it with nothing stored. With ``stored=True`` it is held after
        the inner backend stored the events, shielded, as a write running in a worker thread
        is: a cancel waits for the release, and the write then returns its position.
        """
        return self._schedule(Fault("hold", self._target(nth), stored))

    def lose_sync(self, *, nth: int | None = None) -> Fault:
        """Lose a write's sync: it returns as if durable, but its events stay in this backend's
        "page cache" (see the class docs) until a later write syncs them, or are lost when
        this backend is closed."""
        return self._schedule(Fault("lose-sync", self._target(nth), stored=False))

    def _target(self, nth: int | None) -> int:
        if nth is not None:
            if nth <= self._started:
                raise ValueError(
                    f"write {nth} has already started ({self._started} writes so far); "
                    "schedule a fault on a later write"
                )
            return nth
        number = self._started + 1
        while number in self._faults:
            number += 1
        return number

    def _schedule(self, fault: Fault) -> Fault:
        if fault.write in self._faults:
            raise ValueError(f"write {fault.write} already has a fault scheduled")
        self._faults[fault.write] = fault
        return fault

    # --- the protocol -----------------------------------------------------------------------

    def location(self, session_id: SessionId) -> str:
        return self.inner.location(session_id)

    async def read(self, session_id: SessionId) -> ReadResult | None:
        call = self._record(BackendCall("read", session_id))
        try:
            return await self._read(session_id)
        finally:
            self._end(call)

    async def _read(self, session_id: SessionId) -> ReadResult | None:
        result = await self.inner.read(session_id)
        inner = None if result is None else result.position
        cached = self._unsynced.get(session_id)
        if cached is not None and _count(cached.inner) == _count(inner):
            # The page cache: what the lost syncs wrote, on top of what the inner log holds.
            events = (*(() if result is None else result.events), *cached.events)
            header = cached.header if result is None else result.header
            return ReadResult(header, events, Position(len(events), _Token(inner, cached.events)))
        if result is None:
            return None
        # Nothing cached (or the inner log changed under the cache): the inner log is all.
        return attrs.evolve(result, position=Position(result.position.count, _Token(inner)))

    async def exists(self, session_id: SessionId) -> bool:
        call = self._record(BackendCall("exists", session_id))
        try:
            stored = await self.inner.exists(session_id)
        finally:
            self._end(call)
        return stored or session_id in self._unsynced

    async def infos(self) -> list[SessionInfo]:
        call = self._record(BackendCall("infos"))
        try:
            infos = {info.session_id: info for info in await self.inner.infos()}
            for session_id in list(self._unsynced):
                result = await self._read(session_id)
                if result is not None:
                    infos[session_id] = session_info(result.header, result.events)
        finally:
            self._end(call)
        return list(infos.values())

    async def write(
        self, header: SessionHeader, position: Position | None, events: Sequence[SessionEvent]
    ) -> Position:
        sid = header.session_id
        self._started += 1
        fault = self._faults.pop(self._started, None)
        first = events[0].seq if events else 0
        call = self._record(
            BackendCall(
                "write",
                sid,
                range(first, first + len(events)),
                creates=position is None,
                overlapped=self._in_flight.get(sid, 0) > 0,
            )
        )
        self._in_flight[sid] = self._in_flight.get(sid, 0) + 1
        try:
            if fault is None:
                return await self._write_through(header, position, events)
            return await self._write_with(fault, header, position, events)
        finally:
            self._in_flight[sid] -= 1
            self._end(call)

    async def _write_with(
        self,
        fault: Fault,
        header: SessionHeader,
        position: Position | None,
        events: Sequence[SessionEvent],
    ) -> Position:
        if fault.kind == "lose-sync":
            await trio.lowlevel.checkpoint()
            fault.hit.set()
            return self._cache(header, position, events)
        if fault.kind == "hold" and not fault.stored:
            fault.hit.set()
            await fault._released.wait()
            return await self._write_through(header, position, events)
        if fault.kind == "fail" and not fault.stored:
            await trio.lowlevel.checkpoint()
            fault.hit.set()
            assert fault.error is not None
            raise fault.error
        written = await self._write_through(header, position, events)
        fault.hit.set()
        if fault.kind == "fail":
            assert fault.error is not None
            raise fault.error
        with trio.CancelScope(shield=True):
            await fault._released.wait()
        return written

    async def _write_through(
        self, header: SessionHeader, position: Position | None, events: Sequence[SessionEvent]
    ) -> Position:
        inner, unsynced = _unwrap(position)
        written = await self.inner.write(header, inner, (*unsynced, *events))
        self._unsynced.pop(header.session_id, None)
        return Position(written.count, _Token(written))

    def _cache(
        self, header: SessionHeader, position: Position | None, events: Sequence[SessionEvent]
    ) -> Position:
        inner, unsynced = _unwrap(position)
        cached = (*unsynced, *events)
        self._unsynced[header.session_id] = _Unsynced(header, inner, cached)
        return Position(_count(inner) + len(cached), _Token(inner, cached))

    async def acquire(self, session_id: SessionId) -> None:
        call = self._record(BackendCall("acquire", session_id))
        try:
            await self.inner.acquire(session_id)
        finally:
            self._end(call)

    async def release(self, session_id: SessionId) -> None:
        call = self._record(BackendCall("release", session_id))
        try:
            await self.inner.release(session_id)
        finally:
            self._end(call)

    async def aclose(self) -> None:
        call = self._record(BackendCall("aclose"))
        self._unsynced.clear()  # the crash: what was never synced is gone
        try:
            await self.inner.aclose()
        finally:
            self._end(call)


def _count(position: Position | None) -> int:
    return 0 if position is None else position.count


def _unwrap(position: Position | None) -> tuple[Position | None, tuple[SessionEvent, ...]]:
    if position is None:
        return None, ()
    token = position.token
    if not isinstance(token, _Token):
        raise TypeError(
            f"{position!r} did not come from this FaultyBackend; pass back the position its "
            "read or write returned"
        )
    return token.inner, token.unsynced
