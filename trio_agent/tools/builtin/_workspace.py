"""The workspace root and the one path check every built-in tool uses.

Confinement rules (:meth:`Workspace.resolve`):

1. A path containing a NUL byte is refused.
2. A relative path is taken relative to the root; an absolute path is accepted only if it ends
   up inside the root. ``~`` is not expanded.
3. The path is resolved with :func:`os.path.realpath`: ``..`` and every symbolic link are
   followed, including a dangling one and the links above a file that does not exist yet
   (the nearest existing ancestor is resolved, the rest is appended).
4. The result must be the root or lie beneath it; otherwise the call is refused (``DENIED``).
5. Neither the path as written (``..`` removed) nor the resolved path may be protected
   (:mod:`._protect`: ``.git``, the harness's own files, ``protect`` globs); otherwise the
   call is refused (``DENIED``) with the reason.

The root itself is resolved once, when the :class:`Workspace` is made.

Time of check vs. time of use: another process could swap a directory for a symbolic link
between the check and the use. The tools narrow that window: files are opened by their
resolved path with ``O_NOFOLLOW`` (the last component cannot have become a link), then the
open file's real location is read back from ``/proc/self/fd`` (Linux) and refused if it is
outside the root or protected; a file read through a second hard link to a protected file is
refused too. Writes go through a directory descriptor checked the same way, so the file is
created and renamed in the directory that was checked (a write replaces the name, never the
content of another link to the same file). Directories created for ``write_file`` are made
before that final check, so a racing swap could leave empty directories outside the root,
never a file. ``list_dir`` / ``glob`` / ``grep`` walk by path and skip protected entries
(``grep``'s search process reads each file only if it is still the one that was checked).
Without ``/proc`` (macOS, BSD), only the ``O_NOFOLLOW`` part applies. None of this constrains
``shell``: a command runs with the process's full rights, in the root as its working directory.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import final

import attrs

from ._errors import (
    BuiltinToolError,
    BuiltinToolsConfigError,
    ProtectedPathError,
    WorkspacePathError,
)
from ._protect import DEFAULT_PROTECT_WRITES, ProtectedPaths

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


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@final
@attrs.frozen
class Workspace:
    """The directory the built-in tools are confined to, and what inside it is protected.

    ``Workspace(".")`` resolves the root once (``~`` expanded, relative to the current
    directory, symbolic links followed) and requires it to be an existing directory.
    ``protect_paths``, ``protect`` and ``protect_writes`` add to the protected set (see
    :class:`BuiltinToolsConfig`); ``.git``, ``.trio-agent/`` and ``trio-agent.yml`` in the root
    are always protected.

    Raises:
        BuiltinToolsConfigError: the root is not an existing directory, or a protect glob is
            unusable.
    """

    root: Path = attrs.field(converter=_root)
    protect_paths: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    protect: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    protect_writes: tuple[str, ...] = attrs.field(
        default=DEFAULT_PROTECT_WRITES, converter=_strings
    )
    _protected: ProtectedPaths = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        protected = ProtectedPaths.build(
            self.root,
            paths=self.protect_paths,
            protect=self.protect,
            protect_writes=self.protect_writes,
        )
        object.__setattr__(self, "_protected", protected)

    def contains(self, resolved: str | os.PathLike[str]) -> bool:
        """Whether the already-resolved path ``resolved`` is the root or beneath it."""
        text = os.fspath(resolved)
        root = str(self.root)
        return text == root or text.startswith(root.rstrip(os.sep) + os.sep)

    def protection(self, resolved: str | os.PathLike[str], *, write: bool = False) -> str | None:
        """Why the file tools may not read (or, with ``write``, write) the absolute path
        ``resolved``, or None if they may."""
        return self._protected.reason(os.fspath(resolved), write=write)

    def _refuse_protected(self, path: str, resolved: str, *, write: bool) -> None:
        reason = self.protection(resolved, write=write)
        if reason is not None:
            raise ProtectedPathError(
                f"path {quoted(path)} is protected: {reason}. The file tools never "
                f"{'write' if write else 'read'} it; leave it alone, or ask the user to "
                "make the change"
            )

    def resolve(self, path: str, *, write: bool = False) -> Path:
        """The real path of ``path`` (relative to the root, or absolute), if inside the root and
        not protected (for writing, when ``write``).

        The path need not exist. See the module documentation for the exact rules.

        Raises:
            WorkspacePathError: it contains a NUL byte, or it resolves outside the root.
            ProtectedPathError: the path as written or the resolved path is protected.
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
        written = os.path.normpath(candidate)
        if self.contains(resolved):
            if self.contains(written):
                self._refuse_protected(path, written, write=write)
            self._refuse_protected(path, resolved, write=write)
            return Path(resolved)
        if self.contains(written):
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
        text = os.fspath(resolved)
        prefix = str(self.root).rstrip(os.sep) + os.sep
        relative = (
            text[len(prefix) :] if text.startswith(prefix) else os.path.relpath(text, self.root)
        )
        return "." if relative in (".", "") else relative.replace(os.sep, "/")

    # --- checked opening (used by the tools; see the module notes on races) ---------------

    def _check_fd(self, fd: int, shown: str, *, write: bool = False, child: str = "") -> None:
        try:
            where = os.readlink(f"{_PROC_FD}/{fd}")
        except OSError:
            return  # no /proc: O_NOFOLLOW is all we have
        if not self.contains(where):
            raise WorkspacePathError(
                f"path {quoted(shown)} changed while it was being opened and now leads "
                f"outside the workspace root {self.root}; try again with a path inside it"
            )
        self._refuse_protected(shown, os.path.join(where, child) if child else where, write=write)

    def check_identity(self, status: os.stat_result, shown: str) -> None:
        """Refuse a file (``status`` from ``fstat``) that is a hard link to a protected file.

        Raises:
            ProtectedPathError: it is.
        """
        if self._protected.is_linked_to_protected(status):
            raise ProtectedPathError(
                f"path {quoted(shown)} is protected: it is a hard link to one of the "
                "protected files. The file tools never read it; leave it alone"
            )

    def open_file(self, resolved: Path, shown: str) -> int:
        """Open the regular file ``resolved`` (already checked) for reading; return the fd.

        Raises:
            WorkspacePathError: it moved outside the root while being opened, or it is
                protected (:class:`ProtectedPathError`, also for a hard link to a protected
                file).
            BuiltinToolError: it is not a regular file.
            OSError: it cannot be opened.
        """
        fd = os.open(resolved, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
        try:
            self._check_fd(fd, shown)
            status = os.fstat(fd)
            if stat.S_ISDIR(status.st_mode):
                raise BuiltinToolError(
                    f"{quoted(shown)} is a directory, not a file; use list_dir to see what "
                    "it contains"
                )
            if not stat.S_ISREG(status.st_mode):
                raise BuiltinToolError(
                    f"{quoted(shown)} is not a regular file (a device, socket or pipe); the "
                    "file tools only handle regular files"
                )
            self.check_identity(status, shown)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open_directory(
        self, resolved: Path, shown: str, *, write: bool = False, child: str = ""
    ) -> int:
        """Open the directory ``resolved`` (already checked); return the fd. With ``child``,
        the entry of that name in it is checked too (for a write, when ``write``).

        Raises:
            WorkspacePathError: it moved outside the root or into a protected place while
                being opened.
            OSError: it cannot be opened (``NotADirectoryError`` if it is not a directory).
        """
        fd = os.open(resolved, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC)
        try:
            self._check_fd(fd, shown, write=write, child=child)
        except BaseException:
            os.close(fd)
            raise
        return fd
