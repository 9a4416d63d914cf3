"""Session logs to test persistence with: a loop-shaped turn, and one event of every core type."""

from __future__ import annotations

from ..ids import CallId, MessageId
from ..llm import (
    LlmCallConfig,
    LlmFailure,
    Message,
    MessageSource,
    ReasoningBlock,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolResult,
    ToolSchema,
    Usage,
)
from ..session import (
    ApprovalDecisionEvent,
    ApprovalRequestEvent,
    AssistantChunk,
    AssistantMessageEvent,
    CompactionPrune,
    CompactionSummary,
    ContextMessageEvent,
    LlmRetry,
    PromptBlocked,
    RequestHeader,
    Session,
    SteeringMessageEvent,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)

__all__ = ["append_every_event_type", "append_tool_turn"]


def _message(text: str, id: str, *, source: MessageSource = "user") -> Message:
    return Message(MessageId(id), "user", (TextBlock(text),), source)


def append_tool_turn(session: Session, *, prompt: str = "hello", close: bool = True) -> None:
    """Append one loop-shaped turn to ``session``: the prompt, an assistant message calling the
    ``add`` tool (call id ``call-<turn>``), its ``tool/call``, and, unless ``close`` is false,
    its result, ``step/end`` and ``turn/end(completed)``. A turn left open is what a crash in
    the middle of a tool call leaves behind."""
    turn = session.last_turn + 1
    call = CallId(f"call-{turn}")
    arguments = '{"a": 1, "b": 2}'
    session.append(TurnStart.event_type, TurnStart(turn=turn))
    session.append(
        UserMessageEvent.event_type,
        UserMessageEvent(turn=turn, message=_message(prompt, f"u{turn}")),
    )
    session.append(StepStart.event_type, StepStart(turn=turn, step=1))
    answer = Message.assistant(
        TextBlock("Let me add."), ToolCallBlock(call, "add", arguments), id=MessageId(f"a{turn}")
    )
    session.append(
        AssistantMessageEvent.event_type,
        AssistantMessageEvent(turn=turn, step=1, message=answer, finish="tool-calls"),
    )
    session.append(
        ToolCallEvent.event_type,
        ToolCallEvent(turn=turn, step=1, call_id=call, name="add", arguments=arguments),
    )
    if not close:
        return
    session.append(
        ToolResultEvent.event_type,
        ToolResultEvent(
            turn=turn, step=1, call_id=call, result=ToolResult(call, (TextBlock("3"),))
        ),
    )
    session.append(StepEnd.event_type, StepEnd(turn=turn, step=1))
    session.append(TurnEnd.event_type, TurnEnd(turn=turn, reason="completed"))


def append_every_event_type(session: Session) -> None:
    """Append one event of every core type (``session/end-seed`` aside) as one completed turn,
    then a plugin event whose data is awkward JSON (escapes, a big integer, ``-0.0``)."""
    call = CallId("call-1")
    session.append(TurnStart.event_type, TurnStart(turn=1))
    session.append(
        UserMessageEvent.event_type,
        UserMessageEvent(turn=1, message=_message("Add 1 and 2\nplease", "u1")),
    )
    session.append(
        PromptBlocked.event_type,
        PromptBlocked(turn=1, message=_message("rm -rf /", "u2"), reason="policy"),
    )
    session.append(StepStart.event_type, StepStart(turn=1, step=1))
    session.append(
        RequestHeader.event_type,
        RequestHeader(
            turn=1,
            step=1,
            config=LlmCallConfig("scripted", "m", max_tokens=100, temperature=0.5, stop=("x",)),
            system="You are terse.",
            tools=(ToolSchema("add", "Add.", {"type": "object", "properties": {}}),),
            prefix=(_message("prefix", "p1"),),
        ),
    )
    session.append(
        AssistantChunk.event_type, AssistantChunk(turn=1, step=1, chunk=TextDelta(0, "Let"))
    )
    session.append(
        AssistantMessageEvent.event_type,
        AssistantMessageEvent(
            turn=1,
            step=1,
            message=Message.assistant(
                ReasoningBlock("think"),
                TextBlock("Let me add."),
                ToolCallBlock(call, "add", '{"a": 1, "b": 2}'),
                id=MessageId("a1"),
            ),
            finish="tool-calls",
            usage=Usage(10, 5, cache_read_tokens=2),
        ),
    )
    session.append(
        ToolCallEvent.event_type,
        ToolCallEvent(turn=1, step=1, call_id=call, name="add", arguments='{"a": 1, "b": 2}'),
    )
    session.append(
        ApprovalRequestEvent.event_type,
        ApprovalRequestEvent(
            turn=1, step=1, call_id=call, tool="add", arguments='{"a": 1, "b": 2}', reason="ask"
        ),
    )
    session.append(
        ApprovalDecisionEvent.event_type,
        ApprovalDecisionEvent(
            turn=1, step=1, call_id=call, decision="approved", by="Policy", remember="once"
        ),
    )
    session.append(
        ToolResultEvent.event_type,
        ToolResultEvent(
            turn=1, step=1, call_id=call, result=ToolResult(call, (TextBlock("3"),), code=None)
        ),
    )
    session.append(
        ContextMessageEvent.event_type,
        ContextMessageEvent(turn=1, step=1, message=_message("ctx", "c1", source="context")),
    )
    session.append(
        SteeringMessageEvent.event_type,
        SteeringMessageEvent(turn=1, step=1, message=_message("steer", "s1", source="steering")),
    )
    session.append(
        LlmRetry.event_type,
        LlmRetry(
            turn=1,
            step=1,
            attempt=1,
            delay=0.25,
            failure=LlmFailure("RATE_LIMIT", "slow down", status=429, retry_after=1.5),
        ),
    )
    session.append(StepEnd.event_type, StepEnd(turn=1, step=1))
    end = session.append(TurnEnd.event_type, TurnEnd(turn=1, reason="completed")).seq
    session.append(
        CompactionPrune.event_type,
        CompactionPrune(turn=1, first_seq=0, last_seq=end, stub="[pruned]"),
    )
    session.append(
        CompactionSummary.event_type,
        CompactionSummary(
            turn=1, first_seq=0, last_seq=end, summary="The user asked for 1 + 2; it is 3."
        ),
    )
    session.append(
        "plugin/custom",
        {
            "unicode": 'héllo ☃ 𝄞 \u2028 \n "quoted" \\',
            "big": 2**70,
            "neg": -0.0,
            "float": 1e-300,
            "nested": [[], {}, [None, True, False]],
        },
    )
