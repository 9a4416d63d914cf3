"""The append-only session log: :class:`Session`, its event view and its subscriptions."""

from __future__ import annotations

import enum
import math
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, final, overload

import attrs
import trio

from .. import _serde
from ._encoders import FAST_ENCODERS, UNSHARED, encode_chunk
from ._errors import (
    EventPayloadError,
    InvalidSeedError,
    JsonValueError,
    SessionDetachedError,
    SessionExistsError,
    SessionReentrancyError,
    SubscriberLaggedError,
)
from ._events import (
    EVENT_PAYLOADS,
    SHAREABLE_PAYLOADS,
    AssistantChunk,
    RequestHeader,
    SessionEndSeed,
    SessionEvent,
    SessionHeader,
    StepStart,
    TurnStart,
    TypedPayload,
    new_event,
    prime_payload,
    structure_payload,
)
from ._json import snapshot_json
from ._projection import MessageHistory, Projection

if TYPE_CHECKING:
    from ..ids import SessionId
    from ..llm import StreamChunk
    from ..runtime import Disposer, Scope

__all__ = ["EventLog", "Session", "SessionAppended", "SessionSubscription"]

_PAYLOAD_CLASS_SET = frozenset(EVENT_PAYLOADS.values())
#: The event type of each core payload class (a lone ``append(payload)`` of one is a lookup).
_TYPE_OF_CLASS: dict[type, str] = {cls: name for name, cls in EVENT_PAYLOADS.items()}

#: ``emit(name, payload, target=scope)`` of the store's context.
_Emit = Callable[..., None]


class _NoData(enum.Enum):
    NO_DATA = "NO_DATA"


#: ``append(payload)``: no ``data`` argument, the event type comes from the payload's class.
_NO_DATA = _NoData.NO_DATA


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
    """Read-only, live view of a session's events (``session.events``), or of its events of one
    type (``session.events_of_type(type)``).

    In ``session.events``, ``log[i]`` is the event with seq ``i``; a slice is a ``tuple``
    snapshot. The view grows as events are appended; take ``tuple(session.events)`` for a fixed
    snapshot.
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
@attrs.define(eq=False, repr=False)
class Session:
    """An append-only log of :class:`SessionEvent` s and the model history projected from it.

    Create sessions with ``ctx.sessions.create(...)`` (:class:`SessionStore`); the store publishes
    each append as ``session/event`` and detaches the session when its owner goes away.
    ``Session(header)`` alone builds a standalone session (no store, no events emitted), for
    tests and offline tools.

    The session owns its lifecycle: a store :meth:`attach` es it when publishing it and asks it to
    :meth:`detach`; the store itself keeps only its table of live sessions.

    Bookkeeping the loop relies on is kept incrementally: :attr:`last_turn`, :attr:`open_turn`,
    :attr:`open_step`. :meth:`derive_messages` is O(1) per call and O(1) per appended event
    (a ``compaction/*`` event costs one pass over the history, once).
    """

    header: SessionHeader
    #: ``emit(name, payload, target=scope)`` of the store's context (``None``: standalone).
    _emit: _Emit | None = attrs.field(default=None, kw_only=True)
    #: ``hears(name)`` of the same context: whether anyone listens (``None``: assume so).
    _hears: Callable[[str], bool] | None = attrs.field(default=None, kw_only=True)
    #: The scope store events are aimed at (that of the context that created the session).
    _scope: Scope | None = attrs.field(default=None, kw_only=True)
    _events: list[SessionEvent] = attrs.field(init=False, factory=list)
    _view: EventLog = attrs.field(init=False)
    _projection: Projection = attrs.field(init=False, factory=Projection)
    #: Event type → its events, for the types someone asked for (``events_of_type``).
    _by_type: dict[str, list[SessionEvent]] = attrs.field(init=False, factory=dict)
    _last_turn: int = attrs.field(init=False, default=0)
    _request_header: SessionEvent | None = attrs.field(init=False, default=None)
    _open_turn: int | None = attrs.field(init=False, default=None)
    _open_step: int | None = attrs.field(init=False, default=None)
    #: A ``session/event`` dispatch of this session is running (appends are not re-entrant).
    _publishing: bool = attrs.field(init=False, default=False)
    _detached: bool = attrs.field(init=False, default=False)
    #: ``detach()`` was called during a dispatch; it takes effect right after it.
    _detach_pending: bool = attrs.field(init=False, default=False)
    #: The ownership effect on the publishing fiber (set by :meth:`attach`).
    _owner: Disposer | None = attrs.field(init=False, default=None)
    #: The store's callback, run once when the detach takes effect.
    _on_detached: Callable[[Session], None] | None = attrs.field(init=False, default=None)
    #: Where subscribers wait for the next append; built by the first one (#17: most sessions
    #: have none).
    _lot: trio.lowlevel.ParkingLot | None = attrs.field(init=False, default=None)
    #: How many subscribers are parked in ``_lot`` (an int test per append, not a method call).
    _parked: int = attrs.field(init=False, default=0)

    @_view.default
    def _make_view(self) -> EventLog:
        return EventLog(self._events)

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
        tool-result message per ``tool/result``, answering the logged ``call_id``. A
        ``compaction/summary`` replaces the messages of its range with one user message holding
        the summary; a ``compaction/prune`` shows the tool results of its range as a stub (the
        log keeps everything). The projection is maintained as events are appended, so this is
        O(1) whatever the history length; the returned :class:`MessageHistory` never changes
        afterwards.
        """
        return self._projection.history()

    def history_index(self, seq: int) -> int:
        """How many messages of :meth:`derive_messages` stand for events up to ``seq``.

        ``derive_messages()[history_index(s):]`` are the messages logged after seq ``s`` (a
        summary counts at its ``first_seq``). O(log n).
        """
        return self._projection.index_after(seq)

    def events_of_type(self, type: str) -> EventLog:
        """A live, read-only view of this session's events of type ``type``, in seq order.

        The first call for a type scans the log once; from then on the view grows with every
        append at O(1), so following one kind of event (say ``assistant/message``) costs
        nothing per event of the other kinds.
        """
        events = self._by_type.get(type)
        if events is None:
            events = self._by_type[type] = [e for e in self._events if e.type == type]
        return EventLog(events)

    # --- write side -----------------------------------------------------------------------

    @overload
    def append(self, payload: TypedPayload, /) -> SessionEvent: ...

    @overload
    def append(self, type: str, data: object) -> SessionEvent: ...

    def append(self, type: str | TypedPayload, data: object = _NO_DATA) -> SessionEvent:
        """Append one event and publish it; return the logged event.

        ``append(TurnStart(turn=1))`` logs a payload value under the event type its class names
        (every core payload class has an ``event_type``; a plugin's attrs payload class may
        declare one too). ``append(type, data)`` logs ``data`` (a payload value or a ``dict``)
        under ``type``; plugins use it for their own event types. ``data`` is validated as
        lossless JSON and copied in one pass, so the logged event never shares the caller's
        objects. Data for a core event type must fit that type's payload class. On any error
        nothing is logged.

        After the event is committed, ``session/event`` (:class:`SessionAppended`) is emitted
        and subscribers are woken.

        Raises:
            TypeError: a lone argument is not a payload whose class names its ``event_type``,
                or ``type`` is not a non-empty ``str``.
            JsonValueError: ``data`` is not lossless JSON (the message names the path).
            EventPayloadError: ``data`` does not fit the payload class of ``type``.
            SessionReentrancyError: called from a ``session/event`` listener of this session.
            SessionDetachedError: the session was detached.
        """
        if data is _NO_DATA:
            data = type
            type = _TYPE_OF_CLASS.get(data.__class__) or _event_type_of(data)
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
        # Chunks are the most numerous events and the least read: the log keeps their JSON only
        # (``payload`` structures it on demand), not a second copy as objects (#17).
        if payload is None or type == "assistant/chunk":
            event = new_event(len(self._events), type, time.time(), snapshot)
        else:
            event = new_event(len(self._events), type, time.time(), snapshot, payload)
        self._commit(event, payload)
        self._publish(event)
        return event

    def append_chunk(self, turn: int, step: int, chunk: StreamChunk) -> SessionEvent:
        """``append(AssistantChunk(turn=turn, step=step, chunk=chunk))``, the same event, without
        building the payload first: the loop logs every streamed chunk through it (#17). Raises
        what :meth:`append` raises."""
        if not (self._publishing or self._detached):
            data = encode_chunk(turn, step, chunk)
            if data is not None:
                event = new_event(len(self._events), "assistant/chunk", time.time(), data)
                self._commit(event)
                self._publish(event)
                return event
        return self.append(AssistantChunk(turn=turn, step=step, chunk=chunk))

    def _commit(self, event: SessionEvent, payload: object | None = None) -> None:
        """Fold ``event`` into the bookkeeping and the projection, then store it (``payload``:
        its typed payload when the caller holds it already)."""
        kind = event.type
        if kind == "assistant/chunk":
            pass  # the most numerous event: no bookkeeping, not projected
        elif kind == "turn/start":
            turn = (payload if type(payload) is TurnStart else event.payload_as(TurnStart)).turn
            self._last_turn = turn
            self._open_turn = turn
            self._open_step = None
        elif kind == "turn/end":
            self._open_turn = None
            self._open_step = None
        elif kind == "step/start":
            step = payload if type(payload) is StepStart else event.payload_as(StepStart)
            self._open_step = step.step
        elif kind == "step/end":
            self._open_step = None
        elif kind == "request/header":
            self._request_header = event
        else:
            # Raises (before anything changed) for a compaction range it cannot honour.
            self._projection.feed(event)
        self._events.append(event)
        typed = self._by_type.get(kind)
        if typed is not None:
            typed.append(event)

    def _publish(self, event: SessionEvent) -> None:
        if self._parked and self._lot is not None:
            self._lot.unpark_all()  # reschedules the subscribers; runs none of their code
        # The notification is built only when someone listens (#17); only a listener can
        # re-enter, so only then is the append marked as publishing.
        if self._emit is None or (self._hears is not None and not self._hears("session/event")):
            return
        self._publishing = True
        try:
            self._emit("session/event", SessionAppended(self, event), target=self._scope)
        finally:
            self._publishing = False
            if self._detach_pending:
                self._detach_pending = False
                self.detach()

    def load_seed(self, seed: Sequence[SessionEvent], *, copy: bool = True) -> None:
        """Fold ``seed`` into a fresh session, then mark its end with ``session/end-seed``.

        For stores (``prepare(seed=...)``, ``fork``) and for tests building a standalone
        session. The seed is not published as ``session/event`` s. ``copy=True`` validates and
        copies every event; ``copy=False`` shares the (immutable) events of another session's log
        and is for events that log already validated.

        Raises:
            RuntimeError: the session already holds events or was attached to a store.
            InvalidSeedError, JsonValueError, EventPayloadError: a seed event is malformed.
        """
        if self._events or self._owner is not None or self._detached:
            raise RuntimeError(
                f"session {self.id!r}: load_seed() is only for a fresh session (no events, "
                "never published); pass the seed when creating the session instead"
            )
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

    # --- lifecycle (driven by the store) --------------------------------------------------

    def attach(self, owner: Disposer, on_detached: Callable[[Session], None]) -> None:
        """Mark the session published (called by the store that publishes it).

        ``owner`` is the ownership effect on the publishing fiber (its teardown detaches the
        session); :meth:`detach` releases it. ``on_detached`` is called once, when the detach
        takes effect, so the store can drop the session from its table.

        Raises:
            SessionExistsError: the session was published (or detached) before.
        """
        if self._owner is not None or self._detached:
            raise SessionExistsError(
                f"session {self.id!r} was already published; prepare a new session instead",
                session_id=self.id,
            )
        self._owner = owner
        self._on_detached = on_detached

    def detach(self) -> None:
        """Refuse further appends and end the subscriptions; idempotent.

        Called from a ``session/event`` listener of this session, it takes effect right after
        that dispatch. The ownership effect is released and the store is told (it emits
        ``session/disposed``). Prefer ``ctx.sessions.detach(session)``, which also checks that
        the session is that store's.
        """
        if self._detached:
            return
        if self._publishing:
            self._detach_pending = True
            return
        self._detached = True
        owner, self._owner = self._owner, None
        on_detached, self._on_detached = self._on_detached, None
        if owner is not None:
            owner.release()  # the fiber forgets the effect (a no-op while it is running)
        if self._lot is not None:
            self._lot.unpark_all()
        if on_detached is not None:
            on_detached(self)

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
            events = session.events
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
            if session.detached:
                raise trio.EndOfChannel
            # The session's own module: it unparks on append.
            session._parked += 1
            try:
                if session._lot is None:
                    session._lot = trio.lowlevel.ParkingLot()
                await session._lot.park()
            finally:
                session._parked -= 1

    async def aclose(self) -> None:
        """Stop receiving; a task blocked in ``receive`` gets ``trio.ClosedResourceError``."""
        if not self._closed:
            self._closed = True
            if self._session._lot is not None:
                self._session._lot.unpark_all()
        await trio.lowlevel.checkpoint()


def _event_type_of(payload: object) -> str:
    """The event type a lone ``append(payload)`` argument names through its class."""
    event_type = getattr(type(payload), "event_type", None)
    if not isinstance(event_type, str) or not event_type:
        raise TypeError(
            f"append({type(payload).__name__}): a lone argument must be a payload whose "
            "class names its event_type (TurnStart(turn=1), ToolCallEvent(...)); for a plugin's "
            "own event pass append(type, data)"
        )
    return event_type


def _prepare(event_type: str, data: object) -> tuple[dict[str, Any], object | None]:
    """Validate + snapshot ``data``; return the snapshot and the typed payload (if known)."""
    cls = EVENT_PAYLOADS.get(event_type)
    data_cls = type(data)
    if data_cls is cls:
        encoder = FAST_ENCODERS.get(data_cls)
        if encoder is not None:
            fast = encoder(data)
            if fast is not None:
                # Checked in place, so the snapshot structures back; an unshared payload is
                # structured from it on first read (#17: never, for a header nobody reads).
                return fast, (None if data_cls in UNSHARED else data)
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
        prime_payload(copied, structure_payload(event.type, snapshot, seq=index))
    return copied
