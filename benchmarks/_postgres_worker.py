"""A worker process of ``bench_postgres``: ``python -m benchmarks._postgres_worker MODE DSN ...``.

* ``turns DSN NAME SESSIONS CONCURRENCY``: connect, print ``ready``, wait for a line on stdin,
  then run one agent turn on each of SESSIONS fresh sessions (``NAME-0``, ``NAME-1`` ...; each
  acquired, created, prompted, closed; CONCURRENCY at a time) and print one JSON line:
  ``{"wall": seconds, "flushes": [seconds, ...]}`` (every durable write the backend made).
* ``hold DSN SID``: acquire SID, print ``held``, then wait to be killed.
* ``take DSN SID``: print ``ready``, wait for a line on stdin, then acquire SID, trying every
  millisecond while it is held, and print ``taken MONOTONIC`` (``time.monotonic()`` when it
  succeeded; the parent compares it with the moment it killed the holder).
"""

from __future__ import annotations

import json
import os
import sys
import time

import trio

from benchmarks._backends import TimedBackend
from trio_agent.agent import AgentRegistry
from trio_agent.ids import SessionId
from trio_agent.persistence import (
    PersistenceService,
    PostgresBackend,
    PostgresPersistence,
    SessionBusyError,
)
from trio_agent.testing import open_test_harness, text


def say(line: str) -> None:
    os.write(sys.stdout.fileno(), (line + "\n").encode())


async def wait_for_go() -> None:
    await trio.to_thread.run_sync(sys.stdin.readline)


async def turns(dsn: str, name: str, sessions: int, concurrency: int) -> None:
    backend = TimedBackend(PostgresBackend(dsn))
    flushes = backend.writes
    config = PersistenceService.Config(backend=backend)
    async with open_test_harness(
        [text("done")] * sessions, persistence=PersistenceService, persistence_config=config
    ) as h:
        await h.ctx.require(PersistenceService).list()  # connected, tables checked
        agents = h.ctx.require(AgentRegistry)
        persistence = h.ctx.require(PersistenceService)
        limiter = trio.CapacityLimiter(concurrency)

        async def one(n: int) -> None:
            async with limiter:
                sid = f"{name}-{n}"
                await persistence.acquire(sid)
                handle = await agents.create(agent_id=sid, session_id=sid)
                handle.agent.send("hello")
                await handle.agent.wait_idle()
                await handle.aclose()

        say("ready")
        await wait_for_go()
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for n in range(sessions):
                nursery.start_soon(one, n)
        wall = time.perf_counter() - start
    say(json.dumps({"wall": wall, "flushes": flushes}))


async def hold(dsn: str, sid: str) -> None:
    async with open_test_harness(
        persistence=PostgresPersistence, persistence_config=PostgresPersistence.Config(dsn=dsn)
    ) as h:
        await h.ctx.require(PostgresPersistence).acquire(sid)
        say("held")
        await trio.sleep_forever()


async def take(dsn: str, sid: str) -> None:
    backend = PostgresBackend(dsn)
    try:
        await backend.open()
        say("ready")
        await wait_for_go()
        with trio.fail_after(120):
            while True:
                try:
                    await backend.acquire(SessionId(sid))
                    break
                except SessionBusyError:
                    await trio.sleep(0.001)
        say(f"taken {time.monotonic()!r}")
    finally:
        await backend.aclose()


def main() -> None:
    mode, dsn, *args = sys.argv[1:]
    if mode == "turns":
        trio.run(turns, dsn, args[0], int(args[1]), int(args[2]))
    elif mode == "hold":
        trio.run(hold, dsn, args[0])
    elif mode == "take":
        trio.run(take, dsn, args[0])
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
