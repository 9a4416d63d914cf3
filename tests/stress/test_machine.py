"""AgentStateMachine on the project's own loop, with a plugin rule, a broken tool, duplicate ids."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
from broken_plugins import swallowing
from hypothesis import Phase
from hypothesis.stateful import precondition, rule
from stress_scenarios import ToolsPlugin, one_prompt

from trio_agent.testing import text, tool_call, turn_end_reasons
from trio_agent.testing.stress import (
    AgentStateMachine,
    CallTools,
    Cancel,
    Op,
    Respond,
    RunRecord,
    Send,
    StressFailure,
    ToolCallSpec,
    World,
    explore_cancellation,
    replay,
    scenario,
)
from trio_agent.tools import tool


@tool(concurrency_safe=True)
async def echo(value: str) -> str:
    """Echo a value."""
    return value


@tool
async def nap(seconds: float) -> str:
    """Sleep a while (virtual time)."""
    await trio.sleep(max(0.0, min(seconds, 60.0)))
    return "rested"


@tool
async def boom() -> str:
    """Always fails."""
    raise RuntimeError("tool failure")


class LoopMachine(AgentStateMachine):
    """The loop with parallel, slow and failing tools."""

    tools = (echo, nap, boom)


def test_the_loop_keeps_every_invariant(stress: Any) -> None:
    stress.run_machine(LoopMachine, max_examples=15, steps=20)


@pytest.mark.slow
def test_the_loop_keeps_every_invariant_long(stress: Any) -> None:
    stress.run_machine(LoopMachine, max_examples=300, steps=50)


@attrs.frozen(repr=False)
class UnloadPlugins(Op):
    """Unload the machine's plugins (a plugin-specific operation)."""

    async def apply(self, world: World) -> None:
        for fiber in reversed(world.fibers):
            await fiber.dispose()


class UnloadMachine(AgentStateMachine):
    """Tools that a plugin owns, and a rule that unloads the plugin mid-run."""

    plugins = (ToolsPlugin,)

    def __init__(self) -> None:
        super().__init__()
        self.unloaded = False

    @precondition(lambda self: not self.unloaded)
    @rule()
    def unload_plugins(self) -> None:
        self.unloaded = True
        self.execute(UnloadPlugins())


def test_a_plugin_rule_unloads_the_plugin_mid_run(stress: Any) -> None:
    stress.run_machine(UnloadMachine, max_examples=10, steps=20)


class SwallowMachine(AgentStateMachine):
    """A tool that swallows trio.Cancelled (see broken_plugins.py)."""

    tools = (swallowing,)


SWALLOWED = [
    Respond(CallTools((ToolCallSpec("c1", "swallowing", '{"seconds": 5}'),))),
    Send("go", slack=30),
    Cancel(),
]


def test_replay_runs_operations_on_the_machine() -> None:
    with pytest.raises(StressFailure) as info:
        replay(SwallowMachine, ops=SWALLOWED, seed=1)
    assert [v.invariant for v in info.value.violations] == ["cancel-swallowed"]
    assert replay(SwallowMachine, ops=SWALLOWED[:2], seed=1).sessions  # no cancel, no failure


def no_finished_turns(record: RunRecord) -> None:
    for session in record.sessions:
        assert not turn_end_reasons(session), "a turn ended"


class NoTurnEndsMachine(AgentStateMachine):
    """A check of our own that any finished turn breaks, so the search finds a failure in its
    first examples whatever the loop's timing: this test is about the report, not the search
    (the slow test below is about the search). A check that only a cancel landing mid-turn
    breaks was found or not depending on how few schedule points a turn takes."""

    checks = (no_finished_turns,)


def test_a_failing_example_prints_a_snippet_that_replays_it(stress: Any) -> None:
    # Shrinking is left out to keep this fast; the slow test below shows the shrunk form.
    with pytest.raises(StressFailure) as info:
        stress.run_machine(
            NoTurnEndsMachine,
            max_examples=50,
            steps=20,
            phases=[Phase.generate],
            derandomize=True,
            database=None,
        )
    failure = info.value
    assert [v.invariant for v in failure.violations] == ["user:no_finished_turns"]
    assert "from test_machine import NoTurnEndsMachine" in failure.snippet
    with pytest.raises(StressFailure):
        exec(failure.snippet, {})


@pytest.mark.slow
def test_the_machine_finds_the_broken_tool_and_shrinks_it(stress: Any) -> None:
    with pytest.raises(StressFailure) as info:
        stress.run_machine(SwallowMachine, max_examples=1000, steps=20, database=None)
    failure = info.value
    print(failure)
    assert "cancel-swallowed" in {v.invariant for v in failure.violations}
    with pytest.raises(StressFailure):
        exec(failure.snippet, {})


duplicate_ids = scenario(
    tools=[echo],
    responses=[
        tool_call("c1", "echo", {"value": "a"}) + tool_call("c1", "echo", {"value": "b"}),
        text("done"),
    ],
)(one_prompt)


def test_duplicate_ids_get_one_call_and_one_result_each() -> None:
    # The loop rewrites repeated and empty ids (SPEC §12), so every point keeps every invariant.
    report = explore_cancellation(duplicate_ids)
    assert report.failures == ()
    assert report.explored


class DuplicateIdMachine(LoopMachine):
    duplicate_ids = True


def test_the_loop_keeps_every_invariant_with_duplicate_ids(stress: Any) -> None:
    stress.run_machine(
        DuplicateIdMachine, max_examples=50, steps=20, derandomize=True, database=None
    )
