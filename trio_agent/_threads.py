"""Running a blocking call in a worker thread, cheaper than ``trio.to_thread.run_sync``
(package-internal).

:func:`run_sync` runs ``fn(*args)`` in a thread of trio's thread cache with the semantics of
``trio.to_thread.run_sync`` as the persistence backends use it: a checkpoint first, bounded by
trio's default thread limiter, and not cancellable once the thread runs (a cancel waits for
``fn`` and lands at the caller's next checkpoint, so a write that happened is never left
unrecorded). :func:`wait_in_thread` is the part under it, for a caller with its own bound and
its own answer to a cancel (the PostgreSQL backend interrupts the running statement).
:func:`run_sync_when_idle` skips the thread when no other task is ready to run: the file
backends' writes (docs/design.md, "A write runs in the trio thread when nothing else is ready").

They leave out what the backends do not use and a durable step pays for twice per step: a
yield to acquire the limiter when a token is free, renaming the worker thread around every
call (two ``prctl`` calls), a copy of the context, and ``trio.from_thread`` support (a function
run here that calls back into trio passes ``trio_token=``). Measured on the 2-core machine of
#13: about 50-90 µs less per durable step at p50 (two flushes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, TypeVarTuple

import outcome
import trio

__all__ = ["run_sync", "run_sync_when_idle", "wait_in_thread"]

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


async def wait_in_thread(call: Callable[[], T], on_cancel: Callable[[], None] | None = None) -> T:
    """``call()`` in a cache thread, the caller parked until it returns; no checkpoint first
    and no limiter. A cancel meanwhile runs ``on_cancel`` (in the trio thread) and waits on:
    the caller always gets ``call``'s outcome, and the cancel lands at its next checkpoint."""
    task = trio.lowlevel.current_task()
    token = trio.lowlevel.current_trio_token()

    def deliver(result: outcome.Outcome[T]) -> None:
        token.run_sync_soon(trio.lowlevel.reschedule, task, result)

    def abort(_: Any) -> trio.lowlevel.Abort:
        if on_cancel is not None:
            on_cancel()
        return trio.lowlevel.Abort.FAILED  # never abandoned: rescheduled with the outcome

    trio.lowlevel.start_thread_soon(call, deliver)
    result: T = await trio.lowlevel.wait_task_rescheduled(abort)
    return result


async def run_sync(fn: Callable[[*Ts], T], *args: *Ts) -> T:
    """``fn(*args)`` in a worker thread, bounded by trio's default thread limiter; see the
    module docs."""
    await trio.lowlevel.checkpoint_if_cancelled()
    limiter = trio.to_thread.current_default_thread_limiter()
    borrower = object()
    try:
        limiter.acquire_on_behalf_of_nowait(borrower)
    except trio.WouldBlock:
        await limiter.acquire_on_behalf_of(borrower)

    def call() -> T:
        return fn(*args)

    try:
        return await wait_in_thread(call)
    finally:
        limiter.release_on_behalf_of(borrower)


async def run_sync_when_idle(fn: Callable[[*Ts], T], *args: *Ts) -> T:
    """``fn(*args)`` in the trio thread itself when no other task is ready to run, else as
    :func:`run_sync`. A cancel point; a schedule point only when it hops (idle, there is no
    one to yield to)."""
    if trio.lowlevel.current_statistics().tasks_runnable:
        return await run_sync(fn, *args)
    await trio.lowlevel.checkpoint_if_cancelled()
    return fn(*args)
