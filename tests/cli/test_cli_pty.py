"""#23: chat through a real pty (pexpect): /help, streaming, Ctrl-C at an idle prompt exits,
Ctrl-D exits, the resume hint."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect
import pytest

CLI = Path(sys.executable).parent / "trio-agent"


def _spawn(cwd: Path, *args: str) -> pexpect.spawn[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    # Generous guard, not a timing assertion: the machine may be loaded.
    return pexpect.spawn(str(CLI), ["chat", *args], cwd=str(cwd), env=env, timeout=60)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("alpha\nbeta\n")
    return tmp_path


def test_chat_help_a_turn_and_ctrl_c_at_idle_exits(workspace: Path) -> None:
    child = _spawn(workspace)
    child.expect("type /help for commands")
    child.expect("> ")
    child.sendline("/help")
    child.expect("/cancel")
    child.sendline("read notes.txt")
    child.expect("alpha")  # the tool result note
    child.expect("\r\n> ")  # the idle prompt: the turn is over
    child.sendintr()  # idle: exits at once
    child.expect("resume with: trio-agent chat --resume ")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert b"Traceback" not in (child.before or b"")


def test_chat_ctrl_d_exits_with_the_resume_hint(workspace: Path) -> None:
    child = _spawn(workspace)
    child.expect("type /help for commands")
    child.sendeof()
    child.expect("resume with: trio-agent chat --resume ")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
