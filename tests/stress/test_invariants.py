"""Each named invariant holds on a real agent's log and catches the break it names."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from trio_agent.ids import CallId
from trio_agent.llm import FinishReason, Message, TextBlock, ToolCallBlock, ToolResult
from trio_agent.runtime import Context
from trio_agent.session import (
    AssistantMessageEvent,
    Session,
    SessionEvent,
    SessionStore,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)
from trio_agent.testing import open_test_harness, text, tool_call
from trio_agent.testing.stress import (
    LoggedError,
    QueuedPrompt,
    RunRecord,
    Violation,
    check_no_child_process_left,
    check_no_hang,
    check_no_scope_misnesting,
    check_no_task_left,
    check_no_unhandled_error,
    check_prompts_logged_once,
    check_run,
    check_seq_contiguous,
    check_session,
    check_status_transitions,
    check_steps_balanced,
    check_tool_calls_answered,
    check_turns_closed,
)
from trio_agent.tools import tool


@tool
async def echo(value: str) -> str:
    """Echo a value."""
    return value


def names(violations: Sequence[Violation]) -> set[str]:
    return {v.invariant for v in violations}


@pytest.fixture
async def session(ctx: Context) -> Session:
    await ctx.plugin(SessionStore)
    created: Session = ctx.sessions.create("invariants")
    return created


def log(session: Session, *events: tuple[str, Any]) -> Session:
    for kind, payload in events:
        session.append(kind, payload)
    return session


def user(turn: int, content: str = "hi") -> tuple[str, Any]:
    return UserMessageEvent.event_type, UserMessageEvent(turn=turn, message=Message.user(content))


def assistant(turn: int, step: int, *call_ids: str, interrupted: bool = False) -> tuple[str, Any]:
    blocks = tuple(ToolCallBlock(CallId(c), "echo", "{}") for c in call_ids)
    message = Message.assistant(TextBlock("ok"), *blocks)
    finish: FinishReason = "tool-calls" if call_ids else "stop"
    return AssistantMessageEvent.event_type, AssistantMessageEvent(
        turn=turn, step=step, message=message, finish=finish, interrupted=interrupted
    )


def call(turn: int, step: int, call_id: str) -> tuple[str, Any]:
    return ToolCallEvent.event_type, ToolCallEvent(
        turn=turn, step=step, call_id=CallId(call_id), name="echo", arguments="{}"
    )


def result(turn: int, step: int, call_id: str, for_id: str | None = None) -> tuple[str, Any]:
    answer = ToolResult(CallId(for_id or call_id), (TextBlock("v"),))
    return ToolResultEvent.event_type, ToolResultEvent(
        turn=turn, step=step, call_id=CallId(call_id), result=answer
    )


def turn(n: int, *body: tuple[str, Any], reason: str = "completed") -> list[tuple[str, Any]]:
    return [
        (TurnStart.event_type, TurnStart(turn=n)),
        *body,
        (TurnEnd.event_type, TurnEnd(turn=n, reason=reason)),  # type: ignore[arg-type]
    ]


def step(t: int, s: int, *body: tuple[str, Any]) -> list[tuple[str, Any]]:
    return [
        (StepStart.event_type, StepStart(turn=t, step=s)),
        *body,
        (StepEnd.event_type, StepEnd(turn=t, step=s)),
    ]


async def test_a_real_two_tool_turn_passes_every_log_check() -> None:
    responses = [tool_call("c1", "echo", {"value": "a"}) + tool_call("c2", "echo", {"value": "b"})]
    async with open_test_harness([*responses, text("done")], tools=[echo]) as h:
        agent = h.agent()
        agent.send("go")
        await agent.wait_idle()
        assert check_session(agent.session) == []


def test_seq_contiguous_finds_a_gap() -> None:
    events = [SessionEvent(0, "x", 0.0, {}), SessionEvent(2, "x", 0.0, {})]
    assert names(check_seq_contiguous(events)) == {"seq-contiguous"}
    assert check_seq_contiguous(events[:1]) == []


async def test_turns_closed(session: Session) -> None:
    log(session, *turn(1, user(1)), (TurnStart.event_type, TurnStart(turn=3)))
    found = check_turns_closed(session)
    assert [v.message for v in found] == ["turn 3 follows turn 1 (seq 3)", "turn 3 never ended"]
    assert len(check_turns_closed(session, complete=False)) == 1


async def test_turns_closed_finds_a_nested_turn_and_a_stray_end(session: Session) -> None:
    log(
        session,
        (TurnStart.event_type, TurnStart(turn=1)),
        (TurnStart.event_type, TurnStart(turn=2)),
        (TurnEnd.event_type, TurnEnd(turn=2, reason="completed")),
        (TurnEnd.event_type, TurnEnd(turn=2, reason="completed")),
    )
    messages = [v.message for v in check_turns_closed(session)]
    assert messages[0] == "turn 2 started inside open turn 1"
    assert "but the open turn is None" in messages[1]


async def test_steps_balanced(session: Session) -> None:
    log(session, *turn(1, *step(1, 1), (StepStart.event_type, StepStart(turn=1, step=3))))
    messages = [v.message for v in check_steps_balanced(session)]
    assert messages == ["step 3 follows step 1", "turn ended inside open step 3"]


async def test_steps_balanced_finds_a_step_outside_a_turn(session: Session) -> None:
    log(session, *step(1, 1))
    assert [v.message for v in check_steps_balanced(session)] == ["step 1 started outside a turn"]


async def test_tool_calls_answered_holds_for_answered_calls(session: Session) -> None:
    body = step(1, 1, assistant(1, 1, "a", "b"), call(1, 1, "a"), call(1, 1, "b"))
    body[-1:-1] = [result(1, 1, "a"), result(1, 1, "b")]
    log(session, *turn(1, user(1), *body))
    assert check_tool_calls_answered(session) == []


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        pytest.param(
            [assistant(1, 1, "a"), call(1, 1, "a")],
            "got 1 tool/call and 0 tool/result events",
            id="unanswered",
        ),
        pytest.param(
            [assistant(1, 1, "a", "a"), call(1, 1, "a"), result(1, 1, "a")],
            "logs tool-call id 'a' 2 time(s)",
            id="duplicate-id",
        ),
        pytest.param(
            [assistant(1, 1, ""), call(1, 1, ""), result(1, 1, "")],
            "logs tool-call id '' 1 time(s)",
            id="empty-id",
        ),
        pytest.param(
            [assistant(1, 1), result(1, 1, "z")],
            "tool/result 'z' (turn 1 step 1) answers no pending tool/call",
            id="stray-result",
        ),
        pytest.param(
            [assistant(1, 1), call(1, 1, "z")],
            "tool/call 'z' (turn 1 step 1) matches no tool-call block",
            id="stray-call",
        ),
        pytest.param(
            [assistant(1, 1, "a"), call(1, 1, "a"), result(1, 1, "a", for_id="b")],
            "carries a result for 'b'",
            id="wrong-result-id",
        ),
        pytest.param(
            [assistant(1, 1, "a", interrupted=True)],
            "interrupted message (turn 1 step 1) holds tool calls",
            id="interrupted-call",
        ),
    ],
)
async def test_tool_calls_answered_finds(
    session: Session, events: list[tuple[str, Any]], expected: str
) -> None:
    log(session, *turn(1, user(1), *step(1, 1, *events)))
    messages = [v.message for v in check_tool_calls_answered(session)]
    assert any(expected in m for m in messages), messages


async def test_prompts_logged_once_and_in_order(session: Session) -> None:
    first = Message.user("first")
    second = Message.user("second")
    log(
        session,
        *turn(
            1,
            (UserMessageEvent.event_type, UserMessageEvent(turn=1, message=second)),
            (UserMessageEvent.event_type, UserMessageEvent(turn=1, message=first)),
            (UserMessageEvent.event_type, UserMessageEvent(turn=1, message=first)),
        ),
    )
    queued = [QueuedPrompt(first.id, False, 1), QueuedPrompt(second.id, False, 2)]
    messages = [v.message for v in check_prompts_logged_once(session, queued)]
    assert messages == [f"prompt {first.id} was logged 2 times", "sends were logged out of order"]
    assert len(check_prompts_logged_once(session)) == 1


@pytest.mark.parametrize(
    ("statuses", "complete", "expected"),
    [
        (["running", "idle", "running", "disposed"], True, []),
        (["running", "idle"], False, []),
        (["running", "idle"], True, ["the agent ended 'idle', never 'disposed'"]),
        (["idle"], False, ["status 'idle' repeated (#0)"]),
        (["disposed", "idle"], True, ["status 'idle' after 'disposed' (#1)"]),
        (["running", "disposed", "disposed"], True, ["status 'disposed' after 'disposed' (#2)"]),
        (["paused"], False, ["unknown status 'paused'"]),
    ],
)
def test_status_transitions(statuses: list[str], complete: bool, expected: list[str]) -> None:
    found = check_status_transitions(statuses, complete=complete)
    assert [v.message for v in found] == expected


def test_run_level_checks() -> None:
    record = RunRecord(tasks_left=["poller"], children_left=[4242], hang="stuck")
    assert names(check_no_task_left(record)) == {"no-task-left"}
    assert names(check_no_child_process_left(record)) == {"no-child-process-left"}
    assert names(check_no_hang(record)) == {"hang"}
    assert check_no_child_process_left(RunRecord(children_left=None)) == []


def test_errors_are_told_apart() -> None:
    corrupted = RuntimeError("Cancel scope stack corrupted: attempted to exit <scope> from ...")
    record = RunRecord(
        errors=[
            LoggedError("trio_agent.runtime", "a task of plugin 'p' crashed", corrupted),
            LoggedError("trio_agent.loop", "flushing failed"),
            LoggedError(None, "ExceptionGroup: boom [ValueError: x]"),
        ]
    )
    assert len(check_no_scope_misnesting(record)) == 1
    assert [v.message for v in check_no_unhandled_error(record)] == [
        "flushing failed (logged by trio_agent.loop)",
        "ExceptionGroup: boom [ValueError: x] (escaped the run)",
    ]
    assert len(check_no_unhandled_error(record, allowed=["^flushing"])) == 1


def test_user_checks_fail_by_assertion_or_by_messages() -> None:
    def no_sessions(record: RunRecord) -> None:
        assert record.sessions, "no session was created"

    def complaints(record: RunRecord) -> list[str]:
        return ["first", "second"]

    def broken(record: RunRecord) -> None:
        raise KeyError("oops")

    found = check_run(RunRecord(), checks=[no_sessions, complaints, broken])
    assert [str(v) for v in found] == [
        "user:no_sessions: no session was created",
        "user:complaints: first",
        "user:complaints: second",
        "user:broken: the check raised KeyError: 'oops'",
    ]
