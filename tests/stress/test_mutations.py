"""The mutation check: each deliberately broken plugin is found, with a minimal replayable schedule.

Every broken plugin behaves when nothing is cancelled (the run without an action passes), so
what finds it is the cancel at one exact schedule point, and replaying the printed snippet
fails the same way.
"""

from __future__ import annotations

import pytest
from broken_plugins import (
    GlobalNurseryPlugin,
    LeakyAdapterPlugin,
    MisnestingPlugin,
    never_returns,
    swallowing,
)
from stress_scenarios import one_prompt, slow

from trio_agent.agent import AgentOptions
from trio_agent.testing import ScriptItem, TestHarness, text, tool_call
from trio_agent.testing.stress import (
    Scenario,
    StressFailure,
    explore_cancellation,
    replay,
    scenario,
)


def _sleep_call(name: str) -> list[ScriptItem]:
    return [tool_call("c1", name, {"seconds": 5}), text("done")]


swallows_cancelled = scenario(tools=[swallowing], responses=_sleep_call("swallowing"))(one_prompt)
never_returns_on_cancel = scenario(tools=[never_returns], responses=_sleep_call("never_returns"))(
    one_prompt
)
spawns_globally = scenario(
    tools=[slow], plugins=[GlobalNurseryPlugin], responses=_sleep_call("slow")
)(one_prompt)
exits_scope_elsewhere = scenario(
    tools=[slow], plugins=[MisnestingPlugin], responses=_sleep_call("slow")
)(one_prompt)


async def leaky_prompt(h: TestHarness) -> None:
    agent = h.agent(options=AgentOptions(provider="leaky"))
    agent.send("go")
    await agent.wait_idle()


leaves_stream_open = scenario(plugins=[LeakyAdapterPlugin])(leaky_prompt)

MUTANTS = [
    pytest.param(swallows_cancelled, "cancel-swallowed", id="tool-swallows-cancelled"),
    pytest.param(spawns_globally, "no-task-left", id="plugin-spawns-into-global-nursery"),
    pytest.param(
        exits_scope_elsewhere, "cancel-scope-misnesting", id="listener-exits-scope-in-other-task"
    ),
    pytest.param(leaves_stream_open, "stream-left-open", id="adapter-leaves-stream-open"),
    pytest.param(never_returns_on_cancel, "hang", id="tool-never-returns-on-cancel"),
]


@pytest.mark.parametrize(("mutant", "invariant"), MUTANTS)
def test_the_kit_finds_the_broken_plugin(mutant: Scenario, invariant: str) -> None:
    replay(mutant)  # without a cancel the plugin behaves: the run passes

    with pytest.raises(StressFailure) as info:
        explore_cancellation(mutant)
    failure = info.value
    print(failure)  # the minimal schedule, as a replay snippet
    found = {v.invariant for v in failure.violations}
    assert invariant in found, failure
    assert "replay(" in failure.snippet and "point=" in failure.snippet

    point = int(failure.snippet.split("point=")[1].split(",")[0])
    for earlier in range(1, point):  # minimal: no earlier point fails
        replay(mutant, action="cancel", point=earlier)
    with pytest.raises(StressFailure) as again:
        replay(mutant, action="cancel", point=point)
    assert invariant in {v.invariant for v in again.value.violations}
