"""The event envelope and the typed payload of each core event type."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from trio_agent import _serde
from trio_agent.ids import CallId, MessageId
from trio_agent.llm import (
    LlmCallConfig,
    LlmFailure,
    Message,
    TextBlock,
    TextDelta,
    ToolResult,
    ToolSchema,
    Usage,
)
from trio_agent.runtime import Context
from trio_agent.session import (
    EVENT_PAYLOADS,
    ApprovalDecisionEvent,
    ApprovalRequestEvent,
    AssistantChunk,
    AssistantMessageEvent,
    CompactionPrune,
    CompactionSummary,
    ContextMessageEvent,
    EventPayloadError,
    LlmRetry,
    PromptBlocked,
    RequestHeader,
    SessionEndSeed,
    SessionEvent,
    SteeringMessageEvent,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)

MSG = Message(MessageId("m1"), "user", (TextBlock("hi"),), "user")
FAILURE = LlmFailure("RATE_LIMIT", "slow down", status=429, retry_after=2.0)

SAMPLES: list[Any] = [
    TurnStart(turn=1),
    UserMessageEvent(turn=1, message=MSG),
    PromptBlocked(turn=1, message=MSG, reason="no"),
    StepStart(turn=1, step=1),
    RequestHeader(
        turn=1,
        step=1,
        config=LlmCallConfig("p", "m", max_tokens=10, stop=("x",)),
        system="be brief",
        tools=(ToolSchema("ls", "list", {"type": "object", "properties": {}}),),
        prefix=(Message(MessageId("p1"), "user", (TextBlock("runtime context"),), "plugin:x"),),
    ),
    AssistantChunk(turn=1, step=1, chunk=TextDelta(0, "h")),
    AssistantMessageEvent(
        turn=1,
        step=1,
        message=Message.assistant(TextBlock("ok"), id=MessageId("a1")),
        finish="stop",
        usage=Usage(3, 4),
        interrupted=True,
    ),
    ToolCallEvent(turn=1, step=1, call_id=CallId("c1"), name="ls", arguments='{"a": 1}'),
    ToolResultEvent(
        turn=1,
        step=1,
        call_id=CallId("c1"),
        result=ToolResult(CallId("c1"), (TextBlock("out"),), is_error=True, code="TOOL_ERROR"),
    ),
    ContextMessageEvent(turn=1, step=None, message=MSG),
    SteeringMessageEvent(turn=1, step=2, message=MSG),
    StepEnd(turn=1, step=1),
    TurnEnd(turn=1, reason="error", error=FAILURE),
    LlmRetry(turn=1, step=1, attempt=2, delay=0.25, failure=FAILURE),
    SessionEndSeed(),
    CompactionSummary(turn=1, first_seq=0, last_seq=0, summary="earlier"),
    CompactionPrune(turn=1, first_seq=0, last_seq=0, stub="[pruned]", step=1),
    ApprovalRequestEvent(
        turn=1, step=1, call_id=CallId("c1"), tool="shell", arguments="{}", reason="effects"
    ),
    ApprovalDecisionEvent(
        turn=1, step=1, call_id=CallId("c1"), decision="approved", by="Svc", remember="session"
    ),
]


def test_every_core_type_has_a_payload_class() -> None:
    assert set(EVENT_PAYLOADS) == {
        "turn/start",
        "user/message",
        "prompt/blocked",
        "step/start",
        "request/header",
        "assistant/chunk",
        "assistant/message",
        "tool/call",
        "tool/result",
        "context/message",
        "steering/message",
        "step/end",
        "turn/end",
        "llm/retry",
        "session/end-seed",
        "compaction/summary",
        "compaction/prune",
        "approval/request",
        "approval/decision",
    }
    assert {type(p) for p in SAMPLES} == set(EVENT_PAYLOADS.values())
    for event_type, cls in EVENT_PAYLOADS.items():
        assert cls.event_type == event_type  # type: ignore[attr-defined]
        assert attrs.has(cls)
        sample = next(p for p in SAMPLES if type(p) is cls)
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            sample.turn = 99  # type: ignore[attr-defined]


@pytest.mark.parametrize("payload", SAMPLES, ids=lambda p: type(p).__name__)
async def test_payload_round_trips_through_the_log(sctx: Context, payload: Any) -> None:
    session = sctx.sessions.create("s")
    if isinstance(payload, CompactionSummary | CompactionPrune):
        session.append(UserMessageEvent(turn=1, message=MSG))  # the range: seq 0
    event = session.append(payload)
    assert event.payload == payload
    # A log loaded from JSON (plain dicts) structures to the same payload.
    loaded = SessionEvent(event.seq, event.type, event.time, _serde.unstructure(payload))
    assert loaded.payload == payload
    assert loaded.payload is loaded.payload  # structured once, cached
    # Keys are snake_case and every core payload but end-seed carries its turn.
    assert all(key.islower() and "-" not in key for key in event.data)
    if not isinstance(payload, SessionEndSeed):
        assert event.data["turn"] == 1


def test_step_is_none_outside_a_step() -> None:
    data = _serde.unstructure(ContextMessageEvent(turn=0, message=MSG))
    assert data["step"] is None


async def test_dict_data_for_a_core_type_is_validated(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    event = session.append("step/start", {"turn": 1, "step": 2})
    assert event.payload == StepStart(turn=1, step=2)
    with pytest.raises(EventPayloadError, match=r"'step/start'.*StepStart") as info:
        session.append("step/start", {"turn": 1, "stepp": 2})
    assert isinstance(info.value, ValueError)
    with pytest.raises(EventPayloadError, match="turn/end"):
        session.append("turn/end", {"turn": 1, "reason": "bored"})
    assert len(session.events) == 1


async def test_payload_class_must_match_the_type(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    with pytest.raises(EventPayloadError, match="StepEnd is the payload of 'step/end'"):
        session.append("turn/end", StepEnd(turn=1, step=1))
    with pytest.raises(EventPayloadError, match="TurnStart is the payload of 'turn/start'"):
        session.append("plugin/thing", TurnStart(turn=1))
    assert len(session.events) == 0


@attrs.frozen
class _PluginNote:
    text: str
    tags: tuple[str, ...] = ()


async def test_plugin_types_stay_plain_dicts(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    event = session.append("plugin/note", _PluginNote("hi", ("a",)))
    assert event.data == {"text": "hi", "tags": ["a"]}
    assert event.payload is event.data
    raw = session.append("plugin/raw", {"x": [1]})
    assert raw.payload == {"x": [1]}


def test_payload_as_checks_the_class() -> None:
    event = SessionEvent(0, "turn/start", 0.0, {"turn": 3})
    assert event.payload_as(TurnStart).turn == 3
    with pytest.raises(TypeError, match="TurnStart payload, not a StepEnd"):
        event.payload_as(StepEnd)


def test_a_malformed_loaded_event_names_its_seq() -> None:
    event = SessionEvent(7, "tool/result", 0.0, {"turn": 1})
    with pytest.raises(EventPayloadError, match=r"event seq 7 \('tool/result'\)"):
        _ = event.payload


def test_events_compare_by_value_and_ignore_the_cache() -> None:
    a = SessionEvent(0, "turn/start", 1.0, {"turn": 1})
    b = SessionEvent(0, "turn/start", 1.0, {"turn": 1})
    _ = a.payload
    assert a == b
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        a.seq = 3  # type: ignore[misc]


def test_envelope_and_header_round_trip_through_json() -> None:
    import json

    from trio_agent.session import SessionHeader

    event = SessionEvent(3, "turn/start", 12.5, {"turn": 2})
    _ = event.payload
    wire = json.loads(json.dumps(_serde.unstructure(event)))
    assert wire == {"seq": 3, "type": "turn/start", "time": 12.5, "data": {"turn": 2}}
    assert _serde.structure(wire, SessionEvent) == event
    header = SessionHeader(
        session_id="s",  # type: ignore[arg-type]
        created_at=1.0,
        cwd="/w",
        parent_session="p",  # type: ignore[arg-type]
        seed_length=4,
        meta={"k": [1]},
    )
    assert (
        _serde.structure(json.loads(json.dumps(_serde.unstructure(header))), SessionHeader)
        == header
    )


async def test_appended_payload_values_are_kept_unless_caller_owned(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    start = TurnStart(turn=1)
    assert session.append(start).payload is start  # immutable: shared
    parameters: dict[str, Any] = {"type": "object"}
    header = RequestHeader(
        turn=1, step=1, config=LlmCallConfig("p", "m"), tools=(ToolSchema("t", "d", parameters),)
    )
    event = session.append(header)
    parameters["type"] = "changed"  # the caller's mapping: neither data nor payload follow it
    assert event.data["tools"][0]["parameters"] == {"type": "object"}
    assert event.payload_as(RequestHeader).tools[0].parameters == {"type": "object"}
