"""#14: chat asks before effects, over a real pty (pexpect): y, n, a (a second call is not
asked), Ctrl-C at the question cancels the turn."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect

CLI = Path(sys.executable).parent / "trio-agent"
QUESTION = "allow? [y]es once / [n]o / [a]lways for this tool in this session: "


def _spawn(cwd: Path) -> pexpect.spawn[bytes]:
    (cwd / "trio-agent.yml").write_text("persistence: {type: memory}\n")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    # Generous guard, not a timing assertion: the machine may be loaded.
    return pexpect.spawn(str(CLI), ["chat"], cwd=str(cwd), env=env, timeout=60)


def _turn_over(child: pexpect.spawn[bytes]) -> None:
    child.expect_exact("\r\n> ")


def test_chat_asks_y_n_a(tmp_path: Path) -> None:
    child = _spawn(tmp_path)
    child.expect_exact("type /help for commands")
    child.expect_exact("> ")

    child.sendline("write yes.txt: one")
    child.expect_exact("approval: write_file (")
    child.expect_exact("path: yes.txt")
    child.expect_exact("content: one")
    child.expect_exact("reason: ")
    child.expect_exact(QUESTION)
    child.sendline("y")
    _turn_over(child)
    assert (tmp_path / "yes.txt").read_text() == "one"

    child.sendline("write no.txt: two")
    child.expect_exact(QUESTION)
    child.sendline("n")
    _turn_over(child)
    assert not (tmp_path / "no.txt").exists()

    child.sendline("write always.txt: three")
    child.expect_exact(QUESTION)
    child.sendline("a")
    _turn_over(child)
    assert (tmp_path / "always.txt").read_text() == "three"

    child.sendline("write again.txt: four")  # remembered: not asked
    _turn_over(child)
    assert (tmp_path / "again.txt").read_text() == "four"
    assert QUESTION.encode() not in (child.before or b"")

    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert b"Traceback" not in (child.before or b"")


def test_chat_ctrl_c_at_the_question_cancels_the_turn(tmp_path: Path) -> None:
    child = _spawn(tmp_path)
    child.expect_exact("type /help for commands")
    child.expect_exact("> ")
    child.sendline("write cancelled.txt: x")
    child.expect_exact(QUESTION)
    child.sendintr()
    child.expect_exact("^C: cancelling the turn")
    _turn_over(child)
    assert not (tmp_path / "cancelled.txt").exists()
    child.sendline("write next.txt: y")  # the session goes on, and asks again
    child.expect_exact(QUESTION)
    child.sendline("y")
    _turn_over(child)
    assert (tmp_path / "next.txt").read_text() == "y"
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
