"""Sub-agent cost: a parent whose one answer delegates to N children, one turn each.

The parent's zero-latency model answers with N ``subagent`` calls in one message; each child
answers one text; the parent then answers. Measured: wall time per child for N = 1, 10, 100
(every child runs in parallel: ``max_parallel = N``), and the memory per child at the largest
N with every child live at once (in a fresh subprocess): RSS growth on its first run, and the
Python heap held (tracemalloc) on a second. Floor: the same N children made directly with ``ctx.agents.create``,
each sent its task, waited for and closed, all at once in a nursery - the child agents' own
work without the tool call, the plan (ids, depth, persistence probe), the prompt section, the
listeners and the notices.
"""

from __future__ import annotations

import contextlib
import gc
import json
import resource
import subprocess
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable
from typing import Any

import trio

from benchmarks._harness import Metric, print_table
from trio_agent.agent import Agent, AgentOptions, AgentRegistry
from trio_agent.llm import GenerateRequest, StreamChunk
from trio_agent.runtime import Context
from trio_agent.subagents import SubagentDefinition, SubagentNotice, SubagentService
from trio_agent.testing import ScriptedResponse, open_test_harness, text, tool_call

WORKER = SubagentDefinition("worker", "Does a piece of work.", "Answer briefly.")


def _model(children: int) -> Any:
    calls = tool_call("c0", "subagent", {"task": "task 0"})
    for n in range(1, children):
        calls = calls + tool_call(f"c{n}", "subagent", {"task": f"task {n}"})

    def respond(request: GenerateRequest) -> ScriptedResponse:
        if "." in (request.session_id or ""):
            return text("child done")
        delegated = any(m.role == "assistant" for m in request.messages)
        return text("parent done") if delegated else calls

    return respond


async def _delegate(children: int) -> float:
    """Wall seconds of one parent turn delegating to ``children`` children."""
    async with open_test_harness(
        [_model(children)] * (children + 2), max_parallel_tool_calls=children
    ) as h:
        await _mount(h.ctx, children)
        parent = h.agent("p")
        start = time.perf_counter()
        parent.send("go")
        await parent.wait_idle()
        wall = time.perf_counter() - start
        results = [e for e in parent.session.events if e.type == "tool/result"]
        assert len(results) == children
        assert all(not e.data["result"]["is_error"] for e in results)
    return wall


async def _mount(ctx: Context, children: int) -> None:
    await ctx.plugin(
        SubagentService, SubagentService.Config(definitions=(WORKER,), max_parallel=children)
    )


def _resident_kib() -> float:
    """The process's current resident set (Linux ``/proc``; else the peak so far)."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
    except OSError:
        return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return pages * resource.getpagesize() / 1024


class _GatedModel:
    """Children's requests wait until every child is live, so all of them are measured at
    once; the parent's are answered at once."""

    name = "gated"

    def __init__(self, children: int, gate: trio.Event) -> None:
        self._respond = _model(children)
        self._gate = gate

    @contextlib.asynccontextmanager
    async def stream(
        self, request: GenerateRequest
    ) -> AsyncIterator[trio.MemoryReceiveChannel[StreamChunk]]:
        if "." in (request.session_id or ""):
            await self._gate.wait()
        chunks = self._respond(request).chunks()
        send, receive = trio.open_memory_channel[StreamChunk](len(chunks))
        async with send:
            for chunk in chunks:
                send.send_nowait(chunk)
        async with receive:
            yield receive


async def _memory_per_child(children: int, measure: Callable[[], float]) -> float:
    """KiB that ``measure`` grows by per child while ``children`` children are live at once."""
    async with open_test_harness(max_parallel_tool_calls=children) as h:
        gate = trio.Event()
        h.ctx.llm.register(_GatedModel(children, gate))
        await _mount(h.ctx, children)
        parent = h.agent("p", AgentOptions(provider="gated"))
        started: list[SubagentNotice] = []
        peak: list[float] = []

        def on_notice(notice: SubagentNotice) -> None:
            if notice.kind == "started":
                started.append(notice)
                if len(started) == children:
                    peak.append(measure())
                    gate.set()

        parent.ctx.on("agent/subagent", on_notice)
        gc.collect()
        before = measure()
        parent.send("go")
        await parent.wait_idle()
    return (peak[0] - before) / children


def _traced_kib() -> float:
    return tracemalloc.get_traced_memory()[0] / 1024


async def _floor(children: int) -> float:
    """The same children as plain agents made with ``ctx.agents.create``."""
    async with open_test_harness([text("child done")] * children) as h:
        parent = h.agent("p")
        agents = h.ctx.require(AgentRegistry)
        start = time.perf_counter()

        async def one(n: int) -> None:
            handle = await agents.create(
                agent_id=f"p.worker-{n}", session_id=f"{parent.session.id}.worker-{n}"
            )
            child: Agent = handle.agent
            async with handle:
                child.send(f"task {n}")
                await child.wait_idle()

        async with trio.open_nursery() as nursery:
            for n in range(children):
                nursery.start_soon(one, n)
        return time.perf_counter() - start


def _best_delegate(repeats: int, children: int) -> float:
    return min(trio.run(_delegate, children) for _ in range(repeats))


def _best_floor(repeats: int, children: int) -> float:
    return min(trio.run(_floor, children) for _ in range(repeats))


def _child(children: int) -> None:
    # RSS on the first run (a warmed-up allocator would reuse freed memory and show nothing),
    # then the Python heap a live child holds, traced on a second run.
    rss = trio.run(_memory_per_child, children, _resident_kib)
    tracemalloc.start()
    heap = trio.run(_memory_per_child, children, _traced_kib)
    print(json.dumps({"rss": rss, "heap": heap}))


def _in_subprocess(children: int) -> dict[str, float]:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from benchmarks.bench_subagents import _child; _child({children})",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run(smoke: bool) -> list[Metric]:
    sizes = (1, 10) if smoke else (1, 10, 100)
    repeats = 1 if smoke else 5
    metrics = []
    for children in sizes:
        wall = _best_delegate(repeats, children)
        floor = _best_floor(repeats, children)
        metrics.append(
            Metric(
                f"parent + {children} children, one turn each: wall per child",
                wall / children * 1e3,
                "ms",
                floor / children * 1e3,
                "floor: the same children made with ctx.agents.create, in parallel",
            )
        )
    largest = sizes[-1]
    memory = _in_subprocess(largest)
    metrics.append(
        Metric(
            f"RSS per child ({largest} children live at once)",
            memory["rss"],
            "KiB",
            note="growth from before the turn to the moment every child is live, fresh process",
        )
    )
    metrics.append(
        Metric(
            f"Python heap per live child ({largest} children)",
            memory["heap"],
            "KiB",
            note="tracemalloc, same moment",
        )
    )
    return metrics


if __name__ == "__main__":
    print_table(run("--smoke" in sys.argv))
