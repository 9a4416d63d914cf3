"""The file tools' blocking work (run in worker threads): read, write, edit, list, glob, grep.

Every function takes the :class:`Workspace` and reports problems as :class:`BuiltinToolError`
with a model-facing message; paths in messages and listings are relative to the root.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
import secrets
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import attrs

from ._errors import BuiltinToolError, WorkspacePathError
from ._workspace import Workspace, quoted

__all__ = [
    "SKIPPED_DIRECTORIES",
    "Limits",
    "edit_file",
    "glob_paths",
    "grep",
    "list_dir",
    "read_file",
    "write_file",
]

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
#: grep searches at most this many bytes of each line.
_GREP_LINE_BYTES = 1 << 20
#: grep shows at most this many characters of a matching line.
_GREP_SHOWN_CHARS = 300
#: edit_file refuses files larger than this (it holds the whole file in memory).
_MAX_EDIT_BYTES = 64 << 20
_COUNT_CHUNK = 1 << 20
#: read_file counts the lines after the shown ones only if there are at most this many bytes.
_MAX_COUNT_BYTES = 64 << 20


@attrs.frozen
class Limits:
    """The caps the file tools apply (from the config)."""

    max_read_bytes: int
    max_read_lines: int
    max_results: int
    max_output_bytes: int


class _Stopped(Exception):
    """The caller went away (cancelled); the worker thread stops early."""


# --- helpers ----------------------------------------------------------------------------------


@contextlib.contextmanager
def _os_errors(shown: str, action: str) -> Iterator[None]:
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


def _lines(f: BinaryIO, cap: int) -> Iterator[tuple[bytes, bool]]:
    """Yield each line (with its line break) cut to ``cap`` bytes, and whether it was cut; the
    rest of a cut line is skipped without holding it in memory."""
    while raw := f.readline(cap):
        cut = False
        if len(raw) == cap and not raw.endswith(b"\n"):
            while more := f.readline(cap):
                cut = True
                if more.endswith(b"\n"):
                    break
        yield raw, cut


def _count_lines(f: BinaryIO) -> int:
    """The number of lines from the current position to the end of ``f``."""
    count = 0
    last = b"\n"
    while chunk := f.read(_COUNT_CHUNK):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count if last == b"\n" else count + 1


def _check_line_number(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise BuiltinToolError(f"{name} must be 1 or more (lines are numbered from 1), got {value}")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# --- read_file --------------------------------------------------------------------------------


def read_file(
    ws: Workspace, limits: Limits, path: str, start_line: int | None, end_line: int | None
) -> str:
    """Lines ``start_line``..``end_line`` (1-based, inclusive) of a text file, capped."""
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
    with _os_errors(shown, "read"):
        fd = ws.open_file(resolved, shown)
        with os.fdopen(fd, "rb") as f:
            if _is_binary(f):
                raise _binary_error(shown)
            pieces: list[bytes] = []
            size = 0
            lineno = 0
            last_shown = 0
            capped = False
            cut_lines: list[int] = []
            for lineno, (raw, cut) in enumerate(_lines(f, limits.max_read_bytes), 1):
                if lineno < first:
                    continue
                if end_line is not None and lineno > end_line:
                    break
                if len(pieces) == limits.max_read_lines or size + len(raw) > limits.max_read_bytes:
                    capped = True
                    break
                pieces.append(raw)
                size += len(raw)
                last_shown = lineno
                if cut:
                    cut_lines.append(lineno)
            # Lines 1..lineno have been read; count the rest for the note, unless that means
            # reading a huge remainder just to say how long the file is.
            size_of_file = os.fstat(f.fileno()).st_size
            rest = size_of_file - f.tell()
            total: int | None = lineno + _count_lines(f) if rest <= _MAX_COUNT_BYTES else None
    of = f"of {total}" if total is not None else f"of a {size_of_file}-byte file"
    if not pieces:
        assert total is not None  # nothing shown: the loop read to the end
        if total == 0 and first == 1:
            return f"[{shown} is empty]"
        raise BuiltinToolError(
            f"start_line {first} is past the end of {quoted(shown)}, which has "
            f"{_plural(total, 'line')}; pass a start_line from 1 to {max(total, 1)}"
        )
    text = b"".join(pieces).decode("utf-8", "replace")
    notes: list[str] = []
    if capped:
        notes.append(
            f"[showing lines {first}-{last_shown} {of}: read_file returns at most "
            f"{limits.max_read_lines} lines / {limits.max_read_bytes} bytes per call. To read "
            f"on, call read_file with start_line={last_shown + 1}]"
        )
    elif first != 1 or last_shown != total:
        notes.append(f"[showing lines {first}-{last_shown} {of}]")
    if cut_lines:
        listed = ", ".join(map(str, cut_lines[:10]))
        notes.append(
            f"[line(s) {listed} are longer than {limits.max_read_bytes} bytes and were cut; "
            "use grep to search them]"
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
    with _os_errors(ws.display(parent), "create the directory"):
        os.makedirs(parent, exist_ok=True)
    with _os_errors(shown, "write"):
        dir_fd = ws.open_directory(parent, shown)
        try:
            name = resolved.name
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
    resolved = ws.resolve(path)
    shown = ws.display(resolved)
    data = _encode(content, "content")
    created = _write_atomically(ws, resolved, shown, data)
    what = "created the file" if created else "replaced its previous content"
    return f"Wrote {_plural(len(data), 'byte')} to {quoted(shown)} ({what})"


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
    resolved = ws.resolve(path)
    shown = ws.display(resolved)
    with _os_errors(shown, "read"):
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
        f"Edited {quoted(shown)}: replaced {_plural(removed, 'line')} at line "
        f"{_line_of(text, start)} with {_plural(added, 'line')}"
    )


# --- list_dir ---------------------------------------------------------------------------------


def _entry_is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def list_dir(ws: Workspace, limits: Limits, path: str) -> str:
    """The entries of a directory, sorted by name, directories marked with ``/``, capped."""
    resolved = ws.resolve(path)
    shown = ws.display(resolved)
    with _os_errors(shown, "list"):
        try:
            dir_fd = ws.open_directory(resolved, shown)
        except NotADirectoryError:
            raise BuiltinToolError(
                f"{quoted(shown)} is a file, not a directory; use read_file to read it"
            ) from None
        try:
            with os.scandir(dir_fd) as entries:
                names = sorted(e.name + ("/" if _entry_is_dir(e) else "") for e in entries)
        finally:
            os.close(dir_fd)
    if not names:
        return f"[{shown} is empty]"
    shown_names = names[: limits.max_results]
    text = "\n".join(shown_names)
    if len(names) > len(shown_names):
        text += (
            f"\n[... and {len(names) - len(shown_names)} more entries, {len(names)} in all "
            f"(list_dir shows at most {limits.max_results}); use glob with a pattern to find "
            "specific files]"
        )
    return text


# --- glob -------------------------------------------------------------------------------------


def _has_magic(part: str) -> bool:
    return any(c in part for c in "*?[")


def _pattern_parts(ws: Workspace, pattern: str, what: str = "pattern") -> tuple[list[str], bool]:
    """Split a glob pattern into components relative to the root; and whether it ends in
    ``/`` (directories only)."""
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
    return parts, text.endswith("/")


def _match_parts(pattern: list[str], parts: list[str]) -> bool:
    """Whether path ``parts`` match pattern components (``**`` = zero or more components)."""
    if not pattern:
        return not parts
    head = pattern[0]
    if head == "**":
        return any(_match_parts(pattern[1:], parts[i:]) for i in range(len(parts) + 1))
    return (
        bool(parts) and fnmatch.fnmatchcase(parts[0], head) and _match_parts(pattern[1:], parts[1:])
    )


def _scan(directory: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as entries:
            return sorted(entries, key=lambda e: e.name)
    except OSError:
        return []


def _glob(
    ws: Workspace, parts: list[str], dirs_only: bool, stop: threading.Event
) -> dict[str, bool]:
    results: dict[str, bool] = {}
    visited: set[tuple[str, int]] = set()
    named = {p for p in parts if not _has_magic(p)}

    def inside(entry: os.DirEntry[str]) -> bool:
        return not entry.is_symlink() or ws.contains(os.path.realpath(entry.path))

    def add(relative: str, is_dir: bool) -> None:
        if is_dir or not dirs_only:
            results[relative] = is_dir

    def visit(directory: str, relative: str, i: int) -> None:
        if stop.is_set():
            raise _Stopped
        if (directory, i) in visited:
            return
        visited.add((directory, i))
        if i == len(parts):
            if relative:
                add(relative, True)
            return
        part = parts[i]
        last = i == len(parts) - 1
        if part == "**":
            visit(directory, relative, i + 1)
            for entry in _scan(directory):
                child = f"{relative}/{entry.name}" if relative else entry.name
                is_dir = _entry_is_dir(entry)
                if last and inside(entry):
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
        for entry in _scan(directory):
            if not fnmatch.fnmatchcase(entry.name, part) or not inside(entry):
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
    """Paths under the root matching ``pattern``, sorted, directories marked ``/``, capped."""
    parts, dirs_only = _pattern_parts(ws, pattern)
    found = _glob(ws, parts, dirs_only, stop)
    if not found:
        hint = ""
        if len(parts) == 1 and parts[0] != "**":
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


# --- grep -------------------------------------------------------------------------------------


def _walk_files(start: str, stop: threading.Event) -> Iterator[str]:
    """Files under ``start``, depth first in name order; symbolic links to directories are not
    followed and :data:`SKIPPED_DIRECTORIES` below ``start`` are not entered."""
    stack = [iter(_scan(start))]
    while stack:
        if stop.is_set():
            raise _Stopped
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
        elif not _entry_is_dir(entry):
            yield entry.path
        elif not entry.is_symlink() and entry.name not in SKIPPED_DIRECTORIES:
            stack.append(iter(_scan(entry.path)))


def grep(
    ws: Workspace,
    limits: Limits,
    pattern: str,
    path: str,
    glob: str | None,
    ignore_case: bool,
    stop: threading.Event,
) -> str:
    """Lines matching the regular expression ``pattern``, as ``path:line: text``, capped."""
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        where = f" at position {exc.pos}" if exc.pos is not None else ""
        raise BuiltinToolError(
            f"invalid regular expression {quoted(pattern)}: {exc.msg}{where}; fix it, or "
            "escape special characters with a backslash (\\( \\. \\*) to match them literally"
        ) from None
    resolved = ws.resolve(path)
    shown = ws.display(resolved)
    filter_parts: list[str] | None = None
    if glob is not None:
        filter_parts, _ = _pattern_parts(ws, glob, "glob")
    by_name = filter_parts is not None and len(filter_parts) == 1
    with _os_errors(shown, "search"):
        if resolved.is_dir():
            files: Iterator[str] = _walk_files(str(resolved), stop)
            single = False
        elif resolved.exists():
            files, single = iter([str(resolved)]), True
        else:
            raise FileNotFoundError
    results: list[str] = []
    size = 0
    capped = False
    searched = binary = 0
    for file in files:
        relative = ws.display(file)
        if filter_parts is not None:
            parts = [relative.rsplit("/", 1)[-1]] if by_name else relative.split("/")
            if not _match_parts(filter_parts, parts):
                continue
        real = os.path.realpath(file)
        if not ws.contains(real):
            continue  # a symbolic link pointing out of the workspace
        try:
            fd = ws.open_file(Path(real), relative)
        except (BuiltinToolError, OSError):
            if single:
                raise
            continue
        with os.fdopen(fd, "rb") as f:
            if _is_binary(f):
                if single:
                    raise BuiltinToolError(
                        f"{quoted(shown)} looks like a binary file (it contains NUL bytes); "
                        "grep only searches text"
                    )
                binary += 1
                continue
            searched += 1
            for lineno, (raw, _) in enumerate(_lines(f, _GREP_LINE_BYTES), 1):
                if stop.is_set():
                    raise _Stopped
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if regex.search(line) is None:
                    continue
                if len(line) > _GREP_SHOWN_CHARS:
                    line = line[:_GREP_SHOWN_CHARS] + " [...]"
                hit = f"{relative}:{lineno}: {line}"
                if len(results) == limits.max_results or size + len(hit) > limits.max_output_bytes:
                    capped = True
                    break
                results.append(hit)
                size += len(hit) + 1
        if capped:
            break
    if not results:
        skipped = f", {_plural(binary, 'binary file')} skipped" if binary else ""
        return (
            f"No matches for {quoted(pattern)} in {quoted(shown)} "
            f"({_plural(searched, 'file')} searched{skipped})"
        )
    text = "\n".join(results)
    if capped:
        text += (
            f"\n[stopped after {len(results)} matches: grep shows at most "
            f"{limits.max_results} matches / {limits.max_output_bytes} bytes; narrow the "
            "pattern, path or glob to see the rest]"
        )
    return text
