"""``trio-agent send SESSION-ID TEXT``, the real command in a subprocess, on a real PostgreSQL:
a prompt sent while a worker process holds the session is run by that worker, once; one sent
while nobody holds it runs after a resume; the failures get their code, their status and no
traceback, and never show the DSN's password."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import trio
from pg_helpers import admin
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from workers import GUARD, open_worker

CLI = Path(sys.executable).parent / "trio-agent"

#: The config every test writes: the DSN comes from the environment, as docs/postgres.md shows.
CONFIG = "persistence: {type: postgres, dsn: '${TRIO_AGENT_SEND_DSN}'}\n"


async def send(
    cwd: Path, dsn: str, *args: str, stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    """Run ``trio-agent -c trio-agent.yml send ARGS`` with the config on ``dsn``."""
    (cwd / "trio-agent.yml").write_text(CONFIG)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["TRIO_AGENT_SEND_DSN"] = dsn
    with trio.fail_after(GUARD):  # run_process kills the child when cancelled
        return await trio.run_process(
            [str(CLI), "-c", "trio-agent.yml", "send", *args],
            cwd=cwd,
            env=env,
            stdin=stdin,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


def waiting(dsn: str, session_id: str) -> list[int]:
    """The ids of the inbox rows waiting for ``session_id``."""
    with admin(dsn) as conn:
        rows = conn.execute(
            "SELECT id FROM trio_agent_inbox WHERE session_id = %s ORDER BY id", (session_id,)
        ).fetchall()
    return [int(row[0]) for row in rows]


def stored_prompts(dsn: str, session_id: str) -> list[str]:
    """The texts of the ``user/message`` events stored for ``session_id``, in order."""
    with admin(dsn) as conn:
        rows = conn.execute(
            "SELECT data::jsonb #>> '{message,content,0,text}' FROM trio_agent_events "
            "WHERE session_id = %s AND type = 'user/message' ORDER BY seq",
            (session_id,),
        ).fetchall()
    return [row[0] for row in rows]


def password_of(dsn: str) -> str:
    password = conninfo_to_dict(dsn).get("password")
    assert isinstance(password, str) and len(password) >= 4
    return password


def assert_clean(result: subprocess.CompletedProcess[bytes], password: str) -> None:
    """No traceback and no password anywhere in the command's output."""
    both = result.stdout + result.stderr
    assert b"Traceback" not in both
    assert password.encode() not in both


async def test_a_prompt_sent_while_a_worker_holds_the_session_runs_there_once(
    dsn: str, tmp_path: Path
) -> None:
    async with open_worker(dsn, tmp_path, "holder") as worker:
        await worker.send("create held")
        assert await worker.expect("agent", "busy") == "agent held"
        result = await send(tmp_path, dsn, "held", "from", "the", "command", "line")
        assert result.returncode == 0, result.stderr.decode()
        assert result.stderr == b""
        inbox_id = int(result.stdout.decode())  # the one line on stdout: the inbox id
        assert inbox_id > 0
        assert_clean(result, password_of(dsn))
        assert await worker.expect("prompt") == "prompt from the command line"
        assert await worker.expect("turn-end") == "turn-end 1 completed"
        # Consumed by the write that stored it; a later prompt is not preceded by it again.
        assert waiting(dsn, "held") == []
        piped = await send(tmp_path, dsn, "held", "-", stdin=b"a piped prompt\n")
        assert piped.returncode == 0, piped.stderr.decode()
        assert int(piped.stdout.decode()) > inbox_id
        assert await worker.expect("prompt") == "prompt a piped prompt"
        assert await worker.expect("turn-end") == "turn-end 2 completed"
        assert waiting(dsn, "held") == []
    assert stored_prompts(dsn, "held") == ["from the command line", "a piped prompt"]
    assert [line for line in worker.seen if line.startswith("prompt ")] == [
        "prompt from the command line",
        "prompt a piped prompt",
    ]


async def test_a_prompt_sent_while_nobody_holds_the_session_runs_after_a_resume(
    dsn: str, tmp_path: Path
) -> None:
    async with open_worker(dsn, tmp_path, "first") as first:
        await first.send("create away")
        assert await first.expect("agent", "busy") == "agent away"
        await first.send("send hello")
        assert await first.expect("turn-end") == "turn-end 1 completed"
        await first.send("close")
        await first.expect("closed")
        # Nobody holds the session now (the first worker gave it back; it is still running).
        result = await send(tmp_path, dsn, "away", "while", "nobody", "held", "it")
        assert result.returncode == 0, result.stderr.decode()
        assert waiting(dsn, "away") == [int(result.stdout.decode())]
        assert stored_prompts(dsn, "away") == ["hello"]
    assert waiting(dsn, "away") == [int(result.stdout.decode())]  # it waits for a holder
    async with open_worker(dsn, tmp_path, "second") as second:
        await second.send("resume away")
        assert await second.expect("agent", "busy") == "agent away"
        assert await second.expect("prompt") == "prompt while nobody held it"
        assert await second.expect("turn-end") == "turn-end 2 completed"
        assert waiting(dsn, "away") == []
    assert stored_prompts(dsn, "away") == ["hello", "while nobody held it"]
    assert [line for line in second.seen if line.startswith("prompt ")] == [
        "prompt while nobody held it"
    ]


async def test_send_failures_get_a_code_a_status_and_no_secret(dsn: str, tmp_path: Path) -> None:
    password = password_of(dsn)
    cases = [
        (["../../etc/passwd", "hi"], 2, "INVALID_SESSION_ID"),
        (["s", "  "], 2, "USAGE"),
        (["no-such-session", "hi"], 2, "SESSION_NOT_FOUND"),
    ]
    for args, status, code in cases:
        result = await send(tmp_path, dsn, *args)
        err = result.stderr.decode()
        assert result.returncode == status, (args, err)
        assert err.startswith(f"trio-agent: {code}: "), (args, err)
        assert result.stdout == b""
        assert_clean(result, password)
    # A wrong password: the server refuses; the message names the server, not the password.
    wrong = make_conninfo(dsn, password="wrong-secret-4711")
    result = await send(tmp_path, wrong, "s", "hi")
    err = result.stderr.decode()
    assert result.returncode == 1, err
    assert err.startswith("trio-agent: PERSISTENCE: cannot send the prompt to session 's': ")
    assert "password authentication failed" in err
    assert_clean(result, "wrong-secret-4711")
    assert_clean(result, password)
    # A server that is not there.
    gone = make_conninfo(dsn, host="127.0.0.1", port="1", connect_timeout="5")
    result = await send(tmp_path, gone, "s", "hi")
    assert result.returncode == 1
    assert result.stderr.decode().startswith("trio-agent: PERSISTENCE: ")
    assert_clean(result, password)
    assert waiting(dsn, "s") == []


async def test_a_non_postgres_config_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "other.yml").write_text(f"persistence: {{type: sqlite, path: {tmp_path}/s.db}}\n")
    with trio.fail_after(GUARD):
        result = await trio.run_process(
            [str(CLI), "send", "-c", "other.yml", "s", "hi"],
            cwd=tmp_path,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert result.returncode == 2
    assert result.stderr.decode().startswith(
        "trio-agent: CONFIG: persistence type 'sqlite' is not shared between processes; "
        "trio-agent send needs a shared backend (persistence type postgres)\n"
    )
    assert b"Traceback" not in result.stderr
    assert not (tmp_path / "s.db").exists()
