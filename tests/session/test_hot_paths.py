"""#17: the fast paths of ``Session.append`` log exactly what the generic path logs."""

from __future__ import annotations

import hashlib
import json
import time

import pytest
import trio

from trio_agent import _serde
from trio_agent.ids import CallId, MessageId, SessionId
from trio_agent.llm import (
    BlockEnd,
    BlockStart,
    Finish,
    ImageBlock,
    LlmCallConfig,
    LlmFailure,
    Message,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    ToolResult,
    ToolSchema,
    Usage,
    UsageChunk,
)
from trio_agent.persistence._format import jsonl_lines
from trio_agent.session import (
    AssistantChunk,
    AssistantMessageEvent,
    JsonValueError,
    RequestHeader,
    Session,
    SessionAppended,
    SessionDetachedError,
    SessionHeader,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)
from trio_agent.session._encoders import FAST_ENCODERS
from trio_agent.session._json import snapshot_json
from trio_agent.testing import open_test_harness, text, tool_call
from trio_agent.tools import tool


def _session() -> Session:
    return Session(SessionHeader(session_id=SessionId("s"), created_at=time.time()))


CHUNKS = [
    TextDelta(0, "plain"),
    TextDelta(3, "ünïcødé ✓"),
    TextDelta(0, ""),
    ReasoningDelta(1, "thinking"),
    ToolCallDelta(2, CallId("c1"), "read_file", '{"path": "a"}'),
    ToolCallDelta(0, CallId("c\u00e9"), "n\u00e4me", ""),
    BlockStart(0, "text"),
    BlockStart(1, "tool-call"),
    BlockEnd(0, TextBlock("done ✓")),
    BlockEnd(1, ToolCallBlock(CallId("c1"), "ls", "{}")),
    BlockEnd(2, ReasoningBlock("hm")),
    BlockEnd(3, ImageBlock("image/png", "aGk=")),  # generic
    Finish("stop"),
    Finish("error", LlmFailure("TRANSPORT", "gone")),  # generic
    UsageChunk(Usage(1, 2, 3, 4, 5)),
]


@pytest.mark.parametrize("chunk", CHUNKS, ids=repr)
def test_chunk_snapshot_equals_generic(chunk: object) -> None:
    payload = AssistantChunk(turn=2, step=5, chunk=chunk)  # type: ignore[arg-type]
    session = _session()
    event = session.append(payload)
    generic = snapshot_json(_serde.unstructure(payload), "data")
    assert event.data == generic
    assert list(event.data) == list(generic)
    assert list(event.data["chunk"]) == list(generic["chunk"])
    assert json.dumps(event.data) == json.dumps(generic)
    # The log keeps a chunk as JSON only: its payload is structured on demand, equal to
    # what was appended, and the appended objects are not kept alive by the log.
    assert event.payload == payload
    assert event.payload is not payload


@pytest.mark.parametrize("chunk", CHUNKS, ids=repr)
def test_append_chunk_logs_what_append_logs(chunk: StreamChunk) -> None:
    by_payload, direct = _session(), _session()
    expected = by_payload.append(AssistantChunk(turn=2, step=5, chunk=chunk))
    event = direct.append_chunk(2, 5, chunk)
    assert (event.seq, event.type) == (expected.seq, expected.type)
    assert json.dumps(event.data) == json.dumps(expected.data)
    assert event.payload == expected.payload
    assert direct.events_of_type("assistant/chunk")[-1] is event


def test_append_chunk_refuses_what_append_refuses() -> None:
    session = _session()
    with pytest.raises(JsonValueError):
        session.append_chunk(1, 1, TextDelta(0, "bad \ud800"))
    assert len(session.events) == 0
    # Not an int: the generic path decides, as it does for append.
    odd = session.append_chunk(True, 1, TextDelta(0, "ok"))
    assert (
        odd.data
        == _session().append(AssistantChunk(turn=True, step=1, chunk=TextDelta(0, "ok"))).data
    )
    session.detach()
    with pytest.raises(SessionDetachedError):
        session.append_chunk(1, 1, TextDelta(0, "late"))


def test_counter_payload_snapshots_equal_generic() -> None:
    session = _session()
    for payload in (
        TurnStart(turn=1),
        StepStart(turn=1, step=1),
        StepEnd(turn=1, step=1),
        TurnEnd(turn=1, reason="completed"),
    ):
        event = session.append(payload)
        generic = snapshot_json(_serde.unstructure(payload), "data")
        assert event.data == generic
        assert list(event.data) == list(generic)
        assert json.dumps(event.data) == json.dumps(generic)
        assert event.payload is payload


def _messages() -> list[Message]:
    return [
        Message(MessageId("a1"), "assistant", (TextBlock("hi ✓"),), "model"),
        Message(
            MessageId("a2"),
            "assistant",
            (ReasoningBlock("hm"), TextBlock(""), ToolCallBlock(CallId("c1"), "ls", '{"p": 1}')),
            "model",
        ),
        Message(MessageId("u1"), "user", (TextBlock("go"),), "user"),
        Message(MessageId("u2"), "user", (ImageBlock("image/png", "aGk="),), "user"),  # generic
        Message(MessageId("a3"), "assistant", (), "model"),
    ]


def _results() -> list[ToolResult]:
    return [
        ToolResult(CallId("c1"), (TextBlock("ok"),)),
        ToolResult(CallId("c1"), (TextBlock("nope"),), is_error=True, code="TOOL_ERROR"),
        ToolResult(CallId("c1"), (), concludes_turn=True),
        ToolResult(CallId("c1"), (TextBlock("x"),), additional_context=(Message.user("ctx"),)),
        ToolResult(CallId("c1"), (ImageBlock("image/png", "aGk="),)),  # generic
    ]


def _loop_payloads() -> list[object]:
    payloads: list[object] = []
    for message in _messages():
        payloads.append(UserMessageEvent(turn=1, message=message))
        for usage in (None, Usage(10, 2), Usage(1, 2, 3, 4, 5)):
            payloads.append(
                AssistantMessageEvent(
                    turn=1, step=2, message=message, finish="stop", usage=usage, interrupted=True
                )
            )
    for result in _results():
        payloads.append(ToolResultEvent(turn=1, step=2, call_id=CallId("c1"), result=result))
    for read_only in (False, True):
        payloads.append(
            ToolCallEvent(
                turn=1, step=2, call_id=CallId("c1"), name="ls", arguments="{}", read_only=read_only
            )
        )
    schema = ToolSchema(
        "ls",
        "List ✓",
        {"type": "object", "properties": {"p": {"type": "string", "enum": ["a", "b"]}}},
    )
    for config in (
        LlmCallConfig("openai", "gpt"),
        LlmCallConfig("openai", "gpt", 100, 0.5, ("END",), "high"),
        LlmCallConfig("openai", "gpt", temperature=1),  # an int: generic
    ):
        payloads.append(RequestHeader(turn=1, step=2, config=config))
        payloads.append(
            RequestHeader(
                turn=1,
                step=2,
                config=config,
                system="be brief",
                tools=(schema, ToolSchema("none", "")),
                prefix=tuple(_messages()),
            )
        )
    return payloads


@pytest.mark.parametrize("payload", _loop_payloads(), ids=lambda p: type(p).__name__)
def test_loop_payload_snapshots_equal_generic(payload: object) -> None:
    event = _session().append(payload)  # type: ignore[call-overload]
    generic = snapshot_json(_serde.unstructure(payload), "data")
    assert event.data == generic
    assert json.dumps(event.data) == json.dumps(generic)  # the same keys in the same order
    assert event.payload == payload


@pytest.mark.parametrize(
    "payload",
    [
        UserMessageEvent(turn=1, message=Message.user("bad \ud800")),
        ToolCallEvent(turn=1, step=1, call_id=CallId("c"), name="ls", arguments="\udfff"),
        ToolResultEvent(
            turn=1,
            step=1,
            call_id=CallId("c"),
            result=ToolResult(CallId("c"), (TextBlock("\ud800"),)),
        ),
    ],
    ids=lambda p: type(p).__name__,
)
def test_loop_payloads_with_a_lone_surrogate_are_still_rejected(payload: object) -> None:
    session = _session()
    with pytest.raises(JsonValueError):
        session.append(payload)  # type: ignore[call-overload]
    assert len(session.events) == 0


def test_chunk_with_a_lone_surrogate_is_still_rejected() -> None:
    session = _session()
    with pytest.raises(JsonValueError):
        session.append(AssistantChunk(turn=1, step=1, chunk=TextDelta(0, "bad \ud800")))
    assert len(session.events) == 0


@tool
async def echo(word: str) -> str:
    """Echo ``word``."""
    return word


#: sha256 of the JSONL lines (times and ids blanked) of the scenario below, on main before #17.
PINNED = "486205f646560e4eb5978760eebb52da946c1ab5bc05c57f92e559d6d1652841"


def _scenario_bytes(session: Session) -> bytes:
    lines = []
    for line in jsonl_lines(session.header, session.events):
        obj = json.loads(line)
        obj.pop("time", None)
        obj.pop("created_at", None)
        lines.append(json.dumps(obj, sort_keys=False))
    text_ = "\n".join(lines)
    return text_.encode()


async def test_log_bytes_are_pinned_for_a_fixed_scenario() -> None:
    script = [
        tool_call("c1", "echo", '{"word": "hé"}'),
        text("done ", "here"),
    ]
    with trio.fail_after(30):
        async with open_test_harness(script, tools=[echo]) as h:
            agent = h.agent("pinned")
            agent.send("go")
            await agent.wait_idle()
            data = _scenario_bytes(agent.session)
    import re

    # Message ids are random per run; blank them so the pin covers everything else.
    data = re.sub(rb'"(id|session_id|message_id)": "[^"]*"', rb'"\1": "_"', data)
    digest = hashlib.sha256(data).hexdigest()
    assert digest == PINNED, data.decode()


async def test_the_loops_own_payloads_take_the_fast_path() -> None:
    script = [tool_call("c1", "echo", '{"word": "hé"}'), text("done ", "here")]
    with trio.fail_after(30):
        async with open_test_harness(script, tools=[echo]) as h:
            agent = h.agent("fast")
            agent.send("go")
            await agent.wait_idle()
            events = agent.session.events
    slow = [
        e.type
        for e in events
        if type(e.payload) not in FAST_ENCODERS or FAST_ENCODERS[type(e.payload)](e.payload) is None
    ]
    assert slow == []


def test_a_request_header_is_not_shared_with_the_caller() -> None:
    # Its tool schemas hold dicts: the log keeps its own copy, structured on first read.
    parameters: dict[str, object] = {"type": "object", "properties": {}}
    header = RequestHeader(
        turn=1, step=1, config=LlmCallConfig("p", "m"), tools=(ToolSchema("t", "", parameters),)
    )
    session = _session()
    event = session.append(header)
    parameters["properties"] = {"changed": {}}
    logged = event.payload_as(RequestHeader)
    assert logged is not header and logged.tools[0].parameters["properties"] == {}
    assert event.data["tools"][0]["parameters"]["properties"] == {}


def test_a_request_header_that_is_not_json_is_still_rejected() -> None:
    session = _session()
    bad = ToolSchema("t", "", {"x": float("nan")})
    with pytest.raises(JsonValueError, match=r'data\["tools"\]\[0\]'):
        session.append(RequestHeader(turn=1, step=1, config=LlmCallConfig("p", "m"), tools=(bad,)))
    assert len(session.events) == 0


def test_an_append_nobody_hears_builds_no_notification() -> None:
    sent: list[tuple[str, object]] = []
    listening = False

    def emit(name: str, payload: object, *, target: object = None) -> None:
        sent.append((name, payload))

    session = Session(
        SessionHeader(session_id=SessionId("s"), created_at=time.time()),
        emit=emit,
        hears=lambda name: listening,
    )
    session.append(TurnStart(turn=1))
    assert sent == []
    listening = True
    event = session.append(StepStart(turn=1, step=1))
    ((name, notice),) = sent
    assert name == "session/event" and isinstance(notice, SessionAppended)
    assert notice.event is event and notice.session is session
