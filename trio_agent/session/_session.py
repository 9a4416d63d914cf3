"""The append-only session log: :class:`Session`, its event view and its subscriptions."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, final, overload

import attrs
import trio

from .. import _serde
from ..llm import Message
from ._errors import (
    EventPayloadError,
    InvalidSeedError,
    JsonValueError,
    SessionDetachedError,
    SessionReentrancyError,
    SubscriberLaggedError,
)
from ._events import (
    EVENT_PAYLOADS,
    SHAREABLE_PAYLOADS,
    RequestHeader,
    SessionEndSeed,
    SessionEvent,
    SessionHeader,
    StepStart,
    TurnStart,
    structure_payload,
)
from ._json import snapshot_json
from ._projection import _PROJECTORS, MessageHistory

if TYPE_CHECKING:
    from ..ids import SessionId
    from ..runtime import Disposer, Scope

__all__ = ["EventLog", "Session", "SessionAppended", "SessionSubscription"]

_PAYLOAD_CLASS_SET = frozenset(EVENT_PAYLOADS.values())

#: ``emit(name, payload, target=scope)`` of the store's context.
_Emit = Callable[..., None]


@attrs.frozen(eq=False)
class SessionAppended:
    """Payload of ``session/event``: ``event`` was just appended to ``session``.

    Emitted synchronously after the event is committed, aimed at the scope of the context that
    created the session. Listeners must not append to the same session (it raises
    :class:`SessionReentrancyError`, which the emit contains and logs).
    """

    session: Session
    event: SessionEvent


@final
class EventLog(Sequence[SessionEvent]):
    """Read-only, live view of a session's events (``session.events``).

    ``log[i]`` is the event with seq ``i``; a slice is a ``tuple`` snapshot. The view grows as
    events are appended; take ``tuple(session.events)`` for a fixed snapshot.
    """

    __slots__ = ("_events",)

    def __init__(self, events: list[SessionEvent]) -> None:
        self._events = events

    def __len__(self) -> int:
        return len(self._events)

    @overload
    def __getitem__(self, index: int) -> SessionEvent: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[SessionEvent, ...]: ...

    def __getitem__(self, index: int | slice) -> SessionEvent | tuple[SessionEvent, ...]:
        if isinstance(index, slice):
            return tuple(self._events[index])
        return self._events[index]

    def __iter__(self) -> Iterator[SessionEvent]:
        return iter(self._events)

    def __repr__(self) -> str:
        return f"<EventLog of {len(self._events)} events>"


@final
@attrs.define(eq=False, repr=False, init=False)
class Session:
    """An append-only log of :class:`SessionEvent` s and the model history projected from it.

    Create sessions with ``ctx.sessions.create(...)`` (:class:`SessionStore`); the store publishes
    each append as ``session/event`` and detaches the session when its owner goes away.

    Bookkeeping the loop relies on is kept incrementally: :attr:`last_turn`, :attr:`open_turn`,
    :attr:`open_step`. :meth:`derive_messages` is O(1) per call and O(1) per appended event.
    """

    header: SessionHeader
    _events: list[SessionEvent]
    _view: EventLog
    _messages: list[Message]
    _history: MessageHistory | None
    _last_turn: int
    _request_header: SessionEvent | None
    _open_turn: int | None
    _open_step: int | None
    _emit: _Emit | None
    _scope: Scope | None
    _publishing: bool
    _detached: bool
    _detach_pending: bool
    _on_deferred_detach: Callable[[Session], None] | None
    _owner: Disposer | None
    _lot: trio.lowlevel.ParkingLot

    def __init__(
        self,
        header: SessionHeader,
        *,
        emit: _Emit | None = None,
        scope: Scope | None = None,
    ) -> None:
        """Internal: use ``ctx.sessions.create``."""
        self.header = header
        self._events = []
        self._view = EventLog(self._events)
        self._messages = []
        self._history = None
        self._last_turn = 0
        self._request_header = None
        self._open_turn = None
        self._open_step = None
        self._emit = emit
        self._scope = scope
        self._publishing = False
        self._detached = False
        self._detach_pending = False
        self._on_deferred_detach = None
        self._owner = None
        self._lot = trio.lowlevel.ParkingLot()

    def __repr__(self) -> str:
        state = " detached" if self._detached else ""
        return f"<Session {self.id!r} {len(self._events)} events{state}>"

    # --- read side ------------------------------------------------------------------------

    @property
    def id(self) -> SessionId:
        """The session id (also its file name in persistence)."""
        return self.header.session_id

    @property
    def events(self) -> EventLog:
        """Every event, as a read-only live view (O(1))."""
        return self._view

    @property
    def scope(self) -> Scope | None:
        """The scope of the context that created the session (``None``: global)."""
        return self._scope

    @property
    def detached(self) -> bool:
        """True once the store detached the session; it then refuses appends."""
        return self._detached

    @property
    def live(self) -> bool:
        """True while the session is published in a store and not detached."""
        return self._owner is not None and not self._detached

    @property
    def last_turn(self) -> int:
        """Number of the latest ``turn/start`` (seed included), 0 if there is none."""
        return self._last_turn

    @property
    def open_turn(self) -> int | None:
        """The turn started and not yet ended, if any."""
        return self._open_turn

    @property
    def open_step(self) -> int | None:
        """The step started and not yet ended (inside :attr:`open_turn`), if any."""
        return self._open_step

    @property
    def request_header(self) -> RequestHeader | None:
        """The payload of the latest ``request/header`` (seed included), or ``None``; O(1)."""
        event = self._request_header
        return None if event is None else event.payload_as(RequestHeader)

    def derive_messages(self) -> MessageHistory:
        """The model history projected from the log, as an immutable tuple-like snapshot.

        Contains ``user/message``, ``context/message`` and ``steering/message`` messages,
        non-empty ``assistant/message`` messages (interrupted partial ones included) and one
        tool-result message per ``tool/result``, answering the logged ``call_id``. The
        projection is maintained as events are appended, so this is O(1) whatever the history
        length; the returned :class:`MessageHistory` never changes afterwards.
        """
        history = self._history
        if history is None:
            history = self._history = MessageHistory(self._messages, len(self._messages))
        return history

    # --- write side -----------------------------------------------------------------------

    def append(self, type: str, data: object) -> SessionEvent:
        """Append one event and publish it; return the logged event.

        ``data`` is a payload value (``TurnStart(turn=1)``, any attrs class the converter can
        unstructure) or a ``dict``. It is validated as lossless JSON and copied in one pass, so
        the logged event never shares the caller's objects. Data for a core event type must fit
        that type's payload class. On any error nothing is logged.

        After the event is committed, ``session/event`` (:class:`SessionAppended`) is emitted
        and subscribers are woken.

        Raises:
            JsonValueError: ``data`` is not lossless JSON (the message names the path).
            EventPayloadError: ``data`` does not fit the payload class of ``type``.
            SessionReentrancyError: called from a ``session/event`` listener of this session.
            SessionDetachedError: the session was detached.
        """
        if self._publishing:
            raise SessionReentrancyError(
                f"session {self.id!r}: append({type!r}) was called while the previous append was "
                "being published (from a session/event listener); appends are not re-entrant, "
                "so schedule the append after the dispatch (for example with ctx.start_soon)"
            )
        if self._detached:
            raise SessionDetachedError(
                f"session {self.id!r} is detached; it accepts no more events (create or fork a "
                "live session to continue)"
            )
        if not isinstance(type, str) or not type:
            raise TypeError(f"event type must be a non-empty str, got {type!r}")
        snapshot, payload = _prepare(type, data)
        event = SessionEvent(len(self._events), type, time.time(), snapshot)
        if payload is not None:
            event._cache_payload(payload)
        self._commit(event)
        self._publish(event)
        return event

    def _commit(self, event: SessionEvent) -> None:
        """Fold ``event`` into the bookkeeping and the projection, then store it."""
        kind = event.type
        if kind == "turn/start":
            turn = event.payload_as(TurnStart).turn
            self._last_turn = turn
            self._open_turn = turn
            self._open_step = None
        elif kind == "turn/end":
            self._open_turn = None
            self._open_step = None
        elif kind == "step/start":
            self._open_step = event.payload_as(StepStart).step
        elif kind == "step/end":
            self._open_step = None
        elif kind == "request/header":
            self._request_header = event
        else:
            projector = _PROJECTORS.get(kind)
            if projector is not None:
                message = projector(event)
                if message is not None:
                    self._messages.append(message)
                    self._history = None
        self._events.append(event)

    def _publish(self, event: SessionEvent) -> None:
        self._publishing = True
        try:
            if self._emit is not None:
                self._emit("session/event", SessionAppended(self, event), target=self._scope)
            if self._lot:
                self._lot.unpark_all()
        finally:
            self._publishing = False
            if self._detach_pending:
                self._detach_pending = False
                if self._on_deferred_detach is not None:
                    self._on_deferred_detach(self)

    def _load_seed(self, seed: Sequence[SessionEvent], *, copy: bool) -> None:
        """Fold ``seed`` in (copied and validated unless ``copy`` is false), then end-seed."""
        for index, event in enumerate(seed):
            if not isinstance(event, SessionEvent):
                raise InvalidSeedError(
                    f"seed[{index}] is a {type(event).__name__}, not a SessionEvent; build seed "
                    "events with SessionEvent(seq, type, time, data)"
                )
            if event.seq != index:
                raise InvalidSeedError(
                    f"seed must be contiguous from 0: seed[{index}] has seq {event.seq}; pass "
                    "the events of one log in order, without gaps"
                )
            if copy:
                event = _copy_event(event, index)
            elif event.type in EVENT_PAYLOADS:
                event.payload  # noqa: B018 - structure once (cached on the shared event)
            self._commit(event)
        if not seed or seed[-1].type != SessionEndSeed.event_type:
            self._commit(
                SessionEvent(len(self._events), SessionEndSeed.event_type, time.time(), {})
            )

    def _mark_detached(self) -> None:
        self._detached = True
        self._lot.unpark_all()

    # --- subscriptions --------------------------------------------------------------------

    def subscribe(
        self, *, from_seq: int | None = None, max_lag: int | None = None
    ) -> SessionSubscription:
        """Follow the log: ``async with session.subscribe() as events: async for e in events``.

        The subscription is a cursor into the log (the log is its buffer), so a slow subscriber
        never blocks or slows :meth:`append` and never misses an event: it receives every event
        from ``from_seq`` (default: the next one appended) in order, however far behind it is.
        With ``max_lag=N``, a subscriber that finds more than ``N`` events waiting is instead
        disconnected: ``receive`` raises :class:`SubscriberLaggedError` (saying by how many
        events it fell behind, and ``next_seq``) so a UI can re-render from ``session.events``
        and subscribe again. When the session is detached, receivers get the remaining events
        and then ``trio.EndOfChannel`` (an ``async for`` ends cleanly).

        Raises:
            SessionDetachedError: the session is already detached.
            ValueError: ``from_seq`` or ``max_lag`` is out of range.
        """
        if self._detached:
            raise SessionDetachedError(
                f"session {self.id!r} is detached; read session.events instead of subscribing"
            )
        end = len(self._events)
        start = end if from_seq is None else from_seq
        if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start <= end:
            raise ValueError(
                f"from_seq must be an int between 0 and {end} (the next seq), got {from_seq!r}"
            )
        if max_lag is not None and (
            isinstance(max_lag, bool) or not isinstance(max_lag, int) or max_lag < 1
        ):
            raise ValueError(f"max_lag must be None or an int >= 1, got {max_lag!r}")
        return SessionSubscription(self, start, max_lag)


@final
class SessionSubscription(trio.abc.ReceiveChannel[SessionEvent]):
    """A receive channel of a session's events; see :meth:`Session.subscribe`.

    ``receive()`` is a checkpoint. After ``aclose()`` it raises ``trio.ClosedResourceError``;
    after the session is detached and every event was received, ``trio.EndOfChannel``.
    """

    __slots__ = ("_broken", "_closed", "_max_lag", "_next", "_session")

    def __init__(self, session: Session, next_seq: int, max_lag: int | None) -> None:
        self._session = session
        self._next = next_seq
        self._max_lag = max_lag
        self._closed = False
        self._broken: SubscriberLaggedError | None = None

    @property
    def next_seq(self) -> int:
        """Seq of the next event this subscription will deliver."""
        return self._next

    async def receive(self) -> SessionEvent:
        """The next event; waits for an append if there is none yet."""
        await trio.lowlevel.checkpoint_if_cancelled()
        session = self._session
        while True:
            if self._closed:
                raise trio.ClosedResourceError("this session subscription was closed")
            if self._broken is not None:
                raise self._broken
            events = session._events
            behind = len(events) - self._next
            if behind > 0:
                if self._max_lag is not None and behind > self._max_lag:
                    self._broken = SubscriberLaggedError(
                        f"subscriber of session {session.id!r} fell behind by {behind} events "
                        f"(max_lag={self._max_lag}) and was disconnected; re-read "
                        f"session.events[{self._next}:] and subscribe again",
                        next_seq=self._next,
                        behind=behind,
                    )
                    raise self._broken
                event = events[self._next]
                self._next += 1
                await trio.lowlevel.cancel_shielded_checkpoint()
                return event
            if session._detached:
                raise trio.EndOfChannel
            await session._lot.park()

    async def aclose(self) -> None:
        """Stop receiving; a task blocked in ``receive`` gets ``trio.ClosedResourceError``."""
        if not self._closed:
            self._closed = True
            self._session._lot.unpark_all()
        await trio.lowlevel.checkpoint()


def _prepare(event_type: str, data: object) -> tuple[dict[str, Any], object | None]:
    """Validate + snapshot ``data``; return the snapshot and the typed payload (if known)."""
    cls = EVENT_PAYLOADS.get(event_type)
    data_cls = type(data)
    if data_cls is dict:
        snapshot = snapshot_json(data, "data")
        if cls is None:
            return snapshot, None
        return snapshot, structure_payload(event_type, snapshot)
    if attrs.has(data_cls):
        if data_cls is not cls and (cls is not None or data_cls in _PAYLOAD_CLASS_SET):
            expected = f"a {cls.__name__}" if cls is not None else "a plugin payload"
            raise EventPayloadError(
                f"append({event_type!r}, {data_cls.__name__}(...)): {event_type!r} events carry "
                f"{expected}, but {data_cls.__name__} is the payload of "
                f"{getattr(data_cls, 'event_type', 'another event type')!r}"
            )
        snapshot = snapshot_json(_serde.unstructure(data), "data")
        if type(snapshot) is not dict:
            raise JsonValueError(
                f"data: {data_cls.__name__} unstructured to a {type(snapshot).__name__}; event "
                "data must be a JSON object (dict)",
                path="data",
                found=type(snapshot).__name__,
            )
        if cls is None:
            return snapshot, None
        if cls in SHAREABLE_PAYLOADS:
            return snapshot, data
        return snapshot, structure_payload(event_type, snapshot)
    raise JsonValueError(
        f"data: found {data_cls.__name__}; event data must be a dict (a JSON object) or an "
        "attrs payload value such as TurnStart(turn=1)",
        path="data",
        found=data_cls.__name__,
    )


def _copy_event(event: SessionEvent, index: int) -> SessionEvent:
    if not isinstance(event.type, str) or not event.type:
        raise InvalidSeedError(f"seed[{index}] has event type {event.type!r}; expected a str")
    stamp = event.time
    if isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or not math.isfinite(stamp):
        raise InvalidSeedError(f"seed[{index}] has time {stamp!r}; expected epoch seconds")
    data = event.data
    if type(data) is not dict:
        raise JsonValueError(
            f"seed[{index}].data: found {type(data).__name__}; event data must be a dict",
            path=f"seed[{index}].data",
            found=type(data).__name__,
        )
    snapshot = snapshot_json(data, f"seed[{index}].data")
    copied = SessionEvent(index, event.type, float(stamp), snapshot)
    if event.type in EVENT_PAYLOADS:
        copied._cache_payload(structure_payload(event.type, snapshot, seq=index))
    return copied
