"""grep: choose the files in a worker thread, search them in a process that can be killed.

Python's ``re`` cannot be interrupted once a match has started, and a pattern such as
``(a+)+$`` takes exponential time on a line of ``a``\\ s. So the matching runs in a separate
interpreter (:mod:`._grep_worker`, started with ``python -I -S``), which is killed when the
time limit passes or the call is cancelled: its work really stops. Choosing the files — the
workspace confinement, the protected paths, the skipped directories, the ``glob`` filter —
stays here, in a thread that stops at its next check when abandoned. See docs/design.md
("Built-in tools hardening") for why a process rather than a linear-time engine.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import attrs
import trio

from .._types import TOOL_TIMEOUT
from ._errors import BuiltinToolError, ProtectedPathError
from ._files import (
    SKIPPED_DIRECTORIES,
    Limits,
    Stopped,
    in_thread,
    os_errors,
    pattern_parts,
    plural,
    scan,
)
from ._globs import GlobPattern
from ._workspace import Workspace, quoted

__all__ = ["grep"]

#: The longest regular expression grep accepts, in characters.
MAX_REGEX_CHARS = 10_000
#: grep searches at most this many bytes of each line.
_LINE_BYTES = 1 << 20
#: grep shows at most this many characters of a matching line.
_SHOWN_CHARS = 300
_WORKER = Path(__file__).with_name("_grep_worker.py")
#: How long a killed search process may take to be reaped (shielded).
_REAP_TIMEOUT = 5.0
_READ_SIZE = 65536


class _TimedOut(BuiltinToolError):
    code: ClassVar[str] = TOOL_TIMEOUT


@attrs.frozen
class _Target:
    """A file chosen for the search, identified by what was checked."""

    path: str
    shown: str
    dev: int
    ino: int


@attrs.frozen
class _Selection:
    shown: str
    single: bool
    files: tuple[_Target, ...]


@attrs.define
class _Outcome:
    """What the search process reported so far."""

    hits: list[str] = attrs.field(factory=list)
    binary: list[str] = attrs.field(factory=list)
    unreadable: list[str] = attrs.field(factory=list)
    searched: int = 0
    capped: bool = False
    done: bool = False
    failure: list[str] = attrs.field(factory=list)

    def take(self, line: bytes) -> None:
        try:
            kind, *rest = json.loads(line)
        except ValueError:
            self.failure.append(line.decode("utf-8", "replace").rstrip())
            return
        if kind == "hit":
            self.hits.append(rest[0])
        elif kind == "binary":
            self.binary.append(rest[0])
        elif kind == "unreadable":
            self.unreadable.append(rest[0])
        elif kind == "done":
            self.searched, self.capped = rest
            self.done = True


# --- choosing the files (a worker thread) -----------------------------------------------------


def _check_regex(pattern: str) -> None:
    if len(pattern) > MAX_REGEX_CHARS:
        raise BuiltinToolError(
            f"the regular expression has {len(pattern)} characters; grep accepts at most "
            f"{MAX_REGEX_CHARS}: search for a shorter, more specific pattern"
        )
    try:
        re.compile(pattern)
    except re.error as exc:
        where = f" at position {exc.pos}" if exc.pos is not None else ""
        raise BuiltinToolError(
            f"invalid regular expression {quoted(pattern)}: {exc.msg}{where}; fix it, or "
            "escape special characters with a backslash (\\( \\. \\*) to match them literally"
        ) from None


def _walk(ws: Workspace, start: str, stop: threading.Event) -> Iterator[os.DirEntry[str]]:
    """Files under ``start``, depth first in name order. Symbolic links to directories are
    not followed; :data:`SKIPPED_DIRECTORIES` below ``start`` and protected entries are not
    entered or listed."""
    stack = [iter(scan(start))]
    while stack:
        if stop.is_set():
            raise Stopped
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
        elif ws.protection(entry.path) is not None:
            continue
        elif not entry.is_dir():
            yield entry
        elif not entry.is_symlink() and entry.name not in SKIPPED_DIRECTORIES:
            stack.append(iter(scan(entry.path)))


def _target(ws: Workspace, path: str) -> _Target | None:
    """The file at ``path`` as the search process must find it, or None if it may not be
    searched (a link out of the workspace or to a protected file, not a regular file)."""
    real = os.path.realpath(path)
    if not ws.contains(real) or ws.protection(real) is not None:
        return None
    shown = ws.display(path)
    try:
        status = os.stat(real)
        if not stat.S_ISREG(status.st_mode):
            return None
        ws.check_identity(status, shown)
    except (OSError, ProtectedPathError):
        return None
    return _Target(real, shown, status.st_dev, status.st_ino)


def _matches(pattern: GlobPattern | None, shown: str) -> bool:
    if pattern is None:
        return True
    if len(pattern.parts) == 1 and not pattern.is_double_star(0):
        return pattern.match([shown.rsplit("/", 1)[-1]])
    return pattern.match(shown.split("/"))


def _select(ws: Workspace, path: str, glob: str | None, stop: threading.Event) -> _Selection:
    resolved = ws.resolve(path)
    shown = ws.display(resolved)
    name_filter = None if glob is None else pattern_parts(ws, glob, "glob")[0]
    if resolved.is_dir():
        files: list[_Target] = []
        for entry in _walk(ws, str(resolved), stop):
            relative = ws.display(entry.path)
            if _matches(name_filter, relative) and (target := _target(ws, entry.path)):
                files.append(target)
        return _Selection(shown, False, tuple(files))
    with os_errors(shown, "search"):
        fd = ws.open_file(resolved, shown)  # refuses what read_file refuses, with its message
        status = os.fstat(fd)
        os.close(fd)
    return _Selection(shown, True, (_Target(str(resolved), shown, status.st_dev, status.st_ino),))


# --- searching (a killable process) -----------------------------------------------------------


async def _search(
    selection: _Selection,
    limits: Limits,
    pattern: str,
    ignore_case: bool,
    seconds: float,
    outcome: _Outcome,
) -> None:
    """Run the search process over the chosen files, filling ``outcome`` as it reports. The
    process is killed when this returns, raises or is cancelled."""
    if not selection.files:
        outcome.done = True
        return
    request = {
        "pattern": pattern,
        "ignore_case": ignore_case,
        "files": [[t.path, t.shown, t.dev, t.ino] for t in selection.files],
        "max_results": limits.max_results,
        "max_bytes": limits.max_output_bytes,
        "line_bytes": _LINE_BYTES,
        "shown_chars": _SHOWN_CHARS,
        "seconds": seconds,
    }
    process = await trio.lowlevel.open_process(
        [sys.executable, "-I", "-S", str(_WORKER)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={},
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        try:
            await process.stdin.send_all(json.dumps(request).encode())
            await process.stdin.aclose()
        except trio.BrokenResourceError:
            pass  # it died early; what it printed says why
        buffer = b""
        while chunk := await process.stdout.receive_some(_READ_SIZE):
            *lines, buffer = (buffer + chunk).split(b"\n")
            for line in lines:
                outcome.take(line)
        if buffer:
            outcome.take(buffer)
        await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
        with trio.move_on_after(_REAP_TIMEOUT) as cleanup:
            cleanup.shield = True
            await process.wait()
            await process.stdin.aclose()
            await process.stdout.aclose()


# --- the tool ---------------------------------------------------------------------------------


def _report(selection: _Selection, limits: Limits, pattern: str, outcome: _Outcome) -> str:
    if selection.single and outcome.binary:
        raise BuiltinToolError(
            f"{quoted(selection.shown)} looks like a binary file (it contains NUL bytes); grep "
            "only searches text"
        )
    if selection.single and outcome.unreadable:
        raise BuiltinToolError(
            f"{quoted(selection.shown)} changed while it was being searched; try again"
        )
    if not outcome.hits:
        skipped = (
            f", {plural(len(outcome.binary), 'binary file')} skipped" if outcome.binary else ""
        )
        return (
            f"No matches for {quoted(pattern)} in {quoted(selection.shown)} "
            f"({plural(outcome.searched, 'file')} searched{skipped})"
        )
    text = "\n".join(outcome.hits)
    if outcome.capped:
        text += (
            f"\n[stopped after {len(outcome.hits)} matches: grep shows at most "
            f"{limits.max_results} matches / {limits.max_output_bytes} bytes; narrow the "
            "pattern, path or glob to see the rest]"
        )
    return text


async def grep(
    ws: Workspace,
    limits: Limits,
    seconds: float,
    pattern: str,
    path: str,
    glob: str | None,
    ignore_case: bool,
) -> str:
    """Lines matching the regular expression ``pattern``, as ``path:line: text``, capped; the
    whole call (choosing the files and searching them) takes at most ``seconds``.

    Raises:
        BuiltinToolError: a bad pattern or path, a binary single file, or the time limit
            passed (code ``TOOL_TIMEOUT``; the message holds the matches found until then).
    """
    _check_regex(pattern)
    outcome = _Outcome()
    with trio.move_on_after(seconds) as deadline:
        selection = await in_thread(lambda stop: _select(ws, path, glob, stop))
        await _search(selection, limits, pattern, ignore_case, seconds, outcome)
    if deadline.cancelled_caught:
        found = "\n".join(outcome.hits)
        raise _TimedOut(
            f"grep stopped after the {seconds:g}s time limit: the pattern may backtrack "
            "heavily (nested repetition such as (a+)+ or (.*)*) or the search covers too much; "
            "simplify the pattern or narrow the path or glob. "
            + (
                f"Matches found before the limit:\n{found}"
                if found
                else "No matches were found before it."
            )
        )
    if not outcome.done:
        detail = outcome.failure[-1] if outcome.failure else "it exited without a result"
        raise BuiltinToolError(f"grep's search process failed ({detail}); try a simpler pattern")
    return _report(selection, limits, pattern, outcome)
