"""Session.append, the event view, bookkeeping, publication and derive_messages."""

from __future__ import annotations

import logging
import time
from typing import ClassVar

import attrs
import pytest

from trio_agent.ids import CallId, MessageId, SessionId
from trio_agent.llm import (
    LlmCallConfig,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResult,
)
from trio_agent.runtime import Context
from trio_agent.session import (
    AssistantMessageEvent,
    ContextMessageEvent,
    EventLog,
    MessageHistory,
    PromptBlocked,
    RequestHeader,
    Session,
    SessionAppended,
    SessionDetachedError,
    SessionEvent,
    SessionHeader,
    SessionReentrancyError,
    SteeringMessageEvent,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
    project_messages,
)


def user(text: str, mid: str = "") -> Message:
    return Message(MessageId(mid or f"u-{text}"), "user", (TextBlock(text),), "user")


def assistant(*blocks: object, mid: str = "a") -> Message:
    return Message(MessageId(mid), "assistant", tuple(blocks), "model")  # type: ignore[arg-type]


async def test_seq_is_contiguous_and_time_is_wall_clock(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    before = time.time()
    events = [session.append("plugin/x", {"i": i}) for i in range(5)]
    after = time.time()
    assert [e.seq for e in events] == [0, 1, 2, 3, 4]
    assert all(before <= e.time <= after for e in events)
    assert list(session.events) == events


async def test_events_is_a_read_only_live_view(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    view = session.events
    assert isinstance(view, EventLog)
    assert session.events is view  # O(1): the same object every time
    session.append("plugin/x", {})
    session.append("plugin/y", {})
    assert len(view) == 2
    assert view[-1].type == "plugin/y"
    assert view[0:1] == (view[0],)
    assert isinstance(view[:], tuple)
    assert not hasattr(view, "append")
    with pytest.raises(TypeError):
        view[0] = view[1]


def state(session: Session) -> tuple[int, int | None, int | None]:
    return session.last_turn, session.open_turn, session.open_step


async def test_bookkeeping(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    assert state(session) == (0, None, None)
    session.append(TurnStart(turn=1))
    assert state(session) == (1, 1, None)
    session.append(StepStart(turn=1, step=1))
    assert state(session) == (1, 1, 1)
    session.append(StepEnd(turn=1, step=1))
    assert state(session) == (1, 1, None)
    session.append("step/start", {"turn": 1, "step": 2})
    assert state(session) == (1, 1, 2)
    session.append(TurnEnd(turn=1, reason="aborted"))
    assert state(session) == (1, None, None)
    session.append(TurnStart(turn=2))
    assert state(session) == (2, 2, None)


async def test_request_header_is_tracked(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    before = session.request_header  # a local: mypy would keep the property narrowed
    assert before is None
    first = RequestHeader(turn=1, step=1, config=LlmCallConfig("p", "a"), system="s")
    session.append(first)
    session.append("plugin/x", {})
    assert session.request_header == first
    prefix = (user("runtime context", "pre"),)
    second = RequestHeader(turn=1, step=2, config=LlmCallConfig("p", "b"), prefix=prefix)
    session.append(second)
    assert session.request_header == second
    assert session.derive_messages() == ()  # the prefix lives on the header, not in history
    seeded = sctx.sessions.create("seeded", seed=list(session.events))
    assert seeded.request_header == second


async def test_session_event_is_emitted_after_commit(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    heard: list[tuple[int, int]] = []

    def listener(payload: SessionAppended) -> None:
        assert payload.session is session
        # The event is committed before listeners run.
        heard.append((payload.event.seq, len(payload.session.events)))

    sctx.on("session/event", listener)
    event = session.append("plugin/x", {})
    assert heard == [(0, 1)]
    assert session.events[0] is event


async def test_append_from_a_listener_fails_inside_it_and_is_contained(
    sctx: Context, caplog: pytest.LogCaptureFixture
) -> None:
    session = sctx.sessions.create("s")
    other = sctx.sessions.create("other")
    failures: list[BaseException] = []

    def listener(payload: SessionAppended) -> None:
        if payload.session is not session:
            return
        other.append("plugin/mirror", {"seq": payload.event.seq})  # another session is fine
        try:
            session.append("plugin/echo", {})
        except SessionReentrancyError as exc:
            failures.append(exc)
        session.append("plugin/echo", {})  # raises; the emit logs and contains it

    sctx.on("session/event", listener)
    with caplog.at_level(logging.ERROR):
        event = session.append("plugin/x", {"n": 1})
    assert event.seq == 0
    assert [e.type for e in session.events] == ["plugin/x"]
    assert [e.data for e in other.events] == [{"seq": 0}]
    assert len(failures) == 1
    assert "not re-entrant" in str(failures[0])
    assert isinstance(failures[0], RuntimeError)
    assert any("SessionReentrancyError" in r.getMessage() + str(r.exc_text) for r in caplog.records)
    # The session works normally afterwards.
    assert session.append("plugin/y", {}).seq == 1


async def test_session_event_reaches_only_the_creators_scope(sctx: Context) -> None:
    a = sctx.scope_context("a")
    b = sctx.scope_context("b")
    heard: dict[str, list[str]] = {"global": [], "a": [], "b": []}
    sctx.on("session/event", lambda p: heard["global"].append(p.session.id))
    a.on("session/event", lambda p: heard["a"].append(p.session.id))
    b.on("session/event", lambda p: heard["b"].append(p.session.id))
    sa = a.sessions.create("sa")
    sb = b.sessions.create("sb")
    sg = sctx.sessions.create("sg")
    assert sa.scope is a.scope and sg.scope is None
    for session in (sa, sb, sg):
        session.append("plugin/x", {})
    assert heard == {"global": ["sa", "sb", "sg"], "a": ["sa"], "b": ["sb"]}


async def test_append_to_a_detached_session_raises(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    sctx.sessions.detach(session)
    with pytest.raises(SessionDetachedError, match="detached"):
        session.append("plugin/x", {})
    assert len(session.events) == 0


async def test_event_type_must_be_a_string(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    with pytest.raises(TypeError, match="non-empty str"):
        session.append("", {})
    with pytest.raises(TypeError, match="non-empty str"):
        session.append(3, {})


@attrs.frozen(kw_only=True)
class PluginNote:
    """A plugin's own payload class naming its event type."""

    event_type: ClassVar[str] = "plugin/note"
    text: str


async def test_append_infers_the_event_type_from_the_payload_class(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    start = session.append(TurnStart(turn=1))
    assert (start.type, start.data) == ("turn/start", {"turn": 1})
    assert start.payload == TurnStart(turn=1)
    note = session.append(PluginNote(text="hi"))
    assert (note.type, note.data) == ("plugin/note", {"text": "hi"})
    # The (type, data) form stays: a plugin's dict, or a core payload spelled out.
    assert session.append("plugin/x", {"k": 1}).type == "plugin/x"
    assert session.append("step/start", StepStart(turn=1, step=1)).type == "step/start"
    assert state(session) == (1, 1, 1)


async def test_a_lone_argument_must_name_its_event_type(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    for lone in ({"turn": 1}, "turn/start", user("no type"), 3):
        with pytest.raises(TypeError, match=r"append\(type, data\)"):
            session.append(lone)
    assert len(session.events) == 0


async def test_a_standalone_session_needs_no_store() -> None:
    session = Session(SessionHeader(session_id=SessionId("alone"), created_at=time.time()))
    session.load_seed([SessionEvent(0, "turn/start", 1.0, {"turn": 1})])
    assert [e.type for e in session.events] == ["turn/start", "session/end-seed"]
    session.append(TurnEnd(turn=1, reason="completed"))
    assert not session.live and session.open_turn is None
    with pytest.raises(RuntimeError, match="fresh session"):
        session.load_seed([])
    session.detach()
    assert session.detached
    with pytest.raises(SessionDetachedError):
        session.append(TurnStart(turn=2))


# --- derive_messages --------------------------------------------------------------------------


async def test_derive_messages_projects_the_model_history(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    prompt, ctx_msg, steer = user("do it"), user("fyi", "ctx"), user("also", "steer")
    call = ToolCallBlock(CallId("c1"), "ls", "{}")
    answer = assistant(TextBlock("on it"), call, mid="a1")
    session.append(TurnStart(turn=1))
    session.append(PromptBlocked(turn=1, message=user("no"), reason="x"))
    session.append(UserMessageEvent(turn=1, message=prompt))
    session.append(StepStart(turn=1, step=1))
    session.append(
        "assistant/chunk",
        {"turn": 1, "step": 1, "chunk": {"type": "finish", "reason": "stop", "failure": None}},
    )
    session.append(
        AssistantMessageEvent(turn=1, step=1, message=answer, finish="tool-calls"),
    )
    session.append(
        ToolCallEvent(turn=1, step=1, call_id=CallId("c1"), name="ls", arguments="{}"),
    )
    # Seed 002: a listener returned a wrong id in the result; the logged call_id wins.
    wrong = ToolResult(CallId("bogus"), (TextBlock("a.txt"),), is_error=True)
    result_event = session.append(
        ToolResultEvent(turn=1, step=1, call_id=CallId("c1"), result=wrong)
    )
    session.append(ContextMessageEvent(turn=1, step=1, message=ctx_msg))
    session.append(SteeringMessageEvent(turn=1, step=1, message=steer))
    session.append("plugin/note", {"text": "not model-visible"})
    session.append(StepEnd(turn=1, step=1))
    session.append(TurnEnd(turn=1, reason="completed"))

    history = session.derive_messages()
    assert len(history) == 5
    assert history[0] == prompt
    assert history[1] == answer
    tool_msg = history[2]
    assert tool_msg.role == "user" and tool_msg.source == "tool"
    assert tool_msg == Message.tool_result(
        CallId("c1"), (TextBlock("a.txt"),), is_error=True, id=tool_msg.id
    )
    assert tool_msg.content[0].tool_call_id == "c1"
    assert tool_msg.id == f"tool-result-{result_event.seq}"
    assert history[3:] == (ctx_msg, steer)
    assert history == project_messages(session.events)


async def test_empty_assistant_messages_are_skipped_but_interrupted_text_is_kept(
    sctx: Context,
) -> None:
    session = sctx.sessions.create("s")
    empties = [assistant(mid="e1"), assistant(TextBlock(""), ReasoningBlock(""), mid="e2")]
    for message in empties:
        session.append(
            AssistantMessageEvent(turn=1, step=1, message=message, finish="stop"),
        )
    partial = assistant(TextBlock("I was say"), mid="p")
    session.append(
        AssistantMessageEvent(turn=1, step=1, message=partial, finish="aborted", interrupted=True),
    )
    thinking = assistant(ReasoningBlock("hmm"), mid="r")
    session.append(
        AssistantMessageEvent(turn=1, step=1, message=thinking, finish="stop"),
    )
    assert session.derive_messages() == (partial, thinking)


async def test_history_snapshots_are_immutable_and_cheap(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    empty = session.derive_messages()
    assert empty == () and len(empty) == 0
    first = user("1")
    session.append(UserMessageEvent(turn=1, message=first))
    h1 = session.derive_messages()
    assert session.derive_messages() is h1  # cached until the history changes
    session.append("plugin/x", {})
    assert session.derive_messages() is h1  # non-surface events change nothing
    second = user("2")
    session.append(UserMessageEvent(turn=1, message=second))
    h2 = session.derive_messages()
    assert h1 == (first,) and list(h1) == [first]  # the earlier snapshot never grows
    assert h2 == (first, second)
    assert isinstance(h2, MessageHistory)
    assert h2[-1] is second and h2[1:] == (second,) and h2[::-1] == (second, first)
    assert list(reversed(h2)) == [second, first]
    prefix = (user("system-ish", "p"),)
    combined = prefix + h2
    assert type(combined) is tuple and combined == (prefix[0], first, second)
    assert h2 + prefix == (first, second, prefix[0])
    assert h2.as_tuple() == (first, second) and hash(h2) == hash((first, second))
    assert h2 != h1 and h2 != [first, second]
    with pytest.raises(IndexError):
        _ = h1[1]
    with pytest.raises(TypeError):
        h2[0] = first  # type: ignore[index]
