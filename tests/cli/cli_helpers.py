"""Running the real ``trio-agent`` command in the CLI tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import trio

from trio_agent.testing import RecordedRequest

#: Text a sub-agent's system prompt always has (its ``subagent`` section).
CHILD_MARK = "You are a sub-agent"

#: The console script of the venv the tests run in.
CLI = Path(sys.executable).parent / "trio-agent"


def cli_env() -> dict[str, str]:
    """This environment without any ``*_API_KEY``, unbuffered."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


async def run_cli(
    cwd: Path, *args: str, stdin: bytes = b"", stdout: IO[bytes] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """``trio-agent ARGS`` in ``cwd``; stdout captured unless given, stderr captured.
    ``run_process`` kills the command if the deadline cancels it: nothing outlives the test."""
    output: dict[str, Any] = {"capture_stdout": True} if stdout is None else {"stdout": stdout}
    with trio.fail_after(90):
        return await trio.run_process(
            [str(CLI), *args],
            cwd=cwd,
            env=cli_env(),
            stdin=stdin,
            capture_stderr=True,
            check=False,
            **output,
        )


def request_messages(request: RecordedRequest) -> list[dict[str, Any]]:
    """The chat messages of a recorded ``/chat/completions`` request."""
    messages: list[dict[str, Any]] = request.json["messages"]
    return messages


def is_child_request(request: RecordedRequest) -> bool:
    """Whether a sub-agent made the request (its system prompt has :data:`CHILD_MARK`)."""
    return any(
        m["role"] == "system" and CHILD_MARK in str(m["content"]) for m in request_messages(request)
    )


def last_user_text(request: RecordedRequest) -> str:
    """The text of the request's last user message (a child's task)."""
    users = [m for m in request_messages(request) if m["role"] == "user"]
    return str(users[-1]["content"])
