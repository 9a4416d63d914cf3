"""trio_agent._locking.held: ``async with lock`` without the schedule point when it is free."""

from __future__ import annotations

import trio
import trio.testing

from trio_agent._locking import held


async def test_a_free_lock_is_taken_without_yielding() -> None:
    lock = trio.Lock()
    ran: list[str] = []

    async def other() -> None:
        ran.append("other")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        async with held(lock):
            assert lock.locked()
            assert ran == []  # no schedule point: the other task has not run
        assert not lock.locked()


async def test_a_held_lock_is_waited_for_and_handed_on() -> None:
    lock = trio.Lock()
    order: list[str] = []

    async def second() -> None:
        async with held(lock):
            order.append("second")

    async with trio.open_nursery() as nursery, held(lock):
        nursery.start_soon(second)
        await trio.testing.wait_all_tasks_blocked()
        order.append("first")
    assert order == ["first", "second"]
    assert not lock.locked()


async def test_a_cancel_while_waiting_leaves_the_lock_to_its_holder() -> None:
    lock = trio.Lock()
    async with held(lock):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:

                async def waiter() -> None:
                    async with held(lock):
                        raise AssertionError("never taken")

                nursery.start_soon(waiter)
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()
        assert lock.locked()
    assert not lock.locked()
