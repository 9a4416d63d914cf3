"""``ctx.agents.wait_for``: the awaitable for "agent X exists"."""

from __future__ import annotations

import trio
import trio.testing

from trio_agent.agent import Agent, AgentRegistry
from trio_agent.testing import open_test_harness


async def test_a_live_agent_is_returned_after_a_checkpoint() -> None:
    async with open_test_harness() as h:
        agent = h.agent("a1")
        registry = h.ctx.require(AgentRegistry)
        with trio.testing.assert_checkpoints():
            assert await registry.wait_for("a1") is agent


async def test_waiters_wake_when_the_agent_is_registered() -> None:
    async with open_test_harness() as h:
        registry = h.ctx.require(AgentRegistry)
        found: list[Agent] = []

        async def waiter() -> None:
            found.append(await registry.wait_for("late"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            nursery.start_soon(waiter)
            h.agent("other")  # another id wakes nobody
            await trio.testing.wait_all_tasks_blocked()
            assert found == []
            agent = h.agent("late")
        assert found == [agent, agent]


async def test_a_cancelled_wait_does_not_disturb_the_next_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_test_harness() as h:
        registry = h.ctx.require(AgentRegistry)
        with trio.move_on_after(1) as waited:
            await registry.wait_for("a1")
        assert waited.cancelled_caught
        found: list[Agent] = []

        async def waiter() -> None:
            found.append(await registry.wait_for("a1"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            agent = h.agent("a1")
        assert found == [agent]


async def test_a_disposed_agent_is_waited_for_again(autojump_clock: trio.testing.MockClock) -> None:
    async with open_test_harness() as h:
        registry = h.ctx.require(AgentRegistry)
        first = h.agent("a1")
        await first.aclose()
        assert registry.get("a1") is None
        with trio.move_on_after(1) as waited:
            await registry.wait_for("a1")
        assert waited.cancelled_caught
