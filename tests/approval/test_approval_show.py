"""``trio-agent sessions show`` renders approval requests and decisions readably."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import attrs
import trio

from trio_agent.approval import ApprovalPolicy
from trio_agent.persistence import JsonlPersistence
from trio_agent.testing import open_test_harness, text, tool_call
from trio_agent.tools import ApprovalRequest, Approved, Denied, tool

CLI = Path(sys.executable).parent / "trio-agent"


@attrs.define
class Answers:
    answers: list[Approved | Denied]

    async def request(self, request: ApprovalRequest) -> Approved | Denied:
        return self.answers.pop(0)


@tool(name="shell")
async def shell(command: str) -> str:
    """A stand-in shell.

    Args:
        command: Anything.
    """
    return f"ran {command}"


async def test_sessions_show_renders_approvals(tmp_path: Path) -> None:
    script = [
        tool_call("c1", "shell", '{"command": "ls"}'),
        tool_call("c2", "shell", '{"command": "rm -rf /"}'),
        tool_call("c3", "shell", '{"command": "pwd"}'),
        text("ok"),
    ]
    answers = Answers([Approved(), Denied("not rm"), Approved(remember="session")])
    directory = str(tmp_path / ".trio-agent" / "sessions")
    async with open_test_harness(
        script,
        tools=[shell],
        persistence=JsonlPersistence,
        persistence_config=JsonlPersistence.Config(path=directory),
    ) as h:
        await h.ctx.plugin(ApprovalPolicy)
        h.ctx.provide("approval", answers)
        handle = await h.ctx.agents.create(agent_id="a", session_id="s1")
        handle.agent.send("go")
        await handle.agent.wait_idle()
        await handle.aclose()

    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    with trio.fail_after(60):
        shown = await trio.run_process(
            [str(CLI), "sessions", "show", "s1"],
            cwd=tmp_path,
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert shown.returncode == 0, shown.stderr.decode()
    lines = shown.stdout.decode().splitlines()
    rendered = [line for line in lines if line.startswith(("- tool", "  - "))]
    assert rendered == [
        '- tool `shell` `{"command": "ls"}`',
        "  - approval asked for `shell`: shell may have effects",
        "  - approved once by Answers",
        "  - ok: ran ls",
        '- tool `shell` `{"command": "rm -rf /"}`',
        "  - approval asked for `shell`: shell may have effects",
        "  - denied by Answers: not rm",
        "  - error DENIED: Error: not rm",
        '- tool `shell` `{"command": "pwd"}`',
        "  - approval asked for `shell`: shell may have effects",
        "  - approved for the session by Answers",
        "  - ok: ran pwd",
    ]
