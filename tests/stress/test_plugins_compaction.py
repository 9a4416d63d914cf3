"""The kit on the compaction plugin: a second turn whose first step compacts the first turn
(a summary request to the model) while the turn is cancelled, closed or the plugins unloaded at
every schedule point; and a state machine with compaction mounted.

The kit's scripted model has no context window, so the threshold trigger never fires; a small
plugin calls the public :meth:`Compaction.compact` from ``agent/pre-step`` instead, which is the
same code path (``_run``: lock, summary request, ``compaction/summary`` append) inside the turn.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio

from trio_agent.agent import PreStep
from trio_agent.compaction import Compaction, CompactionError
from trio_agent.runtime import Context
from trio_agent.session import CompactionSummary
from trio_agent.testing import TestHarness, open_test_harness, text
from trio_agent.testing.stress import (
    AgentStateMachine,
    Close,
    Op,
    PluginSpec,
    Send,
    Settle,
    WaitIdle,
    World,
    replay,
    scenario,
)
from trio_agent.usage import UsageService

#: The harness's scripted model writes the summaries (also before any request of the agent).
CONFIG = Compaction.Config(keep_turns=0, provider="scripted", model="scripted-model")


class CompactEachStep:
    """Compacts the agent's closed turns before every step (the summary is a model request)."""

    inject = ("compaction",)

    def __init__(self, ctx: Context, config: Any = None) -> None:
        self._compaction = ctx.require(Compaction)
        ctx.on("agent/pre-step", self._on_pre_step)

    async def _on_pre_step(self, event: PreStep) -> None:
        try:
            await self._compaction.compact(event.agent)
        except CompactionError:
            pass  # reported by the plugin; the step goes on (as the threshold trigger does)


PLUGINS: tuple[PluginSpec, ...] = (UsageService, (Compaction, CONFIG), CompactEachStep)


async def two_turns(h: TestHarness) -> None:
    """Turn 1 answers; turn 2's first step summarises turn 1, then answers."""
    agent = h.agent()
    agent.send("remember the number 42")
    await agent.wait_idle()
    agent.send("which number?")
    await agent.wait_idle()


# Turn 1's answer, the summary of turn 1, turn 2's answer.
summary_turn = scenario(
    plugins=PLUGINS,
    responses=[text("noted"), text("the user said 42"), text("42")],
)(two_turns)


async def test_the_scenario_really_compacts() -> None:
    """Uncancelled, turn 2 logs the summary of turn 1 (so the explored points include it)."""
    with trio.fail_after(30):
        async with open_test_harness(summary_turn.harness.responses) as h:
            await h.ctx.plugin(UsageService)
            await h.ctx.plugin(Compaction, CONFIG)
            await h.ctx.plugin(CompactEachStep)
            agent = h.agent()
            for prompt in ("remember the number 42", "which number?"):
                agent.send(prompt)
                await agent.wait_idle()
            summaries = agent.session.events_of_type(CompactionSummary.event_type)
            assert len(summaries) == 1
            assert summaries[0].payload_as(CompactionSummary).summary.endswith("the user said 42")
            assert agent.session.derive_messages()[-1].text == "42"


def test_compaction_scenario_explores_clean(stress: Any) -> None:
    report = stress.explore(summary_turn, budget=1)
    assert report.failures == () and report.points > 0


@pytest.mark.parametrize("action", ["cancel", "close", "unload"])
def test_compaction_survives_cancels(stress: Any, action: str) -> None:
    report = stress.explore(summary_turn, action=action, budget=12)
    assert report.failures == ()


@pytest.mark.slow
@pytest.mark.parametrize("action", ["cancel", "close", "unload"])
def test_compaction_at_every_point(stress: Any, action: str) -> None:
    report = stress.explore(summary_turn, action=action)
    print(report)
    assert report.failures == () and report.explored == tuple(range(1, report.points + 1))


class CompactionMachine(AgentStateMachine):
    """Every step compacts first, so random cancels land in summary requests too."""

    plugins = PLUGINS


def test_compaction_state_machine(stress: Any) -> None:
    stress.run_machine(CompactionMachine, max_examples=8, steps=15)


@pytest.mark.slow
def test_compaction_state_machine_long(stress: Any) -> None:
    stress.run_machine(CompactionMachine, max_examples=100, steps=30)


@attrs.frozen(repr=False)
class ExpectDisposed(Op):
    """Fails unless the agent is disposed (the ``Close`` before it finished)."""

    async def apply(self, world: World) -> None:
        assert world.agent is not None and world.agent.status == "disposed", world.agent


def test_close_after_an_idle_moment_finishes() -> None:
    # Found by the long machine: the clock driver was woken at the same idle moment as the
    # operation before Close, ran after Close had rescheduled the agent's task, and jumped the
    # clock over it (600 virtual seconds, Close timed out with the agent still idle). The kit now
    # checks that no task is runnable before it moves the clock.
    replay(
        CompactionMachine,
        seed=0,
        ops=[
            Settle(),
            WaitIdle(600.0),
            Send("send-1", slack=1),
            Send("send-2", slack=20),
            Settle(),
            WaitIdle(600.0),
            Settle(),
            Close(),
            ExpectDisposed(),
        ],
    )
