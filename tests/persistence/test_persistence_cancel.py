"""A cancel during a flush: the thread's write completes and is accounted for, never half-done."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from persistence_helpers import BACKENDS, BackendKind, open_store, sid, write_turn

from trio_agent.persistence import _jsonl
from trio_agent.runtime import open_runtime
from trio_agent.session import SessionStore

FILE_BACKENDS = [kind for kind in BACKENDS if kind.name != "memory"]


def plain(events: Any) -> list[Any]:
    return [(e.seq, e.type, e.time, e.data) for e in events]


class Gate:
    """Holds a worker thread inside a write until the test opens the gate."""

    def __init__(self) -> None:
        self.entered = trio.Event()
        self.open = threading.Event()
        self.calls = 0

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def gated(*args: Any) -> Any:
            self.calls += 1
            trio.from_thread.run_sync(self.entered.set)
            assert self.open.wait(timeout=30)
            return fn(*args)

        return gated


def hold_writes(kind: BackendKind, backend: Any, monkeypatch: pytest.MonkeyPatch) -> Gate:
    gate = Gate()
    if kind.name == "jsonl":
        monkeypatch.setattr(_jsonl, "_write_all", gate.wrap(_jsonl._write_all))
    else:
        monkeypatch.setattr(backend, "_write", gate.wrap(backend._write))
    return gate


@pytest.mark.parametrize("kind", FILE_BACKENDS, ids=[k.name for k in FILE_BACKENDS])
async def test_a_cancel_mid_write_waits_for_the_thread_and_keeps_the_books(
    kind: BackendKind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_store(kind, tmp_path) as ctx:
        p = ctx.session_persistence
        session = ctx.sessions.create("s1")
        write_turn(session)
        await ctx.sessions.flush(session)  # the log exists: the next write is an append
        write_turn(session)
        gate = hold_writes(kind, p._backend, monkeypatch)
        finished = trio.Event()

        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def flush() -> None:
                with scope:
                    await ctx.sessions.flush(session)
                finished.set()

            nursery.start_soon(flush)
            await gate.entered.wait()
            scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            assert not finished.is_set()  # the flush waits for its thread despite the cancel
            gate.open.set()
        assert scope.cancel_called
        # Whatever the cancel did to the caller, the write happened and was recorded.
        assert p._tracked["s1"].pending == []
        stored = await p._backend.read(sid("s1"))
        assert plain(stored.events) == plain(session.events)
        calls = gate.calls
        await ctx.sessions.flush(session)
        assert gate.calls == calls  # nothing left to write, nothing written twice


@pytest.mark.parametrize("kind", BACKENDS, ids=[k.name for k in BACKENDS])
async def test_a_cancel_while_waiting_for_the_lock_writes_nothing(
    kind: BackendKind, tmp_path: Path
) -> None:
    async with open_store(kind, tmp_path) as ctx:
        p = ctx.session_persistence
        session = ctx.sessions.create("s1")
        write_turn(session)
        tracked = p._tracked["s1"]
        with trio.CancelScope() as scope:
            async with tracked.lock, trio.open_nursery() as nursery:
                nursery.start_soon(ctx.sessions.flush, session)
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()
        assert scope.cancelled_caught
        assert len(tracked.pending) == len(session.events)
        assert await p._backend.read(sid("s1")) is None
        await ctx.sessions.flush(session)
        assert plain((await p._backend.read(sid("s1"))).events) == plain(session.events)


@pytest.mark.parametrize("kind", FILE_BACKENDS, ids=[k.name for k in FILE_BACKENDS])
async def test_unloading_waits_for_a_final_write_in_flight(
    kind: BackendKind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_runtime() as ctx:
        await ctx.plugin(SessionStore)
        fiber = await ctx.plugin(kind.plugin, kind.config(tmp_path))
        backend = ctx.session_persistence._backend
        session = ctx.sessions.create("s1")
        write_turn(session)
        gate = hold_writes(kind, backend, monkeypatch)
        ctx.sessions.detach(session)  # schedules the final write in the plugin's nursery
        await gate.entered.wait()
        unloaded = trio.Event()

        async def unload() -> None:
            await fiber.dispose()
            unloaded.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(unload)
            await trio.testing.wait_all_tasks_blocked()
            assert not unloaded.is_set()
            gate.open.set()
        expected = plain(session.events)
    async with open_store(kind, tmp_path) as ctx:
        assert plain((await ctx.session_persistence.load("s1")).events) == expected
