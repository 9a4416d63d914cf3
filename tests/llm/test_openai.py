"""OpenAiAdapter against the fake server over real sockets on 127.0.0.1."""

from __future__ import annotations

import email.utils
import json
import logging
import socket
import time
from typing import Any

import pytest
import trio
import trio.testing

from trio_agent import _serde
from trio_agent.ids import CallId
from trio_agent.llm import (
    BlockAssembler,
    BlockEnd,
    BlockStart,
    Finish,
    GenerateRequest,
    ImageBlock,
    LlmCallConfig,
    LlmFailure,
    Message,
    OpenAiAdapter,
    OpenAiProvider,
    ReasoningBlock,
    ReasoningDelta,
    RetryPolicy,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    ToolSchema,
    Usage,
    UsageChunk,
    http_failure,
)
from trio_agent.runtime import Context
from trio_agent.testing import (
    DROP,
    HANG,
    FakeOpenAiServer,
    Pause,
    completion_chunk,
    error_response,
    hang_response,
    json_response,
    open_fake_openai_server,
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

from .helpers import collect, make_request

SECRET = "sk-test-SECRET-0123456789abcdef"


def request(*messages: Message, **kwargs: Any) -> GenerateRequest:
    config = kwargs.pop("config", LlmCallConfig("openai", "gpt-test"))
    return GenerateRequest(config, messages or (Message.user("hi"),), **kwargs)


async def stream(adapter: OpenAiAdapter, req: GenerateRequest | None = None) -> list[StreamChunk]:
    async with adapter.stream(req or request()) as chunks:
        return [c async for c in chunks]


def assemble(chunks: list[StreamChunk]) -> BlockAssembler:
    a = BlockAssembler()
    a.feed_all(chunks)
    return a


def failure_of(chunks: list[StreamChunk]) -> LlmFailure:
    last = chunks[-1]
    assert isinstance(last, Finish) and last.reason == "error" and last.failure is not None
    assert sum(isinstance(c, Finish) for c in chunks) == 1
    return last.failure


@pytest.fixture
async def server() -> Any:
    async with open_fake_openai_server() as fake:
        yield fake


@pytest.fixture
async def adapter(server: FakeOpenAiServer) -> Any:
    a = OpenAiAdapter(base_url=server.base_url, api_key_env=None, idle_timeout=10.0)
    try:
        yield a
    finally:
        await a.aclose()


# --- happy paths ------------------------------------------------------------------------------


async def test_streamed_text(server: FakeOpenAiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_OPENAI_KEY", SECRET)
    server.push(sse_reply("Hello ", "world"))
    adapter = OpenAiAdapter(base_url=server.base_url, api_key_env="TEST_OPENAI_KEY")
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


async def test_request_body_translation(adapter: OpenAiAdapter, server: FakeOpenAiServer) -> None:
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
        Message("m", "user", (TextBlock("and "), ImageBlock("image/png", "QUJD")), "user"),
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


async def test_reasoning_then_passback(adapter: OpenAiAdapter, server: FakeOpenAiServer) -> None:
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
    adapter: OpenAiAdapter, server: FakeOpenAiServer
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
    adapter: OpenAiAdapter, server: FakeOpenAiServer, deepseek: bool
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
    adapter: OpenAiAdapter, server: FakeOpenAiServer
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


async def test_length_finish_is_max_tokens(
    adapter: OpenAiAdapter, server: FakeOpenAiServer
) -> None:
    server.push(sse_reply("cut o", finish="length"))
    assert (await stream(adapter))[-1] == Finish("max-tokens")


async def test_other_finish_reasons_are_errors(
    adapter: OpenAiAdapter, server: FakeOpenAiServer
) -> None:
    server.push(sse_reply("x", finish="content_filter"))
    failure = failure_of(await stream(adapter))
    assert failure.code == "CONTENT_FILTER" and "content_filter" in failure.message


async def test_completed_stop_without_content_is_empty_response(
    adapter: OpenAiAdapter, server: FakeOpenAiServer
) -> None:
    server.push(sse_reply())
    failure = failure_of(await stream(adapter))
    assert failure.code == "EMPTY_RESPONSE"


async def test_reasoning_only_is_not_empty(
    adapter: OpenAiAdapter, server: FakeOpenAiServer
) -> None:
    server.push(sse_response(sse_reasoning("hmm"), sse_finish(), sse_done()))
    assert (await stream(adapter))[-1] == Finish("stop")


async def test_data_after_done_is_ignored(adapter: OpenAiAdapter, server: FakeOpenAiServer) -> None:
    server.push(sse_response(sse_text("x"), sse_finish(), sse_done(), sse_text("ghost"), "garbage"))
    chunks = await stream(adapter)
    assert assemble(chunks).message().text == "x" and chunks[-1] == Finish("stop")


async def test_comments_and_multiline_data(
    adapter: OpenAiAdapter, server: FakeOpenAiServer
) -> None:
    payload = json.dumps(completion_chunk({"content": "multi"}), indent=1)
    server.push(
        sse_response(
            sse_comment("OPENROUTER PROCESSING"), sse_event(payload), sse_finish(), sse_done()
        )
    )
    assert assemble(await stream(adapter)).message().text == "multi"


# --- failures ---------------------------------------------------------------------------------

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
    server: FakeOpenAiServer,
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


async def test_non_json_error_body(adapter: OpenAiAdapter, server: FakeOpenAiServer) -> None:
    server.push(json_response(b"<html>Bad Gateway</html>", status=502))
    failure = failure_of(await stream(adapter))
    assert failure.code == "SERVER" and failure.message == "openai API error (HTTP 502)"


async def test_retry_after_seconds(adapter: OpenAiAdapter, server: FakeOpenAiServer) -> None:
    server.push(error_response(429, "slow down", headers={"retry-after": "2.5"}))
    assert failure_of(await stream(adapter)).retry_after == 2.5


async def test_retry_after_http_date(adapter: OpenAiAdapter, server: FakeOpenAiServer) -> None:
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


async def test_malformed_json_event(adapter: OpenAiAdapter, server: FakeOpenAiServer) -> None:
    server.push(sse_response(sse_text("ok"), sse_event("{not json"), sse_done()))
    chunks = await stream(adapter)
    failure = failure_of(chunks)
    assert failure.code == "MALFORMED_RESPONSE" and "{not json" in failure.message
    assert TextDelta(0, "ok") in chunks


@pytest.mark.parametrize(
    "payload", ['"a string"', '{"choices": 3}', '{"choices": [{"delta": "x"}]}']
)
async def test_malformed_shapes(
    adapter: OpenAiAdapter, server: FakeOpenAiServer, payload: str
) -> None:
    server.push(sse_response(sse_event(payload), sse_done()))
    assert failure_of(await stream(adapter)).code == "MALFORMED_RESPONSE"


async def test_error_object_in_the_stream(adapter: OpenAiAdapter, server: FakeOpenAiServer) -> None:
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
    adapter: OpenAiAdapter, server: FakeOpenAiServer
) -> None:
    server.push(sse_response(sse_text("par"), sse_finish()))
    chunks = await stream(adapter)
    assert failure_of(chunks).code == "STREAM_CLOSED"
    assert assemble(chunks).interrupted_message().text == "par"  # type: ignore[union-attr]


async def test_connection_dropped_mid_stream_is_transport(
    adapter: OpenAiAdapter, server: FakeOpenAiServer
) -> None:
    server.push(sse_response(sse_text("par"), DROP))
    chunks = await stream(adapter)
    failure = failure_of(chunks)
    assert failure.code == "TRANSPORT" and server.base_url in failure.message


async def test_connect_failure_is_transport() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    adapter = OpenAiAdapter(base_url=f"http://127.0.0.1:{port}/v1", api_key_env=None)
    try:
        failure = failure_of(await stream(adapter))
    finally:
        await adapter.aclose()
    assert failure.code == "TRANSPORT" and f"127.0.0.1:{port}" in failure.message


# --- timeouts and cancellation ----------------------------------------------------------------


async def test_idle_timeout_between_chunks(
    server: FakeOpenAiServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(sse_response(sse_text("par"), HANG))
    adapter = OpenAiAdapter(base_url=server.base_url, api_key_env=None, idle_timeout=5.0)
    try:
        start = trio.current_time()
        chunks = await stream(adapter)
        elapsed = trio.current_time() - start
    finally:
        await adapter.aclose()
    failure = failure_of(chunks)
    assert failure.code == "TIMEOUT" and "5 s" in failure.message
    assert elapsed == pytest.approx(5.0, abs=0.5)
    with trio.fail_after(1):
        await server.requests[0].disconnected.wait()


async def test_idle_timeout_before_headers(
    server: FakeOpenAiServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(hang_response())
    adapter = OpenAiAdapter(base_url=server.base_url, api_key_env=None, idle_timeout=7.0)
    try:
        failure = failure_of(await stream(adapter))
    finally:
        await adapter.aclose()
    assert failure.code == "TIMEOUT"


async def test_comments_rearm_the_idle_timer(
    server: FakeOpenAiServer, autojump_clock: trio.testing.MockClock
) -> None:
    keepalive = [piece for _ in range(5) for piece in (Pause(3.0), sse_comment())]
    server.push(sse_response(sse_text("a"), *keepalive, sse_text("b"), sse_finish(), sse_done()))
    adapter = OpenAiAdapter(base_url=server.base_url, api_key_env=None, idle_timeout=5.0)
    try:
        start = trio.current_time()
        chunks = await stream(adapter)
    finally:
        await adapter.aclose()
    assert chunks[-1] == Finish("stop")
    assert assemble(chunks).message().text == "ab"
    assert trio.current_time() - start >= 15.0


async def test_slow_but_steady_stream_does_not_time_out(
    server: FakeOpenAiServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(
        sse_response(sse_text("a"), Pause(4.0), sse_text("b"), Pause(4.0), sse_finish(), sse_done())
    )
    adapter = OpenAiAdapter(base_url=server.base_url, api_key_env=None, idle_timeout=5.0)
    try:
        assert (await stream(adapter))[-1] == Finish("stop")
    finally:
        await adapter.aclose()


async def test_cancel_mid_stream_closes_the_connection(
    adapter: OpenAiAdapter, server: FakeOpenAiServer
) -> None:
    server.push(sse_response(sse_text("partial"), HANG))
    seen: list[StreamChunk] = []
    with trio.CancelScope() as scope:
        async with adapter.stream(request()) as chunks:
            async for chunk in chunks:
                seen.append(chunk)
                if isinstance(chunk, TextDelta):
                    scope.cancel()
    assert scope.cancelled_caught
    assert not any(isinstance(c, Finish) for c in seen)
    with trio.fail_after(5):
        await server.requests[0].disconnected.wait()


async def test_cancel_through_the_service_closes_the_connection(
    lctx: Context, server: FakeOpenAiServer
) -> None:
    fiber = await lctx.plugin(OpenAiProvider, {"base_url": server.base_url, "api_key_env": None})
    server.push(sse_response(sse_text("partial"), HANG))
    scope = trio.CancelScope()

    async def consume() -> None:
        with scope:
            await collect(lctx, make_request("openai"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        with trio.fail_after(5):
            while not server.requests:
                await trio.testing.wait_all_tasks_blocked()
        await trio.testing.wait_all_tasks_blocked()
        scope.cancel()
    assert scope.cancelled_caught
    with trio.fail_after(5):
        await server.requests[0].disconnected.wait()
    await fiber.dispose()


# --- the API key ------------------------------------------------------------------------------


async def test_api_key_never_leaks(
    server: FakeOpenAiServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("TEST_OPENAI_KEY", SECRET)
    server.push(
        error_response(401, f"Incorrect API key provided: {SECRET}. Find your key at ..."),
        sse_response(sse_event(f"{{bad json {SECRET}"), sse_done()),
        sse_reply("fine"),
    )
    adapter = OpenAiAdapter(
        name="secretive", base_url=server.base_url, api_key_env="TEST_OPENAI_KEY"
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
    server: FakeOpenAiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TEST_MISSING_KEY", raising=False)
    adapter = OpenAiAdapter(base_url=server.base_url, api_key_env="TEST_MISSING_KEY")
    try:
        failure = failure_of(await stream(adapter))
    finally:
        await adapter.aclose()
    assert failure.code == "AUTH" and "TEST_MISSING_KEY" in failure.message
    assert server.requests == []


async def test_unsendable_api_key_is_not_echoed(
    server: FakeOpenAiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-bad key-é")
    adapter = OpenAiAdapter(base_url=server.base_url, api_key_env="TEST_OPENAI_KEY")
    try:
        failure = failure_of(await stream(adapter))
    finally:
        await adapter.aclose()
    assert failure.code == "AUTH" and "bad key" not in failure.message
    assert server.requests == []


# --- lifecycle and the provider plugin --------------------------------------------------------


async def test_closed_adapter_refuses_to_stream(server: FakeOpenAiServer) -> None:
    adapter = OpenAiAdapter(base_url=server.base_url, api_key_env=None)
    await adapter.aclose()
    await adapter.aclose()  # idempotent
    with pytest.raises(trio.ClosedResourceError, match="is closed"):
        adapter.stream(request())


async def test_provider_plugin_registers_and_closes(
    lctx: Context, server: FakeOpenAiServer
) -> None:
    server.push(sse_reply("via plugin"))
    fiber = await lctx.plugin(
        OpenAiProvider,
        {
            "name": "local",
            "base_url": server.base_url,
            "api_key_env": None,
            "models": ["m1"],
            "retry": {"max_attempts": 2},
        },
    )
    adapter = lctx.llm.get("local")
    assert isinstance(adapter, OpenAiAdapter) and adapter.models == ("m1",)
    assert lctx.llm.retry_policy("local") == RetryPolicy(max_attempts=2)
    result = await lctx.llm.generate(make_request("local"))
    assert result.message.text == "via plugin" and result.usage == Usage(10, 5)
    await fiber.dispose()
    assert lctx.llm.names() == ()
    with pytest.raises(trio.ClosedResourceError):
        adapter.stream(request())


async def test_invalid_timeouts_are_refused() -> None:
    with pytest.raises(ValueError, match="idle_timeout"):
        OpenAiAdapter(idle_timeout=0)
