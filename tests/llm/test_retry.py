"""RetryPolicy: exponential backoff with jitter, Retry-After, give-up rules."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agent.llm import DEFAULT_RETRY_CODES, LlmFailure, RetryPolicy


def failure(code: str = "SERVER", retry_after: float | None = None) -> LlmFailure:
    return LlmFailure(code, "x", retry_after=retry_after)


def test_defaults() -> None:
    policy = RetryPolicy()
    assert policy.max_attempts == 5
    assert (
        policy.retry_codes
        == DEFAULT_RETRY_CODES
        == (
            "RATE_LIMIT",
            "SERVER",
            "TIMEOUT",
            "TRANSPORT",
            "EMPTY_RESPONSE",
        )
    )
    assert (policy.initial_delay, policy.max_delay, policy.jitter) == (0.5, 10.0, 0.1)


def test_backoff_doubles_until_the_cap_without_jitter() -> None:
    policy = RetryPolicy(max_attempts=10, jitter=0.0, initial_delay=0.5, max_delay=10.0)
    rng = random.Random(0)
    delays = [policy.delay_for(n, failure(), rng) for n in range(1, 10)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0, 10.0]


@given(st.integers(1, 30), st.floats(0, 1), st.randoms(use_true_random=False))
def test_jitter_stays_in_bounds(attempt: int, jitter: float, rng: random.Random) -> None:
    policy = RetryPolicy(max_attempts=100, jitter=jitter)
    delay = policy.delay_for(attempt, failure(), rng)
    assert delay is not None
    base = min(0.5 * 2 ** (attempt - 1), 10.0)
    assert base * (1 - jitter) - 1e-9 <= delay <= min(base * (1 + jitter), 10.0) + 1e-9


def test_jitter_actually_varies() -> None:
    policy = RetryPolicy()
    rng = random.Random(1)
    assert len({policy.delay_for(1, failure(), rng) for _ in range(20)}) > 1


def test_gives_up_after_max_attempts() -> None:
    policy = RetryPolicy(max_attempts=3)
    rng = random.Random(0)
    assert policy.delay_for(1, failure(), rng) is not None
    assert policy.delay_for(2, failure(), rng) is not None
    assert policy.delay_for(3, failure(), rng) is None
    assert RetryPolicy(max_attempts=1).delay_for(1, failure(), rng) is None


@pytest.mark.parametrize(
    "code",
    [
        "AUTH",
        "INVALID_REQUEST",
        "CONTEXT_WINDOW_EXCEEDED",
        "QUOTA",
        "MALFORMED_RESPONSE",
        "NO_ADAPTER",
        "ABORTED",
        "UNKNOWN",
    ],
)
def test_non_retryable_codes(code: str) -> None:
    assert RetryPolicy().delay_for(1, failure(code), random.Random(0)) is None
    assert not RetryPolicy().retryable(failure(code))


@pytest.mark.parametrize("code", DEFAULT_RETRY_CODES)
def test_retryable_codes(code: str) -> None:
    assert RetryPolicy().delay_for(1, failure(code), random.Random(0)) is not None


def test_retry_after_within_cap_is_used_verbatim() -> None:
    policy = RetryPolicy()
    assert policy.delay_for(1, failure("RATE_LIMIT", 7.25), random.Random(0)) == 7.25
    assert policy.delay_for(4, failure("RATE_LIMIT", 0.01), random.Random(0)) == 0.01
    assert policy.delay_for(1, failure("RATE_LIMIT", 10.0), random.Random(0)) == 10.0


def test_retry_after_beyond_cap_gives_up() -> None:
    assert RetryPolicy().delay_for(1, failure("RATE_LIMIT", 10.5), random.Random(0)) is None


def test_retry_after_does_not_make_a_code_retryable() -> None:
    assert RetryPolicy().delay_for(1, failure("AUTH", 1.0), random.Random(0)) is None


def test_custom_codes() -> None:
    policy = RetryPolicy(retry_codes=("QUOTA",))
    assert policy.delay_for(1, failure("QUOTA"), random.Random(0)) is not None
    assert policy.delay_for(1, failure("SERVER"), random.Random(0)) is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 0},
        {"initial_delay": -1.0},
        {"max_delay": float("inf")},
        {"initial_delay": 5.0, "max_delay": 1.0},
        {"jitter": 1.5},
        {"jitter": -0.1},
    ],
)
def test_invalid_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="RetryPolicy"):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_attempt_starts_at_one() -> None:
    with pytest.raises(ValueError, match="starts at 1"):
        RetryPolicy().delay_for(0, failure(), random.Random(0))


def test_policy_structures_from_config() -> None:
    from trio_agent import _serde

    policy = _serde.structure({"max_attempts": 2, "retry_codes": ["SERVER"]}, RetryPolicy)
    assert policy == RetryPolicy(max_attempts=2, retry_codes=("SERVER",))
