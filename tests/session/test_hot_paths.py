"""#17: the fast paths of ``Session.append`` log exactly what the generic path logs."""

from __future__ import annotations

import hashlib
import json
import time

import pytest
import trio

from trio_agent import _serde
from trio_agent.ids import CallId, SessionId
from trio_agent.llm import ReasoningDelta, TextDelta, ToolCallDelta
from trio_agent.persistence._format import jsonl_lines
from trio_agent.session import (
    AssistantChunk,
    JsonValueError,
    Session,
    SessionHeader,
    StepEnd,
    StepStart,
    TurnEnd,
    TurnStart,
)
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
    assert event.payload is payload


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
