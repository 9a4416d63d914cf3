"""``make demo``: an offline tour of trio-agent on a temporary workspace.

It runs the real ``trio-agent`` command, as a user would, with the built-in offline model (no
API key, no network):

1. a multi-step, tool-using turn ("list files": the model calls ``list_dir``, then answers);
2. a second process resuming that session by id (turn numbers and history continue);
3. a turn cancelled with Ctrl-C (SIGINT) mid-stream: it ends ``aborted``, the partial answer is
   kept, and the log stays balanced;
4. the persisted sessions, listed and shown as a transcript.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

__all__ = ["main"]

_WORKSPACE_FILES = {
    "README.md": "# Demo project\n\nA tiny project for the trio-agent tour.\n",
    "notes.txt": "Buy milk.\nShip the release on Friday.\nCall Ada about the trio talk.\n",
    "src/app.py": 'def main() -> None:\n    print("hello from the demo app")\n',
}

_SLOW_CONFIG = """\
# The offline model again, streaming slowly enough to press Ctrl-C mid-answer.
llm:
  providers:
    - {name: offline, type: offline, delay: 0.05}
"""


def _command() -> list[str]:
    script = Path(sys.executable).parent / "trio-agent"
    return [str(script)] if script.exists() else [sys.executable, "-m", "trio_agent.cli"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _banner(title: str) -> None:
    print(f"\n\033[1m== {title}\033[0m", flush=True)


def _run(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    shown = " ".join(a if " " not in a else repr(a) for a in args)
    print(f"$ trio-agent {shown}", flush=True)
    result = subprocess.run(
        [*_command(), *args], cwd=workspace, env=_env(), capture_output=True, text=True, check=False
    )
    _show(result.stdout, result.stderr)
    print(f"[exit status {result.returncode}]", flush=True)
    return result


def _show(stdout: str, stderr: str) -> None:
    for line in stderr.splitlines():
        print(f"  \033[2m{line}\033[0m")
    for line in stdout.splitlines():
        print(f"  {line}")


def _session_id(stderr: str) -> str:
    for line in stderr.splitlines():
        if line.startswith("session: "):
            return line.split()[1]
    raise RuntimeError(f"trio-agent printed no session id:\n{stderr}")


def _cancelled_run(workspace: Path, prompt: str) -> tuple[str, int]:
    args = ["run", "-c", "slow.yml", prompt]
    print(
        f"$ trio-agent {' '.join(args[:-1])} {prompt!r}   # Ctrl-C after the first words",
        flush=True,
    )
    process = subprocess.Popen(
        [*_command(), *args],
        cwd=workspace,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    # To a pipe `run` writes a step's text once it is final: wait for the session line on
    # stderr, then for the slow model to be mid-answer.
    head = ""
    while "session: " not in head:
        line = process.stderr.readline()
        if not line:
            break
        head += line
    time.sleep(1.0)
    process.send_signal(signal.SIGINT)
    rest, stderr = process.communicate(timeout=30)
    _show(rest, head + stderr)
    print(f"[exit status {process.returncode}]", flush=True)
    return _session_id(head + stderr), process.returncode


def main() -> int:
    """Run the tour; returns 0 when every step behaved as described."""
    with tempfile.TemporaryDirectory(prefix="trio-agent-demo-") as tmp:
        workspace = Path(tmp)
        for name, content in _WORKSPACE_FILES.items():
            path = workspace / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
        (workspace / "slow.yml").write_text(_SLOW_CONFIG)
        print(f"workspace: {workspace}")
        print(textwrap.indent("\n".join(sorted(_WORKSPACE_FILES)), "  "))

        _banner("1. A multi-step, tool-using turn")
        first = _run(workspace, "run", "list files")
        session = _session_id(first.stderr)

        _banner("2. A second process resumes that session by id")
        second = _run(workspace, "run", "--resume", session, "read notes.txt")

        _banner("3. A turn cancelled with Ctrl-C while the answer streams")
        cancelled, status = _cancelled_run(workspace, "read src/app.py")

        _banner("4. The sessions on disk")
        _run(workspace, "sessions", "list")
        shown = _run(workspace, "sessions", "show", session)
        _run(workspace, "sessions", "show", cancelled)

        ok = (
            first.returncode == 0
            and second.returncode == 0
            and status == 130  # 128 + SIGINT: the turn was cancelled by Ctrl-C
            and "## Turn 2" in shown.stdout
        )
        _banner("done" if ok else "something did not go as described")
        return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
