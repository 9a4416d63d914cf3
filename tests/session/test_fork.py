"""ctx.sessions.fork: boundaries, lineage, ownership and the child's history."""

from __future__ import annotations

import re

import pytest

from trio_agent.ids import CallId, MessageId
from trio_agent.llm import Message, TextBlock, ToolCallBlock, ToolResult
from trio_agent.runtime import Context
from trio_agent.session import (
    AssistantMessageEvent,
    ForkBoundaryError,
    MessageHistory,
    Session,
    SessionDetachedError,
    SessionExistsError,
    SessionNotFoundError,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)


def run_turn(session: Session, turn: int, *, close: bool = True) -> dict[str, int]:
    """Append one tool-using turn; return the seq of its landmarks."""
    marks: dict[str, int] = {}
    marks["start"] = session.append(TurnStart(turn=turn)).seq
    prompt = Message(MessageId(f"u{turn}"), "user", (TextBlock(f"prompt {turn}"),), "user")
    session.append(UserMessageEvent(turn=turn, message=prompt))
    session.append(StepStart(turn=turn, step=1))
    call = ToolCallBlock(CallId(f"c{turn}"), "ls", "{}")
    answer = Message(MessageId(f"a{turn}"), "assistant", (call,), "model")
    session.append(
        AssistantMessageEvent(turn=turn, step=1, message=answer, finish="tool-calls"),
    )
    marks["mid"] = session.append(
        ToolCallEvent(turn=turn, step=1, call_id=call.id, name="ls", arguments="{}"),
    ).seq
    result = ToolResult(call.id, (TextBlock("files"),))
    session.append(ToolResultEvent(turn=turn, step=1, call_id=call.id, result=result))
    session.append(StepEnd(turn=turn, step=1))
    if close:
        marks["end"] = session.append(TurnEnd(turn=turn, reason="completed")).seq
    return marks


async def test_fork_at_a_closed_turn(sctx: Context) -> None:
    parent = sctx.sessions.create("parent", cwd="/tmp/work")
    first = run_turn(parent, 1)
    at_boundary: MessageHistory = parent.derive_messages()
    run_turn(parent, 2)
    child = sctx.sessions.fork(parent, first["end"], "child")
    assert child.id == "child"
    assert child.header.parent_session == "parent"
    assert child.header.seed_length == first["end"] + 1
    assert child.header.cwd == "/tmp/work"
    assert list(child.events[: first["end"] + 1]) == list(parent.events[: first["end"] + 1])
    assert child.events[-1].type == "session/end-seed"
    assert child.derive_messages() == at_boundary
    assert child.last_turn == 1 and child.open_turn is None
    # The child lives on independently.
    run_turn(child, 2)
    assert len(parent.events) == 16 and child.last_turn == 2


async def test_fork_between_turns_and_at_plugin_events(sctx: Context) -> None:
    parent = sctx.sessions.create("p")
    parent.append("plugin/setup", {})
    child = sctx.sessions.fork(parent, 0, "c0")
    assert [e.type for e in child.events] == ["plugin/setup", "session/end-seed"]
    run_turn(parent, 1)
    parent.append("plugin/after", {})
    child2 = sctx.sessions.fork(parent)  # default: the last event, outside any turn
    assert child2.header.seed_length == len(parent.events)
    assert child2.derive_messages() == parent.derive_messages()


async def test_fork_inside_an_open_turn_is_refused(sctx: Context) -> None:
    parent = sctx.sessions.create("p")
    closed = run_turn(parent, 1)
    open_marks = run_turn(parent, 2, close=False)
    for boundary in (open_marks["start"], open_marks["mid"], None):
        with pytest.raises(ForkBoundaryError, match="inside open turn 2") as info:
            sctx.sessions.fork(parent, boundary)
        assert info.value.session_id == "p"
    with pytest.raises(ForkBoundaryError, match="inside open turn 1"):
        sctx.sessions.fork(parent, closed["mid"])
    assert [s.id for s in sctx.sessions.list()] == ["p"]


@pytest.mark.parametrize("boundary", [-1, 12, 99])
async def test_fork_at_a_missing_seq_is_refused(sctx: Context, boundary: int) -> None:
    parent = sctx.sessions.create("p")
    run_turn(parent, 1)
    with pytest.raises(
        ForkBoundaryError, match=rf"fork boundary {boundary} does not exist.*last seq: 7"
    ):
        sctx.sessions.fork(parent, boundary)


async def test_fork_boundary_must_be_an_int(sctx: Context) -> None:
    parent = sctx.sessions.create("p")
    parent.append("plugin/x", {})
    for bad in (True, 0.0, "0"):
        with pytest.raises(ForkBoundaryError, match="must be an int"):
            sctx.sessions.fork(parent, bad)


async def test_fork_of_an_empty_session(sctx: Context) -> None:
    parent = sctx.sessions.create("p")
    child = sctx.sessions.fork(parent)
    assert [e.type for e in child.events] == ["session/end-seed"]
    assert child.header.seed_length == 0
    with pytest.raises(ForkBoundaryError, match="last seq: none"):
        sctx.sessions.fork(parent, 0)


async def test_fork_default_child_id(sctx: Context) -> None:
    parent = sctx.sessions.create("p")
    a = sctx.sessions.fork(parent)
    b = sctx.sessions.fork(parent)
    assert re.fullmatch(r"p-fork-[0-9a-f]{12}", a.id) and a.id != b.id
    long_parent = sctx.sessions.create("x" * 200)
    child = sctx.sessions.fork(long_parent)
    assert re.fullmatch(r"fork-[0-9a-f]{32}", child.id)


async def test_fork_source_resolution(sctx: Context) -> None:
    parent = sctx.sessions.create("p")
    parent.append("plugin/x", {})
    assert sctx.sessions.fork("p", 0, "by-id").header.parent_session == "p"
    with pytest.raises(SessionNotFoundError, match="no live session 'nope'"):
        sctx.sessions.fork("nope")
    with pytest.raises(SessionExistsError):
        sctx.sessions.fork(parent, 0, "by-id")
    with pytest.raises(ValueError, match="invalid session id"):
        sctx.sessions.fork(parent, 0, "../evil")
    sctx.sessions.detach(parent)
    with pytest.raises(SessionDetachedError):
        sctx.sessions.fork(parent)


async def test_fork_is_owned_by_the_calling_context(sctx: Context) -> None:
    parent = sctx.sessions.create("p")
    scoped = sctx.scope_context("agent")
    heard: list[str] = []
    scoped.on("session/created", lambda p: heard.append(p.session.id))
    child = scoped.sessions.fork(parent, None, "kid")
    assert heard == ["kid"] and child.scope is scoped.scope
    await scoped.fiber.dispose()
    assert child.detached and not parent.detached
