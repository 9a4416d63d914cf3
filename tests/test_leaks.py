"""trio_agent.testing.assert_no_leaked_tasks: which tasks it counts, and how it fails."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing

from trio_agent.errors import TrioAgentError
from trio_agent.testing import TaskLeakError, assert_no_leaked_tasks


async def _orphan(release: trio.Event, exited: trio.Event) -> None:
    try:
        await release.wait()
    finally:
        exited.set()


class _Orphans:
    """System tasks a test leaks on purpose, released (and waited for) before the test ends, so
    that the suite's own end-of-test check stays quiet."""

    def __init__(self) -> None:
        self.release = trio.Event()
        self.exited: list[trio.Event] = []

    def spawn(self, name: str) -> None:
        exited = trio.Event()
        self.exited.append(exited)
        trio.lowlevel.spawn_system_task(_orphan, self.release, exited, name=name)

    async def reap(self) -> None:
        self.release.set()
        for exited in self.exited:
            await exited.wait()


@pytest.fixture
async def orphans() -> AsyncIterator[_Orphans]:
    spawned = _Orphans()
    yield spawned
    await spawned.reap()


async def test_tasks_that_end_inside_the_block_are_no_leak() -> None:
    with assert_no_leaked_tasks() as check:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)
            await trio.testing.wait_all_tasks_blocked()
            assert len(check.live) == 1
            nursery.cancel_scope.cancel()
    assert check.live == []


async def test_a_system_task_left_running_fails_the_check(orphans: _Orphans) -> None:
    with pytest.raises(TaskLeakError) as caught, assert_no_leaked_tasks():
        orphans.spawn("orphan")
    assert [task.name for task in caught.value.tasks] == ["orphan"]
    assert "'orphan' (in a nursery of '<init>')" in str(caught.value)
    assert "start it in a nursery the block owns" in str(caught.value)


async def test_a_task_started_into_an_outer_nursery_leaks() -> None:
    async with trio.open_nursery() as outer:
        with pytest.raises(TaskLeakError, match="'escaper'"), assert_no_leaked_tasks():
            outer.start_soon(trio.sleep_forever, name="escaper")
        outer.cancel_scope.cancel()


async def test_tasks_spawned_by_counted_tasks_count_at_any_depth(orphans: _Orphans) -> None:
    async def grandparent() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(parent)

    async def parent() -> None:
        orphans.spawn("grandchild")

    with pytest.raises(TaskLeakError, match="'grandchild'"), assert_no_leaked_tasks():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(grandparent)


async def test_tasks_other_code_starts_into_the_blocks_nurseries_count() -> None:
    async with trio.open_nursery() as outer:
        started: list[trio.Nursery] = []
        inner_open = trio.Event()

        async def stranger() -> None:
            await inner_open.wait()
            started[0].start_soon(trio.sleep_forever, name="joined")

        outer.start_soon(stranger)
        with assert_no_leaked_tasks() as check:
            async with trio.open_nursery() as inner:
                started.append(inner)
                inner_open.set()
                await trio.testing.wait_all_tasks_blocked()
                assert [task.name for task in check.live] == ["joined"]
                inner.cancel_scope.cancel()


async def test_tasks_unrelated_tasks_start_elsewhere_do_not_count() -> None:
    async with trio.open_nursery() as outer:
        go = trio.Event()

        async def bystander() -> None:
            await go.wait()
            outer.start_soon(trio.sleep_forever, name="unrelated")

        outer.start_soon(bystander)
        await trio.testing.wait_all_tasks_blocked()
        with assert_no_leaked_tasks() as check:
            go.set()
            await trio.testing.wait_all_tasks_blocked()
            assert check.live == []
        outer.cancel_scope.cancel()


async def test_the_blocks_own_exception_is_not_hidden(orphans: _Orphans) -> None:
    def leak_and_fail() -> None:
        orphans.spawn("orphan")
        raise KeyError("body")

    with pytest.raises(KeyError, match="body"), assert_no_leaked_tasks():
        leak_and_fail()


def test_the_error_is_an_assertion_in_the_tree() -> None:
    assert issubclass(TaskLeakError, TrioAgentError)
    assert issubclass(TaskLeakError, AssertionError)


def test_outside_a_trio_task_it_refuses() -> None:
    with pytest.raises(RuntimeError), assert_no_leaked_tasks():
        pass  # pragma: no cover
