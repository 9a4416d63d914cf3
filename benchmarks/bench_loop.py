"""Agent loop cost: per-step overhead, many concurrent agents, and cancel latency.

1. Harness overhead per step: a scripted zero-latency model that asks for one no-op tool call per
   step, through the whole loop (events, waterfalls, pipeline, log), at 50, 300 and 2,000 steps.
   Floor: a hand-written trio loop doing the same model stream and the same tool body calls,
   appending the same events to a plain in-memory ``list`` (not the library's ``Session``, whose
   speed would otherwise flatter the ratio). Absolute µs are reported next to the ratio. Both
   run on a frozen heap (``gc.freeze`` of what existed before the run; see ``_frozen_heap``).
1a. Garbage collections per 1,000 steps (generations 0 and 1), harness and floor.
1b. Per streamed chunk, end to end: adapter -> ``llm/stream`` guard -> assembler ->
   ``assistant/chunk`` append -> ``agent/stream-chunk``, from one 2,000-chunk answer. Floor: the
   same chunks fed to a ``BlockAssembler`` and appended to a plain list.
1c. Chunk logging alone: ``Session.append`` of one ``assistant/chunk`` payload, and the loop's
   ``Session.append_chunk`` (floor: ``list.append`` of the payload).
1d. Concurrent streaming agents per core: agents streaming at 50 chunks/s; the process's CPU time
   over the wall time of a run with K agents gives how many such agents saturate one core.
2. N agents running one turn each concurrently, model latency ``trio.sleep(0.01)``: wall time
   next to the ideal (one latency), and resident memory per live agent (measured in a fresh
   subprocess); at 10,000 agents also with ``open_harness(gc_threshold=50_000)`` 's setting.
3. Cancel latency: from ``agent.cancel()`` during a stream to ``turn/end`` appended (p50, p99).
"""

from __future__ import annotations

import contextlib
import gc
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import trio
import trio.testing

from benchmarks._harness import Metric, print_table
from trio_agent.agent import AgentOptions
from trio_agent.ids import CallId
from trio_agent.llm import (
    BlockAssembler,
    GenerateRequest,
    Message,
    TextBlock,
    ToolResult,
)
from trio_agent.llm._playback import Playback
from trio_agent.llm._scripted import ScriptedAdapter
from trio_agent.session import (
    AssistantChunk,
    AssistantMessageEvent,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)
from trio_agent.testing import hang, open_test_harness, text, tool_call
from trio_agent.tools import tool


@tool
async def noop() -> str:
    """Do nothing."""
    return "ok"


def _script(steps: int) -> list[Any]:
    return [tool_call(f"c{i}", "noop", "{}") for i in range(steps - 1)] + [text("done")]


@contextlib.contextmanager
def _frozen_heap() -> Iterator[None]:
    """What exists when the block starts kept out of the collector's full passes
    (``gc.freeze``): a 2,000-step row then measures the loop and the collection of what *it*
    allocates, not one full scan of the benchmark process's import-time heap (~67,000 objects,
    ~60 ms) that lands inside the longer runs only. Harness and floor alike."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _on_frozen_heap(run: Callable[[int], Awaitable[float]], steps: int) -> float:
    """``trio.run(run, steps)`` on a frozen heap (see ``_frozen_heap``)."""
    with _frozen_heap():
        return trio.run(run, steps)


def _collections(run: Callable[[int], Awaitable[float]], steps: int) -> tuple[float, float]:
    """Garbage collections (generation 0, generation 1) per 1,000 steps of ``run`` on a frozen
    heap: each young collection stands for ~700 container objects allocated and still alive."""
    with _frozen_heap():
        before = [stats["collections"] for stats in gc.get_stats()]
        trio.run(run, steps)
        after = [stats["collections"] for stats in gc.get_stats()]
    return (after[0] - before[0]) * 1000 / steps, (after[1] - before[1]) * 1000 / steps


def _idle_tool(index: int) -> Any:
    @tool(name=f"idle_{index}")
    async def idle(path: str, pattern: str = "*", limit: int = 10, recursive: bool = False) -> str:
        """A tool the model sees but never calls.

        Args:
            path: Where.
            pattern: What.
            limit: How many.
            recursive: How deep.
        """
        return ""

    return idle


#: How many tools the "many tools" row shows the model (an MCP server or two).
_MANY_TOOLS = 30


async def _harness_steps_many_tools(steps: int) -> float:
    return await _harness_steps(steps, [_idle_tool(i) for i in range(_MANY_TOOLS - 1)])


async def _harness_steps(steps: int, extra_tools: list[Any] | None = None) -> float:
    async with open_test_harness(_script(steps), tools=[noop, *(extra_tools or ())]) as h:
        # The default step budget (50) would end a longer turn early.
        agent = h.agent(options=AgentOptions(max_steps=None))
        start = time.perf_counter()
        agent.send("go")
        await agent.wait_idle()
        elapsed = time.perf_counter() - start
        assert sum(e.type == "step/start" for e in agent.session.events) == steps
    return elapsed / steps


async def _floor_steps(steps: int) -> float:
    """The same work without the harness: the model stream, the tool body, and the same events
    appended to a plain in-memory list (the floor must not depend on ``Session``'s speed)."""
    model = ScriptedAdapter(name="floor", responses=_script(steps))
    body = noop.body
    log: list[tuple[str, object]] = []
    append = log.append
    messages: list[Message] = []
    start = time.perf_counter()
    append((TurnStart.event_type, TurnStart(turn=1)))
    prompt = Message.user("go")
    messages.append(prompt)
    append((UserMessageEvent.event_type, UserMessageEvent(turn=1, message=prompt)))
    for step in range(1, steps + 1):
        append((StepStart.event_type, StepStart(turn=1, step=step)))
        assembler = BlockAssembler()
        # The scripted model ignores the history; a bounded window keeps the floor flat.
        request = GenerateRequest(config=_CONFIG, messages=tuple(messages[-4:]))
        async with model.stream(request) as chunks:
            async for chunk in chunks:
                append((AssistantChunk.event_type, AssistantChunk(turn=1, step=step, chunk=chunk)))
                assembler.feed(chunk)
        message = assembler.message()
        messages.append(message)
        append(
            (
                AssistantMessageEvent.event_type,
                AssistantMessageEvent(turn=1, step=step, message=message, finish="stop"),
            )
        )
        for call in message.tool_calls:
            append(
                (
                    ToolCallEvent.event_type,
                    ToolCallEvent(
                        turn=1, step=step, call_id=call.id, name=call.name, arguments=call.arguments
                    ),
                )
            )
            output = await body({}, None)  # type: ignore[arg-type]
            result = ToolResult(call_id=CallId(call.id), content=(TextBlock(str(output)),))
            messages.append(Message.tool_result(result.call_id, result.content))
            append(
                (
                    ToolResultEvent.event_type,
                    ToolResultEvent(turn=1, step=step, call_id=call.id, result=result),
                )
            )
        append((StepEnd.event_type, StepEnd(turn=1, step=step)))
    append((TurnEnd.event_type, TurnEnd(turn=1, reason="completed")))
    elapsed = time.perf_counter() - start
    return elapsed / steps


_CHUNKS = 2_000


async def _harness_chunks(chunks: int) -> float:
    """Seconds per chunk of one long streamed answer through the whole loop."""
    async with open_test_harness([text(*(["tok "] * chunks))]) as h:
        agent = h.agent()
        heard = [0]

        def on_chunk(payload: object) -> None:
            heard[0] += 1

        agent.ctx.on("agent/stream-chunk", on_chunk)
        start = time.perf_counter()
        agent.send("go")
        await agent.wait_idle()
        elapsed = time.perf_counter() - start
        assert heard[0] >= chunks, heard
    return elapsed / chunks


async def _floor_chunks(chunks: int) -> float:
    model = ScriptedAdapter(name="floor", responses=[text(*(["tok "] * chunks))])
    log: list[tuple[str, object]] = []
    append = log.append
    assembler = BlockAssembler()
    request = GenerateRequest(config=_CONFIG, messages=(Message.user("go"),))
    start = time.perf_counter()
    async with model.stream(request) as stream:
        async for chunk in stream:
            assembler.feed(chunk)
            append((AssistantChunk.event_type, AssistantChunk(turn=1, step=1, chunk=chunk)))
    elapsed = time.perf_counter() - start
    return elapsed / chunks


def _chunk_logging(count: int) -> tuple[float, float, float]:
    """Seconds per ``assistant/chunk`` append: ``Session.append`` of a payload, the loop's
    ``Session.append_chunk``, and a plain list (the same payload objects)."""
    from trio_agent.ids import SessionId
    from trio_agent.llm import TextDelta
    from trio_agent.session import Session, SessionHeader

    chunks = [TextDelta(0, "tok ") for _ in range(count)]
    payloads = [AssistantChunk(turn=1, step=1, chunk=chunk) for chunk in chunks]

    def fresh_session() -> Session:
        session = Session(SessionHeader(session_id=SessionId("bench"), created_at=time.time()))
        session.append(TurnStart.event_type, TurnStart(turn=1))
        session.append(StepStart.event_type, StepStart(turn=1, step=1))
        gc.collect()
        return session

    session = fresh_session()
    start = time.perf_counter()
    for payload in payloads:
        session.append(AssistantChunk.event_type, payload)
    logged = time.perf_counter() - start
    session = fresh_session()
    append_chunk = session.append_chunk
    start = time.perf_counter()
    for chunk in chunks:
        append_chunk(1, 1, chunk)
    direct = time.perf_counter() - start
    log: list[tuple[str, object]] = []
    start = time.perf_counter()
    for payload in payloads:
        log.append((AssistantChunk.event_type, payload))
    floor = time.perf_counter() - start
    return logged / count, direct / count, floor / count


async def _streaming_agents(count: int, chunks: int) -> float:
    """Agents per core streaming at 50 chunks/s: K agents' CPU time over the run's wall time."""
    from trio_agent.agent import AgentOptions

    async with open_test_harness([text(*(["tok "] * chunks))] * count) as h:
        h.model.delay = 0.02
        agents = [h.agent(f"s{i}", AgentOptions()) for i in range(count)]
        cpu = time.process_time()
        start = time.perf_counter()
        for agent in agents:
            agent.send("go")
        for agent in agents:
            await agent.wait_idle()
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu
    return count * wall / max(cpu, 1e-9)


from trio_agent.llm import LlmCallConfig  # noqa: E402

_CONFIG = LlmCallConfig(provider="floor", model="floor")


class _LatencyModel:
    """Answers every request with one short text after ``trio.sleep(latency)``.

    Its stream runs no background task, so it says so (``streams_inline``) as the library's own
    network adapter does: ``ctx.llm`` then reads it in the agent's task, with no pump task. The
    stream is a class handing out the library's own precomputed-chunk channel, so what an agent
    holds while it waits is the harness's, not a memory channel of the benchmark's model.
    """

    streams_inline = True

    def __init__(self, latency: float) -> None:
        self.name = "latency"
        self._latency = latency

    def stream(self, request: GenerateRequest) -> _LatencyStream:
        return _LatencyStream(self._latency)


class _LatencyStream:
    __slots__ = ("_latency",)

    def __init__(self, latency: float) -> None:
        self._latency = latency

    async def __aenter__(self) -> Playback:
        await trio.sleep(self._latency)
        return Playback(text("hi").chunks())

    async def __aexit__(self, *exc_info: object) -> None:
        return None


async def _many_agents(count: int, latency: float) -> dict[str, float]:
    async with open_test_harness() as h:
        h.ctx.llm.register(_LatencyModel(latency))
        from trio_agent.agent import AgentOptions

        baseline = _rss_kib()
        agents = [h.agent(f"a{i}", AgentOptions(provider="latency")) for i in range(count)]
        start = time.perf_counter()
        for agent in agents:
            agent.send("hello")
        for agent in agents:
            await agent.wait_idle()
        wall = time.perf_counter() - start
        live = _rss_kib()  # every agent and its session are still live here
        assert all(any(e.type == "turn/end" for e in agent.session.events) for agent in agents)
    return {"wall": wall, "rss_per_agent_kib": (live - baseline) / count}


def _rss_kib() -> float:
    """The process's resident set now, in KiB (``ru_maxrss``, the peak, where /proc is absent:
    a peak taken as the baseline would hide everything below an earlier high, such as the
    imports')."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
    except OSError:
        return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return pages * resource.getpagesize() / 1024


async def _cancel_latencies(samples: int) -> list[float]:
    latencies: list[float] = []
    async with open_test_harness([hang(partial="streaming")] * samples) as h:
        agent = h.agent()
        for _ in range(samples):
            ended = trio.Event()
            stamp: list[float] = []

            def on_event(event: Any, ended: trio.Event = ended, stamp: list[float] = stamp) -> None:
                if event.event.type == "turn/end" and not stamp:
                    stamp.append(time.perf_counter())
                    ended.set()

            off = agent.ctx.on("session/event", on_event)
            agent.send("go")
            await trio.testing.wait_all_tasks_blocked()
            start = time.perf_counter()
            agent.cancel()
            await ended.wait()
            latencies.append(stamp[0] - start)
            off()
            await agent.wait_idle()
    return latencies


def _child(count: int, gc_threshold: int | None) -> None:
    if gc_threshold is not None:  # what open_harness(gc_threshold=...) does
        gc.set_threshold(gc_threshold, *gc.get_threshold()[1:])
    result = trio.run(_many_agents, count, 0.01)
    print(json.dumps(result))


def _in_subprocess(count: int, gc_threshold: int | None = None) -> dict[str, float]:
    extra = [] if gc_threshold is None else [str(gc_threshold)]
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_loop", "--child", str(count), *extra],
        check=True,
        capture_output=True,
        text=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


#: The generation-0 threshold of the tuned many-agents row (Python's default: 700).
_GC_THRESHOLD = 50_000


def run(smoke: bool) -> list[Metric]:
    metrics: list[Metric] = []
    per_step: dict[int, float] = {}
    for steps in (20,) if smoke else (50, 300, 2_000):
        repeats = 1 if smoke else (5 if steps <= 300 else 2)
        harness = per_step[steps] = min(
            _on_frozen_heap(_harness_steps, steps) for _ in range(repeats)
        )
        floor = min(_on_frozen_heap(_floor_steps, steps) for _ in range(repeats))
        metrics.append(
            Metric(
                f"loop overhead per step, {steps:,} steps (1 no-op tool call)",
                harness * 1e6,
                "µs",
                floor * 1e6,
                "floor: hand-written trio loop, same calls, events into a plain list",
            )
        )
    steps = 20 if smoke else 300
    repeats = 1 if smoke else 5
    many = min(_on_frozen_heap(_harness_steps_many_tools, steps) for _ in range(repeats))
    one = per_step[steps]  # the same loop with one tool, measured above
    metrics.append(
        Metric(
            f"loop overhead per step, {steps:,} steps, {_MANY_TOOLS} tools visible",
            many * 1e6,
            "µs",
            one * 1e6,
            "floor: the same loop with 1 tool visible (the cost of the others' schemas)",
        )
    )
    young, middle = _collections(_harness_steps, steps)
    young_floor, middle_floor = _collections(_floor_steps, steps)
    metrics.append(
        Metric(
            f"GC collections per 1,000 steps, generation 0 ({steps:,} steps)",
            young,
            "collections",
            young_floor,
            f"generation 1: {middle:.0f} (floor {middle_floor:.0f}); floor: the hand-written loop",
        )
    )
    chunks = 200 if smoke else _CHUNKS
    per_chunk = min(trio.run(_harness_chunks, chunks) for _ in range(repeats))
    per_chunk_floor = min(trio.run(_floor_chunks, chunks) for _ in range(repeats))
    metrics.append(
        Metric(
            "per streamed chunk, end to end (adapter→guard→assembler→log→agent/stream-chunk)",
            per_chunk * 1e6,
            "µs",
            per_chunk_floor * 1e6,
            "floor: the adapter's chunks into an assembler and a plain list",
        )
    )
    logged, direct, logged_floor = min(
        _chunk_logging(2_000 if smoke else 50_000) for _ in range(repeats)
    )
    metrics += [
        Metric(
            "chunk logging: Session.append(assistant/chunk)",
            logged * 1e6,
            "µs",
            logged_floor * 1e6,
            "floor: list.append of the same payload",
        ),
        Metric(
            "chunk logging: Session.append_chunk (the loop's path)",
            direct * 1e6,
            "µs",
            logged_floor * 1e6,
            "floor: list.append of the same payload",
        ),
    ]
    per_core = trio.run(_streaming_agents, 20 if smoke else 200, 5 if smoke else 25)
    metrics.append(
        Metric(
            "concurrent streaming agents per core (50 chunks/s each)",
            per_core,
            "agents",
            None,
            "K agents x wall / CPU time; higher is better",
        )
    )
    for count in (50,) if smoke else (1_000, 10_000):
        result = _in_subprocess(count)
        metrics.append(
            Metric(
                f"{count:,} agents, one turn each (10 ms model)",
                result["wall"] * 1e3,
                "ms",
                10.0,
                "floor: the ideal, one model latency",
            )
        )
        metrics.append(
            Metric(f"RSS per live agent ({count:,} agents)", result["rss_per_agent_kib"], "KiB")
        )
        if count >= 10_000:
            tuned = _in_subprocess(count, _GC_THRESHOLD)
            metrics.append(
                Metric(
                    f"{count:,} agents, one turn each, gc_threshold={_GC_THRESHOLD:,}",
                    tuned["wall"] * 1e3,
                    "ms",
                    result["wall"] * 1e3,
                    "open_harness(gc_threshold=...); floor: the same with Python's default",
                )
            )
    samples = sorted(trio.run(_cancel_latencies, 20 if smoke else 300))
    metrics.append(Metric("cancel → turn/end, p50", statistics.median(samples) * 1e6, "µs"))
    metrics.append(
        Metric("cancel → turn/end, p99", samples[int(len(samples) * 0.99) - 1] * 1e6, "µs")
    )
    return metrics


if __name__ == "__main__":
    if "--child" in sys.argv:
        args = sys.argv[sys.argv.index("--child") + 1 :]
        _child(int(args[0]), int(args[1]) if len(args) > 1 else None)
    else:
        print_table(run(smoke="--smoke" in sys.argv))
