"""The kit on approvals: a turn waiting on an approval answer, cancelled (or closed) at every
schedule point; the pending question is cancelled with the turn and its call never runs."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from trio_agent.approval import ApprovalPolicy
from trio_agent.runtime import Context, Service
from trio_agent.session import (
    ApprovalDecisionEvent,
    ApprovalRequestEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from trio_agent.testing import TestHarness, text, tool_call
from trio_agent.testing.stress import RunRecord, scenario
from trio_agent.tools import (
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    ApprovalRequest,
    Approved,
    Denied,
    tool,
)

RAN: list[str] = []


@tool(name="shell")
async def shell(command: str) -> str:
    """A stand-in shell with effects.

    Args:
        command: Anything.
    """
    RAN.append(command)
    return f"ran {command}"


class SlowApprovals(Service, name="approval"):
    """A person who takes five virtual seconds to say yes to ``ls`` and no to anything else."""

    def __init__(self, ctx: Context, config: None = None) -> None:
        super().__init__(ctx, config)

    async def request(self, request: ApprovalRequest) -> Approved | Denied:
        await trio.sleep(5)
        if '"ls"' in request.arguments:
            return Approved()
        return Denied("only ls")


def pending_questions_are_cancelled(record: RunRecord) -> None:
    """An unanswered question's call ends ABORTED_BEFORE_DISPATCH; a denied body never ran."""
    for session in record.sessions:
        asked = {
            e.payload_as(ApprovalRequestEvent).call_id
            for e in session.events
            if e.type == "approval/request"
        }
        decided = {
            (d.call_id, d.decision)
            for d in (
                e.payload_as(ApprovalDecisionEvent)
                for e in session.events
                if e.type == "approval/decision"
            )
        }
        answered = {call_id for call_id, _ in decided}
        results = {
            r.call_id: r.result
            for r in (
                e.payload_as(ToolResultEvent) for e in session.events if e.type == "tool/result"
            )
        }
        commands = {
            c.call_id: json.loads(c.arguments)["command"]
            for c in (e.payload_as(ToolCallEvent) for e in session.events if e.type == "tool/call")
        }
        for call_id in asked - answered:
            result = results.get(call_id)
            assert result is not None, f"call {call_id} was asked about and never answered"
            # The call's tool/call is logged before the question, so the loop records the
            # cancel as ABORTED (a started call); the body never ran either way.
            assert result.code in (ABORTED, ABORTED_BEFORE_DISPATCH), (
                f"call {call_id}: a pending question ended {result.code!r}"
            )
            assert commands[call_id] not in RAN, f"call {call_id} ran without an answer"
        for call_id, decision in decided:
            if decision == "denied":
                result = results.get(call_id)
                assert result is not None and result.is_error
                assert commands[call_id] not in RAN, f"denied call {call_id} ran"


async def ask_twice(h: TestHarness) -> None:
    """The model runs ``ls`` (approved after 5 s) then ``rm`` (denied after 5 s), then answers."""
    RAN.clear()
    agent = h.agent()
    agent.send("look, then clean up")
    await agent.wait_idle()


waiting_on_approval = scenario(
    tools=[shell],
    plugins=[ApprovalPolicy, SlowApprovals],
    checks=[pending_questions_are_cancelled],
    responses=[
        tool_call("c1", "shell", {"command": "ls"}),
        tool_call("c2", "shell", {"command": "rm"}),
        text("done"),
    ],
)(ask_twice)


@pytest.mark.parametrize("action", ["cancel", "close"])
def test_a_pending_approval_survives_cancels(stress: Any, action: str) -> None:
    report = stress.explore(waiting_on_approval, action=action, budget=15)
    assert report.failures == ()


@pytest.mark.slow
@pytest.mark.parametrize("action", ["cancel", "close", "unload"])
def test_a_pending_approval_at_every_point(stress: Any, action: str) -> None:
    report = stress.explore(waiting_on_approval, action=action)
    print(report)
    assert report.failures == () and report.explored == tuple(range(1, report.points + 1))
