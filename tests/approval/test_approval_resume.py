"""Remembered answers survive a resume: the policy reads them back from the session's log."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from trio_agent.approval import ApprovalPolicy
from trio_agent.persistence import JsonlPersistence
from trio_agent.session import ApprovalDecisionEvent
from trio_agent.testing import open_test_harness, text, tool_call
from trio_agent.tools import ApprovalRequest, Approved, Denied, tool


@attrs.define
class Answers:
    answers: list[Approved | Denied]
    asked: list[str] = attrs.field(factory=list)

    async def request(self, request: ApprovalRequest) -> Approved | Denied:
        self.asked.append(request.tool)
        return self.answers.pop(0)


@tool(name="shell")
async def shell(command: str) -> str:
    """A stand-in shell.

    Args:
        command: Anything.
    """
    return f"ran {command}"


def config(tmp_path: Path) -> JsonlPersistence.Config:
    return JsonlPersistence.Config(path=str(tmp_path / "sessions"))


async def test_a_session_answer_is_remembered_after_resume(
    tmp_path: Path, autojump_clock: object
) -> None:
    first = Answers([Approved(remember="session")])
    script = [tool_call("c1", "shell", '{"command": "ls"}'), text("ok")]
    async with open_test_harness(
        script, tools=[shell], persistence=JsonlPersistence, persistence_config=config(tmp_path)
    ) as h:
        await h.ctx.plugin(ApprovalPolicy)
        h.ctx.provide("approval", first)
        handle = await h.ctx.agents.create(agent_id="a", session_id="s1")
        handle.agent.send("go")
        await handle.agent.wait_idle()
        await handle.aclose()
    assert first.asked == ["shell"]

    # A fresh harness (as another process would): nothing in memory but the log on disk.
    second = Answers([Denied("must not be asked")])
    script = [tool_call("c2", "shell", '{"command": "pwd"}'), text("ok")]
    async with open_test_harness(
        script, tools=[shell], persistence=JsonlPersistence, persistence_config=config(tmp_path)
    ) as h:
        await h.ctx.plugin(ApprovalPolicy)
        h.ctx.provide("approval", second)
        handle = await h.ctx.agents.resume(agent_id="b", resume_session_id="s1")
        since = len(handle.agent.session.events)
        handle.agent.send("again")
        await handle.agent.wait_idle()
        events = handle.agent.session.events[since:]
        await handle.aclose()
    assert second.asked == []
    types = [e.type for e in events]
    assert "approval/request" not in types and "approval/decision" not in types
    results = [e for e in events if e.type == "tool/result"]
    assert len(results) == 1 and "ran pwd" in str(results[0].data)


@pytest.mark.parametrize("answer", [Approved(), Denied("not now")])
async def test_once_and_denied_answers_are_asked_again_after_resume(
    tmp_path: Path, autojump_clock: object, answer: Approved | Denied
) -> None:
    for number, session_answer in enumerate([answer, Approved()]):
        answers = Answers([session_answer])
        script = [tool_call(f"c{number}", "shell", '{"command": "ls"}'), text("ok")]
        async with open_test_harness(
            script, tools=[shell], persistence=JsonlPersistence, persistence_config=config(tmp_path)
        ) as h:
            await h.ctx.plugin(ApprovalPolicy)
            h.ctx.provide("approval", answers)
            if number == 0:
                handle = await h.ctx.agents.create(agent_id="a", session_id="s1")
            else:
                handle = await h.ctx.agents.resume(agent_id="a", resume_session_id="s1")
            handle.agent.send("go")
            await handle.agent.wait_idle()
            decisions = [
                e.payload_as(ApprovalDecisionEvent)
                for e in handle.agent.session.events
                if e.type == "approval/decision"
            ]
            await handle.aclose()
        assert answers.asked == ["shell"]
        assert len(decisions) == number + 1
