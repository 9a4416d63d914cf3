"""trio_agent._threads.run_sync: to_thread.run_sync's semantics for the persistence backends;
run_sync_when_idle: the same, or in the trio thread when nothing else is ready to run."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing

from trio_agent._threads import run_sync, run_sync_when_idle

Runner = Callable[..., Awaitable[Any]]


async def test_returns_the_result_from_another_thread() -> None:
    assert await run_sync(threading.get_ident) != threading.get_ident()
    assert await run_sync(divmod, 7, 2) == (3, 1)


#: Both ways to run a blocking call; what holds for both is tested once for each.
RUNNERS = [run_sync, run_sync_when_idle]


@pytest.mark.parametrize("runner", RUNNERS)
async def test_raises_what_the_function_raised(runner: Runner) -> None:
    def fail() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await runner(fail)


@pytest.mark.parametrize("runner", RUNNERS)
async def test_a_cancelled_caller_does_not_start_the_function(runner: Runner) -> None:
    ran: list[int] = []
    with trio.CancelScope() as scope:
        scope.cancel()
        await runner(ran.append, 1)
    assert scope.cancelled_caught
    assert ran == []


async def test_a_cancel_waits_for_the_running_function_and_keeps_its_result() -> None:
    entered = threading.Event()
    release = threading.Event()
    results: list[str] = []

    def work() -> str:
        entered.set()
        assert release.wait(timeout=30)
        return "done"

    async def call(scope: trio.CancelScope) -> None:
        with scope:
            results.append(await run_sync(work))
            await trio.lowlevel.checkpoint()  # the cancel lands here, after the result
            results.append("not reached")

    scope = trio.CancelScope()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, scope)
            await run_sync_wait(entered)
            scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            assert results == []  # still waiting for its thread despite the cancel
            release.set()
    assert results == ["done"]
    assert scope.cancelled_caught


async def test_the_default_thread_limiter_bounds_the_threads() -> None:
    limiter = trio.to_thread.current_default_thread_limiter()
    saved = limiter.total_tokens
    limiter.total_tokens = 1
    running = 0
    most = 0
    lock = threading.Lock()
    gate = threading.Event()

    def work() -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        assert gate.wait(timeout=30)
        with lock:
            running -= 1

    try:
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(run_sync, work)
                await trio.testing.wait_all_tasks_blocked()
                assert limiter.borrowed_tokens == 1
                assert limiter.statistics().tasks_waiting == 2
                gate.set()
    finally:
        limiter.total_tokens = saved
    assert most == 1
    assert limiter.borrowed_tokens == 0


async def test_when_idle_the_function_runs_in_the_trio_thread_without_yielding() -> None:
    ran_beside: list[str] = []

    async def beside() -> None:
        ran_beside.append("ran")

    async with trio.open_nursery() as nursery:
        await trio.testing.wait_all_tasks_blocked()
        assert await run_sync_when_idle(threading.get_ident) == threading.get_ident()
        # Nothing was ready, so there was no one to yield to; a task started now is ready, so
        # the next call hops to a thread (a schedule point: the task runs meanwhile).
        nursery.start_soon(beside)
        assert await run_sync_when_idle(threading.get_ident) != threading.get_ident()
        assert ran_beside == ["ran"]


async def run_sync_wait(event: threading.Event) -> None:
    """Wait for a threading.Event without blocking the trio thread."""
    assert await trio.to_thread.run_sync(event.wait, 30)
