"""The kit on the project's own plugins: built-in tools, the retry plugin, persistence backends.

Each gets an ``explore_cancellation`` test and a state-machine test. Bigger budgets are behind
the ``slow`` marker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trio_agent.agent import AgentHandle
from trio_agent.llm import RetryPolicy
from trio_agent.lowlevel import Plugin
from trio_agent.persistence import JsonlPersistence, MemoryPersistence, SqlitePersistence
from trio_agent.testing import TestHarness, error, text, tool_call
from trio_agent.testing.stress import AgentStateMachine, Scenario, per_run, scenario
from trio_agent.tools.builtin import BuiltinTools


def workspace(directory: Path) -> dict[str, Any]:
    """A workspace with one file, where ``echo`` may run."""
    (directory / "notes.txt").write_text("first line\nsecond line\n")
    return {"root": str(directory), "shell": ["echo"]}


async def one_prompt(h: TestHarness) -> None:
    agent = h.agent()
    agent.send("go")
    await agent.wait_idle()


# --- built-in tools ---------------------------------------------------------------------------

file_tools = scenario(
    plugins=[(BuiltinTools, per_run(workspace))],
    responses=[
        tool_call("c1", "read_file", {"path": "notes.txt"})
        + tool_call("c2", "write_file", {"path": "out.txt", "content": "written"})
        + tool_call("c3", "list_dir", {"path": "."}),
        text("done"),
    ],
)(one_prompt)

shell_tool = scenario(
    plugins=[(BuiltinTools, per_run(workspace))],
    responses=[tool_call("c1", "shell", {"command": "echo hello"}), text("done")],
)(one_prompt)


@pytest.mark.parametrize("action", ["cancel", "close", "unload"])
def test_builtin_file_tools_survive_every_cancel(stress: Any, action: str) -> None:
    report = stress.explore(file_tools, action=action, budget=15)
    assert report.failures == ()
    assert not report.replayable  # the file tools run in worker threads


def test_builtin_shell_survives_cancels_and_leaves_no_process(stress: Any) -> None:
    report = stress.explore(shell_tool, budget=12)
    assert report.failures == ()


@pytest.mark.slow
@pytest.mark.parametrize("target", [file_tools, shell_tool])
def test_builtin_tools_at_every_point(stress: Any, target: Scenario) -> None:
    assert stress.explore(target).failures == ()


class BuiltinToolsMachine(AgentStateMachine):
    """The model calls the built-in tools with arguments drawn from their schemas."""

    plugins = ((BuiltinTools, per_run(workspace)),)


def test_builtin_tools_state_machine(stress: Any) -> None:
    stress.run_machine(BuiltinToolsMachine, max_examples=8, steps=15)


# --- the retry plugin -------------------------------------------------------------------------

RETRY = RetryPolicy(max_attempts=3, initial_delay=1.0, max_delay=2.0, jitter=0.0)

retried = scenario(
    retry=RETRY,
    responses=[error("SERVER", partial="par"), error("RATE_LIMIT", retry_after=2.0), text("ok")],
)(one_prompt)


@pytest.mark.parametrize("action", ["cancel", "close"])
def test_retry_plugin_survives_every_cancel(stress: Any, action: str) -> None:
    report = stress.explore(retried, action=action)
    assert report.failures == () and report.replayable


class RetryMachine(AgentStateMachine):
    """Failures the retry plugin retries (with backoff in virtual time), and cancels."""

    retry = RETRY


def test_retry_state_machine(stress: Any) -> None:
    stress.run_machine(RetryMachine, max_examples=10, steps=20)


# --- persistence backends ---------------------------------------------------------------------


async def survive_a_restart(h: TestHarness) -> None:
    """A turn, the agent closed, its session resumed from the backend, another turn."""
    agent = h.agent("keeper")
    agent.send("remember this")
    await agent.wait_idle()
    await agent.aclose()
    if not agent.session.events:
        return  # cancelled before the first turn began: nothing was stored, nothing to resume
    handle: AgentHandle = await h.ctx.agents.resume(
        agent_id="keeper", resume_session_id=agent.session.id
    )
    async with handle:
        handle.agent.send("what did I say?")
        await handle.agent.wait_idle()


BACKENDS = [
    pytest.param(MemoryPersistence, None, id="memory"),
    pytest.param(JsonlPersistence, per_run(lambda d: {"path": str(d)}), id="jsonl"),
    pytest.param(SqlitePersistence, per_run(lambda d: {"path": str(d / "s.db")}), id="sqlite"),
]


def restart_scenario(backend: Plugin, config: Any) -> Scenario:
    return scenario(
        persistence=backend,
        persistence_config=config,
        responses=[text("noted"), text("you said: remember this")],
    )(survive_a_restart)


@pytest.mark.parametrize(("backend", "config"), BACKENDS)
@pytest.mark.parametrize("action", ["cancel", "close"])
def test_persistence_survives_every_cancel(
    stress: Any, backend: Plugin, config: Any, action: str
) -> None:
    report = stress.explore(restart_scenario(backend, config), action=action, budget=15)
    assert report.failures == ()


@pytest.mark.slow
@pytest.mark.parametrize(("backend", "config"), BACKENDS)
def test_persistence_at_every_point(stress: Any, backend: Plugin, config: Any) -> None:
    assert stress.explore(restart_scenario(backend, config)).failures == ()


@pytest.mark.parametrize(("backend", "config"), BACKENDS)
def test_persistence_state_machine(stress: Any, backend: Plugin, config: Any) -> None:
    class PersistenceMachine(AgentStateMachine):
        persistence = backend
        persistence_config = config

    stress.run_machine(PersistenceMachine, max_examples=6, steps=15)
