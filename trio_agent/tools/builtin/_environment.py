"""The scrubbed environment a ``shell`` command runs with.

A command never inherits the process's environment: it gets only :data:`BASE_ENV_NAMES`
(plus every ``LC_*``) and the names the configuration lists in ``shell_env``, never a name in
the deny set (each provider's ``api_key_env``), plus the git defence of :mod:`._git`. ``PATH``
loses every entry that is empty, relative or inside the workspace, so a program the model
wrote cannot stand in for a real one (``./git``, ``.`` on ``PATH``).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path

from ._git import git_environment

__all__ = ["BASE_ENV_NAMES", "shell_environment"]

#: The variables every command gets (when the process has them), besides ``LC_*``.
BASE_ENV_NAMES: tuple[str, ...] = ("PATH", "HOME", "LANG", "TERM", "TMPDIR", "USER")


def _safe_path(value: str, root: Path) -> str:
    kept: list[str] = []
    for entry in value.split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        real = os.path.realpath(entry)
        if real == str(root) or real.startswith(str(root).rstrip(os.sep) + os.sep):
            continue
        kept.append(entry)
    return os.pathsep.join(kept)


def shell_environment(
    source: Mapping[str, str],
    *,
    extra: Collection[str],
    deny: Collection[str],
    root: Path,
) -> dict[str, str]:
    """The environment for a command: from ``source`` (normally ``os.environ``), the base
    names, ``LC_*`` and ``extra``, without any name in ``deny``; ``PATH`` cleaned; then the
    git defence settings (which override a same-named variable)."""
    env = {
        name: value
        for name, value in source.items()
        if (name in BASE_ENV_NAMES or name.startswith("LC_") or name in extra) and name not in deny
    }
    if "PATH" in env:
        env["PATH"] = _safe_path(env["PATH"], root)
    env.update(git_environment())
    return env
