"""Retry math for failed model calls (the policy only; the agent layer acts on it)."""

from __future__ import annotations

import math
import random

import attrs

from ._types import LlmFailure

__all__ = ["DEFAULT_RETRY_CODES", "RetryPolicy"]

#: Failure codes worth another attempt: transient on the provider's side or on the wire.
DEFAULT_RETRY_CODES: tuple[str, ...] = (
    "RATE_LIMIT",
    "SERVER",
    "TIMEOUT",
    "TRANSPORT",
    "EMPTY_RESPONSE",
)


def _positive(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(
            f"RetryPolicy.{attribute.name} must be a finite number >= 0, got {value!r}"
        )


@attrs.frozen
class RetryPolicy:
    """When and how long to wait before repeating a failed model call.

    ``max_attempts`` counts calls, the first included: ``max_attempts=5`` allows 4 retries.
    The delay before retry ``n`` (``n = attempt``, the number of calls that failed so far) is
    ``min(initial_delay * 2**(n-1), max_delay)``, scaled by a random factor in
    ``[1 - jitter, 1 + jitter]`` and capped at ``max_delay``. A provider's ``retry_after`` wins
    when it is at most ``max_delay`` (used verbatim); a longer one means give up, since waiting
    that long inside a turn is worse than reporting the error.

    Raises:
        ValueError: on construction, for a negative or non-finite delay, ``initial_delay >
            max_delay``, ``jitter`` outside ``[0, 1]`` or ``max_attempts < 1``.
    """

    max_attempts: int = 5
    retry_codes: tuple[str, ...] = DEFAULT_RETRY_CODES
    initial_delay: float = attrs.field(default=0.5, validator=_positive)
    max_delay: float = attrs.field(default=10.0, validator=_positive)
    jitter: float = 0.1

    def __attrs_post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(
                f"RetryPolicy.max_attempts must be >= 1 (1 means never retry), got {self.max_attempts}"
            )
        if self.initial_delay > self.max_delay:
            raise ValueError(
                f"RetryPolicy.initial_delay ({self.initial_delay}) must not exceed max_delay "
                f"({self.max_delay})"
            )
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"RetryPolicy.jitter must be within [0, 1], got {self.jitter!r}")

    def retryable(self, failure: LlmFailure) -> bool:
        """Whether ``failure``'s code is one this policy retries."""
        return failure.code in self.retry_codes

    def delay_for(self, attempt: int, failure: LlmFailure, rng: random.Random) -> float | None:
        """Seconds to wait before the next call, or ``None`` to give up.

        Args:
            attempt: how many calls have failed so far (1 after the first failure).
            failure: why the last call failed.
            rng: the random source for jitter (pass a seeded one for reproducible runs).
        """
        if attempt < 1:
            raise ValueError(f"attempt counts failed calls and starts at 1, got {attempt}")
        if attempt >= self.max_attempts or not self.retryable(failure):
            return None
        retry_after = failure.retry_after
        if retry_after is not None and retry_after > 0:
            return retry_after if retry_after <= self.max_delay else None
        base = min(self.initial_delay * 2.0 ** min(attempt - 1, 64), self.max_delay)
        factor = 1.0 - self.jitter + 2.0 * self.jitter * rng.random()
        return min(base * factor, self.max_delay)
