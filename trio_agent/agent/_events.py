"""The ``agent/*`` event taxonomy: payload types and decision values.

Every payload carries ``agent``. Agents dispatch through ``agent.ctx``, so a listener registered
through one agent's scope hears that agent only, and a global listener hears every agent.

========================  =========  ===============================================================
event                     mode       payload → result
========================  =========  ===============================================================
agent/created             emit       :class:`AgentCreated`
agent/disposed            emit       :class:`AgentDisposed`
agent/session-start       emit       :class:`SessionStart` (``source``: ``"startup"`` | ``"resume"``)
agent/status              emit       :class:`StatusChanged` (only on a real change)
agent/queued              emit       :class:`MessageQueued`
agent/turn-start          emit       :class:`TurnStarted`
agent/turn-end            emit       :class:`TurnEnded`
agent/step-start          emit       :class:`StepStarted`
agent/step-end            emit       :class:`StepEnded`
agent/stream-chunk        emit       :class:`StreamChunkReceived`
agent/steering            emit       :class:`SteeringInjected`
agent/error               emit       :class:`AgentFailed`
agent/prompt-submit       waterfall  :class:`PromptSubmit` → :class:`Allow` | :class:`Block`
agent/session-prefix      waterfall  :class:`SessionPrefix` → ``tuple[Message, ...]``
agent/pre-step            serial     :class:`PreStep`
agent/request             waterfall  :class:`RequestConfig` → ``LlmCallConfig``
agent/request-error       waterfall  :class:`RequestFailed` → :class:`Retry` | ``None``
agent/step-result         waterfall  :class:`StepResult` → ``Message``
agent/turn-continuation   waterfall  :class:`TurnContinuation` → :class:`ContinuationDecision`
agent/turn-stop           serial     :class:`TurnStop` → :class:`ContinuationStop` | ``None``
========================  =========  ===============================================================
"""

from __future__ import annotations

from typing import Literal, TypeAlias

import attrs

from ..llm import LlmCallConfig, LlmFailure, Message, StreamChunk, ToolResult
from ..session import TurnEndReason
from ._types import Agent, AgentStatus, to_user_message

__all__ = [
    "AgentCreated",
    "AgentDisposed",
    "AgentFailed",
    "Allow",
    "Block",
    "ContinuationDecision",
    "ContinuationStop",
    "MessageQueued",
    "PreStep",
    "PromptDecision",
    "PromptSubmit",
    "RequestConfig",
    "RequestFailed",
    "Retry",
    "SessionPrefix",
    "SessionStart",
    "StatusChanged",
    "SteeringInjected",
    "StepEnded",
    "StepResult",
    "StepStarted",
    "StreamChunkReceived",
    "TurnContinuation",
    "TurnEndReason",
    "TurnEnded",
    "TurnStarted",
    "TurnStop",
]

# --- decisions --------------------------------------------------------------------------------


def _context_messages(value: object) -> tuple[Message, ...]:
    """``Allow.additional_context``: a string, a :class:`Message`, or a sequence of them (strings
    become user messages, as ``send`` does); anything else is a ``TypeError`` here."""
    items: tuple[object, ...]
    if isinstance(value, (str, Message)):
        items = (value,)
    elif isinstance(value, (tuple, list)):
        items = tuple(value)
    else:
        raise TypeError(
            "Allow(additional_context=...) takes a string, a Message, or a sequence of them; "
            f"got {type(value).__name__}"
        )
    out: list[Message] = []
    for item in items:
        if isinstance(item, str):
            out.append(to_user_message(item, "user"))
        elif isinstance(item, Message):
            out.append(item)
        else:
            raise TypeError(
                "Allow(additional_context=...) items must be strings or Messages; "
                f"got {type(item).__name__}"
            )
    return tuple(out)


@attrs.frozen
class Allow:
    """``agent/prompt-submit``: accept the prompt, adding ``additional_context`` after it."""

    additional_context: tuple[Message, ...] = attrs.field(default=(), converter=_context_messages)


@attrs.frozen
class Block:
    """``agent/prompt-submit``: refuse the prompt; it is logged as ``prompt/blocked``."""

    reason: str


PromptDecision: TypeAlias = Allow | Block


@attrs.frozen
class ContinuationDecision:
    """``agent/turn-continuation``: make another step (``"continue"``) or not (``"stop"``).

    A ``reason`` given with ``"continue"`` is logged as a ``steering/message`` the next step sees.
    Steering that is pending overrides a ``"stop"``.
    """

    action: Literal["continue", "stop"]
    reason: str | None = None


@attrs.frozen
class ContinuationStop:
    """``agent/turn-stop``: end the turn now, authoritatively (a *terminal* stop).

    Unlike an ordinary stop, pending steering cannot override it, and steering that arrives while
    the turn closes is dropped instead of being queued for the next turn.
    """

    reason: str | None = None


@attrs.frozen
class Retry:
    """``agent/request-error``: repeat the failed model request within the same step."""


# --- notifications (emit) ---------------------------------------------------------------------


@attrs.frozen
class AgentCreated:
    """The agent was published in ``ctx.agents``."""

    agent: Agent


@attrs.frozen
class AgentDisposed:
    """The agent left ``ctx.agents`` (its scope is still live while this is emitted)."""

    agent: Agent


@attrs.frozen
class SessionStart:
    """The agent is about to serve its session; emitted once, before turn 1."""

    agent: Agent
    source: Literal["startup", "resume"]


@attrs.frozen
class StatusChanged:
    """The agent's status changed."""

    agent: Agent
    status: AgentStatus


@attrs.frozen
class MessageQueued:
    """A message entered the agent's inbox (``steering``: it will join the running turn)."""

    agent: Agent
    message: Message
    steering: bool


@attrs.frozen
class TurnStarted:
    """A turn began (``turn/start`` is logged)."""

    agent: Agent
    turn: int


@attrs.frozen
class TurnEnded:
    """A turn ended (``turn/end`` is logged)."""

    agent: Agent
    turn: int
    reason: TurnEndReason


@attrs.frozen
class StepStarted:
    """A step began (``step/start`` is logged)."""

    agent: Agent
    turn: int
    step: int


@attrs.frozen
class StepEnded:
    """A step ended (``step/end`` is logged)."""

    agent: Agent
    turn: int
    step: int


@attrs.frozen
class StreamChunkReceived:
    """A raw chunk from the model (also logged as ``assistant/chunk``)."""

    agent: Agent
    turn: int
    step: int
    chunk: StreamChunk


@attrs.frozen
class SteeringInjected:
    """A steering message joined the running turn (``steering/message`` is logged)."""

    agent: Agent
    message: Message


@attrs.frozen
class AgentFailed:
    """A plugin or the model failed and ended the turn with ``error``."""

    agent: Agent
    turn: int
    step: int
    error: BaseException


# --- interception seams -----------------------------------------------------------------------


@attrs.frozen
class PromptSubmit:
    """``agent/prompt-submit`` (waterfall → :class:`Allow` | :class:`Block`), once per prompt."""

    agent: Agent
    turn: int
    message: Message


@attrs.frozen
class SessionPrefix:
    """``agent/session-prefix`` (waterfall → ``tuple[Message, ...]``), once per agent instance.

    The prefix is frozen for the instance's life and sent before the history on every request;
    it is logged in ``request/header``, never in the history.
    """

    agent: Agent


@attrs.frozen
class PreStep:
    """``agent/pre-step`` (serial): before each step's history is derived (compaction goes here)."""

    agent: Agent
    turn: int
    step: int
    prefix: tuple[Message, ...]


@attrs.frozen
class RequestConfig:
    """``agent/request`` (waterfall → ``LlmCallConfig``): return a replacement to switch model."""

    agent: Agent
    turn: int
    step: int
    config: LlmCallConfig


@attrs.frozen
class RequestFailed:
    """``agent/request-error`` (waterfall → :class:`Retry` | ``None``): the model call failed.

    ``config`` is the call that failed; ``attempt`` counts the failed attempts of this step so far
    (1 for the first failure).
    """

    agent: Agent
    turn: int
    step: int
    config: LlmCallConfig
    failure: LlmFailure
    attempt: int


@attrs.frozen
class StepResult:
    """``agent/step-result`` (waterfall → ``Message``): what the log records for this step."""

    agent: Agent
    turn: int
    step: int
    message: Message


@attrs.frozen
class TurnContinuation:
    """``agent/turn-continuation`` (waterfall → :class:`ContinuationDecision`).

    ``default`` is what the loop would do on its own: continue after tool calls, stop otherwise
    (and after ``max-tokens``, or when a tool concluded the turn).
    """

    agent: Agent
    turn: int
    step: int
    message: Message
    tool_results: tuple[ToolResult, ...]
    default: ContinuationDecision


@attrs.frozen
class TurnStop:
    """``agent/turn-stop`` (serial → :class:`ContinuationStop` | ``None``): the terminal policy,
    asked after every step with the ordinary decision already folded in."""

    agent: Agent
    turn: int
    step: int
    continuing: bool
