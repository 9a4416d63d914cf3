"""#23: every subcommand with hostile or malformed arguments and configs: one line
``trio-agent: CODE: message``, the documented exit status, never a traceback."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from trio_agent import cli

LONG = "a" * 5000

#: name -> (config file text or None, argv, expected status, expected code)
CASES: dict[str, tuple[str | None, list[str], int, str]] = {
    "no command": (None, [], 2, "USAGE"),
    "unknown command": (None, ["bogus"], 2, "USAGE"),
    "unknown option": (None, ["run", "--bogus", "hi"], 2, "USAGE"),
    "empty prompt": (None, ["run", ""], 2, "USAGE"),
    "blank prompt": (None, ["run", "  ", "\n"], 2, "USAGE"),
    "empty stdin": (None, ["run", "-"], 2, "USAGE"),
    "resume traversal": (
        None,
        ["run", "--resume", "../../etc/passwd", "hi"],
        2,
        "INVALID_SESSION_ID",
    ),
    "resume empty": (None, ["run", "--resume", "", "hi"], 2, "INVALID_SESSION_ID"),
    "resume long": (None, ["run", "--resume", LONG, "hi"], 2, "INVALID_SESSION_ID"),
    "resume newline": (None, ["run", "--resume", "a\nb", "hi"], 2, "INVALID_SESSION_ID"),
    "resume missing": (None, ["run", "--resume", "no-such", "hi"], 2, "SESSION_NOT_FOUND"),
    "chat resume traversal": (None, ["chat", "--resume", "../x"], 2, "INVALID_SESSION_ID"),
    "chat resume missing": (None, ["chat", "--resume", "nope"], 2, "SESSION_NOT_FOUND"),
    "resume and continue": (None, ["run", "--resume", "a", "--continue", "hi"], 2, "USAGE"),
    "continue with none": (None, ["run", "--continue", "hi"], 2, "SESSION_NOT_FOUND"),
    "agent traversal": (None, ["run", "--agent", "../../x", "hi"], 2, "USAGE"),
    "agent empty": (None, ["run", "--agent", "", "hi"], 2, "USAGE"),
    "unknown provider": (None, ["run", "--provider", "nope", "hi"], 2, "USAGE"),
    "empty model": (None, ["run", "--model", " ", "hi"], 2, "USAGE"),
    "show traversal": (None, ["sessions", "show", "../../etc/passwd"], 2, "INVALID_SESSION_ID"),
    "show empty": (None, ["sessions", "show", ""], 2, "INVALID_SESSION_ID"),
    "show long": (None, ["sessions", "show", LONG], 2, "INVALID_SESSION_ID"),
    "show newline": (None, ["sessions", "show", "x\ny"], 2, "INVALID_SESSION_ID"),
    "show missing": (None, ["sessions", "show", "nope"], 2, "SESSION_NOT_FOUND"),
    "export traversal": (None, ["sessions", "export", "../x"], 2, "INVALID_SESSION_ID"),
    "export bad format": (None, ["sessions", "export", "x", "--format", "pdf"], 2, "USAGE"),
    "export missing": (
        None,
        ["sessions", "export", "nope", "--format", "md"],
        2,
        "SESSION_NOT_FOUND",
    ),
    "rm traversal": (None, ["sessions", "rm", "/etc/passwd"], 2, "INVALID_SESSION_ID"),
    "rm missing": (None, ["sessions", "rm", "nope"], 2, "SESSION_NOT_FOUND"),
    "sessions no action": (None, ["sessions"], 2, "USAGE"),
    "missing config file": (None, ["-c", "nope.yml", "run", "hi"], 2, "CONFIG"),
    "config not yaml": ("a: [\n", ["run", "hi"], 2, "CONFIG"),
    "config a list": ("- 1\n", ["run", "hi"], 2, "CONFIG"),
    "models scalar": (
        "llm: {providers: [{name: o, type: openai, base_url: 'http://127.0.0.1:9', models: gpt}]}\n",
        ["run", "hi"],
        2,
        "CONFIG",
    ),
    "builtin scalar": ("tools: {builtin: read_file}\n", ["run", "hi"], 2, "CONFIG"),
    "unknown provider type": (
        "llm: {providers: [{name: a, type: anthropic}]}\n",
        ["run", "hi"],
        2,
        "CONFIG",
    ),
    "max_attempts 0": ("llm: {retry: {max_attempts: 0}}\n", ["run", "hi"], 2, "CONFIG"),
    "max_tokens 0": ("agents: [{id: a, max_tokens: 0}]\n", ["run", "hi"], 2, "CONFIG"),
    "shell_timeout negative": ("tools: {shell_timeout: -5}\n", ["run", "hi"], 2, "CONFIG"),
    "missing tools root": (
        "tools: {root: /nonexistent/trio-agent-root}\n",
        ["run", "hi"],
        2,
        "CONFIG",
    ),
    "persistence path a file": (
        "persistence: {type: jsonl, path: notes.txt}\n",
        ["run", "hi"],
        2,
        "CONFIG",
    ),
    "persona unknown variable": (
        "system_prompt: {persona: 'hi {{nope}}'}\n",
        ["run", "hi"],
        2,
        "CONFIG",
    ),
    "configured agent resume typo": (
        "agents: [{id: a, resume_session_id: typo}]\n",
        ["run", "--agent", "a", "hi"],
        2,
        "SESSION_NOT_FOUND",
    ),
    "sessions on memory": ("persistence: {type: memory}\n", ["sessions", "list"], 2, "CONFIG"),
    "plugins bad use": ("plugins: [{use: 'no.such.module:X'}]\n", ["plugins"], 2, "CONFIG"),
    "chat bad config": ("tools: {builtin: read_file}\n", ["chat"], 2, "CONFIG"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_arguments_get_a_code_and_a_status(
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config, argv, status, code = CASES[name]
    (tmp_path / "notes.txt").write_text("alpha\n")
    monkeypatch.chdir(tmp_path)
    for key in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "TRIO_AGENT_DEBUG"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    if config is not None:
        (tmp_path / "trio-agent.yml").write_text(config)
    assert cli.main(argv) == status
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"trio-agent: {code}: " in err, err
    [line] = [x for x in err.splitlines() if x.startswith("trio-agent: ") and ": " in x[12:]][-1:]
    assert "\n" not in line


def test_at_least_thirty_cases() -> None:
    assert len(CASES) >= 30


def test_help_lists_the_status_table_and_every_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for word in ("exit status", "130", "SESSION_BUSY", "MAX_STEPS", "DENIED", "OPENAI_BASE_URL"):
        assert word in out
    assert cli.main(["run", "--help"]) == 0
    assert "--continue" in capsys.readouterr().out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("trio-agent ")
