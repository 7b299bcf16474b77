"""The fleet's shared rate budget as pure arithmetic: grants to several workers in virtual
time, corrections, learned limits, holds, and the local share without the server."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore import ConfigError
from agentcore._core.fleetbudget import SharedBudget, local_share
from tests.core.test_ratebudget import ServerBucket

# Per worker call: (seconds since the previous call of any worker, which worker, its line)
calls = st.lists(
    st.tuples(
        st.floats(0.0, 5.0),
        st.integers(0, 3),
        st.lists(st.integers(0, 4_000), min_size=0, max_size=12),
    ),
    min_size=1,
    max_size=60,
)


def run_fleet(
    budget: SharedBudget, steps: list[tuple[float, int, list[int]]], horizon: float
) -> list[tuple[float, int]]:
    """Workers send their lines to one budget at the given times; every request granted is
    sent at its grant's time. A worker keeps what was not granted at the front of its next
    line. Returns (send time, tokens) of every request sent."""
    now = 0.0
    left: dict[int, list[int]] = {}
    sent = []
    for gap, worker, line in steps:
        now += gap
        costs = left.get(worker, []) + line
        grants = budget.reserve(now, costs, horizon)
        assert len(grants.delays) == len(costs) or grants.retry > 0
        for delay, cost in zip(grants.delays, costs, strict=False):
            assert 0 <= delay <= horizon
            sent.append((now + delay, cost))
        left[worker] = costs[len(grants.delays) :]
    return sorted(sent)


@settings(max_examples=300)
@given(calls, st.integers(1_000, 20_000), st.integers(1, 120), st.floats(0.0, 3.0))
def test_an_api_keeping_the_same_buckets_never_refuses_what_the_fleet_is_granted(
    steps: list[tuple[float, int, list[int]]], tpm: int, rpm: int, horizon: float
) -> None:
    sent = run_fleet(SharedBudget(rpm, tpm), steps, horizon)
    tokens, requests = ServerBucket(tpm), ServerBucket(rpm)
    for when, cost in sent:
        assert requests.admit(when, 1)
        assert tokens.admit(when, cost)


@settings(max_examples=200)
@given(st.integers(10, 600), st.integers(1, 4), st.floats(0.1, 2.0))
def test_a_fleet_that_always_has_work_gets_the_whole_limit(
    rpm: int, workers: int, horizon: float
) -> None:
    # Every worker asks every 50 ms with more than it can get: in ten minutes the fleet sends
    # the full bucket plus ten minutes of refill, less what one horizon still holds back.
    budget = SharedBudget(requests_per_minute=rpm)
    sent = 0
    now = 0.0
    while now < 600.0:
        for _ in range(workers):
            sent += sum(d <= 600.0 - now for d in budget.reserve(now, [1] * 50, horizon).delays)
        now += 0.05
    assert rpm + rpm * 10 - 2 <= sent <= rpm + rpm * 10 + 1


@given(calls)
def test_without_known_limits_every_cost_is_granted_at_once(
    steps: list[tuple[float, int, list[int]]],
) -> None:
    budget = SharedBudget()
    for _, _, line in steps:
        grants = budget.reserve(10.0, line, 1.0)
        assert grants.delays == (0.0,) * len(line) and grants.retry == 0.0


def test_grants_go_in_order_up_to_the_horizon_and_say_when_to_ask_again() -> None:
    budget = SharedBudget(requests_per_minute=60)  # one a second after the first minute
    assert budget.reserve(0.0, [1] * 60, 1.0).delays == (0.0,) * 60
    grants = budget.reserve(0.0, [1] * 5, 2.5)
    assert grants.delays == pytest.approx((1.0, 2.0))
    assert grants.retry == pytest.approx(0.5)  # the third is ready at 3.0, 2.5 s ahead
    assert budget.reserve(0.5, [1], 2.5).delays == pytest.approx((2.5,))


def test_a_request_dearer_than_the_bucket_waits_for_a_full_one() -> None:
    budget = SharedBudget(tokens_per_minute=600)
    assert budget.reserve(0.0, [100], 0.0).delays == (0.0,)
    grants = budget.reserve(0.0, [5_000], 100.0)
    assert grants.delays == pytest.approx((10.0,))  # the 100 taken refill in 10 s


@given(st.integers(1, 5_000), st.integers(0, 5_000), st.integers(0, 5_000))
def test_a_correction_gives_back_or_charges_the_difference(
    tpm: int, estimate: int, used: int
) -> None:
    budget = SharedBudget(tokens_per_minute=tpm)
    budget.reserve(0.0, [estimate], math.inf)
    budget.adjust(0.0, 0.0, float(estimate - used))
    level = budget.levels(0.0)[1]
    assert level == pytest.approx(min(float(tpm), tpm - used) if used else tpm)


def test_a_refund_gives_the_request_and_its_tokens_back() -> None:
    budget = SharedBudget(requests_per_minute=10, tokens_per_minute=1_000)
    budget.reserve(0.0, [400], 0.0)
    budget.adjust(0.0, 1.0, 400.0)
    assert budget.levels(0.0) == (10.0, 1_000.0)


def test_a_hold_grants_nothing_until_it_is_over() -> None:
    budget = SharedBudget(requests_per_minute=100)
    budget.hold(5.0, 2.0)
    held = budget.reserve(6.0, [1], 10.0)
    assert held.delays == () and held.retry == pytest.approx(1.0)
    assert budget.reserve(7.0, [1], 10.0).delays == (0.0,)


def test_learned_limits_apply_with_the_lower_one_and_keep_the_level() -> None:
    budget = SharedBudget(requests_per_minute=100)
    budget.reserve(0.0, [1] * 40, 0.0)  # level 60 of 100
    budget.learn(0.0, 500, 10_000)
    assert budget.limits == (100, 10_000)  # the configured request limit is lower
    budget.learn(0.0, 80, None)
    assert budget.limits == (80, 10_000)
    assert budget.levels(0.0) == (60.0, 10_000.0)


def test_what_remains_caps_the_level_but_never_raises_it() -> None:
    budget = SharedBudget(requests_per_minute=100)
    budget.cap(0.0, 30, None)
    assert budget.levels(0.0)[0] == 30.0
    budget.cap(0.0, 90, None)
    assert budget.levels(0.0)[0] == 30.0


def test_a_call_applies_corrections_before_what_remains() -> None:
    # The headers' remaining already counts the usage a correction reports.
    budget = SharedBudget(tokens_per_minute=1_000)
    budget.reserve(0.0, [500], 0.0)
    budget.update(0.0, back=(0.0, 400.0), remaining=(None, 850))
    assert budget.levels(0.0)[1] == 850.0


@settings(max_examples=200)
@given(
    st.integers(10, 1_000),
    st.integers(1, 6),
    st.floats(0.0, 30.0),
    st.lists(st.tuples(st.floats(0.0, 2.0), st.integers(0, 5)), max_size=80),
)
def test_the_local_shares_of_all_workers_together_stay_within_the_limit(
    rpm: int, workers: int, empty_at: float, steps: list[tuple[float, int]]
) -> None:
    # Every worker falls back at once, each with limit // workers from when the fleet's last
    # grant may still be sent: an API bucket that was empty then never refuses them.
    shares = [local_share((rpm, None), workers, empty_at) for _ in range(workers)]
    api = ServerBucket(rpm)
    api.level, api.updated = 0.0, empty_at
    now = empty_at
    sent = []
    for gap, worker in steps:
        now += gap
        for delay in shares[worker % workers].reserve(now, [1] * 3, 1.0).delays:
            sent.append(now + delay)
    for when in sorted(sent):
        assert api.admit(when, 1)


def test_a_local_share_divides_each_known_limit_and_starts_empty() -> None:
    share = local_share((100, 9_000), 4, 10.0)
    assert share.limits == (25, 2_250)
    assert share.levels(10.0) == (0.0, 0.0)
    assert local_share((3, None), 8, 0.0).limits == (1, None)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10"])
def test_limits_must_be_positive_integers(bad: object) -> None:
    with pytest.raises(ConfigError, match="requests_per_minute"):
        SharedBudget(requests_per_minute=bad)  # type: ignore[arg-type]
