"""The real ``trio-agent`` command, run in a subprocess on a temporary workspace."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
import trio

CLI = Path(sys.executable).parent / "trio-agent"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("alpha\nbeta\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("print('app')\n")
    return tmp_path


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


async def trio_agent(workspace: Path, *args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(60):
        return await trio.run_process(
            [str(CLI), *args],
            cwd=workspace,
            env=_env(**env),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


def _session_of(stderr: bytes) -> str:
    for line in stderr.decode().splitlines():
        if line.startswith("session: "):
            return line.split()[1]
    raise AssertionError(f"no session id in: {stderr.decode()}")


async def test_run_with_the_offline_model(workspace: Path) -> None:
    result = await trio_agent(workspace, "run", "list", "files")
    assert result.returncode == 0, result.stderr.decode()
    out, err = result.stdout.decode(), result.stderr.decode()
    assert "notes.txt" in out
    assert "src/" in out
    assert "using the offline model" in err
    assert "→ list_dir" in err
    session = _session_of(result.stderr)
    assert (workspace / ".trio-agent" / "sessions" / f"{session}.jsonl").exists()


async def test_run_json_and_resume_continue_the_session(workspace: Path) -> None:
    first = await trio_agent(workspace, "run", "--json", "read notes.txt")
    assert first.returncode == 0
    result = json.loads(first.stdout)
    assert result["reason"] == "completed"
    assert result["turn"] == 1
    assert "alpha" in result["text"]
    second = await trio_agent(
        workspace, "run", "--json", "--resume", result["session_id"], "read src/app.py"
    )
    assert second.returncode == 0, second.stderr.decode()
    resumed = json.loads(second.stdout)
    assert resumed["session_id"] == result["session_id"]
    assert resumed["turn"] == 2
    assert "print('app')" in resumed["text"]


async def test_resume_of_an_unknown_session_fails_clearly(workspace: Path) -> None:
    result = await trio_agent(workspace, "run", "--resume", "no-such-session", "hi")
    assert result.returncode == 1
    assert b"no-such-session" in result.stderr
    assert b"Traceback" not in result.stderr
    hostile = await trio_agent(workspace, "run", "--resume", "../../etc/passwd", "hi")
    assert hostile.returncode == 1
    assert b"invalid session id" in hostile.stderr


async def test_sessions_list_show_export(workspace: Path) -> None:
    run = await trio_agent(workspace, "run", "read notes.txt")
    session = _session_of(run.stderr)
    listing = await trio_agent(workspace, "sessions", "list", "--json")
    assert listing.returncode == 0
    [info] = json.loads(listing.stdout)
    assert info["session_id"] == session
    assert info["turns"] == 1
    assert info["title"] == "read notes.txt"
    show = await trio_agent(workspace, "sessions", "show", session)
    assert b"**User:** read notes.txt" in show.stdout
    assert b"turn 1 ended: completed" in show.stdout
    markdown = await trio_agent(workspace, "sessions", "export", session, "--format", "markdown")
    assert markdown.stdout == show.stdout
    exported = await trio_agent(workspace, "sessions", "export", session)
    stored = (workspace / ".trio-agent" / "sessions" / f"{session}.jsonl").read_bytes()
    assert exported.stdout == stored


async def test_bad_config_names_the_key_path_and_exits_2(workspace: Path) -> None:
    (workspace / "bad.yml").write_text(
        "llm:\n  providers:\n    - {name: x, type: offline, modelz: [a]}\n"
    )
    result = await trio_agent(workspace, "run", "-c", "bad.yml", "hi")
    assert result.returncode == 2
    assert (
        b"trio-agent: CONFIG: bad.yml: extra fields found (modelz) @ $.llm.providers[0]"
        in result.stderr
    )
    assert not (workspace / ".trio-agent").exists()


async def test_unreachable_openai_endpoint(workspace: Path) -> None:
    (workspace / "trio-agent.yml").write_text(
        """
llm:
  providers:
    - {name: remote, type: openai, base_url: "http://127.0.0.1:9/v1", api_key_env: TEST_KEY, models: [m]}
  retry: {max_attempts: 1}
"""
    )
    result = await trio_agent(workspace, "run", "hello", TEST_KEY="sk-very-secret")
    assert result.returncode == 1
    err = result.stderr.decode()
    assert "trio-agent: TRANSPORT: " in err
    assert "sk-very-secret" not in err
    session = _session_of(result.stderr)
    lines = (workspace / ".trio-agent" / "sessions" / f"{session}.jsonl").read_text().splitlines()
    types = [json.loads(line)["type"] for line in lines[1:]]
    assert types[0] == "turn/start"
    assert types[-2:] == ["step/end", "turn/end"]  # complete, nothing half-written
    assert "sk-very-secret" not in "\n".join(lines)


async def test_ctrl_c_cancels_a_run(workspace: Path) -> None:
    (workspace / "slow.yml").write_text(
        "llm:\n  providers: [{name: offline, type: offline, delay: 0.05}]\n"
    )
    async with trio.open_nursery() as nursery:
        process = await nursery.start(
            partial(
                trio.run_process,
                [str(CLI), "run", "-c", "slow.yml", "read notes.txt"],
                cwd=workspace,
                env=_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                check=False,
            )
        )
        with trio.fail_after(30):
            assert await process.stdout.receive_some(1)  # the answer is streaming
            process.send_signal(signal.SIGINT)
            await process.wait()
            err = b""
            while chunk := await process.stderr.receive_some():
                err += chunk
    assert process.returncode == 1
    assert b"trio-agent: ABORTED: the turn was cancelled" in err


async def test_chat_ctrl_c_cancels_the_turn_not_the_program(workspace: Path) -> None:
    (workspace / "trio-agent.yml").write_text(
        "llm:\n  providers: [{name: offline, type: offline, delay: 0.05}]\n"
    )
    async with trio.open_nursery() as nursery:
        process = await nursery.start(
            partial(
                trio.run_process,
                [str(CLI), "chat"],
                cwd=workspace,
                env=_env(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                check=False,
            )
        )
        err = bytearray()
        out = bytearray()
        arrived = [trio.Event()]

        async def collect(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
            while chunk := await stream.receive_some():
                into.extend(chunk)
                arrived[0].set()
                arrived[0] = trio.Event()

        nursery.start_soon(collect, process.stderr, err)
        nursery.start_soon(collect, process.stdout, out)

        async def until(buffer: bytearray, needle: bytes) -> None:
            while needle not in buffer:
                await arrived[0].wait()

        with trio.fail_after(30):
            await until(err, b"session: ")
            await process.stdin.send_all(b"read notes.txt\n")
            await until(out, b"Reading")
            process.send_signal(signal.SIGINT)
            await until(err, b"turn 1 ended: aborted")
            await process.stdin.send_all(b"read src/app.py\n")
            await until(out, b"print('app')")
            await until(out, b"```\n")
            await process.stdin.send_all(b"/exit\n")
            await process.wait()
    assert process.returncode == 0, err.decode()
    assert b"^C: cancelling the turn" in err
    session = _session_of(bytes(err))
    log = (workspace / ".trio-agent" / "sessions" / f"{session}.jsonl").read_text()
    ends = [
        json.loads(line)["data"]["reason"] for line in log.splitlines()[1:] if '"turn/end"' in line
    ]
    assert ends == ["aborted", "completed"]
