"""The pure rate budget: per-minute request and token limits, reservations, corrections."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore._core.ratebudget import RateBudget, RateObservation

# (seconds since the previous reservation, estimated tokens)
arrivals = st.lists(st.tuples(st.floats(0.0, 30.0), st.integers(0, 3_000)), min_size=1, max_size=60)


def schedule(budget: RateBudget, steps: list[tuple[float, int]]) -> list[tuple[float, int]]:
    """Serve the arrivals in line, each sent at its ready time; return (send time, tokens)."""
    arrived = free = 0.0
    sent = []
    for gap, tokens in steps:
        arrived += gap
        now = max(arrived, free)  # the line: nobody goes before the one ahead
        when = budget.ready_at(now, tokens)
        budget.take(when, tokens)
        sent.append((when, tokens))
        free = when
    return sent


class ServerBucket:
    """How a server enforces a per-minute limit: a bucket of one minute's allowance,
    refilled continuously; a request is refused unless the bucket holds its cost (or, for a
    request larger than the whole bucket, unless the bucket is full)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.level, self.updated = limit, float(limit), 0.0

    def admit(self, now: float, cost: float) -> bool:
        self.level = min(self.limit, self.level + (now - self.updated) * self.limit / 60)
        self.updated = now
        if self.level + 1e-6 < min(cost, self.limit):
            return False
        self.level -= cost
        return True


@settings(max_examples=300)
@given(arrivals, st.integers(1_000, 20_000), st.integers(1, 120))
def test_a_server_enforcing_the_same_limits_never_refuses_what_the_budget_lets_through(
    steps: list[tuple[float, int]], tpm: int, rpm: int
) -> None:
    budget = RateBudget(requests_per_minute=rpm, tokens_per_minute=tpm)
    sent = schedule(budget, steps)
    tokens, requests = ServerBucket(tpm), ServerBucket(rpm)
    for when, used in sent:
        assert tokens.admit(when, used)
        assert requests.admit(when, 1)


@settings(max_examples=200)
@given(arrivals, st.integers(100, 20_000))
def test_requests_are_ready_in_the_order_they_reserved(
    steps: list[tuple[float, int]], tpm: int
) -> None:
    sent = schedule(RateBudget(tokens_per_minute=tpm), steps)
    times = [when for when, _ in sent]
    assert all(later >= earlier - 1e-9 for earlier, later in itertools.pairwise(times))


@given(arrivals)
def test_without_known_limits_nothing_waits(steps: list[tuple[float, int]]) -> None:
    budget = RateBudget()
    assert not budget.limited
    now = 0.0
    for gap, tokens in steps:
        now += gap
        assert budget.ready_at(now, tokens) == now
        budget.take(now, tokens)


def test_a_full_minute_is_available_at_once_then_the_refill_rate() -> None:
    budget = RateBudget(tokens_per_minute=6_000)
    for _ in range(6):
        assert budget.ready_at(0.0, 1_000) == 0.0
        budget.take(0.0, 1_000)
    assert budget.ready_at(0.0, 1_000) == pytest.approx(10.0)  # 1,000 tokens at 100 a second
    assert budget.ready_at(0.0, 100_000) == pytest.approx(60.0)  # dearer than all: a full bucket


@settings(max_examples=100)
@given(st.integers(1, 5_000), st.integers(0, 5_000), st.integers(0, 5_000))
def test_settling_with_the_usage_corrects_the_estimate(
    estimate: int, used: int, next_tokens: int
) -> None:
    exact, corrected = RateBudget(tokens_per_minute=2_000), RateBudget(tokens_per_minute=2_000)
    exact.take(0.0, used)
    reservation = corrected.take(0.0, estimate)
    corrected.settle(reservation, used, 0.0)
    # Once corrected, the budget is where it would be had the estimate been exact.
    assert corrected.levels(0.0) == exact.levels(0.0)
    assert corrected.ready_at(1.0, next_tokens) == pytest.approx(exact.ready_at(1.0, next_tokens))


def test_a_refund_gives_everything_back() -> None:
    budget = RateBudget(requests_per_minute=10, tokens_per_minute=1_000)
    before = budget.levels(0.0)
    reservation = budget.take(0.0, 700)
    assert budget.levels(0.0) == (9.0, 300.0)
    budget.refund(reservation, 0.0)
    assert budget.levels(0.0) == before


def test_a_penalty_holds_back_every_reservation() -> None:
    budget = RateBudget()
    assert budget.ready_at(1.0, 10) == 1.0
    budget.penalize(1.0, 5.0)
    assert budget.limited
    assert budget.ready_at(2.0, 10) == pytest.approx(6.0)
    assert budget.ready_at(6.5, 10) == 6.5


@given(
    st.floats(0.0, 100.0),
    st.floats(0.001, 60.0),
    st.floats(0.0, 200.0),
)
def test_a_hold_stops_even_what_was_admitted_before_it(
    start: float, retry_after: float, later: float
) -> None:
    budget = RateBudget(requests_per_minute=1_000)
    assert budget.ready_at(start, 10) == start  # admitted
    budget.take(start, 10)
    assert not budget.held(start)
    budget.penalize(start, retry_after)
    # Whatever was admitted before, nothing may be sent until the hold is over.
    now = start + later
    assert budget.held(now) == (now < start + retry_after)


def test_limits_are_learned_from_headers_and_the_lower_one_applies() -> None:
    budget = RateBudget(tokens_per_minute=10_000)
    assert budget.limits == (None, 10_000)
    budget.observe(0.0, RateObservation(limit_requests=60, limit_tokens=50_000))
    assert budget.limits == (60, 10_000)
    budget.observe(0.0, RateObservation(limit_tokens=4_000))
    assert budget.limits == (60, 4_000)
    assert budget.levels(0.0) == (60.0, 4_000.0)


def test_remaining_from_headers_caps_the_level_but_never_raises_it() -> None:
    budget = RateBudget(requests_per_minute=100, tokens_per_minute=10_000)
    budget.take(0.0, 5_000)
    budget.observe(0.0, RateObservation(remaining_tokens=1_000, remaining_requests=90))
    assert budget.levels(0.0) == (90.0, 1_000.0)
    budget.observe(0.0, RateObservation(remaining_tokens=9_000))
    assert budget.levels(0.0) == (90.0, 1_000.0)
    # Refilled at 10,000 / 60 tokens per second afterwards.
    _, tokens = budget.levels(6.0)
    assert tokens == pytest.approx(2_000.0)


def test_a_budget_learned_only_from_headers_starts_limiting() -> None:
    budget = RateBudget()
    budget.observe(0.0, RateObservation(limit_tokens=600, remaining_tokens=0))
    assert budget.limited
    assert budget.ready_at(0.0, 100) == pytest.approx(10.0)


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "60"])
def test_limits_must_be_positive_integers(bad: object) -> None:
    with pytest.raises(ValueError, match="per_minute"):
        RateBudget(requests_per_minute=bad)  # type: ignore[arg-type]


_limit = st.none() | st.integers(-5, 100_000)
_budget_steps = st.lists(
    st.one_of(
        st.tuples(st.just("observe"), _limit, _limit),
        st.tuples(st.just("penalize"), st.floats(-10.0, 100.0) | st.just(math.inf), st.none()),
        st.tuples(st.just("take"), st.integers(0, 5_000), st.none()),
    ),
    max_size=8,
)


@given(st.none() | st.integers(1, 1_000), st.none() | st.integers(1, 100_000), _budget_steps)
def test_limited_says_whether_a_limit_or_a_hold_is_known_after_any_updates(
    rpm: int | None, tpm: int | None, steps: list[tuple[str, object, object]]
) -> None:
    budget = RateBudget(requests_per_minute=rpm, tokens_per_minute=tpm)
    now = 0.0
    for kind, first, second in steps:
        now += 1.0
        if kind == "observe":
            observation = RateObservation(limit_requests=first, limit_tokens=second)  # type: ignore[arg-type]
            budget.observe(now, observation)
        elif kind == "penalize":
            budget.penalize(now, first)  # type: ignore[arg-type]
        else:
            budget.take(now, first)  # type: ignore[arg-type]
        known = budget.limits != (None, None) or budget.blocked_until > -math.inf
        assert budget.limited == known
