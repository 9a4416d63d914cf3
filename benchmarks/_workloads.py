"""Loop-shaped session traffic shared by the session and persistence benchmarks."""

from __future__ import annotations

from trio_agent.ids import CallId, MessageId
from trio_agent.llm import Message, TextBlock, TextDelta, ToolCallBlock, ToolResult, Usage
from trio_agent.session import (
    AssistantChunk,
    AssistantMessageEvent,
    Session,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)

__all__ = ["EVENTS_PER_STEP", "append_step", "end_turn", "start_turn"]

#: step/start, three chunks, assistant/message, tool/call, tool/result, step/end.
EVENTS_PER_STEP = 8


def start_turn(session: Session, turn: int) -> None:
    """Append ``turn/start`` and the prompt of turn ``turn``."""
    prompt = Message(MessageId(f"u{turn}"), "user", (TextBlock("list the files"),), "user")
    session.append("turn/start", TurnStart(turn=turn))
    session.append("user/message", UserMessageEvent(turn=turn, message=prompt))


def end_turn(session: Session, turn: int) -> None:
    """Append ``turn/end`` (completed) for turn ``turn``."""
    session.append("turn/end", TurnEnd(turn=turn, reason="completed"))


def append_step(session: Session, turn: int, step: int, call: int) -> None:
    """Append one step as the loop writes it: a streamed answer with one tool call, the call
    and its result. ``call`` numbers the tool call (ids must be unique in the session)."""
    append = session.append
    call_id = CallId(f"call-{call}")
    append("step/start", StepStart(turn=turn, step=step))
    for piece in ("Let me ", "look at ", "the files."):
        append("assistant/chunk", AssistantChunk(turn=turn, step=step, chunk=TextDelta(0, piece)))
    answer = Message(
        MessageId(f"a{call}"),
        "assistant",
        (TextBlock("Let me look at the files."), ToolCallBlock(call_id, "ls", '{"path": "."}')),
        "model",
    )
    append(
        "assistant/message",
        AssistantMessageEvent(
            turn=turn, step=step, message=answer, finish="tool-calls", usage=Usage(120, 14)
        ),
    )
    append(
        "tool/call",
        ToolCallEvent(turn=turn, step=step, call_id=call_id, name="ls", arguments='{"path": "."}'),
    )
    result = ToolResult(call_id, (TextBlock("README.md\nsrc\ntests\npyproject.toml"),))
    append("tool/result", ToolResultEvent(turn=turn, step=step, call_id=call_id, result=result))
    append("step/end", StepEnd(turn=turn, step=step))
