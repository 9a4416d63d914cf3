"""PostgreSQL sessions next to jsonl and sqlite, scale-out over worker processes, and takeover.

Needs a PostgreSQL server: ``make bench`` runs it through ``scripts/with-postgres``, which exports
``TRIO_AGENT_TEST_POSTGRES_DSN`` (without it this module reports nothing and says so). Each run
uses a schema of its own, dropped afterwards. The server runs with its defaults (``fsync`` and
``synchronous_commit`` on), so a flush is durable when it returns.

* **Durable flush per step**: one loop-shaped step (8 events: step/start, three chunks,
  assistant/message, tool/call, tool/result, step/end) appended, then ``ctx.sessions.flush``;
  p50 and p99 of the flush, for jsonl, sqlite and postgres (the session acquired first, so the
  postgres writes are fenced by a held lease). Floor: the plainest durable write of the same
  events in the same process (``write`` + ``fsync``; ``executemany`` + ``COMMIT`` on a
  WAL/``synchronous=FULL`` SQLite database; ``executemany`` + ``COMMIT`` on one psycopg
  connection). A cost: lower is better.
* **Load + derive** of a 100k-event session (``session_persistence.load`` + ``project_messages``)
  for the three backends. Floor: reading the same rows or lines and ``json.loads`` of each.
* **Scale-out**: 4 worker processes × 250 sessions each, one agent turn per session (acquire,
  create, prompt, turn, flush, close; 10 sessions at a time per worker): the wall time from the
  start signal until every worker is done, and the p99 latency of the durable writes.
* **Takeover after SIGKILL**: a worker holds a session; another one tries to acquire it in a
  loop (every millisecond); the holder is SIGKILLed. The latency is from the kill to the
  successful acquire (the server frees the lock when it sees the connection close).
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from benchmarks._harness import Metric, print_table
from benchmarks._workloads import append_step, end_turn, start_turn
from trio_agent.persistence import (
    JsonlPersistence,
    PostgresPersistence,
    SqlitePersistence,
)
from trio_agent.runtime import Plugin, open_runtime
from trio_agent.session import Session, SessionStore, project_messages

__all__ = ["run"]

ENV = "TRIO_AGENT_TEST_POSTGRES_DSN"
ROOT = Path(__file__).resolve().parent.parent
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# --- durable flush per step -------------------------------------------------------------------


def _flush_per_step(plugin: Plugin, config: Any, steps: int) -> tuple[list[float], list[Any]]:
    """Flush latencies of ``steps`` steps, and each step's events as plain JSON."""
    latencies: list[float] = []
    batches: list[list[dict[str, Any]]] = []

    async def main() -> None:
        async with open_runtime() as ctx:
            await ctx.plugin(SessionStore)
            await ctx.plugin(plugin, config)
            sessions = ctx.require(SessionStore)
            await ctx.session_persistence.acquire("bench")
            session = sessions.create("bench")
            start_turn(session, 1)
            await sessions.flush(session)  # the log exists: every measured write appends
            gc.disable()
            try:
                for step in range(1, steps + 1):
                    first = len(session.events)
                    append_step(session, 1, step, call=step)
                    start = time.perf_counter()
                    await sessions.flush(session)
                    latencies.append(time.perf_counter() - start)
                    batches.append([_plain(e) for e in session.events[first:]])
            finally:
                gc.enable()
            end_turn(session, 1)

    trio.run(main)
    return latencies, batches


def _plain(event: Any) -> dict[str, Any]:
    return {"seq": event.seq, "type": event.type, "time": event.time, "data": event.data}


def _floor_jsonl(directory: Path, batches: list[list[dict[str, Any]]]) -> list[float]:
    latencies = []
    fd = os.open(directory / "floor.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for events in batches:
            start = time.perf_counter()
            os.write(fd, "".join(_dumps(e) + "\n" for e in events).encode())
            os.fsync(fd)
            latencies.append(time.perf_counter() - start)
    finally:
        os.close(fd)
    return latencies


def _floor_sqlite(directory: Path, batches: list[list[dict[str, Any]]]) -> list[float]:
    latencies = []
    db = sqlite3.connect(directory / "floor.sqlite3", isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = FULL")
        db.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, type, time, data)")
        for events in batches:
            start = time.perf_counter()
            db.execute("BEGIN")
            db.executemany(
                "INSERT INTO events VALUES (?, ?, ?, ?)",
                [(e["seq"], e["type"], e["time"], _dumps(e["data"])) for e in events],
            )
            db.execute("COMMIT")
            latencies.append(time.perf_counter() - start)
    finally:
        db.close()
    return latencies


def _floor_postgres(dsn: str, batches: list[list[dict[str, Any]]]) -> list[float]:
    import psycopg

    latencies = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE floor_events (seq integer PRIMARY KEY, type text, time float8, data text)"
        )
        for events in batches:
            start = time.perf_counter()
            with conn.transaction(), conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO floor_events VALUES (%s, %s, %s, %s)",
                    [(e["seq"], e["type"], e["time"], _dumps(e["data"])) for e in events],
                )
            latencies.append(time.perf_counter() - start)
    return latencies


def _flush_metrics(dsn: str, steps: int) -> list[Metric]:
    metrics = []
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        for name, plugin, config, floor in (
            (
                "jsonl",
                JsonlPersistence,
                JsonlPersistence.Config(path=str(root / "jsonl")),
                lambda b: _floor_jsonl(root, b),
            ),
            (
                "sqlite",
                SqlitePersistence,
                SqlitePersistence.Config(path=str(root / "s.sqlite3")),
                lambda b: _floor_sqlite(root, b),
            ),
            (
                "postgres",
                PostgresPersistence,
                PostgresPersistence.Config(dsn=dsn),
                lambda b: _floor_postgres(dsn, b),
            ),
        ):
            ours, batches = _flush_per_step(plugin, config, steps)
            plain = floor(batches)
            for label, q in (("p50", 0.5), ("p99", 0.99)):
                metrics.append(
                    Metric(
                        f"{name}: durable flush per step {label}",
                        percentile(ours, q) * 1e3,
                        "ms",
                        floor=percentile(plain, q) * 1e3,
                        note=f"lower is better; {steps} steps of 8 events; floor: the plainest "
                        "durable write of the same events",
                    )
                )
    return metrics


# --- load + derive ----------------------------------------------------------------------------


def _make_log(plugin: Plugin, config: Any, events: int) -> int:
    length = 0

    async def main() -> None:
        nonlocal length
        async with open_runtime() as ctx:
            await ctx.plugin(SessionStore)
            await ctx.plugin(plugin, config)
            await ctx.session_persistence.acquire("big")
            session = ctx.require(SessionStore).create("big")
            turn = 0
            while len(session.events) < events:
                turn += 1
                _write_turn(session, turn)
            await ctx.require(SessionStore).flush(session)
            length = len(session.events)

    trio.run(main)
    return length


def _write_turn(session: Session, turn: int) -> None:
    start_turn(session, turn)
    for step in range(1, 5):
        append_step(session, turn, step, call=turn * 100 + step)
    end_turn(session, turn)


def _load_and_derive(plugin: Plugin, config: Any) -> float:
    elapsed = 0.0

    async def main() -> None:
        nonlocal elapsed
        async with open_runtime() as ctx:
            await ctx.plugin(plugin, config)
            await ctx.session_persistence.list()  # connected: the load alone is timed
            start = time.perf_counter()
            stored = await ctx.session_persistence.load("big")
            history = project_messages(stored.events)
            elapsed = time.perf_counter() - start
            assert history

    trio.run(main)
    return elapsed


def _load_floor(name: str, root: Path, dsn: str) -> float:
    start = time.perf_counter()
    if name == "jsonl":
        with (root / "jsonl" / "big.jsonl").open("rb") as file:
            parsed = [json.loads(line) for line in file]
    elif name == "sqlite":
        db = sqlite3.connect(root / "s.sqlite3")
        try:
            rows = db.execute(
                "SELECT seq, type, time, data FROM events WHERE session_id = 'big' ORDER BY seq"
            ).fetchall()
        finally:
            db.close()
        parsed = [(seq, kind, stamp, json.loads(data)) for seq, kind, stamp, data in rows]
    else:
        import psycopg

        with psycopg.connect(dsn) as conn:
            rows = conn.execute(
                "SELECT seq, type, time, data FROM trio_agent_events WHERE session_id = 'big' "
                "ORDER BY seq"
            ).fetchall()
        parsed = [(seq, kind, stamp, json.loads(data)) for seq, kind, stamp, data in rows]
    elapsed = time.perf_counter() - start
    assert parsed
    return elapsed


def _load_metrics(dsn: str, size: int, label: str, repeats: int) -> list[Metric]:
    metrics = []
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        for name, plugin, config in (
            ("jsonl", JsonlPersistence, JsonlPersistence.Config(path=str(root / "jsonl"))),
            ("sqlite", SqlitePersistence, SqlitePersistence.Config(path=str(root / "s.sqlite3"))),
            ("postgres", PostgresPersistence, PostgresPersistence.Config(dsn=dsn)),
        ):
            length = _make_log(plugin, config, size)
            ours = min(_load_and_derive(plugin, config) for _ in range(repeats))
            floor = min(_load_floor(name, root, dsn) for _ in range(repeats))
            metrics.append(
                Metric(
                    f"{name}: load + derive @{label} events",
                    ours * 1e3,
                    "ms",
                    floor=floor * 1e3,
                    note=f"{length} events; floor: read the rows/lines and json.loads each",
                )
            )
    return metrics


# --- worker processes -------------------------------------------------------------------------


def _worker(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "benchmarks._postgres_worker", *args],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _expect(process: subprocess.Popen[str], word: str) -> str:
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith(word), f"expected {word!r} from a worker, got {line!r}"
    return line.strip()


def _go(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.write("go\n")
    process.stdin.flush()


def _scale_out_metrics(dsn: str, workers: int, sessions: int) -> list[Metric]:
    processes = [_worker("turns", dsn, f"w{k}", str(sessions), "10") for k in range(workers)]
    try:
        for process in processes:
            _expect(process, "ready")
        start = time.perf_counter()
        for process in processes:
            _go(process)
        results = [json.loads(_expect(process, "{")) for process in processes]
        wall = time.perf_counter() - start
    finally:
        for process in processes:
            process.wait(timeout=120)
    flushes = [f for result in results for f in result["flushes"]]
    shape = f"{workers} workers × {sessions} sessions, one turn each"
    return [
        Metric(
            f"postgres: {shape}: wall",
            wall,
            "s",
            note=f"{workers * sessions / wall:,.0f} sessions/s; acquire, create, turn, flush, close",
        ),
        Metric(
            f"postgres: {shape}: p99 flush",
            percentile(flushes, 0.99) * 1e3,
            "ms",
            note=f"{len(flushes)} durable writes; p50 {percentile(flushes, 0.5) * 1e3:.2f} ms",
        ),
    ]


def _takeover_metrics(dsn: str, repeats: int) -> list[Metric]:
    latencies = []
    for n in range(repeats):
        sid = f"takeover-{n}"
        holder = _worker("hold", dsn, sid)
        taker = _worker("take", dsn, sid)
        try:
            _expect(holder, "held")
            _expect(taker, "ready")
            _go(taker)
            killed = time.monotonic()
            holder.send_signal(signal.SIGKILL)
            taken = float(_expect(taker, "taken").split()[1])
            latencies.append(max(0.0, taken - killed))
        finally:
            holder.kill()
            holder.wait(timeout=60)
            taker.wait(timeout=60)
    return [
        Metric(
            "postgres: takeover after SIGKILL (median)",
            statistics.median(latencies) * 1e3,
            "ms",
            note=f"max {max(latencies) * 1e3:.1f} ms over {repeats}; from the kill to the "
            "other worker's acquire",
        )
    ]


def run(smoke: bool) -> list[Metric]:
    """See the module docstring; nothing (with a note on stderr) without a PostgreSQL server."""
    base = os.environ.get(ENV)
    if not base:
        print(
            f"bench_postgres: SKIPPED: no PostgreSQL ({ENV} is not set); run it through "
            "make bench, which starts one",
            file=sys.stderr,
        )
        return []
    import psycopg
    from psycopg.conninfo import make_conninfo

    schema = f"bench_{os.getpid()}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    dsn = make_conninfo(base, options=f"-csearch_path={schema}")
    steps, size, label, repeats = (20, 2_000, "2k", 1) if smoke else (500, 100_000, "100k", 3)
    workers, sessions, takeovers = (2, 10, 1) if smoke else (4, 250, 5)
    try:
        return (
            _flush_metrics(dsn, steps)
            + _load_metrics(dsn, size, label, repeats)
            + _scale_out_metrics(dsn, workers, sessions)
            + _takeover_metrics(dsn, takeovers)
        )
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def main() -> None:
    print_table(run(smoke="--smoke" in sys.argv))


if __name__ == "__main__":
    main()
