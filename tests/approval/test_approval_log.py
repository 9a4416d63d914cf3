"""Every approval request and decision is in the session log before the tool body ran."""

from __future__ import annotations

import attrs

from trio_agent.approval import ApprovalPolicy
from trio_agent.session import ApprovalDecisionEvent, ApprovalRequestEvent
from trio_agent.testing import open_test_harness, text, tool_call
from trio_agent.tools import ApprovalRequest, Approved, Denied, tool


@attrs.define
class Answers:
    answers: list[Approved | Denied]

    async def request(self, request: ApprovalRequest) -> Approved | Denied:
        return self.answers.pop(0)


async def test_decisions_are_logged_before_the_body(autojump_clock: object) -> None:
    seen: list[list[str]] = []

    @tool(name="shell")
    async def shell(command: str) -> str:
        """A stand-in shell that records the log as it was when the body ran.

        Args:
            command: Anything.
        """
        seen.append([e.type for e in agent.session.events if e.type != "assistant/chunk"])
        return "done"

    script = [
        tool_call("c1", "shell", '{"command": "ls"}'),
        tool_call("c2", "shell", '{"command": "rm"}'),
        text("ok"),
    ]
    async with open_test_harness(script, tools=[shell]) as h:
        await h.ctx.plugin(ApprovalPolicy)
        h.ctx.provide("approval", Answers([Approved(), Denied("not rm")]))
        agent = h.agent()
        agent.send("go")
        await agent.wait_idle()
        events = [e for e in agent.session.events if e.type.startswith(("approval/", "tool/"))]
    assert [e.type for e in events] == [
        "tool/call",
        "approval/request",
        "approval/decision",
        "tool/result",
        "tool/call",
        "approval/request",
        "approval/decision",
        "tool/result",
    ]
    assert len(seen) == 1 and seen[0][-3:] == ["tool/call", "approval/request", "approval/decision"]
    request = events[1].payload
    assert isinstance(request, ApprovalRequestEvent)
    assert (request.call_id, request.tool, request.arguments) == (
        "c1",
        "shell",
        '{"command": "ls"}',
    )
    first, second = events[2].payload, events[6].payload
    assert isinstance(first, ApprovalDecisionEvent) and isinstance(second, ApprovalDecisionEvent)
    assert (first.decision, first.remember, first.by) == ("approved", "once", "Answers")
    assert (second.decision, second.reason, second.remember) == ("denied", "not rm", None)
