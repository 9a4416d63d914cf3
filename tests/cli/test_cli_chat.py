"""#23: chat's slash commands (/model, /new, /sessions, /cancel, /compact), the resume recap and
the line history, with piped input (one turn per line) to the real ``trio-agent`` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trio_agent.cli._chat import history_path

CLI = Path(sys.executable).parent / "trio-agent"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("alpha\nbeta\n")
    return tmp_path


def _chat(workspace: Path, lines: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    # subprocess.run kills the child when the (generous) timeout expires.
    result = subprocess.run(
        [str(CLI), "chat", *args],
        cwd=workspace,
        env=env,
        input=lines,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Traceback" not in result.stderr
    return result


def _session_ids(stderr: str) -> list[str]:
    prefix = "resume with: trio-agent chat --resume "
    return [line[len(prefix) :] for line in stderr.splitlines() if line.startswith(prefix)]


def _events(workspace: Path, session_id: str) -> list[dict[str, object]]:
    log = workspace / ".trio-agent" / "sessions" / f"{session_id}.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()[1:]]


def test_model_switches_the_model_of_later_requests(workspace: Path) -> None:
    result = _chat(
        workspace,
        "/model\nread notes.txt\n/model two words\n/model other-model\nlist files\n/model\n",
    )
    assert result.returncode == 0, result.stderr
    err = result.stderr
    assert "model: offline\n" in err
    assert "/model: a model name has no spaces or control characters" in err
    assert "model: other-model (from the next turn on)" in err
    assert err.rstrip().splitlines()[-2] == "model: other-model"
    (session,) = _session_ids(err)
    models = [
        e["data"]["config"]["model"]  # type: ignore[index]
        for e in _events(workspace, session)
        if e["type"] == "request/header"
    ]
    assert models[0] == "offline"
    assert models[-1] == "other-model"


def test_new_starts_a_fresh_session_and_sessions_lists_them(workspace: Path) -> None:
    result = _chat(workspace, "read notes.txt\n/new\nlist files\n/sessions\n/cancel\n")
    assert result.returncode == 0, result.stderr
    err = result.stderr
    first = err.split("session: ", 1)[1].split()[0]
    new_line = next(line for line in err.splitlines() if line.startswith("new session: "))
    second = new_line.split()[2]
    assert second != first
    assert f"(the previous one: trio-agent chat --resume {first})" in new_line
    assert f"  {first}  1 turn(s)  " in err
    assert f"* {second}  1 turn(s)  " in err  # the current one is marked
    assert "/cancel: no turn is running" in err
    assert _session_ids(err) == [second]  # the exit hint names the session in use
    assert [e["type"] for e in _events(workspace, first)].count("turn/start") == 1
    assert [e["type"] for e in _events(workspace, second)].count("turn/start") == 1


def test_new_keeps_a_configured_agents_session(workspace: Path) -> None:
    (workspace / "trio-agent.yml").write_text("agents: [{id: helper}]\n")
    result = _chat(workspace, "/new\n", "--agent", "helper")
    assert result.returncode == 0, result.stderr
    assert "/new: agent 'helper' comes from the config and keeps its session" in result.stderr


def test_sessions_without_persistence(workspace: Path) -> None:
    (workspace / "trio-agent.yml").write_text("persistence: {type: none}\n")
    result = _chat(workspace, "/sessions\n")
    assert result.returncode == 0, result.stderr
    assert "/sessions: the config keeps no sessions" in result.stderr
    assert "resume with" not in result.stderr


def test_resume_recaps_the_last_turns_escaping_control_characters(workspace: Path) -> None:
    (workspace / "evil.txt").write_text("\x1b]0;pwned\x07\u202eevil\n")
    first = _chat(workspace, "read evil.txt\nread missing.txt\n")
    (session,) = _session_ids(first.stderr)
    again = _chat(workspace, "", "--resume", session)
    assert again.returncode == 0, again.stderr
    err = again.stderr
    assert "recap: 2 turn(s) so far; the last 2:\n" in err
    assert "  [1] you: read evil.txt\n" in err
    assert "      agent: Here is `evil.txt`: ``` \\x1b]0;pwned\\x07\\u202eevil ```\n" in err
    assert "  [2] you: read missing.txt\n" in err
    assert "\x1b" not in err and "\u202e" not in err
    fresh = _chat(workspace, "")
    assert "recap:" not in fresh.stderr  # a new session has nothing to recap


def test_piped_input_keeps_no_history(workspace: Path) -> None:
    result = _chat(workspace, "read notes.txt\n")
    assert result.returncode == 0, result.stderr
    assert not history_path().parent.exists()


def test_the_tools_never_touch_the_history(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(workspace / "state"))  # inside the tools' root
    history = workspace / "state" / "trio-agent" / "history"
    history.parent.mkdir(parents=True)
    history.write_text("an earlier prompt\n")
    (workspace / "trio-agent.yml").write_text("tools: {approval: {allow: [write_file]}}\n")
    result = _chat(
        workspace,
        "read state/trio-agent/history\nwrite state/trio-agent/history: rm -rf ~\n",
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("one of the harness's own files") == 2, result.stderr
    assert "an earlier prompt" not in result.stdout + result.stderr
    assert history.read_text() == "an earlier prompt\n"


def test_history_path_honours_xdg_state_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", "/tmp/state-x")
    assert history_path() == Path("/tmp/state-x/trio-agent/history")
    monkeypatch.setenv("XDG_STATE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", "/home/someone")
    assert history_path() == Path("/home/someone/.local/state/trio-agent/history")


def test_compact_compacts_the_older_turns_now(workspace: Path) -> None:
    (workspace / "trio-agent.yml").write_text("compaction: {keep_turns: 1}\n")
    (workspace / "big.txt").write_text("a line worth pruning\n" * 50)
    result = _chat(
        workspace,
        "/compact\nread big.txt\nread notes.txt\n/compact sideways\n/compact prune\n"
        "/compact prune\n",
    )
    assert result.returncode == 0, result.stderr
    err = result.stderr
    assert "/compact: nothing to compact (the latest 1 closed turn(s) are kept" in err
    assert "/compact: the strategy is summary or prune" in err
    assert "compacted (prune): events 0-" in err
    (session,) = _session_ids(err)
    types = [e["type"] for e in _events(workspace, session)]
    assert types.count("compaction/prune") == 1  # the second one found nothing new to cover
    assert err.count("/compact: nothing to compact") == 2


def test_compact_without_compaction_configured(workspace: Path) -> None:
    result = _chat(workspace, "/compact\n")
    assert result.returncode == 0, result.stderr
    assert "/compact: compaction is not configured" in result.stderr
