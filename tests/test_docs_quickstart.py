"""Every command docs/quickstart.md shows is run, as written, by one real shell.

The quickstart marks its shell commands in ```console blocks: a line ``$ COMMAND`` (continued
by a trailing backslash or a here-document), followed by the output a reader sees. This test
runs each command in turn in one ``bash`` (so ``cd``, ``export`` and ``ID=$(...)`` carry over,
as they do for a reader) in an empty directory, with HOME and the XDG directories in tmp, no
API key from the outside, and the doc's example endpoint ``http://127.0.0.1:8080/v1`` replaced
by a fake OpenAI server from :mod:`trio_agent.testing`. Each command must exit 0, or the status
its ``# exit status N`` comment states, print no traceback, and print every output line the doc
shows under it (``…`` stands for any text; whitespace runs compare as one space).

A block right after ``<!-- not run: REASON -->`` is not run; those commands are pinned in
:data:`NOT_RUN`, so a command cannot leave the test by being tagged.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
import trio

from trio_agent.testing import RecordedRequest, SseResponse, open_fake_openai_server, sse_reply

DOC = Path(__file__).resolve().parent.parent / "docs" / "quickstart.md"

#: The endpoint the quickstart's examples use for "a local OpenAI-compatible server".
DOC_ENDPOINT = "http://127.0.0.1:8080/v1"

#: The commands the doc tags as not run: exactly these (the repository's make targets - the
#: tour is tests/cli/test_demo.py, the suite is this suite -, chat, which needs a terminal, and
#: send, which needs PostgreSQL).
NOT_RUN = {
    "make demo",
    "make test",
    "trio-agent chat",
    "trio-agent chat --continue --model gpt-4o",
    "trio-agent -c shared.yml send support-4711 the invoice is attached",
}

_FENCE = re.compile(r"^(`{3,})(\S*)\s*$")
_NOT_RUN = re.compile(r"^<!--\s*not run:\s*(.+?)\s*-->$")
_STATUS = re.compile(r"\s#\s*exit status (\d+)\s*$")
_HEREDOC = re.compile(r"<<-?\s*'?\"?([A-Za-z_]+)'?\"?")


@attrs.frozen
class Command:
    """One ``$ ...`` entry of a console block."""

    text: str
    line: int
    status: int
    expected: tuple[str, ...]
    skipped: str | None


def _commands(markdown: str) -> list[Command]:
    """The ``$`` commands of every console block, in order."""
    lines = markdown.splitlines()
    commands: list[Command] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        ticks, lang = fence.groups()
        start = i
        i += 1
        body: list[tuple[int, str]] = []
        while i < len(lines) and lines[i].strip() != ticks:
            body.append((i + 1, lines[i]))
            i += 1
        i += 1
        if lang in ("sh", "bash", "shell", "zsh"):
            raise AssertionError(
                f"{DOC.name}:{start + 1}: a ```{lang} block; shell commands go in ```console "
                "blocks so this test runs them"
            )
        if lang != "console":
            continue
        before = next((x for x in reversed(lines[:start]) if x.strip()), "")
        tag = _NOT_RUN.match(before.strip())
        commands.extend(_parse_block(body, tag.group(1) if tag else None))
    return commands


def _parse_block(body: list[tuple[int, str]], skipped: str | None) -> list[Command]:
    result: list[Command] = []
    j = 0
    while j < len(body):
        number, line = body[j]
        assert line.startswith("$ "), f"{DOC.name}:{number}: output before any '$ ' command"
        text = line[2:]
        j += 1
        while text.endswith("\\") and j < len(body):
            text += "\n" + body[j][1]
            j += 1
        heredoc = _HEREDOC.search(text)
        if heredoc:
            while j < len(body):
                text += "\n" + body[j][1]
                j += 1
                if body[j - 1][1].strip() == heredoc.group(1):
                    break
        expected: list[str] = []
        while j < len(body) and not body[j][1].startswith("$ "):
            expected.append(body[j][1])
            j += 1
        status = _STATUS.search(text)
        result.append(
            Command(
                text=text,
                line=number,
                status=int(status.group(1)) if status else 0,
                expected=tuple(expected),
                skipped=skipped,
            )
        )
    return result


def _squash(text: str) -> str:
    return " ".join(text.split())


def _pattern(expected: str) -> re.Pattern[str]:
    """A doc output line as a regex: ``…`` is any text, whitespace runs are one space."""
    return re.compile(".*".join(re.escape(part) for part in _squash(expected).split("…")))


def _script(commands: list[Command], out: Path) -> str:
    """One bash script: each command in a group of the current shell (its assignments and
    ``cd`` persist), stdin from /dev/null unless it says otherwise, its streams and status
    into ``out``."""
    parts = ["set +e"]
    for k, command in enumerate(commands):
        parts.append(
            f"{{ {command.text}\n}} </dev/null >{out}/{k}.out 2>{out}/{k}.err\n"
            f"echo $? >{out}/{k}.status"
        )
    return "\n".join(parts) + "\n"


def _env(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.endswith(("_API_KEY", "_BASE_URL")) or k.startswith(("TRIO_AGENT_", "XDG_")))
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(home)
    for name in ("CONFIG", "DATA", "STATE", "CACHE"):
        env[f"XDG_{name}_HOME"] = str(home / f".xdg-{name.lower()}")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _reply(request: RecordedRequest) -> SseResponse:
    return sse_reply(f"Hello from {request.json['model']}.")


def test_the_doc_tags_exactly_the_commands_that_are_not_run() -> None:
    tagged = {c.text for c in _commands(DOC.read_text()) if c.skipped}
    assert tagged == NOT_RUN


def test_output_patterns() -> None:
    assert _pattern("session: trio-agent-session-…").fullmatch("session: trio-agent-session-5f")
    assert _pattern("a  b").fullmatch("a b")
    assert not _pattern("a (b)").fullmatch("a b")


@pytest.mark.trio_timeout(400)
async def test_every_quickstart_command_runs_as_documented(tmp_path: Path) -> None:
    commands = [c for c in _commands(DOC.read_text()) if c.skipped is None]
    assert len(commands) >= 30, "the quickstart lost its commands?"
    work, home, out = tmp_path / "work", tmp_path / "home", tmp_path / "out"
    for d in (work, home, out):
        d.mkdir()
    async with open_fake_openai_server([_reply] * 50) as server:
        substituted = [
            attrs.evolve(c, text=c.text.replace(DOC_ENDPOINT, server.base_url)) for c in commands
        ]
        assert any(c.text != s.text for c, s in zip(commands, substituted, strict=True))
        script = tmp_path / "quickstart.sh"
        script.write_text(_script(substituted, out))
        with (tmp_path / "bash.out").open("wb") as o, (tmp_path / "bash.err").open("wb") as e:
            process = await trio.lowlevel.open_process(
                ["bash", str(script)],
                cwd=work,
                env=_env(home),
                stdin=subprocess.DEVNULL,
                stdout=o,
                stderr=e,
                start_new_session=True,
            )
        try:
            with trio.move_on_after(360) as deadline:
                await process.wait()
            if deadline.cancelled_caught:
                stuck = next(
                    c for k, c in enumerate(commands) if not (out / f"{k}.status").exists()
                )
                raise AssertionError(f"{DOC.name}:{stuck.line}: $ {stuck.text}: still running")
        finally:
            # bash and whatever it started share its process group: nothing outlives the test.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            with trio.CancelScope(shield=True):
                await process.wait()
    assert process.returncode == 0, (tmp_path / "bash.err").read_text()
    problems: list[str] = []
    for k, command in enumerate(commands):
        where = f"{DOC.name}:{command.line}: $ {command.text}"
        status_file = out / f"{k}.status"
        if not status_file.exists():
            problems.append(f"{where}: did not run")
            continue
        status = int(status_file.read_text())
        stdout = (out / f"{k}.out").read_text(errors="replace")
        stderr = (out / f"{k}.err").read_text(errors="replace")
        shown = f"--- stdout\n{stdout}--- stderr\n{stderr}"
        if status != command.status:
            problems.append(
                f"{where}: exit status {status}, the doc says {command.status}\n{shown}"
            )
        if "Traceback" in stdout + stderr:
            problems.append(f"{where}: printed a traceback\n{shown}")
        printed = [_squash(line) for line in (stdout + "\n" + stderr).splitlines()]
        for line in command.expected:
            if _squash(line) in ("", "…"):
                continue
            pattern = _pattern(line)
            if not any(pattern.fullmatch(p) for p in printed):
                problems.append(f"{where}: no output line matches {line!r}\n{shown}")
    assert not problems, "\n\n".join(problems)
    models = [r.json["model"] for r in server.requests]
    assert {"gpt-4o-mini", "gpt-4o", "deepseek-chat", "qwen2.5-coder"} <= set(models), models
    keys = {r.headers.get("authorization") for r in server.requests}
    assert keys == {"Bearer sk-your-key"}, keys
