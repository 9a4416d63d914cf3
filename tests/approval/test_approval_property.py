"""Property: whatever the approval answers (allow, deny, remember for the session, or a cancel
while the question is pending), every ``tool/call`` gets exactly one ``tool/result`` and a
denied (or cancelled) call's body never runs; a remembered tool is not asked again."""

from __future__ import annotations

import json
from typing import Any, Literal

import attrs
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_agent.approval import ApprovalPolicy
from trio_agent.loop import ReactLoopAgent
from trio_agent.session import Session, ToolCallEvent, ToolResultEvent
from trio_agent.testing import open_test_harness, text, tool_call
from trio_agent.tools import ApprovalRequest, Approved, Denied, tool

Answer = Literal["allow", "deny", "remember", "cancel"]
TOOLS = ("shell", "write_file")

calls = st.tuples(st.sampled_from(TOOLS), st.sampled_from(["allow", "deny", "remember", "cancel"]))
#: Steps of one or two calls (two: one assistant message with both calls).
steps = st.lists(st.lists(calls, min_size=1, max_size=2), min_size=1, max_size=5)


def make_tool(name: str, ran: list[int]) -> Any:
    @tool(name=name)
    async def body(n: int) -> str:
        """A stand-in with effects that records that it ran.

        Args:
            n: The call's number.
        """
        ran.append(n)
        return f"ran {n}"

    return body


@attrs.define
class Service:
    answers: dict[int, Answer]
    agent: ReactLoopAgent | None = None
    asked: list[int] = attrs.field(factory=list)

    async def request(self, request: ApprovalRequest) -> Approved | Denied:
        n = int(json.loads(request.arguments)["n"])
        self.asked.append(n)
        answer = self.answers[n]
        if answer == "cancel":
            assert self.agent is not None
            self.agent.cancel()
            await trio.sleep_forever()
        if answer == "deny":
            return Denied(f"not {n}")
        return Approved(remember="session" if answer == "remember" else "once")


def expected(plan: list[list[tuple[str, Answer]]]) -> tuple[list[int], list[int]]:
    """(asked, ran) call numbers as the policy's rules say they must be."""
    remembered: set[str] = set()
    asked: list[int] = []
    ran: list[int] = []
    n = 0
    for step in plan:
        stopped = False
        for name, answer in step:
            n += 1
            if stopped:  # the rest of a cancelled step never starts
                continue
            if name in remembered:
                ran.append(n)
                continue
            asked.append(n)
            if answer == "cancel":
                stopped = True
            elif answer != "deny":
                ran.append(n)
                if answer == "remember":
                    remembered.add(name)
    return asked, ran


def check_log(session: Session) -> None:
    called = [e.payload_as(ToolCallEvent).call_id for e in session.events if e.type == "tool/call"]
    results = [
        e.payload_as(ToolResultEvent).call_id for e in session.events if e.type == "tool/result"
    ]
    assert len(called) == len(set(called))  # the plan's ids are unique
    assert sorted(results) == sorted(called)  # one result per call, nothing else


async def run_plan(plan: list[list[tuple[str, Answer]]]) -> None:
    ran: list[int] = []
    answers: dict[int, Answer] = {}
    script: list[Any] = []
    n = 0
    for step in plan:
        response = None
        for name, answer in step:
            n += 1
            answers[n] = answer
            call = tool_call(f"c{n}", name, {"n": n})
            response = call if response is None else response + call
        script.append(response)
    script.append(text("done"))
    service = Service(answers)
    with trio.fail_after(30):
        async with open_test_harness(script, tools=[make_tool(t, ran) for t in TOOLS]) as h:
            await h.ctx.plugin(ApprovalPolicy)
            h.ctx.provide("approval", service)
            agent = h.agent()
            service.agent = agent
            for _ in range(len(plan) + 1):  # a cancelled turn leaves the rest for the next
                if not h.model.responses:
                    break
                agent.send("go on")
                await agent.wait_idle()
            assert not h.model.responses
            check_log(agent.session)
    asked, should_run = expected(plan)
    denied = {n for n, answer in answers.items() if answer in ("deny", "cancel")}
    assert service.asked == asked
    assert ran == should_run
    assert not denied.intersection(n for n in ran if n in asked)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=steps)
async def test_every_call_is_answered_once_and_denied_bodies_never_run(
    plan: list[list[tuple[str, Answer]]],
) -> None:
    await run_plan(plan)


@pytest.mark.slow
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=steps)
async def test_every_call_is_answered_once_at_full_count(
    plan: list[list[tuple[str, Answer]]],
) -> None:
    await run_plan(plan)
