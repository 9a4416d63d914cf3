"""The shell tool: policy parsing and enforcement, timeouts, output caps, exit codes, cleanup.

These run real processes (``sh``, ``echo``, ``sleep``); the timeouts are real but short.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import trio
from builtin_helpers import Mount, call, fails, ok

from trio_agent.runtime import Context
from trio_agent.tools import DENIED, INVALID_ARGS, TOOL_TIMEOUT
from trio_agent.tools.builtin import (
    BuiltinToolError,
    BuiltinToolsConfigError,
    ShellPolicy,
    ShellPolicyError,
)
from trio_agent.tools.builtin._shell import special_characters

#: How a git command starts after the git defence.
GIT = [
    "git",
    "-c",
    "core.fsmonitor=",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "safe.bareRepository=explicit",
]

# --- the policy -------------------------------------------------------------------------------


def test_parse_policy() -> None:
    assert ShellPolicy.parse("deny") == ShellPolicy("deny")
    assert ShellPolicy.parse("allow") == ShellPolicy("allow")
    assert ShellPolicy.parse(["git status", "pytest -q", "'my tool' run"]) == ShellPolicy(
        "prefixes", (("git", "status"), ("pytest", "-q"), ("my tool", "run"))
    )
    assert ShellPolicy.parse(("ls",)).shown_prefixes == "`ls`"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("alow", "'alow' is not a shell policy"),
        ("git status", "a single prefix goes in a list too"),
        (5, 'got 5; expected "allow", "deny" or a list'),
        ([], "an empty prefix list allows nothing"),
        (["ls", "  "], r"shell\[1\]: an empty prefix would allow every command"),
        (["ls", 3], r"shell\[1\]: got 3"),
        (["git 'status"], r"cannot split .* \(No closing quotation\)"),
    ],
)
def test_parse_policy_errors(value: object, message: str) -> None:
    with pytest.raises(BuiltinToolsConfigError, match=message):
        ShellPolicy.parse(value)


def test_special_characters() -> None:
    assert special_characters("git status -s") == []
    assert special_characters("git status; rm -rf /") == [";"]
    assert special_characters("a && b || c | d") == list("&&|||")
    assert special_characters("cat <in >out 2>&1") == ["<", ">", ">", "&"]
    assert special_characters("echo $(id) `id` $HOME") == ["$", "(", ")", "`", "`", "$"]
    assert special_characters("ls *.py ?.txt [ab]") == ["*", "?", "["]
    assert special_characters("ls ~ a~b #c d#e") == ["~", "#"]
    assert special_characters("a\nb") == ["\n"]
    # Quoted and escaped characters are literal ($ and ` stay special inside double quotes).
    assert special_characters("git log '--format=%h|%s;$x' \\; \"a;b|c\"") == []
    assert special_characters('echo "$HOME `id`"') == ["$", "`", "`"]
    assert special_characters('echo "a\\"b;"') == []


def test_policy_argv() -> None:
    with pytest.raises(ShellPolicyError, match='the shell policy is "deny"'):
        ShellPolicy("deny").argv("ls")
    assert ShellPolicy("allow").argv("ls | wc -l") == ["/bin/sh", "-c", "ls | wc -l"]
    policy = ShellPolicy.parse(["git status", "echo"])
    assert policy.argv("echo 'a b'") == ["echo", "a b"]
    # git gets the git defence as -c options (see test_security_shell for what it refuses).
    assert policy.argv("git status") == [*GIT, "-c", "alias.status=", "status"]
    assert policy.argv("git status -s 'a b'") == [
        *GIT,
        "-c",
        "alias.status=",
        "status",
        "-s",
        "a b",
    ]
    for refused in ("git push", "git -c x=y status", "gitstatus", "git", "git statusx"):
        with pytest.raises(ShellPolicyError, match="is not allowed by the shell policy"):
            policy.argv(refused)
    for trick in (
        "git status; rm -rf /",
        "git status && rm -rf /",
        "git status || rm -rf /",
        "git status | sh",
        "git status $(rm -rf /)",
        "git status `rm -rf /`",
        "git status > /etc/passwd",
        "git status\nrm -rf /",
        "git status &",
    ):
        with pytest.raises(ShellPolicyError, match="uses shell syntax"):
            policy.argv(trick)
    for bad in ("", "   "):
        with pytest.raises(BuiltinToolError, match="command is empty"):
            policy.argv(bad)
    with pytest.raises(BuiltinToolError, match="No closing quotation"):
        policy.argv("echo 'oops")


def test_prefix_policy_passes_quoted_characters_literally() -> None:
    policy = ShellPolicy.parse(["git log"])
    assert policy.argv("git log '--format=%h|%s'")[-2:] == ["log", "--format=%h|%s"]


# --- running ----------------------------------------------------------------------------------


async def test_deny_refuses_everything(ctx: Context, mount: Mount, root: Path) -> None:
    await mount()  # the default policy is "deny"
    message = await fails(ctx, "shell", DENIED, command=f"touch {root}/pwned")
    assert message.startswith('shell commands are disabled here (the shell policy is "deny")')
    assert not (root / "pwned").exists()
    assert "disabled" in ctx.tools.get("shell").description


async def test_allow_runs_through_sh(ctx: Context, mount: Mount, root: Path) -> None:
    await mount(shell="allow")
    text = await ok(ctx, "shell", command="echo out; echo err >&2; pwd; exit 3")
    assert text == f"out\nerr\n{root}\n[exit code 3]"
    assert await ok(ctx, "shell", command="true") == "(no output)\n[exit code 0]"
    assert await ok(ctx, "shell", command="printf abc") == "abc\n[exit code 0]"
    assert await ok(ctx, "shell", command="kill -9 $$") == "(no output)\n[killed by signal SIGKILL]"
    # No input: a command reading stdin sees end-of-file at once.
    assert await ok(ctx, "shell", command="cat") == "(no output)\n[exit code 0]"


async def test_prefix_policy_runs_allowed_commands_only(
    ctx: Context, mount: Mount, root: Path
) -> None:
    await mount(shell=["echo", "ls -a"])
    assert await ok(ctx, "shell", command="echo 'a;b' \"c && d\"") == "a;b c && d\n[exit code 0]"
    (root / "f").write_text("")
    assert await ok(ctx, "shell", command="ls -a") == ".\n..\nf\n[exit code 0]"
    for command in (f"echo hi; touch {root}/pwned", f"echo hi && touch {root}/pwned"):
        message = await fails(ctx, "shell", DENIED, command=command)
        assert "uses shell syntax" in message
    message = await fails(ctx, "shell", DENIED, command=f"touch {root}/pwned")
    assert message == (
        f"command 'touch {root}/pwned' is not allowed by the shell policy; allowed commands "
        "start with one of: `echo`, `ls -a` (matched word by word, so options must come after "
        "the prefix); do the work with the file tools otherwise"
    )
    message = await fails(ctx, "shell", DENIED, command="ls -l")
    assert "is not allowed" in message
    assert not (root / "pwned").exists()
    description = ctx.tools.get("shell").description
    assert "`echo`, `ls -a`" in description and "without a shell" in description


async def test_prefix_command_not_found(ctx: Context, mount: Mount) -> None:
    await mount(shell=["no-such-program-xyz"])
    message = await fails(ctx, "shell", command="no-such-program-xyz --help")
    assert message.startswith("command not found: no-such-program-xyz")


async def test_timeout_kills_the_command(ctx: Context, mount: Mount, root: Path) -> None:
    await mount(shell="allow")
    start = trio.current_time()
    message = await fails(
        ctx, "shell", TOOL_TIMEOUT, command="echo started; sleep 5; echo never", timeout=0.2
    )
    assert trio.current_time() - start < 3
    assert message == (
        "command timed out after 0.2s and was killed; run something quicker, or pass a larger "
        "timeout (at most 30s). Output before the timeout:\nstarted\n"
    )


async def test_configured_timeout_is_the_ceiling(ctx: Context, mount: Mount) -> None:
    await mount(shell="allow", shell_timeout=0.2)
    start = trio.current_time()
    message = await fails(ctx, "shell", TOOL_TIMEOUT, command="sleep 5", timeout=100)
    assert trio.current_time() - start < 3
    assert message.startswith("command timed out after 0.2s")
    assert "at most 0.2s" in message


async def test_timeout_argument_errors(ctx: Context, mount: Mount) -> None:
    await mount(shell="allow")
    assert "positive number" in await fails(ctx, "shell", command="true", timeout=0)
    assert "positive number" in await fails(ctx, "shell", command="true", timeout=-1)
    await fails(ctx, "shell", INVALID_ARGS, command="true", timeout="soon")
    await fails(ctx, "shell", INVALID_ARGS, cmd="true")


async def test_background_processes_do_not_outlive_the_call(
    ctx: Context, mount: Mount, root: Path
) -> None:
    await mount(shell="allow")
    start = trio.current_time()
    text = await ok(ctx, "shell", command="sleep 30 & echo $!")
    assert trio.current_time() - start < 3  # did not wait for the sleep (nor the timeout)
    await assert_dead(int(text.splitlines()[0]))


async def test_cancelling_the_call_kills_the_command(
    ctx: Context, mount: Mount, root: Path
) -> None:
    await mount(shell="allow")
    with trio.move_on_after(0.5):
        await call(ctx, "shell", command="echo $$ > pid.txt; exec sleep 30")
    pid = int((root / "pid.txt").read_text())
    await assert_dead(pid)


def process_state(pid: int) -> str | None:
    """The state letter of process ``pid`` (``Z`` for a zombie), or None if it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None
    except OSError:  # no /proc: fall back to signal 0
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        return "?"


async def assert_dead(pid: int) -> None:
    """The process is gone, or a zombie awaiting a reaper that is not us."""
    with trio.fail_after(3):
        while process_state(pid) not in (None, "Z"):
            await trio.sleep(0.01)


async def test_output_is_capped_head_and_tail(ctx: Context, mount: Mount) -> None:
    await mount(shell="allow", max_output_bytes=100)
    text = await ok(ctx, "shell", command="seq 1 10000")  # 48894 bytes
    note = re.search(
        r"\n\[\.\.\. (\d+) bytes of output omitted: it had 48894 bytes and the cap is 100; "
        r"showing the first and last 50\. Redirect the output to a file and search it with "
        r"grep or read_file to see the rest \.\.\.\]\n",
        text,
    )
    assert note is not None, text
    assert int(note[1]) == 48894 - 100
    head, tail = text[: note.start()], text[note.end() :]
    assert head.startswith("1\n2\n3\n") and len(head) == 50
    assert tail.endswith("9999\n10000\n[exit code 0]")
    assert len(tail.removesuffix("[exit code 0]")) == 50


async def test_output_under_the_cap_is_exact(ctx: Context, mount: Mount) -> None:
    await mount(shell="allow", max_output_bytes=100)
    text = await ok(ctx, "shell", command="printf '%099d' 0")
    assert text == "0" * 99 + "\n[exit code 0]"
