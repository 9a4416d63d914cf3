"""Hypothesis strategies for the LLM vocabulary (reusable by other packages' tests)."""

from __future__ import annotations

import string
from typing import Any

from hypothesis import strategies as st

from trio_agent.ids import CallId, MessageId, SessionId
from trio_agent.llm import (
    BlockEnd,
    BlockStart,
    ContentBlock,
    Finish,
    GenerateRequest,
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
    ToolResultBlock,
    ToolSchema,
    Usage,
    UsageChunk,
)

__all__ = [
    "call_configs",
    "call_ids",
    "content_blocks",
    "failures",
    "finishes",
    "generate_requests",
    "json_values",
    "leaf_blocks",
    "messages",
    "stream_chunks",
    "tool_results",
    "tool_schemas",
    "usages",
]

short_text = st.text(max_size=12)
names = st.text(string.ascii_letters + "_", min_size=1, max_size=10)
call_ids = st.text(string.ascii_letters + string.digits + "-_", min_size=1, max_size=12).map(CallId)
message_ids = st.text(string.hexdigits, min_size=1, max_size=12).map(
    lambda s: MessageId(f"msg-{s}")
)
counts = st.integers(min_value=0, max_value=10**9)
finite_floats = st.floats(allow_nan=False, allow_infinity=False, width=64)

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**12), 10**12) | finite_floats | short_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(short_text, inner, max_size=3),
    max_leaves=8,
)

leaf_blocks: st.SearchStrategy[ContentBlock] = st.one_of(
    st.builds(TextBlock, short_text),
    st.builds(ReasoningBlock, short_text),
    st.builds(
        ImageBlock,
        st.sampled_from(["image/png", "image/jpeg"]),
        st.text(string.ascii_letters + string.digits + "+/=", max_size=16),
    ),
    st.builds(ToolCallBlock, call_ids, names, short_text),
)
content_blocks: st.SearchStrategy[ContentBlock] = st.one_of(
    leaf_blocks,
    st.builds(
        ToolResultBlock,
        call_ids,
        st.lists(leaf_blocks, max_size=3).map(tuple),
        st.booleans(),
    ),
)
messages = st.builds(
    Message,
    message_ids,
    st.sampled_from(["system", "user", "assistant"]),
    st.lists(content_blocks, max_size=4).map(tuple),
    st.sampled_from(["user", "model", "tool", "steering", "context", "plugin:x"]),
)
usages = st.builds(Usage, counts, counts, counts, counts, counts)
failures = st.builds(
    LlmFailure,
    st.sampled_from(["RATE_LIMIT", "SERVER", "TIMEOUT", "AUTH", "UNKNOWN", "HTTP_418"]),
    short_text,
    st.none() | st.integers(100, 599),
    st.none() | st.floats(0, 1e6, allow_nan=False),
    st.none() | short_text,
)
finishes = st.one_of(
    st.builds(Finish, st.sampled_from(["stop", "tool-calls", "max-tokens"])),
    st.builds(Finish, st.sampled_from(["error", "aborted"]), failures),
)
indexes = st.integers(0, 5)
stream_chunks: st.SearchStrategy[StreamChunk] = st.one_of(
    st.builds(BlockStart, indexes, st.sampled_from(["text", "reasoning", "tool-call"])),
    st.builds(TextDelta, indexes, short_text),
    st.builds(ReasoningDelta, indexes, short_text),
    st.builds(
        ToolCallDelta, indexes, call_ids | st.just(CallId("")), names | st.just(""), short_text
    ),
    st.builds(BlockEnd, indexes, content_blocks),
    st.builds(UsageChunk, usages),
    finishes,
)
call_configs = st.builds(
    LlmCallConfig,
    names,
    names,
    st.none() | st.integers(1, 10**6),
    st.none() | st.floats(0, 2, allow_nan=False),
    st.none() | st.lists(short_text, max_size=3).map(tuple),
    st.none() | st.sampled_from(["low", "high"]),
)
tool_schemas = st.builds(
    ToolSchema, names, short_text, st.dictionaries(short_text, json_values, max_size=3)
)
generate_requests = st.builds(
    GenerateRequest,
    call_configs,
    st.lists(messages, max_size=3).map(tuple),
    st.none() | short_text,
    st.lists(tool_schemas, max_size=2).map(tuple),
    st.none() | names.map(SessionId),
)
tool_results = st.builds(
    ToolResult,
    call_ids,
    st.lists(leaf_blocks, max_size=3).map(tuple),
    st.booleans(),
    st.none() | st.sampled_from(["TOOL_ERROR", "DENIED"]),
    st.lists(messages, max_size=2).map(tuple),
    st.booleans(),
)
