"""What a child is allowed: its step budget, the global tool pipeline (approvals name the child),
and the progress it reports to its parent."""

from __future__ import annotations

from typing import Any

from trio_agent.llm import TextDelta, Usage
from trio_agent.subagents import SubagentDefinition, SubagentNotice, SubagentRequest
from trio_agent.testing import text, tool_call
from trio_agent.tools import Allow, ApprovalRequest, Approved, Ask, Denied, ToolExecution

from .helpers import (
    Scripts,
    lookup,
    notices,
    open_subagents,
    record_sessions,
    tool_results,
    turn_ends,
)


async def test_the_step_budget_stops_a_child(autojump_clock: object) -> None:
    budget = SubagentDefinition("worker", "d", "i", max_steps=2)
    looping = [
        tool_call(f"l{n}", "lookup", {"key": str(n)}).with_usage(Usage(5, 1)) for n in range(5)
    ]
    scripts: Scripts = {"": [tool_call("c1", "subagent", {"task": "t"}), "ok"], "worker-1": looping}
    async with open_subagents(scripts, definitions=(budget,), tools=[lookup]) as (h, _, router):
        sessions = record_sessions(h)
        seen: list[SubagentNotice] = []
        parent = h.agent("p")
        notices(parent, seen)
        parent.send("go")
        await parent.wait_idle()
        assert len(router.requests["worker-1"]) == 2
        (result,) = tool_results(parent.session)
        assert result.result.code == "TOOL_ERROR"
        assert "stopped after 2 steps (its max_steps) before it finished" in result.result.text
        assert "reason max-steps, tokens in 10 out 2" in result.result.text
        assert (seen[-1].reason, seen[-1].usage) == ("max-steps", Usage(10, 2))
        # The budget is the child's AgentOptions.max_steps: its turn ends max-steps.
        assert turn_ends(sessions[-1]) == ["max-steps"]


async def test_a_childs_tool_calls_go_through_the_global_pipeline_naming_the_child(
    autojump_clock: object,
) -> None:
    asked: list[tuple[str | None, str | None]] = []

    class Approvals:
        async def request(self, request: ApprovalRequest) -> Approved | Denied:
            asked.append((request.agent, request.reason))
            return Approved()

    async def policy(execution: ToolExecution, next: Any) -> object:
        if execution.name == "lookup":
            return Ask("lookups need approval")
        return Allow()

    scripts: Scripts = {
        "": [tool_call("c1", "subagent", {"task": "t"}), "ok"],
        "worker-1": [tool_call("l1", "lookup", {"key": "k"}), "found"],
    }
    async with open_subagents(scripts, tools=[lookup]) as (h, _, _router):
        h.ctx.provide("approval", Approvals())
        h.ctx.on("tools/pre-execute", policy)
        parent = h.agent("p")
        parent.send("go")
        await parent.wait_idle()
        assert asked == [("p.worker-1", "lookups need approval")]
        assert tool_results(parent.session)[0].result.text.startswith("found")


async def test_progress_is_forwarded_only_while_someone_asks(autojump_clock: object) -> None:
    scripts = {"worker-1": [text("one ", "two")], "worker-2": [text("three")]}
    async with open_subagents(scripts) as (h, service, _router):
        parent = h.agent("p")
        seen: list[SubagentNotice] = []
        notices(h.ctx, seen)
        hold = service.forward_progress()
        await service.run(SubagentRequest(parent=parent, task="t"))
        progress = [n for n in seen if n.kind == "progress"]
        assert [n.chunk.text for n in progress if isinstance(n.chunk, TextDelta)] == ["one ", "two"]
        assert {(n.agent, n.child_id) for n in progress} == {(parent, "p.worker-1")}
        hold()
        seen.clear()
        await service.run(SubagentRequest(parent=parent, task="t"))
        assert [n.kind for n in seen] == ["started", "ended"]
