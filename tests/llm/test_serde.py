"""Every vocabulary type survives a JSON round trip through the one converter unchanged."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agent import _serde
from trio_agent.llm import (
    ContentBlock,
    Finish,
    GenerateRequest,
    LlmCallConfig,
    LlmFailure,
    Message,
    StreamChunk,
    ToolResult,
    ToolSchema,
    Usage,
)

from . import strategies as s

CASES: list[tuple[Any, st.SearchStrategy[Any]]] = [  # (type to structure into, values)
    (ContentBlock, s.content_blocks),
    (StreamChunk, s.stream_chunks),
    (Message, s.messages),
    (Usage, s.usages),
    (LlmFailure, s.failures),
    (Finish, s.finishes),
    (LlmCallConfig, s.call_configs),
    (ToolSchema, s.tool_schemas),
    (GenerateRequest, s.generate_requests),
    (ToolResult, s.tool_results),
]


IDS = ["ContentBlock", "StreamChunk", *(c.__name__ for c, _ in CASES[2:])]


@pytest.mark.parametrize(("cls", "strategy"), CASES, ids=IDS)
def test_json_round_trip_is_identity(cls: Any, strategy: st.SearchStrategy[Any]) -> None:
    @given(strategy)
    def check(value: Any) -> None:
        data = json.loads(json.dumps(_serde.unstructure(value), allow_nan=False))
        assert _serde.structure(data, cls) == value

    check()


def test_union_members_carry_their_tag() -> None:
    from trio_agent.llm import TextBlock, TextDelta

    assert _serde.unstructure(TextBlock("hi")) == {"type": "text", "text": "hi"}
    assert _serde.unstructure(TextDelta(0, "x")) == {"type": "text-delta", "index": 0, "text": "x"}
