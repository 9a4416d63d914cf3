"""The file tools' blocking work (run in worker threads): read, write, edit, list, glob.

Every function takes the :class:`Workspace` and reports problems as :class:`BuiltinToolError`
with a model-facing message; paths in messages and listings are relative to the root.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, TypeVar

import attrs
import trio

from ._errors import BuiltinToolError, WorkspacePathError
from ._globs import GlobPattern, GlobTooComplex, has_magic
from ._workspace import Workspace, quoted

__all__ = [
    "SKIPPED_DIRECTORIES",
    "Limits",
    "Stopped",
    "edit_file",
    "glob_paths",
    "in_thread",
    "list_dir",
    "os_errors",
    "pattern_parts",
    "plural",
    "read_file",
    "scan",
    "write_file",
]

T = TypeVar("T")

#: Directories ``grep`` never descends into, and ``glob``'s ``**`` skips unless the pattern
#: names them: version control, virtual environments, caches, dependencies, session logs.
SKIPPED_DIRECTORIES = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "__pycache__",
        "node_modules",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
        ".eggs",
        ".trio-agent",
    }
)

#: A file whose first this-many bytes hold a NUL byte is binary.
_SNIFF_BYTES = 8192
#: edit_file refuses files larger than this (it holds the whole file in memory).
_MAX_EDIT_BYTES = 64 << 20
_CHUNK = 1 << 20
#: read_file counts the lines after the shown ones only if there are at most this many bytes.
_MAX_COUNT_BYTES = 64 << 20
#: read_file reads at most this many bytes to find ``start_line``.
_MAX_SCAN_BYTES = 256 << 20


@attrs.frozen
class Limits:
    """The caps the file tools apply (from the config)."""

    max_read_bytes: int
    max_read_lines: int
    max_results: int
    max_output_bytes: int


class Stopped(Exception):
    """The caller went away (cancelled); the worker thread stops early."""


class _TooFar(Exception):
    """``read_file``'s scan budget ran out before ``start_line`` (after ``found`` lines)."""

    def __init__(self, found: int) -> None:
        super().__init__(found)
        self.found = found


# --- helpers ----------------------------------------------------------------------------------


async def in_thread(fn: Callable[[threading.Event], T]) -> T:
    """Run ``fn(stop)`` in a worker thread that a cancellation abandons; ``stop`` is set when
    the call ends so an abandoned walk or scan stops at its next check."""
    stop = threading.Event()
    try:
        return await trio.to_thread.run_sync(fn, stop, abandon_on_cancel=True)
    finally:
        stop.set()


@contextlib.contextmanager
def os_errors(shown: str, action: str) -> Iterator[None]:
    """Turn an ``OSError`` into a :class:`BuiltinToolError` that says what to do."""
    try:
        yield
    except BuiltinToolError:
        raise
    except FileNotFoundError:
        raise BuiltinToolError(
            f"{quoted(shown)} does not exist; use list_dir or glob to find the right path"
        ) from None
    except NotADirectoryError:
        raise BuiltinToolError(
            f"cannot {action} {quoted(shown)}: a part of the path is a file, not a directory"
        ) from None
    except IsADirectoryError:
        raise BuiltinToolError(
            f"{quoted(shown)} is a directory, not a file; use list_dir to see what it contains"
        ) from None
    except PermissionError:
        raise BuiltinToolError(f"cannot {action} {quoted(shown)}: permission denied") from None
    except OSError as exc:
        raise BuiltinToolError(f"cannot {action} {quoted(shown)}: {exc.strerror or exc}") from None


def _is_binary(f: BinaryIO) -> bool:
    sample = f.read(_SNIFF_BYTES)
    f.seek(0)
    return b"\0" in sample


def _binary_error(shown: str) -> BuiltinToolError:
    return BuiltinToolError(
        f"{quoted(shown)} looks like a binary file (it contains NUL bytes); the file tools "
        "only handle text"
    )


def _count_newlines(f: BinaryIO, stop: threading.Event) -> int:
    """The number of line breaks from the current position to the end of ``f``."""
    count = 0
    while chunk := f.read(_CHUNK):
        if stop.is_set():
            raise Stopped
        count += chunk.count(b"\n")
    return count


def _skip_lines(f: BinaryIO, lines: int, stop: threading.Event) -> int:
    """Move past the first ``lines`` line breaks of ``f`` (from the start), reading at most
    :data:`_MAX_SCAN_BYTES`; return how many were found (fewer at the end of the file).

    Raises:
        _TooFar: the scan budget ran out first.
    """
    found = 0
    while found < lines:
        if stop.is_set():
            raise Stopped
        start = f.tell()
        if start >= _MAX_SCAN_BYTES:
            raise _TooFar(found)
        chunk = f.read(min(_CHUNK, _MAX_SCAN_BYTES - start))
        if not chunk:
            break
        index = -1
        while found < lines:
            index = chunk.find(b"\n", index + 1)
            if index == -1:
                break
            found += 1
        if found == lines:
            f.seek(start + index + 1)
    return found


def _check_line_number(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise BuiltinToolError(f"{name} must be 1 or more (lines are numbered from 1), got {value}")


def plural(n: int, word: str) -> str:
    """``1 word`` or ``N words``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# --- read_file --------------------------------------------------------------------------------


@attrs.define
class _Window:
    """The lines ``read_file`` shows, read with at most ``max_read_bytes`` in memory."""

    pieces: list[bytes] = attrs.field(factory=list)
    size: int = 0
    capped: bool = False
    cut: bool = False
    newlines: int = 0  # line breaks consumed while reading the window


def _read_window(f: BinaryIO, limits: Limits, wanted: int | None) -> _Window:
    """Read up to ``wanted`` lines (all, if None) from the current position, within the caps.
    A line that does not fit is left unread (``f`` is moved back to its start), unless it is
    the first: then its first ``max_read_bytes`` are taken and the rest is never read."""
    window = _Window()
    while wanted is None or len(window.pieces) < wanted:
        room = limits.max_read_bytes - window.size
        # One byte more than fits tells a line that fits from one that does not.
        raw = f.readline(room + 1)
        if not raw:
            break
        if len(window.pieces) == limits.max_read_lines or len(raw) > room:
            window.capped = True
            if window.pieces:
                f.seek(-len(raw), os.SEEK_CUR)
            else:
                window.pieces.append(raw[:room])
                window.cut = True
                f.seek(room - len(raw), os.SEEK_CUR)
            break
        window.pieces.append(raw)
        window.size += len(raw)
        window.newlines += raw.endswith(b"\n")
    return window


def read_file(
    ws: Workspace,
    limits: Limits,
    path: str,
    start_line: int | None,
    end_line: int | None,
    stop: threading.Event,
) -> str:
    """Lines ``start_line``..``end_line`` (1-based, inclusive) of a text file, capped.

    Memory and CPU stay bounded whatever the line lengths: at most ``max_read_bytes`` are
    held, finding ``start_line`` reads at most :data:`_MAX_SCAN_BYTES`, a line longer than the
    cap is cut (its rest is never read), and the total line count is given only when the rest
    of the file is at most :data:`_MAX_COUNT_BYTES`.
    """
    _check_line_number("start_line", start_line)
    _check_line_number("end_line", end_line)
    if start_line is not None and end_line is not None and end_line < start_line:
        raise BuiltinToolError(
            f"end_line {end_line} is before start_line {start_line}; pass a range with "
            "start_line <= end_line"
        )
    resolved = ws.resolve(path)
    shown = ws.display(resolved)
    first = start_line or 1
    wanted = None if end_line is None else end_line - first + 1
    with os_errors(shown, "read"):
        fd = ws.open_file(resolved, shown)
        with os.fdopen(fd, "rb") as f:
            if _is_binary(f):
                raise _binary_error(shown)
            size_of_file = os.fstat(f.fileno()).st_size
            try:
                skipped = _skip_lines(f, first - 1, stop)
            except _TooFar as exc:
                raise BuiltinToolError(
                    f"start_line {first} of {quoted(shown)} lies beyond the first "
                    f"{_MAX_SCAN_BYTES >> 20} MiB of the file ({exc.found} lines there); "
                    "read_file does not scan further. Use grep to find the text you need"
                ) from None
            window = _read_window(f, limits, wanted) if skipped == first - 1 else _Window()
            ends_with_newline = size_of_file == 0 or os.pread(fd, 1, size_of_file - 1) == b"\n"
            # Count the rest only if that does not mean reading a huge remainder.
            total: int | None = None
            if size_of_file - f.tell() <= _MAX_COUNT_BYTES:
                newlines = skipped + window.newlines + _count_newlines(f, stop)
                total = newlines + (not ends_with_newline)
    last_shown = first + len(window.pieces) - 1
    of = f"of {total}" if total is not None else f"of a {size_of_file}-byte file"
    if not window.pieces:
        if total == 0 and first == 1:
            return f"[{shown} is empty]"
        assert total is not None  # nothing shown: the scan reached the end
        raise BuiltinToolError(
            f"start_line {first} is past the end of {quoted(shown)}, which has "
            f"{plural(total, 'line')}; pass a start_line from 1 to {max(total, 1)}"
        )
    text = b"".join(window.pieces).decode("utf-8", "replace")
    notes: list[str] = []
    if window.capped:
        notes.append(
            f"[showing lines {first}-{last_shown} {of}: read_file returns at most "
            f"{limits.max_read_lines} lines / {limits.max_read_bytes} bytes per call. To read "
            f"on, call read_file with start_line={last_shown + 1}]"
        )
    elif first != 1 or last_shown != total:
        notes.append(f"[showing lines {first}-{last_shown} {of}]")
    if window.cut:
        notes.append(
            f"[line {last_shown} is longer than {limits.max_read_bytes} bytes and was cut; "
            "use grep to search it]"
        )
    if notes:
        text = text + ("" if text.endswith("\n") else "\n") + "\n".join(notes)
    return text


# --- write_file and edit_file -----------------------------------------------------------------


def _write_atomically(ws: Workspace, resolved: Path, shown: str, data: bytes) -> bool:
    """Replace (or create) ``resolved`` with ``data`` through a checked directory descriptor:
    a temporary file in the same directory, renamed over the target. Existing permission bits
    are kept. Returns whether the file is new."""
    if resolved == ws.root:
        raise BuiltinToolError(
            f"{quoted(shown)} is the workspace root directory; pass a file path inside it"
        )
    parent = resolved.parent
    with os_errors(ws.display(parent), "create the directory"):
        os.makedirs(parent, exist_ok=True)
    with os_errors(shown, "write"):
        name = resolved.name
        dir_fd = ws.open_directory(parent, shown, write=True, child=name)
        try:
            try:
                old: os.stat_result | None = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                old = None
            if old is not None and stat.S_ISDIR(old.st_mode):
                raise IsADirectoryError
            if old is not None and not stat.S_ISREG(old.st_mode):
                raise BuiltinToolError(
                    f"{quoted(shown)} is not a regular file; the file tools only write regular "
                    "files"
                )
            temporary = f".{name[:100]}.{secrets.token_hex(6)}.tmp"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(temporary, flags, 0o666, dir_fd=dir_fd)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    if old is not None:
                        os.fchmod(f.fileno(), stat.S_IMODE(old.st_mode))
                os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=dir_fd)
                raise
        finally:
            os.close(dir_fd)
    return old is None


def _encode(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BuiltinToolError(
            f"{what} cannot be written as UTF-8 ({exc.reason} at character {exc.start}); "
            "remove unpaired surrogate characters"
        ) from None


def write_file(ws: Workspace, path: str, content: str) -> str:
    """Create or overwrite a file with ``content`` (UTF-8), creating parent directories."""
    resolved = ws.resolve(path, write=True)
    shown = ws.display(resolved)
    data = _encode(content, "content")
    created = _write_atomically(ws, resolved, shown, data)
    what = "created the file" if created else "replaced its previous content"
    return f"Wrote {plural(len(data), 'byte')} to {quoted(shown)} ({what})"


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _occurrences(text: str, old: str) -> list[int]:
    found: list[int] = []
    start = text.find(old)
    while start != -1:
        found.append(start)
        start = text.find(old, start + 1)
    return found


def edit_file(ws: Workspace, path: str, old: str, new: str) -> str:
    """Replace the one occurrence of ``old`` in a UTF-8 text file with ``new``."""
    if not old:
        raise BuiltinToolError(
            "old is empty; pass the exact text to replace (copy it from read_file), or use "
            "write_file to create or overwrite a whole file"
        )
    if old == new:
        raise BuiltinToolError("old and new are the same text; the edit would change nothing")
    resolved = ws.resolve(path, write=True)
    shown = ws.display(resolved)
    with os_errors(shown, "read"):
        fd = ws.open_file(resolved, shown)
        with os.fdopen(fd, "rb") as f:
            if os.fstat(f.fileno()).st_size > _MAX_EDIT_BYTES:
                raise BuiltinToolError(
                    f"{quoted(shown)} is larger than {_MAX_EDIT_BYTES >> 20} MiB; edit_file "
                    "edits smaller text files only"
                )
            data = f.read()
    if b"\0" in data[:_SNIFF_BYTES]:
        raise _binary_error(shown)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BuiltinToolError(
            f"{quoted(shown)} is not valid UTF-8 text; edit_file only edits UTF-8 files"
        ) from None
    found = _occurrences(text, old)
    if not found and "\r\n" in text and "\n" in old and "\r\n" not in old:
        # The file uses CRLF line breaks; the model almost always writes LF.
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        found = _occurrences(text, old)
    if not found:
        hint = ""
        if old.strip() and old.strip() in text:
            hint = " (it does occur with different leading or trailing whitespace)"
        raise BuiltinToolError(
            f"old text was not found in {quoted(shown)}{hint}; it must match the file exactly, "
            "including indentation, whitespace and line breaks: read the file with read_file "
            "and copy the text exactly"
        )
    if len(found) > 1:
        lines = ", ".join(str(_line_of(text, i)) for i in found[:10])
        more = ", ..." if len(found) > 10 else ""
        raise BuiltinToolError(
            f"old text occurs {len(found)} times in {quoted(shown)} (at lines {lines}{more}); "
            "it must match exactly once: include more of the surrounding lines in old so it "
            "is unique, and make one edit per occurrence"
        )
    start = found[0]
    updated = text[:start] + new + text[start + len(old) :]
    _write_atomically(ws, resolved, shown, _encode(updated, "the edited text"))
    removed = old.count("\n") + 1
    added = new.count("\n") + 1 if new else 0
    return (
        f"Edited {quoted(shown)}: replaced {plural(removed, 'line')} at line "
        f"{_line_of(text, start)} with {plural(added, 'line')}"
    )


# --- list_dir ---------------------------------------------------------------------------------


def _entry_is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def list_dir(ws: Workspace, limits: Limits, path: str) -> str:
    """The entries of a directory, sorted by name, directories marked with ``/``, capped;
    protected entries are left out (and counted)."""
    resolved = ws.resolve(path)
    shown = ws.display(resolved)
    with os_errors(shown, "list"):
        try:
            dir_fd = ws.open_directory(resolved, shown)
        except NotADirectoryError:
            raise BuiltinToolError(
                f"{quoted(shown)} is a file, not a directory; use read_file to read it"
            ) from None
        try:
            with os.scandir(dir_fd) as entries:
                listed = [(e.name, _entry_is_dir(e)) for e in entries]
        finally:
            os.close(dir_fd)
    names = sorted(n + ("/" if d else "") for n, d in listed if not _protected(ws, resolved, n))
    hidden = len(listed) - len(names)
    note = (
        f"[{hidden} protected {'entry' if hidden == 1 else 'entries'} not shown]" if hidden else ""
    )
    if not names:
        return f"[{shown} is empty]" + (f"\n{note}" if note else "")
    shown_names = names[: limits.max_results]
    text = "\n".join(shown_names)
    if len(names) > len(shown_names):
        text += (
            f"\n[... and {len(names) - len(shown_names)} more entries, {len(names)} in all "
            f"(list_dir shows at most {limits.max_results}); use glob with a pattern to find "
            "specific files]"
        )
    return text + (f"\n{note}" if note else "")


def _protected(ws: Workspace, directory: str | os.PathLike[str], name: str) -> bool:
    return ws.protection(os.path.join(directory, name)) is not None


# --- glob -------------------------------------------------------------------------------------


def pattern_parts(ws: Workspace, pattern: str, what: str = "pattern") -> tuple[GlobPattern, bool]:
    """Compile a glob pattern relative to the root; and whether it ends in ``/``
    (directories only).

    Raises:
        WorkspacePathError: an absolute pattern outside the root, or one containing ``..``.
        BuiltinToolError: the pattern is empty, matches only the root, or is too complex.
    """
    if not pattern.strip():
        raise BuiltinToolError(f'{what} is empty; pass a glob pattern such as "**/*.py"')
    if "\0" in pattern:
        raise BuiltinToolError(f"{what} {quoted(pattern)} contains a NUL byte")
    text = pattern.replace(os.sep, "/")
    if text.startswith("/"):
        root = ws.root.as_posix().rstrip("/") + "/"
        if not text.startswith(root):
            raise WorkspacePathError(
                f"{what} {quoted(pattern)} is an absolute path outside the workspace root "
                f'{ws.root}; use a pattern relative to the root, such as "src/**/*.py"'
            )
        text = text[len(root) :]
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise WorkspacePathError(
            f"{what} {quoted(pattern)} contains '..'; glob patterns are relative to the "
            "workspace root and cannot leave it"
        )
    if not parts:
        raise BuiltinToolError(
            f"{what} {quoted(pattern)} matches only the workspace root; use list_dir to list "
            'it, or a pattern such as "*" or "**/*.md"'
        )
    try:
        compiled = GlobPattern.compile(parts)
    except GlobTooComplex as exc:
        raise BuiltinToolError(f"{what} {quoted(pattern)} is too complex: {exc}") from None
    return compiled, text.endswith("/")


def scan(directory: str) -> list[os.DirEntry[str]]:
    """The entries of ``directory`` sorted by name (none if it cannot be read)."""
    try:
        with os.scandir(directory) as entries:
            return sorted(entries, key=lambda e: e.name)
    except OSError:
        return []


def _glob(
    ws: Workspace, pattern: GlobPattern, dirs_only: bool, stop: threading.Event
) -> dict[str, bool]:
    """Matching paths (relative) and whether each is a directory. Each (directory, pattern
    position) pair is visited once, so the walk is linear in the tree times the pattern."""
    parts = pattern.parts
    results: dict[str, bool] = {}
    visited: set[tuple[str, int]] = set()
    named = {p for p in parts if not has_magic(p)}

    def usable(entry: os.DirEntry[str]) -> bool:
        if ws.protection(entry.path) is not None:
            return False
        if not entry.is_symlink():
            return True
        real = os.path.realpath(entry.path)
        return ws.contains(real) and ws.protection(real) is None

    def add(relative: str, is_dir: bool) -> None:
        if is_dir or not dirs_only:
            results[relative] = is_dir

    def visit(directory: str, relative: str, i: int) -> None:
        if stop.is_set():
            raise Stopped
        if (directory, i) in visited:
            return
        visited.add((directory, i))
        if i == len(parts):
            if relative:
                add(relative, True)
            return
        last = i == len(parts) - 1
        if pattern.is_double_star(i):
            visit(directory, relative, i + 1)
            for entry in scan(directory):
                if not usable(entry):
                    continue
                child = f"{relative}/{entry.name}" if relative else entry.name
                is_dir = _entry_is_dir(entry)
                if last:
                    add(child, is_dir)
                # ``**`` never follows symbolic links (no cycles) nor enters skipped directories
                # the pattern does not name.
                if (
                    is_dir
                    and not entry.is_symlink()
                    and (entry.name not in SKIPPED_DIRECTORIES or entry.name in named)
                ):
                    visit(entry.path, child, i)
            return
        for entry in scan(directory):
            if not pattern.match_part(i, entry.name) or not usable(entry):
                continue
            child = f"{relative}/{entry.name}" if relative else entry.name
            is_dir = _entry_is_dir(entry)
            if last:
                add(child, is_dir)
            elif is_dir:
                visit(entry.path, child, i + 1)

    try:
        visit(str(ws.root), "", 0)
    except RecursionError:
        raise BuiltinToolError(
            "the directory tree is too deep to search with this pattern; use a pattern with "
            "fewer ** or start it in a subdirectory"
        ) from None
    return results


def glob_paths(ws: Workspace, limits: Limits, pattern: str, stop: threading.Event) -> str:
    """Paths under the root matching ``pattern``, sorted, directories marked ``/``, capped;
    protected paths are never listed."""
    compiled, dirs_only = pattern_parts(ws, pattern)
    found = _glob(ws, compiled, dirs_only, stop)
    if not found:
        hint = ""
        parts = compiled.parts
        if len(parts) == 1 and not compiled.is_double_star(0):
            hint = (
                f'; a pattern without "/" matches only at the top level, use '
                f'"**/{parts[0]}" to search all directories'
            )
        return f"No paths match {quoted(pattern)} in the workspace{hint}"
    paths = sorted(found)
    shown = [p + ("/" if found[p] else "") for p in paths[: limits.max_results]]
    text = "\n".join(shown)
    if len(paths) > len(shown):
        text += (
            f"\n[... and {len(paths) - len(shown)} more matches, {len(paths)} in all (glob "
            f"shows at most {limits.max_results}); narrow the pattern to see them]"
        )
    return text
