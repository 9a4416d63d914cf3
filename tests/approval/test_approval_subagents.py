"""The sub-agent tools are not asked about (their effects are the child's own calls, which are);
``deny`` still wins over the exemption."""

from __future__ import annotations

import attrs

from trio_agent.approval import ApprovalPolicy
from trio_agent.session import ToolResultEvent
from trio_agent.subagents import SUBAGENT_TOOLS, SubagentDefinition, SubagentService
from trio_agent.testing import open_test_harness, text, tool_call
from trio_agent.tools import ApprovalRequest, Approved, Denied, tool

WORKER = SubagentDefinition("worker", "Does a piece of work.", "Work carefully.")


@attrs.define
class Service:
    asked: list[tuple[str, str | None]] = attrs.Factory(list)

    async def request(self, request: ApprovalRequest) -> Approved | Denied:
        self.asked.append((request.tool, request.agent))
        return Approved()


@tool(name="shell")
async def shell(command: str) -> str:
    """A stand-in shell.

    Args:
        command: Anything.
    """
    return f"ran {command}"


def test_the_exemption_names_the_subagent_tools() -> None:
    assert set(ApprovalPolicy.Config().exempt) == set(SUBAGENT_TOOLS)


async def test_a_child_is_spawned_without_asking_and_its_calls_are_asked(
    autojump_clock: object,
) -> None:
    script = [
        tool_call("p1", "subagent", {"task": "list things"}),  # parent spawns the worker
        tool_call("k1", "shell", {"command": "ls"}),  # the child's own call: asked
        text("three things"),  # the child answers
        tool_call("p2", "subagent", {"task": "again"}),  # a second spawn: still not asked
        tool_call("k2", "shell", {"command": "ls"}),
        text("still three"),
        text("done"),  # the parent answers
    ]
    service = Service()
    async with open_test_harness(script, tools=[shell]) as h:
        await h.ctx.plugin(SubagentService, SubagentService.Config(definitions=(WORKER,)))
        await h.ctx.plugin(ApprovalPolicy, ApprovalPolicy.Config(mode="cli"))
        h.ctx.provide("approval", service)
        agent = h.agent("parent")
        agent.send("delegate")
        await agent.wait_idle()
        results = [
            e.payload_as(ToolResultEvent).result
            for e in agent.session.events
            if e.type == "tool/result"
        ]
        asked_in_parent = [e for e in agent.session.events if e.type == "approval/request"]
    assert [tool for tool, _ in service.asked] == ["shell", "shell"]
    assert all(agent_id not in (None, "parent") for _, agent_id in service.asked)
    assert asked_in_parent == []
    assert [r.is_error for r in results] == [False, False]


async def test_deny_still_wins_over_the_exemption(autojump_clock: object) -> None:
    script = [tool_call("p1", "subagent", {"task": "x"}), text("done")]
    service = Service()
    async with open_test_harness(script) as h:
        await h.ctx.plugin(SubagentService, SubagentService.Config(definitions=(WORKER,)))
        await h.ctx.plugin(ApprovalPolicy, ApprovalPolicy.Config(deny=("subagent",)))
        h.ctx.provide("approval", service)
        agent = h.agent("parent")
        agent.send("delegate")
        await agent.wait_idle()
        [result] = [
            e.payload_as(ToolResultEvent).result
            for e in agent.session.events
            if e.type == "tool/result"
        ]
    assert result.is_error and "denied by tools.approval" in result.text
    assert service.asked == []
