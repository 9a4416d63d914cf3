"""The projection honours compaction/summary and compaction/prune; the log is never rewritten."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent.ids import CallId, MessageId, SessionId
from trio_agent.llm import (
    ImageBlock,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResult,
    ToolResultBlock,
)
from trio_agent.runtime import Context
from trio_agent.session import (
    COMPACTION_SOURCE,
    AssistantMessageEvent,
    CompactionPrune,
    CompactionRangeError,
    CompactionSummary,
    EventPayloadError,
    Session,
    SessionHeader,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
    project_messages,
    would_prune,
)

from .strategies import Op, session_logs


def _standalone() -> Session:
    return Session(SessionHeader(session_id=SessionId("s"), created_at=time.time()))


def _turn(session: Session, turn: int, *, calls: int = 1, output: str = "out") -> int:
    """Log one closed turn (prompt, an answer with ``calls`` tool calls, results, a reply);
    return the seq of its ``turn/end``."""
    session.append(TurnStart(turn=turn))
    session.append(UserMessageEvent(turn=turn, message=Message.user(f"prompt {turn}")))
    ids = [CallId(f"c{turn}-{i}") for i in range(calls)]
    blocks = [ToolCallBlock(call, "read", "{}") for call in ids]
    session.append(
        AssistantMessageEvent(
            turn=turn,
            step=1,
            message=Message.assistant(TextBlock("let me look"), *blocks),
            finish="tool-calls" if calls else "stop",
        )
    )
    for call in ids:
        session.append(ToolCallEvent(turn=turn, step=1, call_id=call, name="read", arguments="{}"))
        session.append(
            ToolResultEvent(
                turn=turn, step=1, call_id=call, result=ToolResult(call, (TextBlock(output),))
            )
        )
    session.append(
        AssistantMessageEvent(
            turn=turn, step=2, message=Message.assistant(TextBlock(f"answer {turn}")), finish="stop"
        )
    )
    return session.append(TurnEnd(turn=turn, reason="completed")).seq


def _texts(session: Session) -> list[str]:
    return [m.text or type(m.content[0]).__name__ for m in session.derive_messages()]


def test_a_summary_replaces_its_range_and_the_log_keeps_everything() -> None:
    session = _standalone()
    end1 = _turn(session, 1)
    end2 = _turn(session, 2)
    before = session.derive_messages()
    events_before = tuple(session.events)
    event = session.append(CompactionSummary(turn=1, first_seq=0, last_seq=end1, summary="S1"))
    history = session.derive_messages()
    assert history[0] == Message(
        MessageId(f"compaction-summary-{event.seq}"), "user", (TextBlock("S1"),), COMPACTION_SOURCE
    )
    assert tuple(history[1:]) == tuple(before[4:])  # turn 2 verbatim, after the summary
    assert len(before) == 8  # a snapshot taken before never changes
    assert tuple(session.events[: event.seq]) == events_before
    assert session.history_index(end1) == 1 and session.history_index(end2) == 5
    # A later summary may cover the earlier one whole.
    session.append(CompactionSummary(turn=1, first_seq=0, last_seq=end2, summary="S2"))
    assert _texts(session) == ["S2"]
    assert project_messages(session.events) == session.derive_messages()


@pytest.mark.parametrize(
    ("first", "last", "words"),
    [
        (0, 99, "reaches the event itself"),
        (0, 3, "separates a tool call from its result"),  # ends after the call, before the result
        (4, 6, "separates a tool call from its result"),  # starts between call and result
    ],
)
def test_a_range_that_would_break_the_history_is_refused(first: int, last: int, words: str) -> None:
    session = _standalone()
    _turn(session, 1)
    size = len(session.events)
    history = session.derive_messages()
    with pytest.raises(CompactionRangeError, match=words):
        session.append(CompactionSummary(turn=1, first_seq=first, last_seq=last, summary="S"))
    assert len(session.events) == size
    assert session.derive_messages() == history


def test_a_range_may_not_cut_an_earlier_summary_or_cover_a_pending_call() -> None:
    session = _standalone()
    end1 = _turn(session, 1)
    _turn(session, 2)
    session.append(CompactionSummary(turn=1, first_seq=0, last_seq=end1, summary="S1"))
    with pytest.raises(CompactionRangeError, match="falls inside the message"):
        session.append(CompactionSummary(turn=1, first_seq=2, last_seq=end1 + 2, summary="S"))
    # An open turn whose call has no result yet.
    session.append(TurnStart(turn=3))
    session.append(
        AssistantMessageEvent(
            turn=3,
            step=1,
            message=Message.assistant(ToolCallBlock(CallId("open"), "read", "{}")),
            finish="tool-calls",
        )
    )
    last = len(session.events) - 1
    with pytest.raises(CompactionRangeError, match=r"'open' .* has no result yet"):
        session.append(CompactionSummary(turn=1, first_seq=0, last_seq=last, summary="S"))


def test_a_malformed_range_is_a_payload_error() -> None:
    with pytest.raises(ValueError, match=r"last_seq .* is before first_seq"):
        CompactionSummary(turn=1, first_seq=4, last_seq=3, summary="S")
    session = _standalone()
    with pytest.raises(EventPayloadError, match="first_seq"):
        session.append(
            "compaction/summary", {"turn": 1, "first_seq": -1, "last_seq": 0, "summary": "S"}
        )


def test_prune_stubs_long_results_and_keeps_the_pairs() -> None:
    session = _standalone()
    end1 = _turn(session, 1, calls=2, output="x" * 500)
    session.append(TurnStart(turn=2))
    session.append(UserMessageEvent(turn=2, message=Message.user("short")))
    session.append(
        AssistantMessageEvent(
            turn=2,
            step=1,
            message=Message.assistant(ToolCallBlock(CallId("small"), "read", "{}")),
            finish="tool-calls",
        )
    )
    tiny = ToolResult(CallId("small"), (TextBlock("ok"),), is_error=True)
    session.append(ToolResultEvent(turn=2, step=1, call_id=CallId("small"), result=tiny))
    session.append(TurnEnd(turn=2, reason="completed"))
    before = session.derive_messages()
    session.append(
        CompactionPrune(turn=1, first_seq=0, last_seq=len(session.events) - 1, stub="[gone]")
    )
    after = session.derive_messages()
    assert len(after) == len(before)
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert changed == [2, 3]  # the two long results of turn 1; "ok" is shorter than the stub
    for index in changed:
        block = after[index].content[0]
        assert block.content == (TextBlock("[gone]"),)  # type: ignore[union-attr]
        assert block.tool_call_id == before[index].content[0].tool_call_id  # type: ignore[union-attr]
        assert after[index].id == before[index].id
    assert session.events[4].payload_as(ToolResultEvent).result.text == "x" * 500  # log intact
    assert project_messages(session.events) == after
    assert session.history_index(end1) == 5


def test_would_prune() -> None:
    result = Message.tool_result(CallId("c"), (TextBlock("abc"),))
    image = Message.tool_result(CallId("c"), (ImageBlock("image/png", "AAAA"),))
    assert would_prune(result, "ab") and not would_prune(result, "abc")
    assert would_prune(image, "a long stub")
    assert not would_prune(Message.user("a long user message"), "x")


def test_events_of_type_is_a_live_view() -> None:
    session = _standalone()
    _turn(session, 1)
    ends = session.events_of_type("turn/end")
    assert [e.type for e in ends] == ["turn/end"]
    _turn(session, 2)
    assert [e.payload_as(TurnEnd).turn for e in ends] == [1, 2]
    assert len(session.events_of_type("nothing/here")) == 0


async def test_fork_and_resume_see_the_same_projection(ctx: Context) -> None:
    from trio_agent.session import SessionStore

    await ctx.plugin(SessionStore)
    source = ctx.require(SessionStore).create("source")
    end1 = _turn(source, 1)
    _turn(source, 2)
    source.append(CompactionSummary(turn=1, first_seq=0, last_seq=end1, summary="S1"))
    _turn(source, 3)
    fork = ctx.require(SessionStore).fork(source, child_session_id="child")
    assert tuple(fork.derive_messages()) == tuple(source.derive_messages())
    resumed = Session(source.header)
    resumed.load_seed(tuple(source.events))
    assert tuple(resumed.derive_messages()) == tuple(source.derive_messages())


# --- the property: compaction never orphans a tool call or result ----------------------------


def _problems(messages: Any, answered: set[CallId]) -> list[str]:
    """Where a history breaks the pairing providers require: every result right after the
    message with its call, in call order, and every call answered there (unless the log never
    answered it: a crash-cut last turn)."""
    problems: list[str] = []
    waiting: list[CallId] = []
    for message in messages:
        results = [b for b in message.content if isinstance(b, ToolResultBlock)]
        if results:
            for block in results:
                if waiting and waiting[0] == block.tool_call_id:
                    waiting.pop(0)
                else:
                    problems.append(f"result {block.tool_call_id!r} is not right after its call")
            continue
        problems.extend(f"call {c!r} is not answered" for c in waiting if c in answered)
        waiting = [b.id for b in message.content if isinstance(b, ToolCallBlock)]
    problems.extend(f"call {c!r} is not answered" for c in waiting if c in answered)
    return problems


def _answered(session: Session) -> set[CallId]:
    return {e.payload_as(ToolResultEvent).call_id for e in session.events_of_type("tool/result")}


@settings(max_examples=150)
@given(log=session_logs(max_turns=5), data=st.data())
def test_compaction_never_orphans_a_tool_call_or_result(log: list[Op], data: st.DataObject) -> None:
    session = _standalone()
    for kind, payload in log:
        session.append(kind, payload)
        if data.draw(st.integers(0, 4)) != 0:
            continue
        seq = len(session.events)
        first = data.draw(st.integers(0, seq))
        last = data.draw(st.integers(first, seq))
        before = session.derive_messages()
        try:
            if data.draw(st.booleans()):
                session.append(
                    CompactionSummary(turn=1, first_seq=first, last_seq=last, summary="S")
                )
            else:
                session.append(CompactionPrune(turn=1, first_seq=first, last_seq=last, stub="-"))
        except CompactionRangeError:
            assert session.derive_messages() == before  # refused: nothing changed
        assert not _problems(session.derive_messages(), _answered(session))
    history = session.derive_messages()
    assert not _problems(history, _answered(session))
    # Incremental and from-scratch projections agree, and so does a reloaded log.
    assert project_messages(session.events) == history
    reloaded = Session(session.header)
    reloaded.load_seed(tuple(session.events))
    assert reloaded.derive_messages() == history


@settings(max_examples=80)
@given(log=session_logs(balanced=True, max_turns=5), keep=st.integers(0, 3))
def test_a_range_ending_at_a_closed_turn_is_always_accepted(log: list[Op], keep: int) -> None:
    session = _standalone()
    for kind, payload in log:
        session.append(kind, payload)
    ends = session.events_of_type("turn/end")
    for index in range(max(len(ends) - keep, 0)):
        session.append(
            CompactionSummary(turn=1, first_seq=0, last_seq=ends[index].seq, summary="S")
        )
        assert not _problems(session.derive_messages(), _answered(session))
