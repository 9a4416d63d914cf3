"""The protected paths: what the file tools never read or write, wherever the model points them.

Protected, always (reads and writes):

* every ``.git`` entry at any depth, and everything beneath it (a directory, or a ``gitdir:``
  file): the repository's configuration and hooks run programs, its objects and refs are the
  history the user trusts, and its configuration may hold credentials;
* ``.trio-agent/`` and ``trio-agent.yml`` / ``trio-agent.yaml`` in the workspace root, whether
  or not they exist (the harness's state and the configuration the next run would load);
* the paths given in ``protect_paths`` (the config file in use, the session store, the chat
  history file), with SQLite's ``-wal`` / ``-shm`` / ``-journal`` side files;
* every path matching a ``protect`` glob (relative to the root), and everything beneath it.

Protected against writes only (``protect_writes``, default ``**/conftest.py``): files a common
allowed command runs whatever its arguments (pytest imports every ``conftest.py`` on the way to
the tests it collects).

Names are compared after Unicode NFC normalization, case folding and removal of the
"ignorable" code points some file systems drop (``.GIT``, ``.g\\u200cit`` and ``.git`` are the
same name on macOS), so a case or Unicode trick cannot name a protected path another way.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import final

import attrs

from ._errors import BuiltinToolsConfigError
from ._globs import GlobPattern, GlobTooComplex

__all__ = ["DEFAULT_PROTECT_WRITES", "ProtectedPaths", "check_globs", "name_key"]

#: The default ``protect_writes`` globs: files the file tools may read but never write.
DEFAULT_PROTECT_WRITES: tuple[str, ...] = ("**/conftest.py",)

_GIT = ".git"
_STATE_DIR = ".trio-agent"
_ROOT_CONFIGS = frozenset({"trio-agent.yml", "trio-agent.yaml"})
_SIDECARS = ("-wal", "-shm", "-journal")
# Code points HFS+/APFS ignore in names (zero-width and direction marks, BOM).
_IGNORABLE = dict.fromkeys(
    [0x200C, 0x200D, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
)
# How many files the hard-link check looks at inside protected directories.
_IDENTITY_SCAN_LIMIT = 10_000


def name_key(name: str) -> str:
    """A name as the protection rules compare it (NFC, ignorables removed, case-folded)."""
    return unicodedata.normalize("NFC", name.translate(_IGNORABLE)).casefold()


def _absolute(text: str) -> tuple[str, ...]:
    """``text`` (``~`` expanded, relative to the current directory) as written and resolved."""
    expanded = os.path.abspath(os.path.expanduser(text))
    return tuple(dict.fromkeys((expanded, os.path.realpath(expanded))))


def _pattern(text: str, where: str) -> GlobPattern:
    parts = [p for p in text.replace(os.sep, "/").split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise BuiltinToolsConfigError(
            f"{where}: {text!r} is not a usable glob; expected a pattern relative to the "
            'workspace root such as "secrets/**" or "**/*.pem", without ".."'
        )
    try:
        return GlobPattern.compile([name_key(p) for p in parts], fold=True)
    except GlobTooComplex as exc:
        raise BuiltinToolsConfigError(f"{where}: {text!r}: {exc}") from None


def _is_path(entry: str) -> bool:
    return entry.startswith(("/", "~"))


def check_globs(entries: tuple[str, ...], where: str, *, paths: bool = True) -> None:
    """Check ``protect``-style entries: globs, or (when ``paths``) paths starting with ``/``
    or ``~``.

    Raises:
        BuiltinToolsConfigError: a glob is empty, contains ``..`` or is too complex; or a
            path where only globs are accepted.
    """
    for i, entry in enumerate(entries):
        if not _is_path(entry):
            _pattern(entry, f"{where}[{i}]")
        elif not paths:
            raise BuiltinToolsConfigError(
                f"{where}[{i}]: {entry!r} is a path; expected a glob relative to the "
                'workspace root such as "**/conftest.py"'
            )


@final
@attrs.frozen
class ProtectedPaths:
    """The protection rules for one workspace root (see the module documentation).

    Build it with :meth:`build`; :meth:`reason` says why a path is protected.
    """

    root: Path
    paths: tuple[str, ...] = ()
    protect: tuple[GlobPattern, ...] = ()
    protect_writes: tuple[GlobPattern, ...] = ()

    @classmethod
    def build(
        cls,
        root: Path,
        *,
        paths: tuple[str, ...] = (),
        protect: tuple[str, ...] = (),
        protect_writes: tuple[str, ...] = DEFAULT_PROTECT_WRITES,
    ) -> ProtectedPaths:
        """The rules for the resolved ``root``. A ``protect`` entry starting with ``/`` or ``~``
        is a path (like ``paths``), any other a glob relative to the root.

        Raises:
            BuiltinToolsConfigError: a glob is empty, contains ``..`` or is too complex.
        """
        absolute = [p for p in protect if _is_path(p)]
        resolved = tuple(
            dict.fromkeys(name_key(a) for p in (*paths, *absolute) for a in _absolute(p))
        )
        return cls(
            root,
            resolved,
            tuple(_pattern(g, f"protect[{i}]") for i, g in enumerate(protect) if not _is_path(g)),
            tuple(_pattern(g, f"protect_writes[{i}]") for i, g in enumerate(protect_writes)),
        )

    def reason(self, path: str, *, write: bool = False) -> str | None:
        """Why the absolute, normalized ``path`` (no ``..``, no doubled separators) is
        protected (for a write when ``write``), or None if the file tools may use it."""
        folded = name_key(path)
        for protected in self.paths:
            if (
                folded == protected
                or folded.startswith(protected.rstrip("/") + "/")
                or any(folded == protected + s for s in _SIDECARS)
            ):
                return "it is one of the harness's own files (configuration, sessions or history)"
        prefix = str(self.root).rstrip(os.sep) + os.sep
        if not path.startswith(prefix):
            return None  # the root itself, or outside it (confinement's business)
        keys = [name_key(n) for n in path[len(prefix) :].split(os.sep)]
        if _GIT in keys:
            return "it is git's repository data (.git), which only git itself may change"
        if keys[0] == _STATE_DIR:
            return "it is the harness's state directory (.trio-agent/: sessions and locks)"
        if len(keys) == 1 and keys[0] in _ROOT_CONFIGS:
            return "it is the harness configuration file that the next run loads"
        for depth in range(1, len(keys) + 1):
            if any(g.match(keys[:depth]) for g in self.protect):
                return "it matches a protect pattern of the configuration"
        if write and any(g.match(keys) for g in self.protect_writes):
            return (
                "it is code that an allowed command runs automatically (such as pytest's "
                "conftest.py); it may be read but not written"
            )
        return None

    # --- hard links ---------------------------------------------------------------------------

    def _identity_candidates(self) -> Iterator[str]:
        yield os.path.join(self.root, _GIT, "config")
        for name in ("hooks", "info"):
            yield from _files_below(os.path.join(self.root, _GIT, name))
        yield from (os.path.join(self.root, n) for n in _ROOT_CONFIGS)
        yield from _files_below(os.path.join(self.root, _STATE_DIR))
        for path in self.paths:
            yield path
            yield from _files_below(path)

    def is_linked_to_protected(self, status: os.stat_result) -> bool:
        """Whether the file with ``status`` (from ``fstat``) has another name that is one of
        the protected files: a hard link made to read a protected file through an innocent
        name. Only files with more than one link are checked; ``protect`` globs are not
        enumerated (see docs/design.md)."""
        if status.st_nlink <= 1:
            return False
        wanted = (status.st_dev, status.st_ino)
        for seen, candidate in enumerate(self._identity_candidates()):
            if seen > _IDENTITY_SCAN_LIMIT:
                return False
            try:
                other = os.stat(candidate, follow_symlinks=False)
            except OSError:
                continue
            if (other.st_dev, other.st_ino) == wanted:
                return True
        return False


def _files_below(directory: str) -> Iterator[str]:
    """Regular files beneath ``directory`` (not following links), in no particular order."""
    stack = [directory]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        yield entry.path
        except OSError:
            continue
