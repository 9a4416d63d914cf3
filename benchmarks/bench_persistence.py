"""Durable sessions: write throughput with a flush per turn, and the cost of loading a big log.

Write: loop-shaped turns (turn/start, user/message, 4 steps of step/start, 3 chunks,
assistant/message with a tool call, tool/call, tool/result, step/end, then turn/end; 35 events)
appended through ``Session.append`` and flushed through ``ctx.sessions.flush`` after every turn,
as the loop does. Floor: the same appends with no persistence mounted, plus the plainest durable
writer in the same process - ``json.dumps`` each event, ``write`` and ``fsync`` once per turn
(JSONL), or ``executemany`` + ``COMMIT`` per turn on a WAL/``synchronous=FULL`` database
(SQLite). Those are throughputs: *higher* is better, so the ratio (ours / floor) is good near 1;
the gap is the write-behind's own cost (the ``session/flush`` dispatch, a worker-thread hop per
flush, opening the file).

Load: ``session_persistence.load`` of a 100k-event JSONL log plus ``project_messages`` (the model
history a resume derives) next to the floor of ``json.loads`` over the same lines, keeping the
parsed objects as any loader must (which makes the garbage collector part of both). A cost:
lower is better.

Durability (issue 13): one agent on the scripted zero-latency model runs a turn of many steps,
each calling one no-op tool with effects, so every step has a write-ahead flush and a step-end
flush. The value is the cost per step with ``durability="step"``, the floor the same turn with
``durability="turn"`` (one flush at the end), both in this run, so the ratio is what durability
by the step costs. Beside it: the p50 and p99 of one step, pooled over the steps of every
repeat (floor: ``"turn"`` with a tool body that makes two plain durable writes itself, the
disk's own share of a step with two durability points, run alternately with it); the same
with every write in a worker thread (``inline_when_idle=False``) against the default, which
writes in the trio thread when nothing else is ready to run; the write-ahead latency (from the
``tools/execute`` dispatch to the body starting, with the flush in between; floor: the
plainest durable write of one event, measured in the same run, so the ratio is what the writer
adds to the disk's own sync); and the syncs per durability point: ``fsync``/``fdatasync`` calls
counted by ``strace`` over a child process running the same turn, divided by the flushes that
wrote (counted by a wrapper around the backend, not by a second ``session/flush`` listener; the
JSONL count includes the two syncs that create the file and its directory entry).
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import trio

from benchmarks._backends import TimedBackend
from benchmarks._harness import Metric, best_of, print_table
from benchmarks._workloads import EVENTS_PER_STEP, append_step, end_turn, start_turn
from trio_agent.agent import AgentOptions
from trio_agent.persistence import (
    JsonlBackend,
    JsonlPersistence,
    PersistenceService,
    SqliteBackend,
    SqlitePersistence,
)
from trio_agent.runtime import Next, Plugin, open_runtime
from trio_agent.session import (
    Session,
    SessionStore,
    project_messages,
)
from trio_agent.testing import open_test_harness, text, tool_call
from trio_agent.tools import ToolCallContext, ToolExecution, tool

__all__ = ["run"]

STEPS_PER_TURN = 4


def write_turn(session: Session) -> None:
    """Append one loop-shaped turn (35 events)."""
    turn = session.last_turn + 1
    start_turn(session, turn)
    for step in range(1, STEPS_PER_TURN + 1):
        append_step(session, turn, step, call=turn * 100 + step)
    end_turn(session, turn)


EVENTS_PER_TURN = 2 + STEPS_PER_TURN * EVENTS_PER_STEP + 1


# --- write throughput ---------------------------------------------------------------------------


def _ours_write(
    plugin: Plugin | None, config: Any, turns: int
) -> tuple[float, list[list[dict[str, Any]]]]:
    """Seconds to append and flush ``turns`` turns (``plugin=None``: append only, no
    persistence); also the turns' events as plain JSON."""
    elapsed = 0.0
    captured: list[list[dict[str, Any]]] = []

    async def main() -> None:
        nonlocal elapsed
        async with open_runtime() as ctx:
            await ctx.plugin(SessionStore)
            if plugin is not None:
                await ctx.plugin(plugin, config)
            session = ctx.sessions.create("bench")
            gc.disable()
            try:
                start = time.perf_counter()
                for _ in range(turns):
                    write_turn(session)
                    if plugin is not None:
                        await ctx.sessions.flush(session)
                elapsed = time.perf_counter() - start
            finally:
                gc.enable()
            events = [
                {"seq": e.seq, "type": e.type, "time": e.time, "data": e.data}
                for e in session.events
            ]
            captured.extend(
                events[i : i + EVENTS_PER_TURN] for i in range(0, len(events), EVENTS_PER_TURN)
            )

    trio.run(main)
    return elapsed, captured


def _floor_jsonl(path: Path, turns: list[list[dict[str, Any]]]) -> float:
    dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for events in turns:
            os.write(fd, "".join([dumps(e) + "\n" for e in events]).encode())
            os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - start


def _floor_sqlite(path: Path, turns: list[list[dict[str, Any]]]) -> float:
    dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = FULL")
        db.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, type, time, data)")
        start = time.perf_counter()
        for events in turns:
            db.execute("BEGIN")
            db.executemany(
                "INSERT INTO events VALUES (?, ?, ?, ?)",
                [(e["seq"], e["type"], e["time"], dumps(e["data"])) for e in events],
            )
            db.execute("COMMIT")
        return time.perf_counter() - start
    finally:
        db.close()


def _write_metrics(turns: int, repeats: int) -> list[Metric]:
    metrics = []
    append_only = best_of(repeats, lambda: _ours_write(None, None, turns)[0])
    for name, plugin, make_config, floor_fn in (
        (
            "jsonl",
            JsonlPersistence,
            lambda d: JsonlPersistence.Config(path=str(d / "s")),
            _floor_jsonl,
        ),
        (
            "sqlite",
            SqlitePersistence,
            lambda d: SqlitePersistence.Config(path=str(d / "s.sqlite3")),
            _floor_sqlite,
        ),
    ):
        captured: list[list[dict[str, Any]]] = []

        def ours(
            plugin: Plugin = plugin,
            make_config: Any = make_config,
            captured: list[list[dict[str, Any]]] = captured,
        ) -> float:
            with tempfile.TemporaryDirectory() as directory:
                seconds, events = _ours_write(plugin, make_config(Path(directory)), turns)
                captured[:] = events
                return seconds

        def floor(
            floor_fn: Any = floor_fn, captured: list[list[dict[str, Any]]] = captured
        ) -> float:
            with tempfile.TemporaryDirectory() as directory:
                return float(floor_fn(Path(directory) / "floor", captured))

        ours_seconds = best_of(repeats, ours)
        floor_seconds = append_only + best_of(repeats, floor)
        events = turns * EVENTS_PER_TURN
        metrics.append(
            Metric(
                f"{name}: append + flush per turn",
                events / ours_seconds,
                "events/s",
                floor=events / floor_seconds,
                note=f"higher is better; {turns} turns of {EVENTS_PER_TURN} events, a durable "
                "flush per turn; floor: appends alone + plain dumps and write/commit per turn",
            )
        )
    return metrics


# --- load ---------------------------------------------------------------------------------------


def _make_log(directory: Path, events: int) -> int:
    """Write a JSONL log of about ``events`` events as session ``big``; return its length."""
    length = 0

    async def main() -> None:
        nonlocal length
        async with open_runtime() as ctx:
            await ctx.plugin(SessionStore)
            await ctx.plugin(JsonlPersistence, JsonlPersistence.Config(path=str(directory)))
            session = ctx.sessions.create("big")
            while len(session.events) < events:
                write_turn(session)
            await ctx.sessions.flush(session)
            length = len(session.events)

    trio.run(main)
    return length


def _load_and_derive(directory: Path) -> float:
    elapsed = 0.0

    async def main() -> None:
        nonlocal elapsed
        async with open_runtime() as ctx:
            await ctx.plugin(JsonlPersistence, JsonlPersistence.Config(path=str(directory)))
            start = time.perf_counter()
            stored = await ctx.session_persistence.load("big")
            history = project_messages(stored.events)
            elapsed = time.perf_counter() - start
            assert history

    trio.run(main)
    return elapsed


def _json_loads_floor(path: Path) -> float:
    start = time.perf_counter()
    with path.open("rb") as file:
        parsed = [json.loads(line) for line in file]
    elapsed = time.perf_counter() - start
    assert parsed
    return elapsed


def _load_metrics(size: int, label: str, repeats: int) -> list[Metric]:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        length = _make_log(root, size)
        ours = best_of(repeats, lambda: _load_and_derive(root))
        floor = best_of(repeats, lambda: _json_loads_floor(root / "big.jsonl"))
    return [
        Metric(
            f"jsonl: load + derive @{label} events",
            ours * 1e3,
            "ms",
            floor=floor * 1e3,
            note=f"{length} events; floor: json.loads over the same lines (results kept)",
        )
    ]


# --- durability by the step ---------------------------------------------------------------------

Backend = Literal["jsonl", "sqlite"]
Durability = Literal["step", "turn"]


def _backend(backend: Backend, directory: Path, inline_when_idle: bool = True) -> TimedBackend:
    """The backend, wrapped to count its writes (the flushes that had work)."""
    if backend == "jsonl":
        return TimedBackend(JsonlBackend(str(directory / "s"), inline_when_idle=inline_when_idle))
    return TimedBackend(
        SqliteBackend(str(directory / "s.sqlite3"), inline_when_idle=inline_when_idle)
    )


class _StepRun:
    """One turn of ``steps`` steps, each calling an effectful no-op tool, and what it took."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.steps: list[float] = []  # the duration of each step
        self.write_ahead: list[float] = []  # tools/execute dispatch -> body start
        self.flushes = 0


def _durable_turn(
    backend: Backend,
    durability: Durability,
    steps: int,
    directory: Path,
    plain_write: Callable[[], None] | None = None,
    inline_when_idle: bool = True,
) -> _StepRun:
    """``plain_write``, when given, is called twice by every tool body: the floor of a durable
    step is a step with ``durability="turn"`` that makes two plain durable writes itself.
    ``inline_when_idle``: the backend's (``False``: every write hops to a worker thread)."""
    run = _StepRun()
    dispatched: dict[str, float] = {}

    @tool
    async def touch(*, call: ToolCallContext) -> str:
        """A no-op with effects (not read-only): its call is written ahead."""
        run.write_ahead.append(time.perf_counter() - dispatched[call.call_id])
        if plain_write is not None:
            plain_write()
            plain_write()
        return "ok"

    async def dispatch(execution: ToolExecution, next: Next) -> Any:
        dispatched[execution.call_id] = time.perf_counter()
        return await next()

    script = [tool_call(f"c{i}", "touch", "{}") for i in range(steps - 1)] + [text("done")]
    storage = _backend(backend, directory, inline_when_idle)

    async def main() -> None:
        async with open_test_harness(
            script,
            tools=[touch],
            persistence=PersistenceService,
            persistence_config=PersistenceService.Config(backend=storage),
        ) as h:
            h.ctx.on("tools/execute", dispatch)
            starts: list[float] = []
            agent = h.agent(options=AgentOptions(durability=durability, max_steps=None))
            agent.ctx.on("agent/step-start", lambda _: starts.append(time.perf_counter()))
            begin = time.perf_counter()
            agent.send("go")
            await agent.wait_idle()
            run.seconds = time.perf_counter() - begin
            run.steps = [b - a for a, b in itertools.pairwise(starts)]

    trio.run(main)
    run.flushes = len(storage.writes)
    return run


def _syncs(backend: Backend, steps: int) -> tuple[int, int] | None:
    """``(syncs, flushes)`` of one durable turn, counted by strace in a child (None without
    strace)."""
    strace = shutil.which("strace")
    if strace is None:
        return None
    with tempfile.TemporaryDirectory() as directory:
        summary = Path(directory) / "strace.txt"
        child = subprocess.run(
            [
                strace,
                "-f",
                "-c",
                "-e",
                "trace=fsync,fdatasync",
                "-o",
                str(summary),
                sys.executable,
                "-m",
                "benchmarks.bench_persistence",
                "--durable-turn",
                backend,
                str(steps),
                directory,
            ],
            cwd=Path(__file__).parent.parent,
            capture_output=True,
            text=True,
            check=False,
        )
        if child.returncode != 0:
            return None
        flushes = int(child.stdout.split()[-1])
        found = re.findall(
            r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(fsync|fdatasync)$",
            summary.read_text(),
            re.MULTILINE,
        )
        return sum(int(calls) for calls, _ in found), flushes


@contextlib.contextmanager
def _plain_writer(backend: Backend, directory: Path) -> Iterator[Callable[[], None]]:
    """A function making the plainest durable write of one small event, inline: a line
    appended and fsynced (JSONL), a row inserted and committed with WAL and
    ``synchronous=FULL`` (SQLite)."""
    line = json.dumps({"seq": 0, "type": "tool/call", "time": 0.0, "data": {"x": "y" * 200}})
    if backend == "jsonl":
        data = (line + "\n").encode()
        fd = os.open(directory / "plain.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

        def append() -> None:
            os.write(fd, data)
            os.fsync(fd)

        try:
            yield append
        finally:
            os.close(fd)
        return
    db = sqlite3.connect(directory / "plain.sqlite3", isolation_level=None)
    seq = itertools.count()

    def commit() -> None:
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO events VALUES (?, ?)", (next(seq), line))
        db.execute("COMMIT")

    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = FULL")
        db.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, data)")
        yield commit
    finally:
        db.close()


def _plain_syncs(backend: Backend, count: int, directory: Path) -> list[float]:
    """Seconds of each of ``count`` plainest durable writes (:func:`_plain_writer`)."""
    out = []
    with _plain_writer(backend, directory) as write:
        for _ in range(count):
            start = time.perf_counter()
            write()
            out.append(time.perf_counter() - start)
    return out


def _percentile(values: list[float], q: int) -> float:
    return (
        statistics.quantiles(values, n=100, method="inclusive")[q - 1]
        if len(values) > 1
        else values[0]
    )


def _durability_metrics(steps: int, repeats: int) -> list[Metric]:
    metrics = []
    backends: tuple[Backend, ...] = ("jsonl", "sqlite")
    for backend in backends:
        # "plain": durability="turn" with two plain durable writes in every tool body, the
        # floor of a durable step's latency; "threaded": "step" with every write in a worker
        # thread (inline_when_idle=False). The modes take turns within each repeat, so a slow
        # phase of the disk falls on all of them alike, and the percentiles pool the steps of
        # every repeat (a p99 of one 300-step run is its third-slowest step).
        runs = {mode: _StepRun() for mode in ("step", "turn", "plain", "threaded")}
        best_seconds = dict.fromkeys(runs, float("inf"))
        for _ in range(repeats):
            for mode, pooled in runs.items():
                gc.collect()
                with (
                    tempfile.TemporaryDirectory() as directory,
                    _plain_writer(backend, Path(directory)) as write,
                ):
                    run = _durable_turn(
                        backend,
                        "turn" if mode in ("turn", "plain") else "step",
                        steps,
                        Path(directory),
                        plain_write=write if mode == "plain" else None,
                        inline_when_idle=mode != "threaded",
                    )
                pooled.steps += run.steps
                pooled.write_ahead += run.write_ahead
                pooled.flushes = run.flushes
                best_seconds[mode] = min(best_seconds[mode], run.seconds)
        step, turn, plain_step, threaded = (runs[m] for m in ("step", "turn", "plain", "threaded"))
        with tempfile.TemporaryDirectory() as directory:
            plain = _plain_syncs(backend, len(step.write_ahead), Path(directory))
        metrics += [
            Metric(
                f"{backend}: loop step, durability step / turn",
                best_seconds["step"] / steps * 1e6,
                "µs",
                floor=best_seconds["turn"] / steps * 1e6,
                note=f"{steps} steps of one effectful tool call; {step.flushes} flushes against "
                f"{turn.flushes}; floor: the same turn with durability='turn'",
            ),
        ]
        for q in (50, 99):
            metrics += [
                Metric(
                    f"{backend}: durable step p{q}",
                    _percentile(step.steps, q) * 1e6,
                    "µs",
                    floor=_percentile(plain_step.steps, q) * 1e6,
                    note="one step (step/start to step/start); floor: durability='turn' with "
                    "two plain durable writes in the tool body (without them: "
                    f"{_percentile(turn.steps, q) * 1e6:,.0f} µs)"
                    + ("; target <= 2 ms" if q == 99 else ""),
                ),
                Metric(
                    f"{backend}: durable step p{q}, writes in a worker thread",
                    _percentile(threaded.steps, q) * 1e6,
                    "µs",
                    floor=_percentile(step.steps, q) * 1e6,
                    note="the same with inline_when_idle=False; floor: the default (a write "
                    "runs in the trio thread when nothing else is ready)",
                ),
                Metric(
                    f"{backend}: write-ahead point p{q}",
                    _percentile(step.write_ahead, q) * 1e6,
                    "µs",
                    floor=_percentile(plain, q) * 1e6,
                    note="tools/execute dispatch -> body start, the flush in between (with "
                    f"durability='turn': {_percentile(turn.write_ahead, q) * 1e6:,.0f} µs); "
                    + (
                        "floor: one line appended and fsynced"
                        if backend == "jsonl"
                        else "floor: one row committed (WAL, synchronous=FULL)"
                    ),
                ),
            ]
        counted = _syncs(backend, steps)
        if counted is None:
            metrics.append(
                Metric(
                    f"{backend}: syncs per durability point",
                    float("nan"),
                    "",
                    note="skipped: no strace",
                )
            )
        else:
            syncs, flushes = counted
            metrics.append(
                Metric(
                    f"{backend}: syncs per durability point",
                    syncs / flushes,
                    "syncs",
                    note=f"{syncs} fsync/fdatasync calls for {flushes} flushes (strace, whole "
                    "process); target <= 1",
                )
            )
    return metrics


def run(smoke: bool) -> list[Metric]:
    """Write throughput (jsonl, sqlite), load + derive of a big log, and the cost of durability
    by the step; see the docstring."""
    turns, repeats = (20, 1) if smoke else (300, 3)
    size, label = (2_000, "2k") if smoke else (100_000, "100k")
    steps = 20 if smoke else 300
    return (
        _write_metrics(turns, repeats)
        + _load_metrics(size, label, repeats)
        + _durability_metrics(steps, repeats)
    )


def main() -> None:
    if sys.argv[1:2] == ["--durable-turn"]:  # the child _syncs counts under strace
        backend, steps, directory = sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
        print(_durable_turn(backend, "step", steps, directory).flushes)  # type: ignore[arg-type]
        return
    print_table(run(smoke="--smoke" in sys.argv))


if __name__ == "__main__":
    main()
