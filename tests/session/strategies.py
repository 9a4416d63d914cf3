"""Hypothesis strategies for session logs: JSON values and turn/step/tool event streams.

``session_logs()`` draws a list of ``(type, payload)`` operations shaped like what the loop
writes: turns of prompts (some blocked), steps with request headers, chunks, an assistant
message (possibly empty or interrupted) with tool calls, one ``tool/call`` + ``tool/result`` per
call, context and steering messages, plugin events in between. With ``balanced=False`` the last
turn may be cut off anywhere, the way a crash leaves a log.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from trio_agent.ids import CallId, MessageId
from trio_agent.llm import (
    Finish,
    LlmCallConfig,
    LlmFailure,
    Message,
    ReasoningBlock,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolResult,
    Usage,
)
from trio_agent.session import (
    AssistantChunk,
    AssistantMessageEvent,
    ContextMessageEvent,
    LlmRetry,
    PromptBlocked,
    RequestHeader,
    SteeringMessageEvent,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)

Op = tuple[str, object]

#: Finite JSON scalars (no NaN/inf, valid Unicode).
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=["Cs"]), max_size=8)
)

#: Lossless JSON values, nested a few levels.
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)

#: Lossless JSON objects (valid event data).
json_objects = st.dictionaries(st.text(max_size=5), json_values, max_size=4)

_words = st.text(st.sampled_from("abcdefgh xyz"), max_size=12)


class _Ids:
    """Deterministic, unique ids inside one drawn log."""

    def __init__(self) -> None:
        self.n = 0

    def next(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}-{self.n}"


def _message(ids: _Ids, role: Any, text: str, source: str) -> Message:
    return Message(MessageId(ids.next("m")), role, (TextBlock(text),), source)


@st.composite
def _step(draw: st.DrawFn, ids: _Ids, turn: int, step: int) -> list[Op]:
    ops: list[Op] = [(StepStart.event_type, StepStart(turn=turn, step=step))]
    if draw(st.booleans()):
        config = LlmCallConfig("scripted", draw(st.sampled_from(["a", "b"])))
        ops.append(
            (
                RequestHeader.event_type,
                RequestHeader(turn=turn, step=step, config=config, system=draw(st.none() | _words)),
            )
        )
    if draw(st.integers(0, 4)) == 0:
        failure = LlmFailure("RATE_LIMIT", "slow down", status=429, retry_after=1.5)
        ops.append(
            (
                LlmRetry.event_type,
                LlmRetry(turn=turn, step=step, attempt=1, delay=0.5, failure=failure),
            )
        )
    text = draw(_words)
    for piece in draw(st.lists(_words, max_size=3)):
        ops.append(
            (
                AssistantChunk.event_type,
                AssistantChunk(turn=turn, step=step, chunk=TextDelta(0, piece)),
            )
        )
    interrupted = draw(st.integers(0, 5)) == 0
    calls = (
        []
        if interrupted
        else [
            ToolCallBlock(CallId(ids.next("call")), name, "{}")
            for name in draw(st.lists(st.sampled_from(["ls", "cat", "run"]), max_size=3))
        ]
    )
    content: list[Any] = []
    if draw(st.booleans()):
        content.append(ReasoningBlock(draw(_words)))
    if text or draw(st.booleans()):
        content.append(TextBlock(text))
    content.extend(calls)
    message = Message(MessageId(ids.next("a")), "assistant", tuple(content), "model")
    finish: Any = "aborted" if interrupted else ("tool-calls" if calls else "stop")
    ops.append(
        (
            AssistantChunk.event_type,
            AssistantChunk(turn=turn, step=step, chunk=Finish(finish)),
        )
    )
    ops.append(
        (
            AssistantMessageEvent.event_type,
            AssistantMessageEvent(
                turn=turn,
                step=step,
                message=message,
                finish=finish,
                usage=draw(st.none() | st.just(Usage(10, 2))),
                interrupted=interrupted,
            ),
        )
    )
    for call in calls:
        ops.append(
            (
                ToolCallEvent.event_type,
                ToolCallEvent(
                    turn=turn, step=step, call_id=call.id, name=call.name, arguments=call.arguments
                ),
            )
        )
        # The result's own call_id is deliberately wrong sometimes: the logged one wins.
        reported = call.id if draw(st.booleans()) else CallId("listener-made-this-up")
        result = ToolResult(reported, (TextBlock(draw(_words)),), is_error=draw(st.booleans()))
        ops.append(
            (
                ToolResultEvent.event_type,
                ToolResultEvent(turn=turn, step=step, call_id=call.id, result=result),
            )
        )
    if draw(st.booleans()):
        ops.append(
            (
                ContextMessageEvent.event_type,
                ContextMessageEvent(
                    turn=turn, step=step, message=_message(ids, "user", draw(_words), "context")
                ),
            )
        )
    if draw(st.integers(0, 3)) == 0:
        ops.append(
            (
                SteeringMessageEvent.event_type,
                SteeringMessageEvent(
                    turn=turn, step=step, message=_message(ids, "user", draw(_words), "steering")
                ),
            )
        )
    ops.append((StepEnd.event_type, StepEnd(turn=turn, step=step)))
    return ops


@st.composite
def _turn(draw: st.DrawFn, ids: _Ids, turn: int) -> list[Op]:
    ops: list[Op] = [(TurnStart.event_type, TurnStart(turn=turn))]
    prompts = draw(st.lists(st.booleans(), min_size=1, max_size=2))
    for accepted in prompts:
        message = _message(ids, "user", draw(_words), "user")
        if accepted:
            ops.append((UserMessageEvent.event_type, UserMessageEvent(turn=turn, message=message)))
        else:
            ops.append(
                (
                    PromptBlocked.event_type,
                    PromptBlocked(turn=turn, message=message, reason="policy"),
                )
            )
    if not any(prompts):
        ops.append((TurnEnd.event_type, TurnEnd(turn=turn, reason="rejected")))
        return ops
    for step in range(1, draw(st.integers(1, 3)) + 1):
        ops.extend(draw(_step(ids, turn, step)))
    reason: Any = draw(st.sampled_from(["completed", "max-tokens", "aborted", "error"]))
    error = LlmFailure("SERVER", "boom", status=500) if reason == "error" else None
    ops.append((TurnEnd.event_type, TurnEnd(turn=turn, reason=reason, error=error)))
    return ops


@st.composite
def session_logs(draw: st.DrawFn, *, balanced: bool | None = None, max_turns: int = 4) -> list[Op]:
    """A drawn session log as ``(type, payload)`` operations.

    ``balanced=True``: every turn closed. ``False``: the last turn is cut off at a random point
    (possibly still balanced if the cut lands on its end). ``None``: either.
    """
    ids = _Ids()
    ops: list[Op] = []
    turns = draw(st.integers(0 if balanced is not False else 1, max_turns))
    for turn in range(1, turns + 1):
        if draw(st.integers(0, 3)) == 0:
            ops.append(("plugin/note", draw(json_objects)))
        if draw(st.integers(0, 4)) == 0:
            # inject() while idle: context outside any turn's steps.
            ops.append(
                (
                    ContextMessageEvent.event_type,
                    ContextMessageEvent(
                        turn=turn - 1, message=_message(ids, "user", draw(_words), "context")
                    ),
                )
            )
        turn_ops = draw(_turn(ids, turn))
        if turn == turns and (balanced is False or (balanced is None and draw(st.booleans()))):
            turn_ops = turn_ops[: draw(st.integers(1, len(turn_ops)))]
        ops.extend(turn_ops)
    return ops
