"""The workspace root and the one path check every built-in tool uses.

Confinement rules (:meth:`Workspace.resolve`):

1. A path containing a NUL byte is refused.
2. A relative path is taken relative to the root; an absolute path is accepted only if it ends
   up inside the root. ``~`` is not expanded.
3. The path is resolved with :func:`os.path.realpath`: ``..`` and every symbolic link are
   followed, including a dangling one and the links above a file that does not exist yet
   (the nearest existing ancestor is resolved, the rest is appended).
4. The result must be the root or lie beneath it; otherwise the call is refused (``DENIED``).

The root itself is resolved once, when the :class:`Workspace` is made.

Time of check vs. time of use: another process could swap a directory for a symbolic link
between the check and the use. The tools narrow that window: files are opened by their
resolved path with ``O_NOFOLLOW`` (the last component cannot have become a link), then the
open file's real location is read back from ``/proc/self/fd`` (Linux) and refused if it is
outside the root; writes go through a directory descriptor checked the same way, so the
file is created and renamed in the directory that was checked. Directories created for
``write_file`` are made before that final check, so a racing swap could leave empty
directories outside the root, never a file. ``list_dir`` / ``glob`` / ``grep`` walk by path
(``grep`` opens each file the checked way). Without ``/proc`` (macOS, BSD), only the
``O_NOFOLLOW`` part applies. None of this constrains ``shell``: a command runs with the
process's full rights, in the root as its working directory.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import final

import attrs

from ._errors import BuiltinToolError, BuiltinToolsConfigError, WorkspacePathError

__all__ = ["Workspace"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_PROC_FD = "/proc/self/fd"


def quoted(value: str) -> str:
    """``value`` as a JSON string literal: how messages show a path the model passed."""
    return json.dumps(value, ensure_ascii=False)


def _root(value: str | os.PathLike[str]) -> Path:
    text = os.fspath(value)
    if not isinstance(text, str) or not text or "\0" in text:
        raise BuiltinToolsConfigError(
            f"workspace root {value!r} is not a usable path; pass a directory path"
        )
    resolved = Path(os.path.realpath(os.path.abspath(os.path.expanduser(text))))
    if not resolved.is_dir():
        raise BuiltinToolsConfigError(
            f"workspace root {text!r} ({resolved}) is not an existing directory; create it or "
            "choose another root"
        )
    return resolved


@final
@attrs.frozen
class Workspace:
    """The directory the built-in tools are confined to.

    ``Workspace(".")`` resolves the root once (``~`` expanded, relative to the current
    directory, symbolic links followed) and requires it to be an existing directory.

    Raises:
        BuiltinToolsConfigError: the root is not an existing directory.
    """

    root: Path = attrs.field(converter=_root)

    def contains(self, resolved: str | os.PathLike[str]) -> bool:
        """Whether the already-resolved path ``resolved`` is the root or beneath it."""
        text = os.fspath(resolved)
        root = str(self.root)
        return text == root or text.startswith(root.rstrip(os.sep) + os.sep)

    def resolve(self, path: str) -> Path:
        """The real path of ``path`` (relative to the root, or absolute), if inside the root.

        The path need not exist. See the module documentation for the exact rules.

        Raises:
            WorkspacePathError: it contains a NUL byte, or it resolves outside the root.
        """
        if not isinstance(path, str):
            raise TypeError(f"resolve() takes a str path, got {type(path).__name__}")
        if "\0" in path:
            raise WorkspacePathError(
                f"path {quoted(path)} contains a NUL byte, which no file name can; pass a "
                f"plain path inside the workspace root {self.root}"
            )
        candidate = os.path.join(self.root, path)
        resolved = os.path.realpath(candidate)
        if self.contains(resolved):
            return Path(resolved)
        if self.contains(os.path.normpath(candidate)):
            raise WorkspacePathError(
                f"path {quoted(path)} leads outside the workspace root {self.root} through a "
                "symbolic link; use a path inside the workspace"
            )
        raise WorkspacePathError(
            f"path {quoted(path)} is outside the workspace root {self.root}; use a path "
            "inside it (relative paths start at the root)"
        )

    def display(self, resolved: str | os.PathLike[str]) -> str:
        """``resolved`` relative to the root, with ``/`` separators (``.`` for the root)."""
        relative = os.path.relpath(resolved, self.root)
        return "." if relative == "." else Path(relative).as_posix()

    # --- checked opening (used by the tools; see the module notes on races) ---------------

    def _check_fd(self, fd: int, shown: str) -> None:
        try:
            where = os.readlink(f"{_PROC_FD}/{fd}")
        except OSError:
            return  # no /proc: O_NOFOLLOW is all we have
        if not self.contains(where):
            raise WorkspacePathError(
                f"path {quoted(shown)} changed while it was being opened and now leads "
                f"outside the workspace root {self.root}; try again with a path inside it"
            )

    def open_file(self, resolved: Path, shown: str) -> int:
        """Open the regular file ``resolved`` (already checked) for reading; return the fd.

        Raises:
            WorkspacePathError: it moved outside the root while being opened.
            BuiltinToolError: it is not a regular file.
            OSError: it cannot be opened.
        """
        fd = os.open(resolved, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
        try:
            self._check_fd(fd, shown)
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                raise BuiltinToolError(
                    f"{quoted(shown)} is a directory, not a file; use list_dir to see what "
                    "it contains"
                )
            if not stat.S_ISREG(mode):
                raise BuiltinToolError(
                    f"{quoted(shown)} is not a regular file (a device, socket or pipe); the "
                    "file tools only handle regular files"
                )
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open_directory(self, resolved: Path, shown: str) -> int:
        """Open the directory ``resolved`` (already checked); return the fd.

        Raises:
            WorkspacePathError: it moved outside the root while being opened.
            OSError: it cannot be opened (``NotADirectoryError`` if it is not a directory).
        """
        fd = os.open(resolved, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC)
        try:
            self._check_fd(fd, shown)
        except BaseException:
            os.close(fd)
            raise
        return fd
