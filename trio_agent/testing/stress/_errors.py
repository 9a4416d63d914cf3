"""The kit's errors."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import TrioAgentError

if TYPE_CHECKING:
    from ._records import Violation

__all__ = ["ScenarioError", "StressFailure"]


class StressFailure(TrioAgentError, AssertionError):
    """A stress run broke an invariant. The message lists the violations and ends with a short
    Python snippet that reproduces the failing run with :func:`replay`.

    Attributes:
        snippet: The reproducing snippet.
        violations: The broken invariants.
    """

    def __init__(self, message: str, *, snippet: str, violations: tuple[Violation, ...]) -> None:
        super().__init__(message)
        self.snippet = snippet
        self.violations = violations


class ScenarioError(TrioAgentError, ValueError):
    """The scenario cannot be explored as written (say, it does not finish without a cancel)."""
