"""The shell policy and running one command under it.

Policy (``BuiltinToolsConfig.shell``):

* ``"deny"`` — every command is refused (``DENIED``).
* ``"allow"`` — the command text runs as ``/bin/sh -c COMMAND``: pipes, ``&&``, redirection,
  variables and globs all work, and the command can do anything the process's user can.
* a list of prefixes such as ``["git status", "pytest -q"]`` — the command is split into words
  with :func:`shlex.split` (POSIX rules, like ``sh`` splits words) and runs **directly, without
  a shell**, if its first words equal one prefix's words (``git status -s`` matches
  ``git status``; ``git push`` and ``git -c x=y status`` do not). Because there is no shell,
  the command is refused if it contains anything ``sh`` would treat specially outside quotes —
  ``; & | < > ( )``, a newline, `````, ``$``, ``* ? [``, or ``~`` / ``#`` starting a word —
  so that ``git status; rm -rf /`` or ``git status && rm -rf /`` can neither run the second
  command nor silently turn into different arguments. Quote such characters to pass them
  literally (``git log '--format=%h|%s'``). Security does not rest on that check: with a prefix
  list nothing is ever handed to a shell. A prefix is not a sandbox either: it chooses the
  program, not what the program does (``pytest`` runs the tests the model wrote); approvals
  are the gate.

With a prefix list, a git command also passes the git defence (:mod:`._git`), and a command
whose arguments name a protected path is refused (:func:`refuse_protected_arguments`).

Running: the process starts in the workspace root, in a new session (its own process group),
with stdin from ``/dev/null``, stderr merged into stdout and the scrubbed environment of
:mod:`._environment` (never the process's own: no API keys). Output is captured up to a byte cap,
keeping the first and last halves. When the call ends — the command exited, timed out, or the
call was cancelled — the whole process group is killed with ``SIGKILL``, so nothing the command
started outlives the call (a process that left the group with ``setsid`` is out of reach).
"""

from __future__ import annotations

import math
import os
import shlex
import signal
import subprocess
from collections.abc import Mapping
from typing import Literal

import attrs
import trio

from ...redaction import redact_known
from ._errors import BuiltinToolError, BuiltinToolsConfigError, ShellPolicyError
from ._git import git_argv, is_git
from ._workspace import Workspace

__all__ = [
    "ShellOutcome",
    "ShellPolicy",
    "refuse_protected_arguments",
    "run_command",
    "special_characters",
]

#: How long a killed process group may take to be reaped (shielded) before we stop waiting.
_REAP_TIMEOUT = 5.0
_READ_SIZE = 65536

_OPERATORS = frozenset(";&|<>()`$*?[\n")
_WORD_START = frozenset("~#")
_BLANKS = frozenset(" \t")


def _q(value: str) -> str:
    return shlex.quote(value) if value else '""'


def special_characters(command: str) -> list[str]:
    """The characters of ``command`` that ``sh`` would interpret rather than pass literally:
    operators, substitutions, globs, and ``~`` / ``#`` at the start of a word. Characters
    inside single quotes, escaped with a backslash, or inside double quotes (except ``$`` and
    `````, which ``sh`` expands there) are literal."""
    found: list[str] = []
    quote: str | None = None
    word_start = True
    i = 0
    while i < len(command):
        c = command[i]
        if quote == "'":
            if c == "'":
                quote = None
        elif quote == '"':
            if c == "\\":
                i += 1
            elif c == '"':
                quote = None
            elif c in "$`":
                found.append(c)
        elif c == "\\":
            i += 1
            word_start = False
        elif c in "'\"":
            quote = c
            word_start = False
        elif c in _BLANKS:
            word_start = True
        else:
            if c in _OPERATORS or (word_start and c in _WORD_START):
                found.append(c)
            word_start = False
        i += 1
    return found


@attrs.frozen
class ShellPolicy:
    """Which commands the ``shell`` tool runs: ``mode`` ``"allow"``, ``"deny"`` or
    ``"prefixes"`` (then ``prefixes`` holds each allowed prefix as words).

    Build one with :meth:`parse` from the config value (``"allow"``, ``"deny"`` or a sequence
    of prefix strings).
    """

    mode: Literal["allow", "deny", "prefixes"]
    prefixes: tuple[tuple[str, ...], ...] = ()

    @classmethod
    def parse(cls, value: object, *, where: str = "shell") -> ShellPolicy:
        """The policy for a config value; ``where`` names the setting in error messages.

        Raises:
            BuiltinToolsConfigError: not ``"allow"``, ``"deny"`` or a sequence of non-empty,
                parseable prefix strings.
        """
        expected = (
            'expected "allow", "deny" or a list of allowed command prefixes such as '
            '["git status", "pytest"]'
        )
        if value == "allow" or value == "deny":
            return cls(value)
        if isinstance(value, str):
            raise BuiltinToolsConfigError(
                f"{where}: {value!r} is not a shell policy; {expected} (a single prefix "
                "goes in a list too)"
            )
        if not isinstance(value, tuple | list):
            raise BuiltinToolsConfigError(f"{where}: got {value!r}; {expected}")
        prefixes: list[tuple[str, ...]] = []
        for i, prefix in enumerate(value):
            if not isinstance(prefix, str):
                raise BuiltinToolsConfigError(
                    f"{where}[{i}]: got {prefix!r}; each prefix is a string such as 'git status'"
                )
            try:
                words = tuple(shlex.split(prefix))
            except ValueError as exc:
                raise BuiltinToolsConfigError(
                    f"{where}[{i}]: cannot split {prefix!r} into words ({exc}); fix its quoting"
                ) from None
            if not words:
                raise BuiltinToolsConfigError(
                    f"{where}[{i}]: an empty prefix would allow every command; use "
                    '"allow" for that, or name the command'
                )
            prefixes.append(words)
        if not prefixes:
            raise BuiltinToolsConfigError(
                f'{where}: an empty prefix list allows nothing; use "deny" for that'
            )
        return cls("prefixes", tuple(prefixes))

    @property
    def shown_prefixes(self) -> str:
        """The allowed prefixes, quoted and comma-separated (empty unless mode is prefixes)."""
        return ", ".join(f"`{shlex.join(p)}`" for p in self.prefixes)

    def argv(self, command: str) -> list[str]:
        """The argv to run for ``command``, or an error saying why the policy refuses it.

        Raises:
            ShellPolicyError: shell is denied; with a prefix list, the command contains shell
                syntax, matches no prefix, or is a git command the git defence refuses
                (:mod:`._git`).
            BuiltinToolError: the command is empty or cannot be split into words.
        """
        if self.mode == "deny":
            raise ShellPolicyError(
                'shell commands are disabled here (the shell policy is "deny"); do the work '
                "with the file tools (read_file, write_file, edit_file, list_dir, glob, grep) "
                "instead, or ask the user to allow shell commands"
            )
        if not command.strip():
            raise BuiltinToolError("command is empty; pass the command line to run")
        if "\0" in command:
            raise BuiltinToolError("command contains a NUL byte, which no command line can")
        if self.mode == "allow":
            return ["/bin/sh", "-c", command]
        special = special_characters(command)
        if special:
            shown = " ".join(dict.fromkeys("newline" if c == "\n" else c for c in special))
            raise ShellPolicyError(
                f"command {command!r} uses shell syntax ({shown}), but with the allowed-"
                "prefix policy commands run without a shell, so pipes, ;, &&, redirection, "
                "variables, globs and substitutions are not available; run one plain command "
                "per call, and quote characters you mean literally"
            )
        try:
            words = shlex.split(command)
        except ValueError as exc:
            raise BuiltinToolError(
                f"cannot split command {command!r} into words ({exc}); fix its quoting"
            ) from None
        for prefix in self.prefixes:
            if tuple(words[: len(prefix)]) == prefix:
                return git_argv(words, command) if is_git(words[0]) else words
        raise ShellPolicyError(
            f"command {command!r} is not allowed by the shell policy; allowed commands start "
            f"with one of: {self.shown_prefixes} (matched word by word, so options must come "
            "after the prefix); do the work with the file tools otherwise"
        )


def refuse_protected_arguments(ws: Workspace, argv: list[str], command: str) -> None:
    """Refuse a prefix-policy command whose arguments name a protected path.

    Each argument, and the value of each ``--option=value``, is taken as a path relative to
    the root (where commands run); if that names a protected path (``.git``, the harness's
    files, ``protect`` globs), the command is refused. This stops the plain routes around the
    file tools' protection (``git diff --output=trio-agent.yml``, ``pytest
    --basetemp=.trio-agent``); it cannot see paths a program computes itself.

    Raises:
        ShellPolicyError: an argument names a protected path.
    """
    for word in argv[1:]:
        values = [word]
        if word.startswith("-") and "=" in word:
            values.append(word.partition("=")[2])
        for value in values:
            if not value or "\0" in value:
                continue
            candidate = os.path.join(ws.root, value)
            for path in (os.path.normpath(candidate), os.path.realpath(candidate)):
                reason = ws.protection(path)
                if reason is not None:
                    raise ShellPolicyError(
                        f"command {command!r} is refused: its argument {value!r} names a "
                        f"protected path ({reason}); commands may not read or change it"
                    )


def _check_time_limit(value: float) -> None:
    if isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"time_limit must be a positive number of seconds, got {value!r}")


@attrs.define(eq=False)
class _Capture:
    """Keeps the first and last ``limit // 2`` bytes of a stream, and counts the rest."""

    limit: int
    head: bytearray = attrs.field(factory=bytearray)
    tail: bytearray = attrs.field(factory=bytearray)
    total: int = 0

    def feed(self, data: bytes | bytearray) -> None:
        self.total += len(data)
        room = self.limit - self.limit // 2 - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            excess = len(self.tail) - self.limit // 2
            if excess > 0:
                del self.tail[:excess]

    def render(self) -> str:
        omitted = self.total - len(self.head) - len(self.tail)
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        if omitted <= 0:
            return head + tail
        # A known secret across either cut would leave a piece no later redaction recognises.
        head, tail = redact_known(head, cut_end=True), redact_known(tail, cut_start=True)
        return (
            f"{head}\n[... {omitted} bytes of output omitted: it had {self.total} bytes and the "
            f"cap is {self.limit}; showing the first and last {self.limit // 2}. Redirect the "
            "output to a file and search it with grep or read_file to see the rest ...]\n"
            f"{tail}"
        )


@attrs.frozen
class ShellOutcome:
    """How a command ended: its (capped) output, exit status, and whether it timed out.

    ``returncode`` is negative when a signal ended the process (``-9`` for ``SIGKILL``).
    """

    output: str
    returncode: int | None
    timed_out: bool

    @property
    def status(self) -> str:
        """``exit code N`` or ``killed by signal NAME``."""
        code = self.returncode
        if code is None:
            return "exit status unknown"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            return f"killed by signal {name}"
        return f"exit code {code}"


def _kill_group(process: trio.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


async def _drain(stream: trio.abc.ReceiveStream, capture: _Capture) -> None:
    while chunk := await stream.receive_some(_READ_SIZE):
        capture.feed(chunk)


async def run_command(
    argv: list[str],
    *,
    cwd: str,
    time_limit: float,
    max_output_bytes: int,
    env: Mapping[str, str],
) -> ShellOutcome:
    """Run ``argv`` in ``cwd`` with exactly the environment ``env`` and stderr merged into
    stdout, for at most ``time_limit`` seconds.

    The process runs in its own process group, which is killed (``SIGKILL``) when the command
    exits, times out, or this call is cancelled; the process is then reaped (shielded, at most
    a few seconds). Cancellation propagates after that cleanup.

    Raises:
        BuiltinToolError: the program cannot be started (not found, not executable).
    """
    _check_time_limit(time_limit)
    capture = _Capture(max_output_bytes)
    try:
        process = await trio.lowlevel.open_process(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(env),
        )
    except FileNotFoundError:
        raise BuiltinToolError(
            f"command not found: {_q(argv[0])}; check the program name (it is looked up on PATH)"
        ) from None
    except PermissionError:
        raise BuiltinToolError(f"cannot execute {_q(argv[0])}: permission denied") from None
    except OSError as exc:
        raise BuiltinToolError(f"cannot start {_q(argv[0])}: {exc.strerror or exc}") from None
    stdout = process.stdout
    assert stdout is not None
    try:
        with trio.move_on_after(time_limit) as deadline:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_drain, stdout, capture)
                await process.wait()
                # The command is done: what it left running in the background dies with it
                # (and releases the pipe, so the drain sees end-of-file).
                _kill_group(process)
    finally:
        _kill_group(process)
        with trio.move_on_after(_REAP_TIMEOUT) as cleanup:
            cleanup.shield = True
            await process.wait()
            await stdout.aclose()
    return ShellOutcome(capture.render(), process.returncode, deadline.cancelled_caught)
