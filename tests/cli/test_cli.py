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
import trio.testing

from trio_agent.persistence import SESSION_PERSISTENCE, JsonlPersistence
from trio_agent.runtime import open_runtime
from trio_agent.session import SessionStore

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
    assert result.returncode == 2
    assert b"trio-agent: SESSION_NOT_FOUND: " in result.stderr
    assert b"no-such-session" in result.stderr
    assert b"Traceback" not in result.stderr
    hostile = await trio_agent(workspace, "run", "--resume", "../../etc/passwd", "hi")
    assert hostile.returncode == 2
    assert b"trio-agent: INVALID_SESSION_ID: " in hostile.stderr


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
    assert b"*usage: " in show.stdout  # show adds the session's token totals
    markdown = await trio_agent(workspace, "sessions", "export", session, "--format", "markdown")
    assert show.stdout.startswith(markdown.stdout)
    md = await trio_agent(workspace, "sessions", "export", session, "--format", "md")
    assert md.stdout == markdown.stdout
    exported = await trio_agent(workspace, "sessions", "export", session)
    stored = (workspace / ".trio-agent" / "sessions" / f"{session}.jsonl").read_bytes()
    assert exported.stdout == stored
    document = await trio_agent(workspace, "sessions", "export", session, "--format", "json")
    parsed = json.loads(document.stdout)
    assert [json.loads(line) for line in stored.splitlines()] == [
        parsed["header"],
        *parsed["events"],
    ]
    removed = await trio_agent(workspace, "sessions", "rm", session)
    assert removed.returncode == 0, removed.stderr.decode()
    assert not (workspace / ".trio-agent" / "sessions" / f"{session}.jsonl").exists()
    gone = await trio_agent(workspace, "sessions", "show", session)
    assert gone.returncode == 2
    assert b"trio-agent: SESSION_NOT_FOUND: " in gone.stderr


async def test_bad_config_names_the_key_path_and_exits_2(workspace: Path) -> None:
    (workspace / "bad.yml").write_text(
        "llm:\n  providers:\n    - {name: x, type: offline, modelz: [a]}\n"
    )
    result = await trio_agent(workspace, "run", "-c", "bad.yml", "hi")
    assert result.returncode == 2
    assert (
        b"trio-agent: CONFIG: bad.yml: $.llm.providers[0]: unknown key(s) modelz" in result.stderr
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


def _turn_ends(log: Path) -> list[str]:
    return [
        json.loads(line)["data"]["reason"]
        for line in log.read_text().splitlines()[1:]
        if '"turn/end"' in line
    ]


async def _run_streaming(workspace: Path, *args: str) -> trio.Process:
    """Start ``trio-agent run`` on a slow offline model (stdout and stderr piped)."""
    (workspace / "slow.yml").write_text(
        "llm:\n  providers: [{name: offline, type: offline, delay: 0.1}]\n"
    )
    return await trio.lowlevel.open_process(
        [str(CLI), "run", "-c", "slow.yml", *args],
        cwd=workspace,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


async def _finish(process: trio.Process) -> bytes:
    """Wait for ``process`` to exit; its whole stderr."""
    assert process.stdout is not None and process.stderr is not None
    err = b""
    while chunk := await process.stderr.receive_some():
        err += chunk
    await process.wait()
    await process.stdout.aclose()
    await process.stderr.aclose()
    return err


@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]
)
async def test_a_signal_cancels_a_run_which_ends_aborted_and_flushed(
    workspace: Path, signum: signal.Signals, status: int
) -> None:
    process = await _run_streaming(workspace, "read notes.txt")
    assert process.stdout is not None
    with trio.fail_after(30):
        assert await process.stdout.receive_some(1)  # the answer is streaming
        process.send_signal(signum)
        err = await _finish(process)
    assert process.returncode == status, err.decode()
    assert f"trio-agent: ABORTED: the turn was cancelled ({signum.name})".encode() in err
    log = workspace / ".trio-agent" / "sessions" / f"{_session_of(err)}.jsonl"
    assert _turn_ends(log) == ["aborted"]  # the file exists, the turn closed and flushed
    assert b"Traceback" not in err


async def test_run_on_a_session_open_in_another_process_is_session_busy(
    workspace: Path,
) -> None:
    first = await trio_agent(workspace, "run", "read notes.txt")
    session = _session_of(first.stderr)
    async with open_runtime() as ctx:
        await ctx.plugin(SessionStore)
        await ctx.plugin(
            JsonlPersistence, JsonlPersistence.Config(str(workspace / ".trio-agent" / "sessions"))
        )
        await ctx.require(SESSION_PERSISTENCE).acquire(session)  # this process holds it
        result = await trio_agent(workspace, "run", "--resume", session, "hi")
    assert result.returncode == 2
    assert result.stderr.decode().splitlines()[-1] == (
        f"trio-agent: SESSION_BUSY: session {session} is open in another process "
        f"(pid {os.getpid()})"
    )
    log = workspace / ".trio-agent" / "sessions" / f"{session}.jsonl"
    assert _turn_ends(log) == ["completed"]  # the busy run wrote nothing


async def test_rm_refuses_a_session_open_in_another_process(workspace: Path) -> None:
    first = await trio_agent(workspace, "run", "read notes.txt")
    session = _session_of(first.stderr)
    log = workspace / ".trio-agent" / "sessions" / f"{session}.jsonl"
    before = log.read_bytes()
    async with open_runtime() as ctx:
        await ctx.plugin(SessionStore)
        await ctx.plugin(
            JsonlPersistence, JsonlPersistence.Config(str(workspace / ".trio-agent" / "sessions"))
        )
        await ctx.require(SESSION_PERSISTENCE).acquire(session)  # this process holds it
        refused = await trio_agent(workspace, "sessions", "rm", session)
    assert refused.returncode == 2
    assert refused.stderr.decode().splitlines()[-1] == (
        f"trio-agent: SESSION_BUSY: session {session} is open in another process "
        f"(pid {os.getpid()})"
    )
    assert b"Traceback" not in refused.stderr
    assert log.read_bytes() == before  # nothing removed, nothing changed
    removed = await trio_agent(workspace, "sessions", "rm", session)  # released: now it goes
    assert removed.returncode == 0, removed.stderr.decode()
    assert not log.exists()


async def test_a_log_changed_under_a_run_is_a_persistence_error(workspace: Path) -> None:
    process = await _run_streaming(workspace, "read notes.txt")
    assert process.stdout is not None and process.stderr is not None
    with trio.fail_after(30):
        assert await process.stdout.receive_some(1)  # the prompt is on disk, the model streams
        sessions = workspace / ".trio-agent" / "sessions"
        (log,) = sessions.glob("*.jsonl")
        intruder = b'{"seq":999,"type":"plugin/intruder","time":1,"data":{}}\n'
        with log.open("ab") as file:
            file.write(intruder)
        tampered = log.read_bytes()
        err = await _finish(process)
    assert process.returncode == 1, err.decode()
    assert b"trio-agent: PERSISTENCE: " in err
    assert b"another program changed it" in err
    assert log.read_bytes() == tampered  # nothing truncated, nothing written over


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
            await until(err, b"ABORTED: the turn was cancelled")
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


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
async def test_chat_ends_the_turn_and_quits_on_sigterm_and_sighup(
    workspace: Path, signum: signal.Signals, status: int
) -> None:
    (workspace / "trio-agent.yml").write_text(
        "llm:\n  providers: [{name: offline, type: offline, delay: 0.1}]\n"
    )
    process = await trio.lowlevel.open_process(
        [str(CLI), "chat"],
        cwd=workspace,
        env=_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    with trio.fail_after(30):
        await process.stdin.send_all(b"read notes.txt\n")
        assert await process.stdout.receive_some(1)  # the turn is streaming
        process.send_signal(signum)
        err = await _finish(process)  # stdin stays open: a blocked read must not hold it up
        await process.stdin.aclose()
    assert process.returncode == status, err.decode()
    assert f"trio-agent: stopped by {signum.name}".encode() in err
    log = workspace / ".trio-agent" / "sessions" / f"{_session_of(err)}.jsonl"
    assert _turn_ends(log) == ["aborted"]


async def test_run_with_a_configured_agent(workspace: Path) -> None:
    (workspace / "trio-agent.yml").write_text(
        "llm:\n  providers: [{name: offline, type: offline, delay: 0}]\nagents: [{id: helper}]\n"
    )
    result = await trio_agent(workspace, "run", "--agent", "helper", "read notes.txt")
    assert result.returncode == 0, result.stderr.decode()
    assert "alpha" in result.stdout.decode()
    assert _session_of(result.stderr).startswith("helper-session-")
    both = await trio_agent(workspace, "run", "--agent", "helper", "--resume", "s-1", "hi")
    assert both.returncode == 2
    assert b"set its resume_session_id there instead of --resume" in both.stderr


async def test_a_configured_agent_whose_resume_id_is_missing_fails_at_once(
    workspace: Path,
) -> None:
    (workspace / "c.yml").write_text("agents: [{id: ghost, resume_session_id: no-such-session}]\n")
    result = await trio_agent(workspace, "-c", "c.yml", "run", "--agent", "ghost", "hi")
    assert result.returncode == 2, result.stderr.decode()
    err = result.stderr.decode()
    assert "trio-agent: SESSION_NOT_FOUND: agent 'ghost': resume_session_id" in err
    assert "Traceback" not in err
