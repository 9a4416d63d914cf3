"""MCP tools: what a call to a real stdio server costs, and how fast a cancel gets through.

1. Round trip of one MCP tool call (``echo`` on the test server over stdio) through the tool
   pipeline, p50. Floor: the same call to an in-process ``@tool``.
2. Cancel latency: from ``agent.cancel()`` while an MCP tool sleeps on the server to
   ``turn/end`` appended (p50, p99). The SDK sends MCP's cancellation notification before the
   call ends ``ABORTED``. Floor: the same cancel of an in-process tool that sleeps.

The server is ``tests/mcp/mcp_server.py`` (the SDK's own ``MCPServer``); without the ``mcp``
extra this module reports nothing.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import trio

from benchmarks._harness import Metric, print_table
from trio_agent.ids import CallId
from trio_agent.testing import open_test_harness, tool_call
from trio_agent.tools import ToolInvocation, tool

SERVER = Path(__file__).resolve().parent.parent / "tests" / "mcp" / "mcp_server.py"


@tool
async def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


def _sleep_tool(started: list[trio.Event]) -> Any:
    @tool
    async def sleep() -> str:
        """Sleep until cancelled."""
        started[0].set()
        await trio.sleep_forever()

    return sleep


async def _mount(ctx: Any) -> None:
    from trio_agent.mcp import McpServers, StdioServerConfig

    server = StdioServerConfig(name="t", command=sys.executable, args=(str(SERVER),))
    await ctx.plugin(McpServers, McpServers.Config(servers=(server,)))


async def _execute(ctx: Any, name: str, arguments: dict[str, Any]) -> Any:
    return await ctx.tools.execute(ToolInvocation(CallId("b"), name, json.dumps(arguments)))


async def _round_trips(samples: int, mcp: bool) -> list[float]:
    async with open_test_harness(tools=(echo,)) as h:
        name = "t__echo" if mcp else "echo"
        if mcp:
            await _mount(h.ctx)
        await _execute(h.ctx, name, {"text": "warm-up"})
        times = []
        for _ in range(samples):
            start = time.perf_counter()
            await _execute(h.ctx, name, {"text": "ping"})
            times.append(time.perf_counter() - start)
        return times


async def _cancel_latencies(samples: int, mcp: bool) -> list[float]:
    started = [trio.Event()]
    name = "t__sleep" if mcp else "sleep"
    script = [tool_call(f"c{i}", name) for i in range(samples)]
    async with open_test_harness(script, tools=(_sleep_tool(started),)) as h:
        if mcp:
            await _mount(h.ctx)
        agent = h.agent()
        latencies: list[float] = []
        for i in range(samples):
            ended = trio.Event()
            stamp: list[float] = []

            def on_event(event: Any, ended: trio.Event = ended, stamp: list[float] = stamp) -> None:
                if event.event.type == "turn/end" and not stamp:
                    stamp.append(time.perf_counter())
                    ended.set()

            off = agent.ctx.on("session/event", on_event)
            started[0] = trio.Event()
            agent.send("sleep")
            if mcp:
                # Returns once the server is inside this turn's call (the last one was cancelled).
                await _execute(h.ctx, "t__wait_cancelled", {"count": i})
                await _execute(h.ctx, "t__wait_sleeping", {})
            else:
                await started[0].wait()
            start = time.perf_counter()
            agent.cancel()
            await ended.wait()
            latencies.append(stamp[0] - start)
            off()
            await agent.wait_idle()
        return latencies


def _p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[max(0, int(len(ordered) * q) - 1)] * 1e6


def run(smoke: bool) -> list[Metric]:
    try:
        import trio_agent.mcp  # noqa: F401
    except ImportError:
        print("# bench_mcp: the mcp extra is not installed; nothing measured", file=sys.stderr)
        return []
    trips = 5 if smoke else 200
    cancels = 3 if smoke else 50
    mcp_trips = trio.run(_round_trips, trips, True)
    local_trips = trio.run(_round_trips, trips, False)
    mcp_cancels = trio.run(_cancel_latencies, cancels, True)
    local_cancels = trio.run(_cancel_latencies, cancels, False)
    return [
        Metric(
            "MCP tool call round trip (stdio), p50",
            statistics.median(mcp_trips) * 1e6,
            "µs",
            statistics.median(local_trips) * 1e6,
            "floor: the same call to an in-process @tool",
        ),
        Metric(
            "cancel during an MCP call → turn/end, p50",
            _p(mcp_cancels, 0.5),
            "µs",
            _p(local_cancels, 0.5),
            "floor: cancelling an in-process tool",
        ),
        Metric(
            "cancel during an MCP call → turn/end, p99",
            _p(mcp_cancels, 0.99),
            "µs",
            _p(local_cancels, 0.99),
            "floor: cancelling an in-process tool",
        ),
    ]


if __name__ == "__main__":
    print_table(run("--smoke" in sys.argv))
