"""The one deprecation helper (STYLE #8): every deprecated path warns through :func:`warn_deprecated`."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TypeVar

__all__ = ["TrioAgentDeprecationWarning", "deprecated_note", "warn_deprecated"]

F = TypeVar("F", bound=Callable[..., object])


class TrioAgentDeprecationWarning(DeprecationWarning):
    """A trio-agent API that still works but goes away in a later release."""


def _message(thing: str, version: str, replacement: str | None, issue: int | None) -> str:
    text = f"{thing} is deprecated since trio-agent {version}"
    if replacement:
        text += f"; use {replacement} instead"
    if issue is not None:
        text += f" (issue #{issue})"
    return text


def warn_deprecated(
    thing: str,
    version: str,
    *,
    replacement: str | None = None,
    issue: int | None = None,
    stacklevel: int = 2,
) -> None:
    """Warn that ``thing`` is deprecated since ``version``.

    Args:
        thing: What the caller used ("an approval service returning a bool").
        version: The release that deprecated it.
        replacement: What to use instead.
        issue: The issue number that explains the change.
        stacklevel: Passed to :func:`warnings.warn`, counted from the caller of this helper
            (``2`` blames the caller's caller).
    """
    warnings.warn(
        _message(thing, version, replacement, issue),
        TrioAgentDeprecationWarning,
        stacklevel=stacklevel + 1,
    )


def deprecated_note(version: str, replacement: str | None = None) -> str:
    """The ``.. deprecated::`` docstring block for a deprecated name."""
    note = f"\n\n.. deprecated:: {version}"
    if replacement:
        note += f"\n   Use {replacement} instead."
    return note
