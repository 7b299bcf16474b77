"""The one pure token bucket (GCRA), checked in virtual time against a plain bucket that keeps
its level and refills it, the way providers describe their limits."""

from __future__ import annotations

import math

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from agentcore._core.tokenbucket import TokenBucket


class LevelBucket:
    """The reference: a level, refilled continuously up to the capacity."""

    def __init__(self, rate: float, capacity: float) -> None:
        self.rate, self.capacity = rate, capacity
        self.level, self.updated = capacity, 0.0

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
        self.updated = now

    def admits(self, now: float, cost: float) -> bool:
        self.refill(now)
        return self.level >= min(cost, self.capacity) - 1e-6 * self.capacity


def close(a: float, b: float, scale: float) -> bool:
    return abs(a - b) <= 1e-6 * max(1.0, scale)


class BucketInVirtualTime(RuleBasedStateMachine):
    """Rules are what the callers do (take, give back, cap at what a server says remains,
    let time pass); the invariants are the promises of the module's theory of operation."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.bucket = TokenBucket(1.0, 1.0)
        self.reference = LevelBucket(1.0, 1.0)

    @initialize(rate=st.floats(0.01, 1_000.0), capacity=st.floats(1.0, 100_000.0))
    def start(self, rate: float, capacity: float) -> None:
        self.bucket = TokenBucket(rate, capacity)
        self.reference = LevelBucket(rate, capacity)

    @rule(seconds=st.floats(0.0, 600.0))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds

    @rule(share=st.floats(0.0, 3.0))
    def take(self, share: float) -> None:
        cost = share * self.bucket.capacity
        self.bucket.take(self.now, cost)
        self.reference.refill(self.now)
        self.reference.level -= cost

    @rule(share=st.floats(0.0, 3.0))
    def give_back(self, share: float) -> None:
        amount = share * self.bucket.capacity
        self.bucket.give(self.now, amount)
        self.reference.refill(self.now)
        self.reference.level = min(self.reference.capacity, self.reference.level + amount)

    @rule(share=st.floats(-1.0, 2.0))
    def server_says_what_remains(self, share: float) -> None:
        remaining = share * self.bucket.capacity
        self.bucket.cap(self.now, remaining)
        self.reference.refill(self.now)
        self.reference.level = min(self.reference.level, remaining)

    @rule(share=st.floats(0.0, 2.0))
    def a_request_waits_exactly_as_long_as_it_must(self, share: float) -> None:
        cost = share * self.bucket.capacity
        wait = self.bucket.wait(self.now, cost)
        assert wait >= 0.0
        # At its time the plain bucket holds what it costs (a whole bucket at most)...
        assert self.reference.admits(self.now + wait, cost)
        # ...and a little before that it did not (by more than the reference's tolerance).
        early_by = max(1e-3, 1e-5 * self.bucket.capacity / self.bucket.rate)
        if wait > early_by:
            early = LevelBucket(self.reference.rate, self.reference.capacity)
            early.level, early.updated = self.reference.level, self.reference.updated
            assert not early.admits(self.now + wait - early_by, cost)

    @invariant()
    def the_level_is_the_plain_buckets(self) -> None:
        self.reference.refill(self.now)
        scale = self.bucket.capacity + abs(self.reference.level)
        assert close(self.bucket.level(self.now), self.reference.level, scale)
        assert self.bucket.level(self.now) <= self.bucket.capacity

    @invariant()
    def full_again_when_it_says(self) -> None:
        until = self.bucket.until_full(self.now)
        later = self.now + until
        assert close(self.bucket.level(later), self.bucket.capacity, self.bucket.capacity)

    @invariant()
    def its_whole_state_is_one_number(self) -> None:
        # What a shared store would keep: a bucket rebuilt from ``tat`` alone is the same.
        again = TokenBucket(self.bucket.rate, self.bucket.capacity, self.bucket.tat)
        assert again == self.bucket
        assert again.wait(self.now, 1.0) == self.bucket.wait(self.now, 1.0)


BucketInVirtualTime.TestCase.settings = settings(max_examples=150, stateful_step_count=40)
test_the_bucket_in_virtual_time = BucketInVirtualTime.TestCase


def test_a_fresh_bucket_is_full_then_refills_at_its_rate() -> None:
    bucket = TokenBucket(rate=10.0, capacity=100.0)
    assert bucket.level(-1e9) == 100.0
    bucket.take(5.0, 100.0)
    assert bucket.wait(5.0, 1.0) == pytest.approx(0.1)
    assert bucket.wait(5.0, 1_000.0) == pytest.approx(10.0)  # dearer than all: a full bucket
    assert bucket.level(7.0) == pytest.approx(20.0)
    assert bucket.until_full(7.0) == pytest.approx(8.0)


def test_whole_costs_add_up_exactly() -> None:
    exact, corrected = TokenBucket(2_000 / 60, 2_000.0), TokenBucket(2_000 / 60, 2_000.0)
    exact.take(0.0, 4_992)
    corrected.take(0.0, 63)
    corrected.add(0.0, 63 - 4_992)
    assert exact.level(0.0) == corrected.level(0.0) == -2_992.0


@pytest.mark.parametrize("level", [-50.0, 0.0, 30.0, 100.0])
def test_resizing_keeps_the_level_within_the_new_capacity(level: float) -> None:
    bucket = TokenBucket(1.0, 100.0)
    bucket.cap(3.0, level)
    smaller = bucket.resized(3.0, 0.5, 40.0)
    assert smaller.level(3.0) == pytest.approx(min(level, 40.0))
    assert smaller.until_full(3.0) == pytest.approx(max(0.0, 40.0 - level) / 0.5)
    assert math.isinf(TokenBucket(1.0, 1.0).tat)
