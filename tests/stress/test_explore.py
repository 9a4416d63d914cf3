"""explore_cancellation on the project's own loop: every schedule point, every invariant."""

from __future__ import annotations

import pytest
import trio
from stress_scenarios import one_prompt, plugin_tools, slow, two_tools

from trio_agent.testing import TestHarness, text, tool_call, turn_end_reasons
from trio_agent.testing.stress import (
    RunRecord,
    ScenarioError,
    StressFailure,
    explore_cancellation,
    replay,
    scenario,
)
from trio_agent.testing.stress._explore import run_scenario
from trio_agent.tools import tool


@pytest.mark.parametrize("action", ["cancel", "close"])
def test_every_point_of_a_two_tool_turn_keeps_every_invariant(action: str) -> None:
    report = explore_cancellation(two_tools, action=action)  # type: ignore[arg-type]
    print(report)
    assert report.points > 30
    assert report.explored == tuple(range(1, report.points + 1))
    assert report.failures == () and report.violations == ()
    assert report.replayable and report.diverged == 0 and report.notes == ()
    assert report.summary().startswith(
        f"explore_cancellation(two_tools, action={action!r}): {report.points} schedule points, "
        f"{report.points} explored, 0 failing run(s), 0 violation(s)"
    )


def test_the_runs_really_cancel_the_turn_at_different_moments() -> None:
    points = run_scenario(two_tools).points
    outcomes = {
        (
            tuple(turn_end_reasons(r.sessions[0])),
            sum(e.type == "tool/result" for e in r.sessions[0].events),
        )
        for r in (run_scenario(two_tools, action="cancel", point=k) for k in range(1, points + 1))
    }
    # No turn yet, aborted before / between / after the tools, and too late to matter.
    assert ((), 0) in outcomes
    assert {(("aborted",), 0), (("aborted",), 2), (("completed",), 2)} <= outcomes


def test_unloading_the_plugin_that_owns_the_tools_mid_turn() -> None:
    report = explore_cancellation(plugin_tools, action="unload")
    assert report.explored and report.failures == ()


def test_a_budget_caps_the_runs() -> None:
    stride = explore_cancellation(two_tools, budget=5)
    assert len(stride.explored) == 5 and stride.explored[0] == 1
    sampled = explore_cancellation(two_tools, budget=5, sample="random", seed=3)
    assert len(sampled.explored) == 5
    assert (
        sampled.explored
        == explore_cancellation(two_tools, budget=5, sample="random", seed=3).explored
    )
    with pytest.raises(ValueError, match="budget must be at least 1"):
        explore_cancellation(two_tools, budget=0)


def test_replay_runs_one_point_again() -> None:
    record = replay(two_tools, action="cancel", point=10)
    assert isinstance(record, RunRecord)
    assert record.actions[0].point == 10
    assert turn_end_reasons(record.sessions[0]) == ["aborted"]


async def never_ends(h: TestHarness) -> None:
    agent = h.agent()
    agent.send("go")
    await trio.sleep_forever()


def test_a_scenario_that_does_not_end_on_its_own_is_refused() -> None:
    with pytest.raises(ScenarioError, match="did not finish within 600 virtual seconds"):
        explore_cancellation(never_ends)


def test_unload_needs_plugins() -> None:
    with pytest.raises(ScenarioError, match="mounts none"):
        explore_cancellation(two_tools, action="unload")


async def raises_after_the_turn(h: TestHarness) -> None:
    await one_prompt(h)
    raise LookupError("the scenario's own bug")


def test_a_scenario_error_is_a_violation() -> None:
    report = explore_cancellation(raises_after_the_turn, raise_on_failure=False)
    assert report.failures[0].point is None
    assert [v.invariant for v in report.violations] == ["scenario-error"]


def test_a_failure_raises_with_the_replay_snippet() -> None:
    def no_aborts(record: RunRecord) -> None:
        assert "aborted" not in turn_end_reasons(record.sessions[0]), "a turn was aborted"

    checked = scenario(
        checks=[no_aborts],
        tools=[slow],
        responses=[tool_call("c1", "slow", {"seconds": 1}), text("ok")],
    )(one_prompt)
    with pytest.raises(StressFailure) as info:
        explore_cancellation(checked)
    failure = info.value
    assert [v.invariant for v in failure.violations] == ["user:no_aborts"]
    assert "replay(" in failure.snippet and "action='cancel', point=" in failure.snippet
    assert failure.snippet in str(failure)


@tool
async def in_a_thread(seconds: float) -> str:
    """Sleep in a worker thread."""
    await trio.to_thread.run_sync(lambda: None)
    return "done"


threaded = scenario(
    tools=[in_a_thread], responses=[tool_call("c1", "in_a_thread", {"seconds": 0}), text("ok")]
)(one_prompt)


def test_threads_are_explored_but_not_exactly_replayable() -> None:
    report = explore_cancellation(threaded, budget=6)
    assert report.failures == ()
    assert not report.replayable
    assert any("worker threads" in note for note in report.notes)


async def waits_beside_a_live_subprocess(h: TestHarness) -> None:
    """A virtual five-second wait while a subprocess's output is read for as long as it lives
    (what an MCP server over stdio looks like to the clock)."""
    process = await trio.lowlevel.open_process(["cat"], stdin=-1, stdout=-1)
    assert process.stdout is not None and process.stdin is not None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(process.stdout.receive_some)
            await trio.sleep(5)
            nursery.cancel_scope.cancel()
    finally:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


beside_a_subprocess = scenario(io_quiet=0.05)(waits_beside_a_live_subprocess)


def test_io_quiet_lets_the_clock_move_past_a_pending_read() -> None:
    # Without io_quiet this run never ends: the pending read holds the clock (and a hung run's
    # thread and child would outlive the test, so that case is not run here).
    report = explore_cancellation(beside_a_subprocess, budget=2)
    assert report.failures == () and not report.replayable
