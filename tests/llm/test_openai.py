"""OpenAiAdapter against the fake server over real sockets on 127.0.0.1: connection failures,
disconnects, idle timeouts, cancellation and real streaming through the provider plugin. The
wire format (encoding, error mapping, SSE parsing) is tested on httpx.MockTransport in
test_openai_wire.py."""

from __future__ import annotations

import socket
from typing import Any

import pytest
import trio
import trio.testing

from trio_agent.llm import (
    Finish,
    OpenAiAdapter,
    OpenAiProvider,
    RetryPolicy,
    StreamChunk,
    TextDelta,
    Usage,
)
from trio_agent.runtime import Context
from trio_agent.testing import (
    DROP,
    HANG,
    FakeOpenAiServer,
    Pause,
    hang_response,
    open_fake_openai_server,
    sse_comment,
    sse_done,
    sse_finish,
    sse_reply,
    sse_response,
    sse_text,
)

from .helpers import assemble, collect, failure_of, make_request, request, stream


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


# --- connection failures ----------------------------------------------------------------------


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


# --- lifecycle and the provider plugin --------------------------------------------------------


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
