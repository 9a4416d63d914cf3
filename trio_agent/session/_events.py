"""The session log's values: the event envelope, the header and the typed payload of each core event.

Every payload class is a frozen, keyword-only attrs value whose JSON form (through the one
converter in :mod:`trio_agent._serde`) is the ``data`` of its event. ``event_type`` names the event
type it belongs to, so appending a payload needs no type::

    session.append(TurnStart(turn=1))
"""

from __future__ import annotations

import builtins
import enum
import types
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, Protocol, TypeAlias, TypeVar

import attrs
import cattrs
from cattrs.v import format_exception

from .. import _serde
from ..ids import CallId, SessionId
from ..llm import (
    FinishReason,
    LlmCallConfig,
    LlmFailure,
    Message,
    StreamChunk,
    ToolResult,
    ToolSchema,
    Usage,
)
from ._errors import EventPayloadError

__all__ = [
    "EVENT_PAYLOADS",
    "SESSION_FORMAT_VERSION",
    "ApprovalDecisionEvent",
    "ApprovalRequestEvent",
    "AssistantChunk",
    "AssistantMessageEvent",
    "CompactionPrune",
    "CompactionSummary",
    "ContextMessageEvent",
    "LlmRetry",
    "PromptBlocked",
    "RequestHeader",
    "SessionEndSeed",
    "SessionEvent",
    "SessionHeader",
    "SteeringMessageEvent",
    "StepEnd",
    "StepStart",
    "ToolCallEvent",
    "ToolResultEvent",
    "TurnEnd",
    "TurnEndReason",
    "TurnStart",
    "TypedPayload",
    "UserMessageEvent",
    "new_event",
    "prime_payload",
    "structure_payload",
]

P = TypeVar("P")

#: Version of the header/event layout, written into every :class:`SessionHeader`.
SESSION_FORMAT_VERSION = 1

#: Why a turn ended. ``interrupted`` is written only by crash repair (:func:`repair_closers`).
TurnEndReason: TypeAlias = Literal[
    "completed",
    "max-tokens",
    "max-steps",
    "rejected",
    "aborted",
    "disposed",
    "error",
    "interrupted",
]


class _Unset(enum.Enum):
    UNSET = "UNSET"


_UNSET = _Unset.UNSET


# --- envelope and header --------------------------------------------------------------------


@attrs.frozen
class SessionEvent:
    """One entry of a session log.

    ``seq`` is the event's index in the log (from 0, no gaps), ``type`` its event type
    (``"turn/start"``, or any type a plugin logs), ``time`` the wall-clock time of the append in
    epoch seconds, and ``data`` its lossless-JSON payload. ``data`` is a snapshot owned by the log:
    read it, never mutate it.
    """

    seq: int
    type: str
    time: float
    data: dict[str, Any]
    _payload: object = attrs.field(default=_UNSET, init=False, eq=False, repr=False)

    @property
    def payload(self) -> object:
        """The typed payload (:class:`TurnStart`, :class:`ToolResultEvent` ...) of a core event.

        Structured from ``data`` on first access and cached. For an event type with no registered
        payload class (a plugin's own type) this is ``data`` itself.

        Raises:
            EventPayloadError: ``data`` does not fit the payload class of ``type``.
        """
        cached = self._payload
        if cached is _UNSET:
            cached = structure_payload(self.type, self.data, seq=self.seq)
            object.__setattr__(self, "_payload", cached)
        return cached

    def payload_as(self, cls: builtins.type[P]) -> P:
        """:attr:`payload`, checked to be a ``cls`` (for typed code).

        Raises:
            TypeError: the payload is not a ``cls``.
        """
        payload = self.payload
        if not isinstance(payload, cls):
            raise TypeError(
                f"event seq {self.seq} ({self.type!r}) has a {type(payload).__name__} payload, "
                f"not a {cls.__name__}; check event.type before asking for a payload class"
            )
        return payload


_new_object = object.__new__
# The slots' own setters: an event built through them skips attrs' frozen ``__init__`` (one
# bound ``object.__setattr__`` plus a call per field), the log's hottest allocation (#17).
_set_seq, _set_type, _set_time, _set_data, _set_payload = (
    SessionEvent.__dict__[name].__set__ for name in ("seq", "type", "time", "data", "_payload")
)


def new_event(
    seq: int, type: str, time: float, data: dict[str, Any], payload: object = _UNSET
) -> SessionEvent:
    """``SessionEvent(seq, type, time, data)`` with ``payload`` primed (see
    :func:`prime_payload`), built without attrs' ``__init__`` (package-internal)."""
    event: SessionEvent = _new_object(SessionEvent)
    _set_seq(event, seq)
    _set_type(event, type)
    _set_time(event, time)
    _set_data(event, data)
    _set_payload(event, payload)
    return event


def prime_payload(event: SessionEvent, payload: object) -> None:
    """Cache ``payload`` as ``event``'s typed payload (it must be what ``data`` structures to);
    for code that builds an event from a payload it already holds (package-internal)."""
    object.__setattr__(event, "_payload", payload)


class TypedPayload(Protocol):
    """A payload value whose class names its event type, as every core payload class does;
    ``session.append(payload)`` logs it under that type."""

    event_type: ClassVar[str]


@attrs.frozen(kw_only=True)
class SessionHeader:
    """What a session is, independent of its events.

    ``cwd`` is the absolute working directory the session was created for (or ``None``),
    ``parent_session`` the session it was forked from, ``seed_length`` how many events it was
    seeded with (``None`` when it was not seeded; for a fork, the fork boundary + 1),
    ``created_at`` epoch seconds, ``meta`` free-form lossless-JSON metadata, ``version`` the
    layout version (:data:`SESSION_FORMAT_VERSION`).
    """

    session_id: SessionId
    created_at: float
    cwd: str | None = None
    parent_session: SessionId | None = None
    seed_length: int | None = None
    meta: dict[str, Any] = attrs.field(factory=dict)
    version: int = SESSION_FORMAT_VERSION


# --- payloads -------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class TurnStart:
    """``turn/start``: turn number ``turn`` begins (turns count from 1)."""

    event_type: ClassVar[str] = "turn/start"
    turn: int


@attrs.frozen(kw_only=True)
class UserMessageEvent:
    """``user/message``: a prompt accepted into turn ``turn``; part of the model history."""

    event_type: ClassVar[str] = "user/message"
    turn: int
    message: Message


@attrs.frozen(kw_only=True)
class PromptBlocked:
    """``prompt/blocked``: ``agent/prompt-submit`` refused ``message``; not model-visible."""

    event_type: ClassVar[str] = "prompt/blocked"
    turn: int
    message: Message
    reason: str


@attrs.frozen(kw_only=True)
class StepStart:
    """``step/start``: step ``step`` (from 1 within the turn) begins."""

    event_type: ClassVar[str] = "step/start"
    turn: int
    step: int


@attrs.frozen(kw_only=True)
class RequestHeader:
    """``request/header``: the model, system prompt, tools and session prefix of the requests
    that follow.

    ``prefix`` holds the frozen ``agent/session-prefix`` messages sent ahead of the history in
    every request; they live on the header, never in :meth:`Session.derive_messages`. Logged
    only when it differs from the previous one.
    """

    event_type: ClassVar[str] = "request/header"
    turn: int
    step: int
    config: LlmCallConfig
    system: str | None = None
    tools: tuple[ToolSchema, ...] = ()
    prefix: tuple[Message, ...] = ()


@attrs.frozen(kw_only=True)
class AssistantChunk:
    """``assistant/chunk``: one stream chunk as the model produced it (for UIs and replay)."""

    event_type: ClassVar[str] = "assistant/chunk"
    turn: int
    step: int
    chunk: StreamChunk


@attrs.frozen(kw_only=True)
class AssistantMessageEvent:
    """``assistant/message``: the assembled answer of one step; part of the model history.

    ``interrupted`` marks the partial message kept when a cancel cut the stream short.
    """

    event_type: ClassVar[str] = "assistant/message"
    turn: int
    step: int
    message: Message
    finish: FinishReason
    usage: Usage | None = None
    interrupted: bool = False


@attrs.frozen(kw_only=True)
class ToolCallEvent:
    """``tool/call``: the loop is about to execute tool ``name`` for call ``call_id``.

    ``read_only`` records whether the tool declared it only reads (``Tool.read_only``); crash
    repair tells the model such a call is safe to run again. A ``tool/call`` logged without it
    (before it was recorded) reads as ``False``: a call that may have had effects.
    """

    event_type: ClassVar[str] = "tool/call"
    turn: int
    step: int
    call_id: CallId
    name: str
    arguments: str
    read_only: bool = False


@attrs.frozen(kw_only=True)
class ApprovalRequestEvent:
    """``approval/request``: the policy asked whether call ``call_id`` may run (logged before the
    tool body, so before its write-ahead flush). ``arguments`` is the model's raw text."""

    event_type: ClassVar[str] = "approval/request"
    turn: int
    step: int
    call_id: CallId
    tool: str
    arguments: str
    reason: str | None = None


@attrs.frozen(kw_only=True)
class ApprovalDecisionEvent:
    """``approval/decision``: the answer for call ``call_id``: ``decision`` ``"approved"`` or
    ``"denied"``, ``remember`` (``"once"`` / ``"session"``) for an approval, ``reason`` for a
    denial, ``by`` who answered (the approval service's class name)."""

    event_type: ClassVar[str] = "approval/decision"
    turn: int
    step: int
    call_id: CallId
    decision: Literal["approved", "denied"]
    by: str
    remember: Literal["once", "session"] | None = None
    reason: str | None = None


@attrs.frozen(kw_only=True)
class ToolResultEvent:
    """``tool/result``: the outcome of call ``call_id``; part of the model history.

    ``call_id`` is authoritative: the derived tool-result message answers ``call_id``, whatever
    ``result.call_id`` says.
    """

    event_type: ClassVar[str] = "tool/result"
    turn: int
    step: int
    call_id: CallId
    result: ToolResult


@attrs.frozen(kw_only=True)
class ContextMessageEvent:
    """``context/message``: context added without a prompt (``inject``, tool additional context)."""

    event_type: ClassVar[str] = "context/message"
    turn: int
    message: Message
    step: int | None = None


@attrs.frozen(kw_only=True)
class SteeringMessageEvent:
    """``steering/message``: a message steered into the running turn between steps."""

    event_type: ClassVar[str] = "steering/message"
    turn: int
    message: Message
    step: int | None = None


@attrs.frozen(kw_only=True)
class StepEnd:
    """``step/end``: step ``step`` of turn ``turn`` is over."""

    event_type: ClassVar[str] = "step/end"
    turn: int
    step: int


@attrs.frozen(kw_only=True)
class TurnEnd:
    """``turn/end``: turn ``turn`` is over, for ``reason``; ``error`` details an ``error`` turn."""

    event_type: ClassVar[str] = "turn/end"
    turn: int
    reason: TurnEndReason
    error: LlmFailure | None = None


@attrs.frozen(kw_only=True)
class LlmRetry:
    """``llm/retry``: attempt ``attempt`` of a request failed with ``failure``; retrying after
    ``delay`` seconds."""

    event_type: ClassVar[str] = "llm/retry"
    turn: int
    step: int
    attempt: int
    delay: float
    failure: LlmFailure


def _seq(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{attribute.name} must be a seq (an int >= 0), got {value!r}")


def _range_end(
    instance: CompactionSummary | CompactionPrune, attribute: object, value: int
) -> None:
    _seq(instance, attribute, value)  # type: ignore[arg-type]
    if value < instance.first_seq:
        raise ValueError(
            f"last_seq ({value}) is before first_seq ({instance.first_seq}); a compaction range "
            "runs from its first to its last covered seq"
        )


@attrs.frozen(kw_only=True)
class CompactionSummary:
    """``compaction/summary``: ``summary`` stands for the model history of seqs
    ``first_seq..last_seq`` (inclusive) from now on.

    The covered events stay in the log; :meth:`Session.derive_messages` shows one user message
    holding ``summary`` (source ``"plugin:compaction"``) where their messages were. A range must
    cover whole messages (a previous summary included), must not separate a tool call from its
    result, and must lie before the event itself; ``append`` refuses any other range
    (:class:`CompactionRangeError`). ``turn`` is the current turn (the open one, else the
    latest), ``step`` the open step, if any.
    """

    event_type: ClassVar[str] = "compaction/summary"
    turn: int
    first_seq: int = attrs.field(validator=_seq)
    last_seq: int = attrs.field(validator=_range_end)
    summary: str
    step: int | None = None


@attrs.frozen(kw_only=True)
class CompactionPrune:
    """``compaction/prune``: tool results logged at seqs ``first_seq..last_seq`` (inclusive) are
    shown to the model as ``stub`` from now on.

    A cheaper policy than a summary (no model call): the results stay paired with their calls
    and keep ``is_error``; only their bodies become ``stub``. A result whose text is not longer
    than ``stub`` (and holds no image) is left as it is. The log keeps the full results.
    """

    event_type: ClassVar[str] = "compaction/prune"
    turn: int
    first_seq: int = attrs.field(validator=_seq)
    last_seq: int = attrs.field(validator=_range_end)
    stub: str
    step: int | None = None


@attrs.frozen(kw_only=True)
class SessionEndSeed:
    """``session/end-seed``: the events before it were copied in (seed, fork, resume)."""

    event_type: ClassVar[str] = "session/end-seed"


_PAYLOAD_CLASSES: tuple[type, ...] = (
    TurnStart,
    UserMessageEvent,
    PromptBlocked,
    StepStart,
    RequestHeader,
    AssistantChunk,
    AssistantMessageEvent,
    ToolCallEvent,
    ToolResultEvent,
    ContextMessageEvent,
    ApprovalRequestEvent,
    ApprovalDecisionEvent,
    SteeringMessageEvent,
    StepEnd,
    TurnEnd,
    LlmRetry,
    SessionEndSeed,
    CompactionSummary,
    CompactionPrune,
)

#: Event type → payload class of every core event type (read-only).
EVENT_PAYLOADS: Mapping[str, type] = types.MappingProxyType(
    {cls.event_type: cls for cls in _PAYLOAD_CLASSES}  # type: ignore[attr-defined]
)

#: Payload classes whose instances are deeply immutable, so an appended instance can be kept as
#: the event's payload instead of being structured again from the snapshot. ``RequestHeader`` is
#: left out: ``ToolSchema.parameters`` is a caller-owned mapping.
SHAREABLE_PAYLOADS: frozenset[type] = frozenset(_PAYLOAD_CLASSES) - {RequestHeader}


def _describe_problem(exc: BaseException, expected: Any) -> str:
    """cattrs' wording, keeping a validator's own message (it says what was wrong)."""
    if expected is None and isinstance(exc, ValueError):
        return f"invalid value ({exc})"
    return format_exception(exc, expected)


def structure_payload(event_type: str, data: dict[str, Any], *, seq: int | None = None) -> object:
    """Structure ``data`` into the payload class of ``event_type`` (``data`` if none).

    Raises:
        EventPayloadError: ``data`` does not fit, with the bad paths named.
    """
    cls = EVENT_PAYLOADS.get(event_type)
    if cls is None:
        return data
    try:
        return _serde.structure(data, cls)
    except (cattrs.BaseValidationError, TypeError, ValueError, KeyError) as exc:
        if isinstance(exc, cattrs.BaseValidationError):
            details = "; ".join(cattrs.transform_error(exc, "data", _describe_problem))
        else:
            details = f"{type(exc).__name__}: {exc}"
        where = f"event seq {seq} " if seq is not None else "event "
        raise EventPayloadError(
            f"{where}({event_type!r}) does not match {cls.__name__}: {details}; log a "
            f"{cls.__name__} (or its unstructured form) for {event_type!r} events"
        ) from exc
