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
"""

from __future__ import annotations

import gc
import json
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from benchmarks._harness import Metric, best_of, print_table
from benchmarks._workloads import EVENTS_PER_STEP, append_step, end_turn, start_turn
from trio_agent.persistence import JsonlPersistence, SqlitePersistence
from trio_agent.runtime import Plugin, open_runtime
from trio_agent.session import (
    Session,
    SessionStore,
    project_messages,
)

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


def run(smoke: bool) -> list[Metric]:
    """Write throughput (jsonl, sqlite) and load + derive of a big log; see the docstring."""
    turns, repeats = (20, 1) if smoke else (300, 3)
    size, label = (2_000, "2k") if smoke else (100_000, "100k")
    return _write_metrics(turns, repeats) + _load_metrics(size, label, repeats)


def main() -> None:
    import sys

    print_table(run(smoke="--smoke" in sys.argv))


if __name__ == "__main__":
    main()
