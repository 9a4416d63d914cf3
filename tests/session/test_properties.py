"""Property tests: the incremental projection equals a from-scratch one, and balanced logs pair
every tool call with exactly one result."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import _serde
from trio_agent.ids import MessageId, SessionId
from trio_agent.llm import Message, ReasoningBlock, TextBlock, ToolResultBlock
from trio_agent.runtime import open_runtime
from trio_agent.session import (
    Session,
    SessionEvent,
    SessionHeader,
    SessionStore,
    project_messages,
    repair_closers,
)

from .strategies import Op, json_objects, json_values, session_logs


def standalone(seed: list[SessionEvent] | None = None) -> Session:
    """A session outside any store (the projection does not need one)."""
    session = Session(SessionHeader(session_id=SessionId("prop"), created_at=time.time()))
    if seed is not None:
        session.load_seed(seed)
    return session


def reference_projection(events: list[SessionEvent]) -> list[Message]:
    """The projection rules applied to the raw JSON data, independently of the session code."""
    out: list[Message] = []
    for event in events:
        data: dict[str, Any] = event.data
        if event.type in ("user/message", "context/message", "steering/message"):
            out.append(_serde.structure(data["message"], Message))
        elif event.type == "assistant/message":
            blocks = data["message"]["content"]
            visible = [
                b for b in blocks if b["type"] not in ("text", "reasoning") or b["text"] != ""
            ]
            if visible:
                out.append(_serde.structure(data["message"], Message))
        elif event.type == "tool/result":
            content: tuple[Any, ...] = tuple(
                _serde.structure(b, TextBlock if b["type"] == "text" else ReasoningBlock)
                for b in data["result"]["content"]
            )
            block = ToolResultBlock(data["call_id"], content, data["result"]["is_error"])
            out.append(Message(MessageId(f"tool-result-{event.seq}"), "user", (block,), "tool"))
    return out


def assert_calls_paired(history: Sequence[Message]) -> None:
    for index, message in enumerate(history):
        if message.role != "assistant":
            continue
        later = history[index + 1 :]
        for call in message.tool_calls:
            answers = [
                m
                for m in later
                if len(m.content) == 1
                and isinstance(m.content[0], ToolResultBlock)
                and m.content[0].tool_call_id == call.id
            ]
            assert len(answers) == 1, (call, answers)


@settings(max_examples=120, deadline=None)
@given(log=session_logs(), data=st.data())
def test_incremental_projection_equals_from_scratch(log: list[Op], data: st.DataObject) -> None:
    session = standalone()
    snapshots: list[tuple[Any, tuple[Message, ...]]] = []
    for event_type, payload in log:
        session.append(event_type, payload)
        if data.draw(st.booleans()):
            history = session.derive_messages()
            expected = tuple(reference_projection(list(session.events)))
            assert history == expected
            assert history == project_messages(session.events)
            snapshots.append((history, expected))
    final = session.derive_messages()
    assert final == tuple(reference_projection(list(session.events)))
    # Snapshots handed out earlier never changed.
    for history, expected in snapshots:
        assert history == expected and len(history) == len(expected)
    # A session seeded from the same log (as from disk) projects the same history.
    loaded = [SessionEvent(e.seq, e.type, e.time, e.data) for e in session.events]
    assert standalone(loaded).derive_messages() == final


@settings(max_examples=80, deadline=None)
@given(log=session_logs(balanced=True))
def test_balanced_logs_pair_every_call_with_one_result(log: list[Op]) -> None:
    session = standalone()
    for event_type, payload in log:
        session.append(event_type, payload)
    assert session.open_turn is None and session.open_step is None
    assert repair_closers(session.events) == []
    assert_calls_paired(session.derive_messages())


@settings(max_examples=80, deadline=None)
@given(log=session_logs(balanced=False))
def test_repaired_logs_are_balanced(log: list[Op]) -> None:
    session = standalone()
    for event_type, payload in log:
        session.append(event_type, payload)
    for event_type, payload in repair_closers(session.events):
        session.append(event_type, payload)
    assert session.open_turn is None and session.open_step is None
    assert repair_closers(session.events) == []
    assert_calls_paired(session.derive_messages())


@settings(max_examples=60, deadline=None)
@given(value=json_objects)
def test_valid_json_round_trips_unchanged(value: dict[str, Any]) -> None:
    event = standalone().append("plugin/x", value)
    assert event.data == value
    _assert_no_shared_containers(value, event.data)


def _assert_no_shared_containers(original: Any, copy: Any) -> None:
    if isinstance(original, (dict, list)):
        assert original is not copy
        items = original.values() if isinstance(original, dict) else original
        copies = copy.values() if isinstance(copy, dict) else copy
        for a, b in zip(items, copies, strict=True):
            _assert_no_shared_containers(a, b)


@settings(max_examples=30, deadline=None)
@given(log=session_logs(max_turns=2), extra=json_values)
async def test_store_sessions_match_standalone_ones(log: list[Op], extra: Any) -> None:
    async with open_runtime() as ctx:
        await ctx.plugin(SessionStore)
        live = ctx.sessions.create("live")
        heard: list[int] = []
        ctx.on("session/event", lambda p: heard.append(p.event.seq))
        for event_type, payload in log:
            live.append(event_type, payload)
        live.append("plugin/extra", {"value": extra})
        assert heard == list(range(len(log) + 1))
        alone = standalone()
        for event_type, payload in log:
            alone.append(event_type, payload)
        assert live.derive_messages() == alone.derive_messages()
