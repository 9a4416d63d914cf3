"""#23: chat on a real terminal (pexpect drives a pty): the state prompt, steering on its own
line, Ctrl-C mid-turn, Ctrl-C and SIGTERM at the idle prompt (the terminal restored), Ctrl-D,
/help, Ctrl-C during /compact, a failed turn's reason, the resume recap, and the line history
across two runs."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import termios
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

CLI = Path(sys.executable).parent / "trio-agent"
#: A shell command that runs until the test creates ``go``: a turn held open on purpose.
HOLD = "run until [ -e go ]; do sleep 0.05; done"
HOLDING_CONFIG = "tools: {shell: allow, approval: {allow: [shell]}}\n"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["TERM"] = "xterm"  # readline's real key bindings, whatever the machine's TERM
    return env


@contextlib.contextmanager
def _chat(cwd: Path, *args: str, command: str | None = None) -> Iterator[pexpect.spawn[bytes]]:
    """``trio-agent chat ARGS`` on a pty (or ``sh -c COMMAND``), killed when the test ends."""
    # Generous guard, not a timing assertion: the machine may be loaded.
    program, argv = (str(CLI), ["chat", *args]) if command is None else ("/bin/sh", ["-c", command])
    child: pexpect.spawn[bytes] = pexpect.spawn(program, argv, cwd=str(cwd), env=_env(), timeout=60)
    try:
        yield child
    finally:
        child.close(force=True)


def _prompt(child: pexpect.spawn[bytes]) -> None:
    """The idle prompt: a status line (short session id, model), then ``> ``."""
    child.expect(rb"\r\n\[[0-9a-f]{8} \xc2\xb7 [^\]\r\n]+\]\r\n> ")


def _finish(child: pexpect.spawn[bytes]) -> bytes:
    child.expect(pexpect.EOF)
    rest = child.before or b""
    child.close()
    assert b"Traceback" not in rest
    return rest


def _session_of(text: bytes) -> str:
    match = re.search(rb"resume with: trio-agent chat --resume (\S+)", text)
    assert match is not None, text
    return match.group(1).decode()


def _events(cwd: Path, session_id: str) -> list[dict[str, object]]:
    log = cwd / ".trio-agent" / "sessions" / f"{session_id}.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()[1:]]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("alpha\nbeta\n")
    return tmp_path


def test_steering_is_echoed_on_its_own_line(workspace: Path) -> None:
    (workspace / "trio-agent.yml").write_text(HOLDING_CONFIG)
    with _chat(workspace) as child:
        _prompt(child)
        child.sendline(HOLD)
        child.expect_exact("→ shell ".encode())  # the command runs until `go` exists
        child.sendline("")
        child.expect_exact("\r\n(busy: a turn is running; type to steer it, Ctrl-C cancels it")
        child.sendline("mind the gap")
        child.expect_exact("\r\n(steering) mind the gap\r\n")
        (workspace / "go").touch()
        _prompt(child)
        child.sendline("/exit")
        session = _session_of(_finish(child))
    assert child.exitstatus == 0
    events = _events(workspace, session)
    assert any(e["type"] == "steering/message" for e in events), [e["type"] for e in events]


def test_ctrl_c_mid_turn_cancels_it_and_the_prompt_returns(workspace: Path) -> None:
    (workspace / "trio-agent.yml").write_text(HOLDING_CONFIG)
    with _chat(workspace) as child:
        _prompt(child)
        child.sendline(HOLD)
        child.expect_exact("→ shell ".encode())
        child.sendintr()
        child.expect_exact("^C: cancelling the turn")
        child.expect_exact("ABORTED: the turn was cancelled")
        _prompt(child)
        child.sendline("read notes.txt")  # the session goes on
        child.expect_exact("alpha")
        _prompt(child)
        child.sendline("/exit")
        session = _session_of(_finish(child))
    assert child.exitstatus == 0
    ends = [e["data"]["reason"] for e in _events(workspace, session) if e["type"] == "turn/end"]  # type: ignore[index]
    assert ends == ["aborted", "completed"]


def test_ctrl_c_at_the_idle_prompt_exits_and_restores_the_terminal(workspace: Path) -> None:
    # The shell traps SIGINT (so it goes on after chat exits; its child gets the default
    # disposition back) and then prints the terminal modes chat left behind.
    command = f"trap : INT; '{CLI}' chat; echo status=$?; stty -a"
    with _chat(workspace, command=command) as child:
        _prompt(child)
        child.send("half-typed")  # readline holds the terminal in raw mode now
        child.sendintr()
        child.expect_exact("resume with: trio-agent chat --resume ")
        rest = _finish(child)
    assert b"status=0" in rest
    modes = rest.split(b"status=0", 1)[1].decode()
    assert re.search(r"(?<![-\w])icanon\b", modes), modes
    assert re.search(r"(?<![-\w])echo\b", modes), modes


def test_ctrl_d_during_a_turn_exits_after_it(workspace: Path) -> None:
    (workspace / "trio-agent.yml").write_text(HOLDING_CONFIG)
    with _chat(workspace) as child:
        _prompt(child)
        child.sendline(HOLD)
        child.expect_exact("→ shell ".encode())
        child.sendeof()
        child.expect_exact("(exiting after this turn")
        (workspace / "go").touch()
        session = _session_of(_finish(child))
    assert child.exitstatus == 0
    ends = [e["data"]["reason"] for e in _events(workspace, session) if e["type"] == "turn/end"]  # type: ignore[index]
    assert ends == ["completed"]


def test_ctrl_d_at_the_prompt_help_and_completion(workspace: Path) -> None:
    with _chat(workspace) as child:
        _prompt(child)
        child.send("/he")
        child.expect_exact("/he")  # readline echoes what is typed
        child.send("lp\r")
        for command in ("/cancel", "/new", "/model", "/sessions", "/compact", "/exit"):
            child.expect_exact(command)
        _prompt(child)
        child.sendline("/nope")
        child.expect_exact("unknown command '/nope'; /help lists them")
        _prompt(child)
        child.send("/sess\t\r")  # Tab completes a command
        child.expect("no persisted sessions yet|resume one with: ")
        _prompt(child)
        child.sendeof()
        child.expect_exact("resume with: trio-agent chat --resume ")
        _finish(child)
    assert child.exitstatus == 0


def test_a_failed_turn_shows_its_code_and_message(workspace: Path) -> None:
    with socket.socket() as closed:  # bound, not listening: connecting is refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        (workspace / "trio-agent.yml").write_text(
            "llm:\n"
            f"  providers: [{{name: dead, type: openai, base_url: 'http://127.0.0.1:{port}/v1',"
            " api_key_env: null, models: [m1]}]\n"
            "  retry: {max_attempts: 1}\n"
        )
        with _chat(workspace) as child:
            _prompt(child)
            child.sendline("hello")
            child.expect_exact(f"TRANSPORT: request to http://127.0.0.1:{port}/v1 failed")
            _prompt(child)
            child.sendline("/exit")
            _finish(child)
    assert child.exitstatus == 0


def test_continue_prints_a_recap_of_the_last_turns(workspace: Path) -> None:
    (workspace / "evil.txt").write_text("\x1b[2Jgone\n")
    lines = "read notes.txt\nread evil.txt\nlist files\nread notes.txt\n"
    first = subprocess.run(
        [str(CLI), "chat"],
        cwd=workspace,
        env=_env(),
        input=lines.encode(),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert first.returncode == 0, first.stderr.decode()
    session = _session_of(first.stderr)
    with _chat(workspace, "--continue") as child:
        child.expect_exact("recap: 4 turn(s) so far; the last 3:")
        child.expect_exact("[2] you: read evil.txt")
        child.expect_exact("agent: Here is `evil.txt`: ``` \\x1b[2Jgone ```")
        child.expect_exact("[3] you: list files")
        child.expect_exact("[4] you: read notes.txt")
        child.expect_exact("agent: Here is `notes.txt`: ``` alpha beta ```")
        _prompt(child)
        recap = child.before or b""
        assert b"\x1b[2J" not in recap  # the model's text cannot drive the terminal
        child.sendeof()
        assert _session_of(_finish(child)) == session
    assert child.exitstatus == 0


def test_the_history_persists_across_two_runs(workspace: Path) -> None:
    state = Path(os.environ["XDG_STATE_HOME"])
    history = state / "trio-agent" / "history"
    with _chat(workspace) as child:
        _prompt(child)
        child.sendline("read notes.txt")
        child.expect_exact("alpha")
        _prompt(child)
        child.sendline(" list files")  # a line that starts with a space is not kept
        child.expect_exact("notes.txt")
        _prompt(child)
        child.sendline("/exit")
        _finish(child)
    assert history.read_text() == "read notes.txt\n/exit\n"
    assert stat.S_IMODE(history.stat().st_mode) == 0o600
    assert stat.S_IMODE(history.parent.stat().st_mode) == 0o700
    with _chat(workspace) as child:
        _prompt(child)
        child.send("\x1b[A\x1b[A")  # up twice: the earlier run's first line
        child.expect_exact("read notes.txt")
        child.send("\r")
        child.expect_exact("Reading `notes.txt`.")
        _prompt(child)
        child.sendline("/exit")
        _finish(child)
    assert history.read_text() == "read notes.txt\n/exit\nread notes.txt\n/exit\n"


def test_ctrl_d_at_an_approval_question_denies_and_exits_after_the_turn(workspace: Path) -> None:
    with _chat(workspace) as child:
        _prompt(child)
        child.sendline("write x.txt: one")
        child.expect_exact("allow? [y]es once / [n]o / [a]lways for this tool in this session: ")
        child.sendeof()
        child.expect_exact("(exiting after this turn")
        child.expect_exact("← error DENIED: ".encode())
        session = _session_of(_finish(child))
    assert child.exitstatus == 0
    assert not (workspace / "x.txt").exists()
    ends = [e["data"]["reason"] for e in _events(workspace, session) if e["type"] == "turn/end"]  # type: ignore[index]
    assert ends == ["completed"]


def test_sigterm_at_the_idle_prompt_restores_the_terminal(workspace: Path) -> None:
    with _chat(workspace) as child:
        _prompt(child)
        child.send("half-typed")
        child.expect_exact("half-typed")  # readline holds the terminal in raw mode now
        assert not termios.tcgetattr(child.child_fd)[3] & termios.ICANON
        child.kill(signal.SIGTERM)
        child.expect_exact("trio-agent: stopped by SIGTERM")
        child.expect(pexpect.EOF)
        # The master side of a pty reads the terminal's modes (Linux).
        modes = termios.tcgetattr(child.child_fd)[3]
        child.close()
    assert child.exitstatus == 143
    assert modes & termios.ICANON and modes & termios.ECHO


def test_a_ctrl_d_typed_before_the_prompt_is_not_lost(workspace: Path) -> None:
    # A Ctrl-D typed in cooked mode just before the prompt left it reaches readline as the
    # NUL byte the kernel keeps for it: sent as such, it must end the chat like Ctrl-D.
    with _chat(workspace) as child:
        _prompt(child)
        child.send("\0")
        child.expect_exact("resume with: trio-agent chat --resume ")
        _finish(child)
    assert child.exitstatus == 0


def test_ctrl_c_cancels_a_compaction_not_the_chat(workspace: Path) -> None:
    # The summarising provider's server accepts connections and never answers.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        (workspace / "trio-agent.yml").write_text(
            "llm:\n"
            "  providers:\n"
            "    - {name: offline, type: offline}\n"
            f"    - {{name: silent, type: openai, base_url: 'http://127.0.0.1:{port}', models: [m]}}\n"
            "compaction: {keep_turns: 0, provider: silent, model: m}\n"
        )
        with _chat(workspace) as child:
            _prompt(child)
            child.sendline("read notes.txt")
            _prompt(child)
            child.sendline("/compact")
            silent.settimeout(60)  # generous guard: the summary request is under way
            connection, _ = silent.accept()
            with connection:
                child.sendintr()
                child.expect_exact("^C: cancelling the compaction")
                child.expect_exact("/compact: cancelled, the history is as it was")
                _prompt(child)
                child.sendline("/exit")
                session = _session_of(_finish(child))
    assert child.exitstatus == 0
    types = [e["type"] for e in _events(workspace, session)]
    assert "compaction/summary" not in types
    assert types.count("turn/end") == 1
