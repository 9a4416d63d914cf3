"""OpenAiAdapter's wire format on ``httpx.MockTransport``: request encoding, HTTP and transport
error mapping, SSE parsing of canned bodies and the API key. Timeouts, disconnects and real
streaming run against the socket server in test_openai.py."""

from __future__ import annotations

import email.utils
import json
import logging
import time
from typing import Any

import httpx
import pytest
import trio

from trio_agent import _serde
from trio_agent.ids import CallId, MessageId
from trio_agent.llm import (
    BlockEnd,
    BlockStart,
    Finish,
    GenerateRequest,
    ImageBlock,
    LlmCallConfig,
    Message,
    OpenAiAdapter,
    OpenAiProvider,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    ToolSchema,
    Usage,
    UsageChunk,
    http_failure,
)
from trio_agent.testing import (
    completion_chunk,
    count_schedule_points,
    error_response,
    json_response,
    sse_comment,
    sse_done,
    sse_event,
    sse_finish,
    sse_reasoning,
    sse_reply,
    sse_response,
    sse_text,
    sse_tool_call,
    sse_usage,
)

from .helpers import SECRET, assemble, failure_of, request, stream
from .mock_openai import MockOpenAi, body_stream


@pytest.fixture
def server() -> MockOpenAi:
    return MockOpenAi()


@pytest.fixture
async def adapter(server: MockOpenAi) -> Any:
    a = server.adapter(idle_timeout=10.0)
    try:
        yield a
    finally:
        await a.aclose()


# --- request encoding -----------------------------------------------------------------------


async def test_streamed_text(server: MockOpenAi, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_OPENAI_KEY", SECRET)
    server.push(sse_reply("Hello ", "world"))
    adapter = OpenAiAdapter(
        base_url=server.base_url, transport=server.transport, api_key_env="TEST_OPENAI_KEY"
    )
    try:
        chunks = await stream(adapter)
    finally:
        await adapter.aclose()
    assert chunks == [
        BlockStart(0, "text"),
        TextDelta(0, "Hello "),
        TextDelta(0, "world"),
        BlockEnd(0, TextBlock("Hello world")),
        UsageChunk(Usage(10, 5)),
        Finish("stop"),
    ]
    (received,) = server.requests
    assert received.method == "POST" and received.path == "/v1/chat/completions"
    assert received.headers["authorization"] == f"Bearer {SECRET}"
    assert received.headers["accept"] == "text/event-stream"
    assert received.headers["user-agent"].startswith("trio-agent/")
    assert received.json == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def test_request_body_translation(adapter: OpenAiAdapter, server: MockOpenAi) -> None:
    server.push(sse_reply("ok"))
    history = (
        Message.user("look at this"),
        Message.assistant(
            ReasoningBlock("I should read it"),
            ToolCallBlock(CallId("call_1"), "read_file", '{"path": "a"}'),
        ),
        Message.tool_result(CallId("call_1"), (TextBlock("file body"),)),
        Message.assistant(TextBlock("Done.")),
        Message.tool_result(CallId("call_2"), ()),
        Message(
            MessageId("m"), "user", (TextBlock("and "), ImageBlock("image/png", "QUJD")), "user"
        ),
    )
    config = LlmCallConfig(
        "openai",
        "deepseek-chat",
        max_tokens=100,
        temperature=0.5,
        stop=("END",),
        reasoning_effort="high",
    )
    tools = (
        ToolSchema(
            "read_file",
            "Read a file",
            {"type": "object", "properties": {"path": {"type": "string"}}},
        ),
    )
    await stream(adapter, GenerateRequest(config, history, "You are helpful.", tools))
    body = server.requests[0].json
    assert body["messages"] == [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "look at this"},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "I should read it",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "file body"},
        {"role": "assistant", "content": "Done."},
        {"role": "tool", "tool_call_id": "call_2", "content": "(no output)"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "and "},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
            ],
        },
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file",
                "parameters": tools[0].parameters,
            },
        }
    ]
    assert (body["max_tokens"], body["temperature"], body["stop"], body["reasoning_effort"]) == (
        100,
        0.5,
        ["END"],
        "high",
    )


async def test_request_url_and_headers(server: MockOpenAi) -> None:
    server.push(sse_reply("ok"))
    adapter = server.adapter(base_url="https://mock.test/api/v1/", headers={"x-team": "blue"})
    try:
        await stream(adapter)
    finally:
        await adapter.aclose()
    (received,) = server.requests
    assert received.url == "https://mock.test/api/v1/chat/completions"
    assert received.headers["x-team"] == "blue"
    assert received.headers["content-type"] == "application/json"
    assert "authorization" not in received.headers  # api_key_env=None: a local server


async def test_request_without_system_prompt_tools_or_options(
    adapter: OpenAiAdapter, server: MockOpenAi
) -> None:
    server.push(sse_reply("ok"))
    history = (Message.user("q"), Message.assistant(TextBlock("a")), Message.user("again"))
    await stream(adapter, request(*history))
    body = server.requests[0].json
    assert body == {
        "model": "gpt-test",
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a"},
            {"role": "user", "content": "again"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


# --- SSE parsing of canned bodies ---------------------------------------------------------


async def test_reasoning_then_passback(adapter: OpenAiAdapter, server: MockOpenAi) -> None:
    server.push(
        sse_response(
            sse_event(completion_chunk({"role": "assistant", "reasoning_content": ""})),
            sse_reasoning("Let me "),
            sse_reasoning("think."),
            sse_text("Answer"),
            sse_finish("stop"),
            sse_usage(20, 8, reasoning_tokens=5),
            sse_done(),
        ),
        sse_reply("second"),
    )
    chunks = await stream(adapter)
    assert chunks[:4] == [
        BlockStart(0, "reasoning"),
        ReasoningDelta(0, "Let me "),
        ReasoningDelta(0, "think."),
        BlockStart(1, "text"),
    ]
    message = assemble(chunks).message()
    assert message.content == (ReasoningBlock("Let me think."), TextBlock("Answer"))
    assert assemble(chunks).usage == Usage(20, 8, reasoning_tokens=5)
    await stream(adapter, request(Message.user("q"), message, Message.user("more")))
    assistant = server.requests[1].json["messages"][1]
    assert assistant == {
        "role": "assistant",
        "content": "Answer",
        "reasoning_content": "Let me think.",
    }


async def test_two_parallel_tool_calls_with_interleaved_arguments(
    adapter: OpenAiAdapter, server: MockOpenAi
) -> None:
    server.push(
        sse_response(
            sse_text("Reading both."),
            sse_tool_call(0, id="call_a", name="read_file", arguments=""),
            sse_tool_call(1, id="call_b", name="read_file", arguments='{"pa'),
            sse_tool_call(0, arguments='{"path"'),
            sse_tool_call(1, arguments='th": "b"}'),
            sse_tool_call(0, arguments=': "a"}'),
            sse_finish("tool_calls"),
            sse_usage(50, 30),
            sse_done(),
        )
    )
    chunks = await stream(adapter)
    assert [c for c in chunks if isinstance(c, BlockStart)] == [
        BlockStart(0, "text"),
        BlockStart(1, "tool-call"),
        BlockStart(2, "tool-call"),
    ]
    deltas = [c for c in chunks if isinstance(c, ToolCallDelta)]
    assert [d.index for d in deltas] == [1, 2, 1, 2, 1]
    assert all(d.id in ("call_a", "call_b") and d.name == "read_file" for d in deltas)
    a = assemble(chunks)
    assert a.finish == Finish("tool-calls")
    assert a.message().tool_calls == (
        ToolCallBlock(CallId("call_a"), "read_file", '{"path": "a"}'),
        ToolCallBlock(CallId("call_b"), "read_file", '{"path": "b"}'),
    )
    ends = [c for c in chunks if isinstance(c, BlockEnd)]
    assert [e.index for e in ends] == [0, 1, 2]


@pytest.mark.parametrize("deepseek", [False, True], ids=["openai-cached", "deepseek-cache-hit"])
async def test_usage_with_cached_tokens(
    adapter: OpenAiAdapter, server: MockOpenAi, deepseek: bool
) -> None:
    server.push(
        sse_response(
            sse_text("x"),
            sse_finish(),
            sse_usage(1000, 40, cached_tokens=600, reasoning_tokens=10, deepseek=deepseek),
            sse_done(),
        )
    )
    chunks = await stream(adapter)
    assert chunks[-2] == UsageChunk(Usage(400, 40, cache_read_tokens=600, reasoning_tokens=10))


async def test_usage_on_the_finish_chunk_and_latest_wins(
    adapter: OpenAiAdapter, server: MockOpenAi
) -> None:
    server.push(
        sse_response(
            sse_event(
                completion_chunk(
                    {"content": "x"}, usage={"prompt_tokens": 1, "completion_tokens": 1}
                )
            ),
            sse_event(
                completion_chunk(
                    {}, finish_reason="stop", usage={"prompt_tokens": 9, "completion_tokens": 3}
                )
            ),
            sse_done(),
        )
    )
    chunks = await stream(adapter)
    assert [c for c in chunks if isinstance(c, UsageChunk)] == [UsageChunk(Usage(9, 3))]


async def test_length_finish_is_max_tokens(adapter: OpenAiAdapter, server: MockOpenAi) -> None:
    server.push(sse_reply("cut o", finish="length"))
    assert (await stream(adapter))[-1] == Finish("max-tokens")


async def test_other_finish_reasons_are_errors(adapter: OpenAiAdapter, server: MockOpenAi) -> None:
    server.push(sse_reply("x", finish="content_filter"))
    failure = failure_of(await stream(adapter))
    assert failure.code == "CONTENT_FILTER" and "content_filter" in failure.message


async def test_completed_stop_without_content_is_empty_response(
    adapter: OpenAiAdapter, server: MockOpenAi
) -> None:
    server.push(sse_reply())
    failure = failure_of(await stream(adapter))
    assert failure.code == "EMPTY_RESPONSE"


async def test_reasoning_only_is_not_empty(adapter: OpenAiAdapter, server: MockOpenAi) -> None:
    server.push(sse_response(sse_reasoning("hmm"), sse_finish(), sse_done()))
    assert (await stream(adapter))[-1] == Finish("stop")


async def test_data_after_done_is_ignored(adapter: OpenAiAdapter, server: MockOpenAi) -> None:
    server.push(sse_response(sse_text("x"), sse_finish(), sse_done(), sse_text("ghost"), "garbage"))
    chunks = await stream(adapter)
    assert assemble(chunks).message().text == "x" and chunks[-1] == Finish("stop")


async def test_comments_and_multiline_data(adapter: OpenAiAdapter, server: MockOpenAi) -> None:
    payload = json.dumps(completion_chunk({"content": "multi"}), indent=1)
    server.push(
        sse_response(
            sse_comment("OPENROUTER PROCESSING"), sse_event(payload), sse_finish(), sse_done()
        )
    )
    assert assemble(await stream(adapter)).message().text == "multi"


#: A reply with every kind of block, and text that is not ASCII.
FULL_REPLY = sse_response(
    sse_reasoning("Let me thínk."),
    sse_text("Héllo ✓ "),
    sse_text("wörld"),
    sse_tool_call(0, id="call_1", name="read_file", arguments='{"path": '),
    sse_tool_call(0, arguments='"ä.txt"}'),
    sse_finish("tool_calls"),
    sse_usage(12, 7),
    sse_done(),
)
FULL_BODY = "".join(str(p) for p in FULL_REPLY.pieces).encode()


def event_stream(*pieces: bytes | Exception) -> httpx.Response:
    return httpx.Response(
        200, headers={"content-type": "text/event-stream"}, stream=body_stream(*pieces)
    )


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, len(FULL_BODY)])
async def test_chunk_boundaries_do_not_change_the_chunks(
    adapter: OpenAiAdapter, server: MockOpenAi, size: int
) -> None:
    server.push(FULL_REPLY)
    expected = await stream(adapter)
    assert assemble(expected).message().text == "Héllo ✓ wörld"
    pieces = [FULL_BODY[i : i + size] for i in range(0, len(FULL_BODY), size)]
    server.push(event_stream(*pieces))
    assert await stream(adapter) == expected


async def test_crlf_line_endings(adapter: OpenAiAdapter, server: MockOpenAi) -> None:
    server.push(FULL_REPLY, event_stream(FULL_BODY.replace(b"\n", b"\r\n")))
    expected = await stream(adapter)
    assert await stream(adapter) == expected


async def test_a_body_that_ends_without_events_is_stream_closed(
    adapter: OpenAiAdapter, server: MockOpenAi
) -> None:
    server.push(event_stream())
    assert failure_of(await stream(adapter)).code == "STREAM_CLOSED"


# --- error mapping ----------------------------------------------------------------------------


HTTP_CASES = [
    (401, "Incorrect API key provided", None, "AUTH"),
    (403, "forbidden", None, "AUTH"),
    (429, "Rate limit reached for requests", "rate_limit_exceeded", "RATE_LIMIT"),
    (429, "You exceeded your current quota, please check your plan", "insufficient_quota", "QUOTA"),
    (402, "Insufficient Balance", None, "QUOTA"),
    (
        400,
        "This model's maximum context length is 8192 tokens",
        "context_length_exceeded",
        "CONTEXT_WINDOW_EXCEEDED",
    ),
    (400, "Invalid value: temperature exceeds maximum allowed value", None, "INVALID_REQUEST"),
    (413, "Request Entity Too Large", None, "INVALID_REQUEST"),
    (500, "internal error", None, "SERVER"),
    (503, "overloaded", None, "SERVER"),
    (404, "no such model", None, "HTTP_404"),
]


@pytest.mark.parametrize(
    ("status", "message", "code", "expected"),
    HTTP_CASES,
    ids=[f"{c[0]}-{c[3]}" for c in HTTP_CASES],
)
async def test_http_errors_are_mapped(
    adapter: OpenAiAdapter,
    server: MockOpenAi,
    status: int,
    message: str,
    code: str | None,
    expected: str,
) -> None:
    server.push(error_response(status, message, code=code, headers={"x-request-id": "req-42"}))
    failure = failure_of(await stream(adapter))
    assert failure.code == expected
    assert failure.status == status
    assert failure.request_id == "req-42"
    assert message in failure.message and f"HTTP {status}" in failure.message


async def test_non_json_error_body(adapter: OpenAiAdapter, server: MockOpenAi) -> None:
    server.push(json_response(b"<html>Bad Gateway</html>", status=502))
    failure = failure_of(await stream(adapter))
    assert failure.code == "SERVER" and failure.message == "openai API error (HTTP 502)"


async def test_retry_after_seconds(adapter: OpenAiAdapter, server: MockOpenAi) -> None:
    server.push(error_response(429, "slow down", headers={"retry-after": "2.5"}))
    assert failure_of(await stream(adapter)).retry_after == 2.5


async def test_retry_after_http_date(adapter: OpenAiAdapter, server: MockOpenAi) -> None:
    when = email.utils.formatdate(time.time() + 120, usegmt=True)
    server.push(error_response(503, "maintenance", headers={"retry-after": when}))
    retry_after = failure_of(await stream(adapter)).retry_after
    assert retry_after is not None and 100 < retry_after <= 121


def test_retry_after_variants() -> None:
    now = 1_700_000_000.0
    past = email.utils.formatdate(now - 10, usegmt=True)
    assert http_failure(429, {"retry-after": past}, b"", now=now).retry_after is None
    assert http_failure(429, {"retry-after": "0"}, b"", now=now).retry_after is None
    assert http_failure(429, {"retry-after": "soon"}, b"", now=now).retry_after is None
    assert (
        http_failure(429, {"retry-after-ms": "1500", "retry-after": "9"}, b"", now=now).retry_after
        == 1.5
    )
    assert http_failure(429, {"x-deepseek-request-id": "ds"}, b"", now=now).request_id == "ds"


async def test_malformed_json_event(adapter: OpenAiAdapter, server: MockOpenAi) -> None:
    server.push(sse_response(sse_text("ok"), sse_event("{not json"), sse_done()))
    chunks = await stream(adapter)
    failure = failure_of(chunks)
    assert failure.code == "MALFORMED_RESPONSE" and "{not json" in failure.message
    assert TextDelta(0, "ok") in chunks


@pytest.mark.parametrize(
    "payload", ['"a string"', '{"choices": 3}', '{"choices": [{"delta": "x"}]}']
)
async def test_malformed_shapes(adapter: OpenAiAdapter, server: MockOpenAi, payload: str) -> None:
    server.push(sse_response(sse_event(payload), sse_done()))
    assert failure_of(await stream(adapter)).code == "MALFORMED_RESPONSE"


async def test_json_with_surrounding_whitespace_decodes_like_json_loads(
    adapter: OpenAiAdapter, server: MockOpenAi
) -> None:
    text = json.dumps(completion_chunk({"content": "ok"}))
    server.push(sse_response(sse_event(f"  {text}"), sse_event(f"{text}\t "), sse_done()))
    chunks = await stream(adapter)
    assert [c for c in chunks if isinstance(c, TextDelta)] == [TextDelta(0, "ok")] * 2


async def test_extra_data_after_the_json_is_malformed(
    adapter: OpenAiAdapter, server: MockOpenAi
) -> None:
    text = json.dumps(completion_chunk({"content": "ok"}))
    server.push(sse_response(sse_event(f"{text} {{}}"), sse_done()))
    chunks = await stream(adapter)
    assert failure_of(chunks).code == "MALFORMED_RESPONSE"
    assert not [c for c in chunks if isinstance(c, TextDelta)]


async def test_nothing_of_a_malformed_event_is_delivered(
    adapter: OpenAiAdapter, server: MockOpenAi
) -> None:
    # The first choice is decoded before the second turns out to be malformed.
    payload = json.dumps({"choices": [{"index": 0, "delta": {"content": "half"}}, 3]})
    server.push(sse_response(sse_text("ok"), sse_event(payload), sse_done()))
    chunks = await stream(adapter)
    assert failure_of(chunks).code == "MALFORMED_RESPONSE"
    assert [c for c in chunks if isinstance(c, TextDelta)] == [TextDelta(0, "ok")]


async def test_every_receive_is_a_cancellation_point_and_each_read_a_schedule_point(
    adapter: OpenAiAdapter, server: MockOpenAi
) -> None:
    # One piece of body: every event arrives with the first read.
    reply = sse_reply(*[f"t{i} " for i in range(50)])
    server.push(sse_response("".join(str(piece) for piece in reply.pieces)))
    async with adapter.stream(request()) as chunks:
        with count_schedule_points() as count:
            first = await chunks.receive()
        assert first == BlockStart(0, "text") and count.steps >= 1
        # The rest of the body was decoded by that read: no schedule point each...
        with count_schedule_points() as count:
            for _ in range(10):
                assert type(await chunks.receive()) is TextDelta
        assert count.steps == 0
        # ... but still a cancellation point each.
        with trio.CancelScope() as scope:
            scope.cancel()
            await chunks.receive()
        assert scope.cancelled_caught
        rest = [c async for c in chunks]
    # The cancelled receive took nothing: t10 comes next.
    assert rest[0] == TextDelta(0, "t10 ") and len(rest) == 40 + 3  # block end, usage, finish
    assert rest[-1] == Finish("stop")


async def test_error_object_in_the_stream(adapter: OpenAiAdapter, server: MockOpenAi) -> None:
    server.push(
        sse_response(
            sse_text("x"),
            sse_event({"error": {"message": "Rate limit exceeded upstream"}}),
            sse_done(),
        )
    )
    failure = failure_of(await stream(adapter))
    assert failure.code == "RATE_LIMIT" and "upstream" in failure.message


async def test_eof_without_done_is_stream_closed(
    adapter: OpenAiAdapter, server: MockOpenAi
) -> None:
    server.push(sse_response(sse_text("par"), sse_finish()))
    chunks = await stream(adapter)
    assert failure_of(chunks).code == "STREAM_CLOSED"
    assert assemble(chunks).interrupted_message().text == "par"  # type: ignore[union-attr]


def error_id(value: object) -> str:
    return type(value).__name__ if isinstance(value, Exception) else str(value)


def expected_code(status: int) -> str:
    """The code :func:`http_failure` gives ``status`` when the body has no telling words."""
    if status in (401, 403):
        return "AUTH"
    if status in (400, 413):
        return "INVALID_REQUEST"
    if status == 429:
        return "RATE_LIMIT"
    if status >= 500:
        return "SERVER"
    return f"HTTP_{status}"


async def test_every_status_from_300_maps_to_a_code(
    adapter: OpenAiAdapter, server: MockOpenAi
) -> None:
    statuses = range(300, 600)
    server.push(
        *(error_response(s, "plain words", headers={"x-request-id": f"req-{s}"}) for s in statuses)
    )
    for status in statuses:
        failure = failure_of(await stream(adapter))
        assert (failure.code, failure.status, failure.request_id) == (
            expected_code(status),
            status,
            f"req-{status}",
        )
        assert failure.message == f"openai API error (HTTP {status}): plain words"
    assert len(server.requests) == len(statuses)


async def test_redirects_are_not_followed(adapter: OpenAiAdapter, server: MockOpenAi) -> None:
    elsewhere = "https://elsewhere.test/v1/chat/completions"
    server.push(httpx.Response(307, headers={"location": elsewhere}))
    failure = failure_of(await stream(adapter))
    assert failure.code == "HTTP_307" and f"redirected to {elsewhere}" in failure.message
    assert len(server.requests) == 1  # the key was not sent on to another host


@pytest.mark.parametrize(
    ("headers", "retry_after", "request_id"),
    [
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5, None),
        ({"retry-after": "7"}, 7.0, None),
        ({"retry-after": "soon"}, None, None),
        ({"retry-after": "-3"}, None, None),
        ({"x-deepseek-request-id": "ds-1"}, None, "ds-1"),
        ({"x-request-id": "a", "x-deepseek-request-id": "b"}, None, "a"),
    ],
)
async def test_retry_after_and_request_id_headers(
    adapter: OpenAiAdapter,
    server: MockOpenAi,
    headers: dict[str, str],
    retry_after: float | None,
    request_id: str | None,
) -> None:
    server.push(error_response(429, "slow down", headers=headers))
    failure = failure_of(await stream(adapter))
    assert (failure.retry_after, failure.request_id) == (retry_after, request_id)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (httpx.ConnectError("connection refused"), "TRANSPORT"),
        (httpx.ConnectTimeout("connect timed out"), "TIMEOUT"),
        (httpx.ReadTimeout("read timed out"), "TIMEOUT"),
        (httpx.RemoteProtocolError("bad framing"), "TRANSPORT"),
    ],
    ids=error_id,
)
async def test_transport_errors_before_the_response(
    adapter: OpenAiAdapter, server: MockOpenAi, error: httpx.HTTPError, code: str
) -> None:
    server.push(error)
    failure = failure_of(await stream(adapter))
    assert failure.code == code
    assert f"{type(error).__name__}: {error}" in failure.message
    assert server.base_url in failure.message


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (httpx.ReadError("connection reset"), "TRANSPORT"),
        (httpx.ReadTimeout("stalled"), "TIMEOUT"),
        (httpx.DecodingError("bad gzip"), "MALFORMED_RESPONSE"),
    ],
    ids=error_id,
)
async def test_transport_errors_mid_body(
    adapter: OpenAiAdapter, server: MockOpenAi, error: httpx.HTTPError, code: str
) -> None:
    server.push(event_stream(sse_text("par").encode(), error))
    chunks = await stream(adapter)
    assert failure_of(chunks).code == code
    assert assemble(chunks).interrupted_message().text == "par"  # type: ignore[union-attr]


# --- the API key ------------------------------------------------------------------------------


async def test_api_key_never_leaks(
    server: MockOpenAi, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("TEST_OPENAI_KEY", SECRET)
    server.push(
        error_response(401, f"Incorrect API key provided: {SECRET}. Find your key at ..."),
        sse_response(sse_event(f"{{bad json {SECRET}"), sse_done()),
        sse_reply("fine"),
    )
    adapter = OpenAiAdapter(
        name="secretive",
        base_url=server.base_url,
        transport=server.transport,
        api_key_env="TEST_OPENAI_KEY",
    )
    try:
        auth = failure_of(await stream(adapter))
        malformed = failure_of(await stream(adapter))
        ok = await stream(adapter)
    finally:
        await adapter.aclose()
    assert auth.code == "AUTH" and malformed.code == "MALFORMED_RESPONSE"
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    for text in (
        auth.message,
        malformed.message,
        repr(adapter),
        repr(auth),
        json.dumps(_serde.unstructure(auth)),
        json.dumps(_serde.unstructure(ok)),
        caplog.text,
    ):
        assert SECRET not in text
    assert "[redacted]" in auth.message


async def test_missing_api_key_names_the_variable(
    server: MockOpenAi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TEST_MISSING_KEY", raising=False)
    adapter = OpenAiAdapter(
        base_url=server.base_url, transport=server.transport, api_key_env="TEST_MISSING_KEY"
    )
    try:
        failure = failure_of(await stream(adapter))
    finally:
        await adapter.aclose()
    assert failure.code == "AUTH" and "TEST_MISSING_KEY" in failure.message
    assert server.requests == []


async def test_unsendable_api_key_is_not_echoed(
    server: MockOpenAi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-bad key-é")
    adapter = OpenAiAdapter(
        base_url=server.base_url, transport=server.transport, api_key_env="TEST_OPENAI_KEY"
    )
    try:
        failure = failure_of(await stream(adapter))
    finally:
        await adapter.aclose()
    assert failure.code == "AUTH" and "bad key" not in failure.message
    assert server.requests == []


async def test_a_transport_error_echoing_the_key_is_redacted(
    server: MockOpenAi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_OPENAI_KEY", SECRET)
    server.push(httpx.ProxyError(f"proxy refused 'authorization: Bearer {SECRET}'"))
    adapter = server.adapter(api_key_env="TEST_OPENAI_KEY")
    try:
        failure = failure_of(await stream(adapter))
    finally:
        await adapter.aclose()
    assert failure.code == "TRANSPORT" and "[redacted]" in failure.message
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    for text in (failure.message, repr(failure), repr(adapter)):
        assert SECRET not in text


# --- construction and lifecycle -----------------------------------------------------------


async def test_closed_adapter_refuses_to_stream(server: MockOpenAi) -> None:
    adapter = OpenAiAdapter(base_url=server.base_url, transport=server.transport, api_key_env=None)
    await adapter.aclose()
    await adapter.aclose()  # idempotent
    with pytest.raises(trio.ClosedResourceError, match="is closed"):
        adapter.stream(request())


async def test_invalid_timeouts_are_refused() -> None:
    with pytest.raises(ValueError, match="idle_timeout"):
        OpenAiAdapter(idle_timeout=0)


async def test_from_config_builds_what_the_entry_describes(
    server: MockOpenAi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_OPENAI_KEY", SECRET)
    config = OpenAiProvider.Config(
        name="local",
        base_url=server.base_url,
        api_key_env="TEST_OPENAI_KEY",
        models=("m1", "m2"),
        idle_timeout=12.0,
        headers={"x-team": "blue"},
    )
    adapter = OpenAiAdapter.from_config(config, transport=server.transport)
    server.push(sse_reply("hi"))
    try:
        chunks = await stream(adapter)
    finally:
        await adapter.aclose()
    assert (adapter.name, adapter.base_url, adapter.api_key_env) == (
        "local",
        server.base_url,
        "TEST_OPENAI_KEY",
    )
    assert (adapter.models, adapter.idle_timeout) == (("m1", "m2"), 12.0)
    assert chunks[-1] == Finish("stop")
    assert server.requests[0].headers["x-team"] == "blue"
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"


def test_a_provider_entry_names_its_endpoint_and_its_key() -> None:
    with pytest.raises(TypeError, match="base_url"):
        OpenAiProvider.Config()  # type: ignore[call-arg]
    config = OpenAiProvider.Config(base_url="http://localhost:8000/v1")
    assert config.api_key_env is None  # no key goes anywhere unless the entry says which
    assert OpenAiProvider.Config.type == "openai"
    with pytest.raises(ValueError, match="idle_timeout"):
        OpenAiProvider.Config(base_url="http://localhost:8000/v1", idle_timeout=0)
    with_header = OpenAiProvider.Config(base_url="http://azure.test", headers={"api-key": SECRET})
    assert SECRET not in repr(with_header) and "api-key" in repr(with_header)
