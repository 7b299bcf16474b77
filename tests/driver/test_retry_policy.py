"""The pure retry policy: back-off with full jitter, retry-after, attempt and time budgets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore import ErrorKind, ModelError, RetryPolicy

RATE_LIMITED = ModelError(ErrorKind.RATE_LIMITED, "slow down", status=429, retryable=True)
BAD_REQUEST = ModelError(ErrorKind.BAD_REQUEST, "no", status=400, retryable=False)


def constant(value: float):  # type: ignore[no-untyped-def]
    return lambda: value


def test_retry_after_is_honoured_exactly() -> None:
    error = ModelError(ErrorKind.RATE_LIMITED, "", status=429, retryable=True, retry_after=7.5)
    wait = RetryPolicy().delay(attempt=1, error=error, elapsed=0.0, random=constant(0.9))
    assert wait == 7.5


def test_retry_after_is_capped() -> None:
    error = ModelError(ErrorKind.RATE_LIMITED, "", retryable=True, retry_after=3600.0)
    policy = RetryPolicy(max_retry_after=20.0)
    assert policy.delay(attempt=1, error=error, elapsed=0.0, random=constant(0.5)) == 20.0


def test_final_errors_are_not_retried() -> None:
    assert RetryPolicy().delay(attempt=1, error=BAD_REQUEST, elapsed=0, random=constant(0)) is None


def test_attempts_are_bounded() -> None:
    policy = RetryPolicy(max_attempts=3)
    assert policy.delay(attempt=2, error=RATE_LIMITED, elapsed=0, random=constant(0.5)) is not None
    assert policy.delay(attempt=3, error=RATE_LIMITED, elapsed=0, random=constant(0.5)) is None
    assert (
        RetryPolicy(max_attempts=1).delay(
            attempt=1, error=RATE_LIMITED, elapsed=0, random=constant(0.5)
        )
        is None
    )


def test_no_retry_starts_past_the_time_budget_or_the_callers_deadline() -> None:
    policy = RetryPolicy(max_elapsed=10.0)
    error = ModelError(ErrorKind.OVERLOADED, "", retryable=True, retry_after=3.0)
    assert policy.delay(attempt=1, error=error, elapsed=6.0, random=constant(0)) == 3.0
    assert policy.delay(attempt=1, error=error, elapsed=8.0, random=constant(0)) is None
    assert (
        policy.delay(attempt=1, error=error, elapsed=0.0, random=constant(0), remaining=2.0) is None
    )


@settings(max_examples=200)
@given(
    attempt=st.integers(1, 40),
    draw=st.floats(0.0, 1.0, exclude_max=True),
    base=st.floats(0.01, 5.0),
    cap=st.floats(0.01, 60.0),
)
def test_backoff_is_full_jitter_under_an_exponential_ceiling(
    attempt: int, draw: float, base: float, cap: float
) -> None:
    policy = RetryPolicy(max_attempts=50, base_delay=base, max_delay=cap, max_elapsed=1e9)
    wait = policy.delay(attempt=attempt, error=RATE_LIMITED, elapsed=0.0, random=lambda: draw)
    ceiling = min(cap, base * 2 ** (attempt - 1))
    assert wait is not None
    assert 0.0 <= wait <= ceiling
    assert wait == pytest.approx(ceiling * draw)


def test_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError):
        RetryPolicy(base_delay=-1.0)
