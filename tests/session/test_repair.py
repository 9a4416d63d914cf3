"""repair_closers / repair_events: closing a turn a crash left open."""

from __future__ import annotations

from trio_agent.ids import CallId, MessageId
from trio_agent.llm import Message, TextBlock, ToolCallBlock, ToolResult
from trio_agent.runtime import Context
from trio_agent.session import (
    INTERRUPTED_NOT_STARTED_TEXT,
    INTERRUPTED_OUTCOME_UNKNOWN_TEXT,
    INTERRUPTED_READ_ONLY_TEXT,
    AssistantMessageEvent,
    Session,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    repair_closers,
    repair_events,
)
from trio_agent.tools import TOOL_OUTCOME_UNKNOWN

#: The code of a repaired call that did not run or only read (a plain string in results).
INTERRUPTED = "INTERRUPTED"


def open_turn_with_calls(session: Session) -> None:
    session.append(TurnStart(turn=3))
    session.append(StepStart(turn=3, step=2))
    calls = [ToolCallBlock(CallId(c), "run", "{}") for c in ("c1", "c2", "c3")]
    answer = Message(MessageId("a"), "assistant", tuple(calls), "model")
    session.append(
        AssistantMessageEvent(turn=3, step=2, message=answer, finish="tool-calls"),
    )
    for call_id in ("c1", "c2"):
        session.append(
            ToolCallEvent(turn=3, step=2, call_id=CallId(call_id), name="run", arguments="{}"),
        )
    done = ToolResult(CallId("c1"), (TextBlock("ok"),))
    session.append(ToolResultEvent(turn=3, step=2, call_id=CallId("c1"), result=done))


async def test_balanced_logs_need_nothing(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    assert repair_closers(session.events) == []
    session.append("plugin/x", {})
    assert repair_closers(session.events) == []
    session.append(TurnStart(turn=1))
    session.append(TurnEnd(turn=1, reason="completed"))
    session.append("plugin/y", {})
    assert repair_closers(session.events) == []
    assert repair_events(session.events) == []


async def test_open_turn_without_a_step(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    session.append(TurnStart(turn=1))
    assert repair_closers(session.events) == [
        ("turn/end", TurnEnd(turn=1, reason="interrupted")),
    ]


async def test_open_step_without_calls(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    session.append(TurnStart(turn=2))
    session.append(StepStart(turn=2, step=1))
    assert repair_closers(session.events) == [
        ("step/end", StepEnd(turn=2, step=1)),
        ("turn/end", TurnEnd(turn=2, reason="interrupted")),
    ]


async def test_pending_calls_get_synthetic_results(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    open_turn_with_calls(session)
    closers = repair_closers(session.events)
    assert [kind for kind, _ in closers] == ["tool/result", "tool/result", "step/end", "turn/end"]
    started, unstarted = closers[0][1], closers[1][1]
    assert isinstance(started, ToolResultEvent) and isinstance(unstarted, ToolResultEvent)
    assert (started.call_id, started.turn, started.step) == ("c2", 3, 2)
    assert started.result.is_error and started.result.code == TOOL_OUTCOME_UNKNOWN
    assert started.result.text == INTERRUPTED_OUTCOME_UNKNOWN_TEXT
    assert "outcome is unknown" in started.result.text
    assert "retry only if the operation is read-only or idempotent" in started.result.text
    assert "first verify external state or ask the user" in started.result.text
    assert unstarted.call_id == "c3" and unstarted.result.text == INTERRUPTED_NOT_STARTED_TEXT
    assert unstarted.result.is_error and unstarted.result.code == INTERRUPTED
    assert closers[2:] == [
        ("step/end", StepEnd(turn=3, step=2)),
        ("turn/end", TurnEnd(turn=3, reason="interrupted")),
    ]


async def test_the_ledger_codes_each_unfinished_call_by_what_the_log_shows(
    sctx: Context,
) -> None:
    session = sctx.sessions.create("s")
    session.append(TurnStart(turn=1))
    session.append(StepStart(turn=1, step=1))
    ids = ("effects", "reads", "old", "never")
    calls = [ToolCallBlock(CallId(c), "t", "{}") for c in ids]
    answer = Message(MessageId("a"), "assistant", tuple(calls), "model")
    session.append(AssistantMessageEvent(turn=1, step=1, message=answer, finish="tool-calls"))
    for call_id, read_only in (("effects", False), ("reads", True)):
        session.append(
            ToolCallEvent(
                turn=1,
                step=1,
                call_id=CallId(call_id),
                name="t",
                arguments="{}",
                read_only=read_only,
            )
        )
    # A tool/call logged before read_only was recorded: it counts as a call with effects.
    session.append(
        "tool/call", {"turn": 1, "step": 1, "call_id": "old", "name": "t", "arguments": "{}"}
    )
    results = {
        payload.call_id: (payload.result.code, payload.result.text)
        for _, payload in repair_closers(session.events)
        if isinstance(payload, ToolResultEvent)
    }
    assert results == {
        "effects": (TOOL_OUTCOME_UNKNOWN, INTERRUPTED_OUTCOME_UNKNOWN_TEXT),
        "reads": (INTERRUPTED, INTERRUPTED_READ_ONLY_TEXT),
        "old": (TOOL_OUTCOME_UNKNOWN, INTERRUPTED_OUTCOME_UNKNOWN_TEXT),
        "never": (INTERRUPTED, INTERRUPTED_NOT_STARTED_TEXT),
    }
    assert "safe to run again" in INTERRUPTED_READ_ONLY_TEXT
    assert "did not run" in INTERRUPTED_NOT_STARTED_TEXT


async def test_applying_the_closers_balances_the_log(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    open_turn_with_calls(session)
    for kind, payload in repair_closers(session.events):
        session.append(kind, payload)
    assert repair_closers(session.events) == []
    assert session.open_turn is None
    history = session.derive_messages()
    answered = [m.content[0].tool_call_id for m in history[1:]]
    assert answered == ["c1", "c2", "c3"]


async def test_repair_events_continue_the_log(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    open_turn_with_calls(session)
    events = list(session.events)
    closers = repair_events(events)
    assert [e.seq for e in closers] == list(range(len(events), len(events) + 4))
    assert all(e.time == events[-1].time for e in closers)
    assert closers[-1].data == {"turn": 3, "reason": "interrupted", "error": None}
    resumed = sctx.sessions.create("resumed", seed=events + closers)
    assert resumed.open_turn is None and repair_closers(resumed.events) == []
    assert [e.type for e in resumed.events[-2:]] == ["turn/end", "session/end-seed"]
    assert repair_events(events, time=1.0)[0].time == 1.0


async def test_only_the_last_turn_is_considered(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    open_turn_with_calls(session)
    session.append(TurnEnd(turn=3, reason="error"))  # a (bad) closed turn
    session.append(TurnStart(turn=4))
    assert repair_closers(session.events) == [
        ("turn/end", TurnEnd(turn=4, reason="interrupted")),
    ]
