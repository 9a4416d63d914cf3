"""Token totals and context-size estimates (values)."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from ..llm import Usage

__all__ = ["ContextEstimate", "UsageReport", "UsageTotals"]


@attrs.frozen
class UsageTotals:
    """Tokens the provider reported for one or more model calls, summed.

    ``input_tokens`` is uncached input (as in :class:`~trio_agent.llm.Usage`), ``cached_tokens``
    input read from the provider's cache, ``cache_write_tokens`` input written to it,
    ``output_tokens`` everything generated (``reasoning_tokens`` included, which are counted a
    second time on their own), ``requests`` how many answers reported usage.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    requests: int = 0

    @classmethod
    def of(cls, usage: Usage) -> UsageTotals:
        """The totals of one reported :class:`~trio_agent.llm.Usage`."""
        return cls(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cached_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            reasoning_tokens=usage.reasoning_tokens,
            requests=1,
        )

    @property
    def prompt_tokens(self) -> int:
        """All input: uncached, cache reads and cache writes."""
        return self.input_tokens + self.cached_tokens + self.cache_write_tokens

    @property
    def total_tokens(self) -> int:
        """All input plus all output."""
        return self.prompt_tokens + self.output_tokens

    def __add__(self, other: UsageTotals) -> UsageTotals:
        if not isinstance(other, UsageTotals):
            return NotImplemented
        return UsageTotals(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            requests=self.requests + other.requests,
        )


@attrs.frozen
class UsageReport:
    """A session's totals, per turn and per step (``(turn, step)``), as a snapshot."""

    session: UsageTotals
    turns: Mapping[int, UsageTotals]
    steps: Mapping[tuple[int, int], UsageTotals]


@attrs.frozen
class ContextEstimate:
    """How many tokens the next request of a session will carry, roughly.

    ``tokens = reported + estimated``: ``reported`` is what the provider said the last request
    and its answer took (0 when it never said, or a compaction made it stale), ``estimated``
    what the character estimator (:func:`estimate_tokens`) adds for everything since.
    ``context_window`` is the model's configured window (``None``: unknown), ``fraction`` the
    share of it the next request would fill.
    """

    tokens: int
    reported: int
    estimated: int
    context_window: int | None = None

    @property
    def fraction(self) -> float | None:
        """``tokens / context_window``, or ``None`` when the window is unknown."""
        if self.context_window is None:
            return None
        return self.tokens / self.context_window
