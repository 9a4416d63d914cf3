"""Glob patterns over path components, matched in linear time.

A pattern is split at ``/`` into components. ``**`` matches zero or more whole components; any
other component is an :mod:`fnmatch` pattern (``*``, ``?``, ``[...]``) for one name, compiled
with :func:`fnmatch.translate`, whose stars become atomic groups (Python 3.11+): matching one
name never backtracks exponentially. A whole path is matched by stepping a set of pattern
positions through its components (a Thompson-style simulation), so ``**/**/**/x`` costs
``O(components × pattern components)``, never the exponential recursion a naive ``**``
matcher has. Runs of ``**`` are collapsed when compiled. Patterns longer than
:data:`MAX_PATTERN_CHARS` or with more than :data:`MAX_PATTERN_PARTS` components are refused.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence

import attrs

__all__ = ["MAX_PATTERN_CHARS", "MAX_PATTERN_PARTS", "GlobPattern", "GlobTooComplex", "has_magic"]

#: The longest glob pattern accepted, in characters.
MAX_PATTERN_CHARS = 1024
#: The most components (``/``-separated parts) a glob pattern may have.
MAX_PATTERN_PARTS = 64

_DOUBLE_STAR = "**"


class GlobTooComplex(ValueError):
    """A pattern above the complexity bound (too long, or too many components)."""


def has_magic(part: str) -> bool:
    """Whether a component holds a wildcard (``*``, ``?`` or ``[``)."""
    return any(c in part for c in "*?[")


def _fold(text: str) -> str:
    return text.casefold()


@attrs.frozen
class GlobPattern:
    """A compiled glob: ``parts`` are the components (``**`` kept as is, runs of it collapsed).

    Build one with :meth:`compile`. ``fold=True`` matches case-insensitively (Unicode case
    folding); callers must then fold the names they pass the same way (:meth:`key`).
    """

    parts: tuple[str, ...]
    fold: bool = False
    _regexes: tuple[re.Pattern[str] | None, ...] = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        regexes = tuple(
            None if part == _DOUBLE_STAR else re.compile(fnmatch.translate(part), re.DOTALL)
            for part in self.parts
        )
        object.__setattr__(self, "_regexes", regexes)

    @classmethod
    def compile(cls, parts: Sequence[str], *, fold: bool = False) -> GlobPattern:
        """The pattern for ``parts`` (already split at ``/``, no empty parts).

        Raises:
            GlobTooComplex: more than :data:`MAX_PATTERN_PARTS` components or more than
                :data:`MAX_PATTERN_CHARS` characters.
        """
        if len(parts) > MAX_PATTERN_PARTS or sum(map(len, parts)) > MAX_PATTERN_CHARS:
            raise GlobTooComplex(
                f"the pattern has {len(parts)} components and {sum(map(len, parts))} "
                f"characters; the limit is {MAX_PATTERN_PARTS} components and "
                f"{MAX_PATTERN_CHARS} characters"
            )
        collapsed: list[str] = []
        for part in parts:
            if part == _DOUBLE_STAR and collapsed and collapsed[-1] == _DOUBLE_STAR:
                continue
            collapsed.append(_fold(part) if fold else part)
        return cls(tuple(collapsed), fold)

    def key(self, name: str) -> str:
        """``name`` as this pattern compares it (case-folded when :attr:`fold`)."""
        return _fold(name) if self.fold else name

    def is_double_star(self, index: int) -> bool:
        """Whether component ``index`` is ``**``."""
        return self.parts[index] == _DOUBLE_STAR

    def match_part(self, index: int, name: str) -> bool:
        """Whether component ``index`` (not ``**``) matches the one name ``name``."""
        regex = self._regexes[index]
        assert regex is not None, "match_part() is for components other than **"
        return regex.match(self.key(name)) is not None

    def _closure(self, states: set[int]) -> set[int]:
        # ``**`` may match zero components: a position at ``**`` also stands past it.
        out = set(states)
        for state in sorted(states):
            while state < len(self.parts) and self.parts[state] == _DOUBLE_STAR:
                state += 1
                out.add(state)
        return out

    def match(self, names: Sequence[str]) -> bool:
        """Whether the path given by its component ``names`` matches the whole pattern."""
        states = self._closure({0})
        for name in names:
            following: set[int] = set()
            for state in states:
                if state == len(self.parts):
                    continue
                if self.parts[state] == _DOUBLE_STAR:
                    following.add(state)
                elif self.match_part(state, name):
                    following.add(state + 1)
            if not following:
                return False
            states = self._closure(following)
        return len(self.parts) in states
