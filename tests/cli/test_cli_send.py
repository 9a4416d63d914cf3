"""``trio-agent send`` refuses what it cannot deliver before it reaches any database: a bad
session id, an empty prompt, a backend other processes do not share. (Delivery on a real
PostgreSQL: tests/postgres/test_postgres_send.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import run_cli

import trio_agent.cli as cli


@pytest.mark.parametrize(
    "persistence",
    [None, "{type: jsonl}", "{type: sqlite, path: s.db}", "{type: memory}", "{type: none}"],
)
async def test_send_needs_a_shared_backend(persistence: str | None, tmp_path: Path) -> None:
    if persistence is not None:
        (tmp_path / "trio-agent.yml").write_text(f"persistence: {persistence}\n")
    result = await run_cli(tmp_path, "send", "some-session", "hello")
    err = result.stderr.decode()
    assert result.returncode == 2, err
    kind = "jsonl" if persistence is None else persistence.split()[1].rstrip(",}")
    assert err.startswith(
        f"trio-agent: CONFIG: persistence type {kind!r} is not shared between processes; "
        "trio-agent send needs a shared backend (persistence type postgres)\n"
    ), err
    assert "Traceback" not in err
    assert result.stdout == b""
    assert not (tmp_path / ".trio-agent").exists()  # nothing was stored anywhere


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["send", "../../etc/passwd", "hi"], "INVALID_SESSION_ID"),
        (["send", ".hidden", "hi"], "INVALID_SESSION_ID"),
        (["send", "s", "   "], "USAGE"),
        (["send", "s", ""], "USAGE"),
        (["send"], "USAGE"),
    ],
)
def test_send_refuses_bad_arguments_before_the_config(
    argv: list[str],
    code: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    # A broken config file: the argument errors come first.
    (tmp_path / "trio-agent.yml").write_text("persistence: {type: nope}\n")
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert f"trio-agent: {code}: " in captured.err, captured.err
    assert "Traceback" not in captured.err
    assert captured.out == ""


async def test_send_reads_an_empty_stdin_as_an_empty_prompt(tmp_path: Path) -> None:
    result = await run_cli(tmp_path, "send", "s", "-", stdin=b"\n  \n")
    assert result.returncode == 2
    assert result.stderr.decode().startswith("trio-agent: USAGE: the prompt is empty\n")


def test_send_is_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    assert "send" in capsys.readouterr().out
    assert cli.main(["send", "--help"]) == 0
    out = capsys.readouterr().out
    assert "SESSION-ID" in out
    assert "exit status" in out
    assert "send: the prompt is queued" in out
