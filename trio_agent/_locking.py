"""Taking a ``trio.Lock`` without a schedule point when it is free (package-internal)."""

from __future__ import annotations

from typing import final

import trio

__all__ = ["Held", "held"]


def held(lock: trio.Lock) -> Held:
    """``async with held(lock):`` is ``async with lock`` minus the schedule point trio's
    ``acquire`` makes when the lock is free - for a caller whose body reaches a checkpoint of
    its own (the durability and persistence flushes, #13 / #17). While another task holds the
    lock it waits as ``acquire`` does."""
    return Held(lock)


@final
class Held:
    """What :func:`held` returns."""

    __slots__ = ("_lock",)

    def __init__(self, lock: trio.Lock) -> None:
        self._lock = lock

    async def __aenter__(self) -> None:
        lock = self._lock
        if lock.locked():
            await lock.acquire()
        else:
            lock.acquire_nowait()

    async def __aexit__(self, *exc_info: object) -> None:
        self._lock.release()
