"""The kit on MCP: a turn whose tool call runs on a real MCP server (the SDK's, over stdio:
``mcp_stress_server.py``),
cancelled, closed or the plugin unloaded at every schedule point; no server process outlives
a run, and every call is answered exactly once.

A real subprocess means real I/O: the runs are explored but not exactly replayable (the report
says so), and the kit's autojump waits for the pipes before it moves the clock.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_agent.mcp import McpServers, RestartPolicy, StdioServerConfig
from trio_agent.session import ToolResultEvent
from trio_agent.testing import TestHarness, open_test_harness, text, tool_call
from trio_agent.testing.stress import AgentStateMachine, scenario

SERVER = Path(__file__).with_name("mcp_stress_server.py")
MARKER = f"trio-agent-stress-mcp-{uuid.uuid4().hex}"

CONFIG = McpServers.Config(
    servers=(
        StdioServerConfig(
            name="t",
            command=sys.executable,
            args=(str(SERVER), f"--marker={MARKER}"),
            restart=RestartPolicy(max_attempts=1, backoff=0.05),
        ),
    ),
    startup_timeout=30.0,
)


async def one_mcp_call(h: TestHarness) -> None:
    """One turn: an ``echo`` on the MCP server, then the answer."""
    agent = h.agent()
    agent.send("echo it")
    await agent.wait_idle()


mcp_turn = scenario(
    plugins=[(McpServers, CONFIG)],
    responses=[tool_call("c1", "t__echo", {"text": "hello"}), text("done")],
)(one_mcp_call)


async def test_the_scenario_really_calls_the_server() -> None:
    with trio.fail_after(60):
        async with open_test_harness(mcp_turn.harness.responses) as h:
            await h.ctx.plugin(McpServers, CONFIG)
            agent = h.agent()
            agent.send("echo it")
            await agent.wait_idle()
            results = [
                e.payload_as(ToolResultEvent).result
                for e in agent.session.events
                if e.type == "tool/result"
            ]
            assert [(r.is_error, r.text) for r in results] == [(False, "hello")]


def server_processes() -> list[int]:
    """The pids of this module's MCP servers that are still running."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and MARKER.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue  # it exited while we looked
    return found


@pytest.fixture(autouse=True)
def no_server_outlives_the_test() -> Any:
    yield
    assert server_processes() == []


def test_mcp_scenario_explores_clean(stress: Any) -> None:
    report = stress.explore(mcp_turn, budget=1)
    print(report)
    assert report.failures == () and report.points > 0
    assert not report.replayable  # a subprocess: explored, but not an exact replay


@pytest.mark.parametrize("action", ["cancel", "close", "unload"])
def test_mcp_survives_cancels(stress: Any, action: str) -> None:
    report = stress.explore(mcp_turn, action=action, budget=6)
    assert report.failures == ()


@pytest.mark.slow
@pytest.mark.parametrize("action", ["cancel", "close", "unload"])
def test_mcp_at_every_point(stress: Any, action: str) -> None:
    report = stress.explore(mcp_turn, action=action)
    print(report)
    assert report.failures == () and report.explored == tuple(range(1, report.points + 1))


class McpMachine(AgentStateMachine):
    """Random operations on an agent whose model calls the MCP server's tools (echo, pause,
    fail) with arguments drawn from their schemas."""

    plugins = ((McpServers, CONFIG),)
    # The server's stdout is read for as long as it lives: without this, virtual time (a
    # hanging response, a clock advance) would never move.
    io_quiet = 0.5


def test_mcp_state_machine(stress: Any) -> None:
    stress.run_machine(McpMachine, max_examples=4, steps=10)


@pytest.mark.slow
def test_mcp_state_machine_long(stress: Any) -> None:
    stress.run_machine(McpMachine, max_examples=40, steps=25)
