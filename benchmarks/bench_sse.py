"""SSE streaming cost: µs per server-sent event through the OpenAI adapter.

The fake OpenAI server on 127.0.0.1 streams one response of N text-delta events. We time
consuming it (a) as ``StreamChunk`` s straight from :class:`OpenAiAdapter`, and (b) through
``ctx.llm.stream`` (the guarded service layer on top). Floor: the same response read with raw
``httpx`` line iteration (``aiter_lines``), which parses nothing - in the same process and run.
Lower is better; the ratio is the price of SSE parsing, JSON decoding, chunk building and the
safe-channel task hops.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import httpx
import trio

from benchmarks._harness import Metric, print_table
from trio_agent.llm import (
    GenerateRequest,
    LlmCallConfig,
    LlmService,
    Message,
    OpenAiAdapter,
    TextDelta,
)
from trio_agent.runtime import open_runtime
from trio_agent.testing import (
    FakeOpenAiServer,
    SseResponse,
    open_fake_openai_server,
    sse_done,
    sse_finish,
    sse_text,
    sse_usage,
)


def _response(events: int) -> SseResponse:
    body = "".join(sse_text(f"tok{i} ") for i in range(events))
    return SseResponse((body, sse_finish(), sse_usage(100, events), sse_done()))


async def _best(repeats: int, fn: Callable[[], Awaitable[float]]) -> float:
    return min([await fn() for _ in range(repeats)])


async def _measure(server: FakeOpenAiServer, events: int, repeats: int) -> list[Metric]:
    response = _response(events)
    request = GenerateRequest(LlmCallConfig("openai", "bench"), (Message.user("go"),))
    adapter = OpenAiAdapter(base_url=server.base_url, api_key_env=None)
    client: httpx.AsyncClient

    async def raw_lines() -> float:
        server.push(response)
        count = 0
        start = time.perf_counter()
        async with client.stream("POST", f"{server.base_url}/chat/completions", json={}) as r:
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    count += 1
        elapsed = time.perf_counter() - start
        assert count == events + 3, count
        return elapsed

    async def via_adapter() -> float:
        server.push(response)
        deltas = 0
        start = time.perf_counter()
        async with adapter.stream(request) as chunks:
            async for chunk in chunks:
                if type(chunk) is TextDelta:
                    deltas += 1
        elapsed = time.perf_counter() - start
        assert deltas == events, deltas
        return elapsed

    async with open_runtime() as ctx:
        await ctx.plugin(LlmService)
        ctx.llm.register(adapter)

        async def via_service() -> float:
            server.push(response)
            deltas = 0
            start = time.perf_counter()
            async with ctx.llm.stream(request) as chunks:
                async for chunk in chunks:
                    if type(chunk) is TextDelta:
                        deltas += 1
            elapsed = time.perf_counter() - start
            assert deltas == events, deltas
            return elapsed

        async with httpx.AsyncClient() as client:
            floor = await _best(repeats, raw_lines)
        direct = await _best(repeats, via_adapter)
        service = await _best(repeats, via_service)
    await adapter.aclose()

    def per_event(seconds: float) -> float:
        return seconds / events * 1e6

    return [
        Metric(
            f"OpenAiAdapter, {events:,} events",
            per_event(direct),
            "µs/event",
            per_event(floor),
            "floor: raw httpx aiter_lines; lower is better",
        ),
        Metric(
            f"ctx.llm.stream, {events:,} events",
            per_event(service),
            "µs/event",
            per_event(floor),
            "floor: raw httpx aiter_lines; lower is better",
        ),
        Metric(
            "OpenAiAdapter throughput",
            events / direct,
            "chunks/s",
            events / floor,
            "floor: raw lines/s; higher is better",
        ),
    ]


def run(smoke: bool) -> list[Metric]:
    events = 2_000 if smoke else 50_000
    repeats = 2 if smoke else 5
    metrics: list[Metric] = []

    async def main() -> None:
        async with open_fake_openai_server() as server:
            metrics.extend(await _measure(server, events, repeats))

    trio.run(main)
    return metrics


if __name__ == "__main__":
    import sys

    print_table(run(smoke="--smoke" in sys.argv))
