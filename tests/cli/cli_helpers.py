"""Running the real ``trio-agent`` command in the CLI tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import trio

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
