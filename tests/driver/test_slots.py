"""The pure slot policy: SlotQueue ordering and accounting, AdaptiveLimit arithmetic."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore._core.slots import AdaptiveLimit
from agentcore.core import SlotQueue


class Waiter:
    def __init__(self, name: int, priority: int, seq: int) -> None:
        self.name = name
        self.priority = priority
        """The priority, and for ``attained`` the service (what its run received so far)."""
        self.seq = seq
        self.queued_at = 0
        """Grants made before it queued (its age is counted in grants)."""
        self.ahead = 0
        """Waiters in line when it queued."""

    def __repr__(self) -> str:
        return f"W{self.name}(p={self.priority})"


operations = st.lists(
    st.one_of(
        st.tuples(st.just("arrive"), st.integers(-3, 3)),
        st.tuples(st.just("release"), st.integers(0, 1000)),
        st.tuples(st.just("withdraw"), st.integers(0, 1000)),
        st.tuples(st.just("requeue"), st.integers(-3, 3)),
        st.tuples(st.just("limit"), st.integers(1, 6)),
    ),
    max_size=80,
)


def replay(policy: str, limit: int, ops: list[tuple[str, int]], age_limit: int = 1024) -> None:
    """Run ``ops`` against a SlotQueue and check it against a reference at every step."""
    queue: SlotQueue[Waiter] = SlotQueue(limit, policy, age_limit)  # type: ignore[arg-type]
    waiting: list[Waiter] = []  # reference line
    withdrawn: list[Waiter] = []  # may be queued again
    holders = 0
    seq = 0
    grants = 0

    def expected_next() -> Waiter:
        if policy == "fifo":
            return min(waiting, key=lambda w: w.seq)
        if policy == "priority":
            return min(waiting, key=lambda w: (-w.priority, w.seq))
        oldest = min(waiting, key=lambda w: w.seq)
        if grants - oldest.queued_at >= age_limit:
            return oldest
        return min(waiting, key=lambda w: (w.priority, w.seq))

    def enqueue(waiter: Waiter) -> None:
        waiter.queued_at = grants
        queue.enqueue(waiter, waiter.priority, service=waiter.priority)
        waiting.append(waiter)

    def check_granted(granted: list[Waiter]) -> None:
        nonlocal holders, grants
        for waiter in granted:
            assert waiter is expected_next()
            waiting.remove(waiter)
            grants += 1
            if policy == "attained":
                # Starvation is bounded: granted within age_limit + (waiters ahead) + 1.
                assert grants - waiter.queued_at <= age_limit + waiter.ahead + 1
            holders += 1
            assert holders <= queue.limit
        assert queue.in_use == holders
        assert queue.waiting == len(waiting)
        # Work conserving: nobody waits while a slot is free.
        assert not waiting or holders >= queue.limit

    for op, arg in ops:
        if op == "arrive":
            seq += 1
            if queue.try_acquire():
                assert not waiting and holders < queue.limit
                holders += 1
            else:
                waiter = Waiter(seq, arg, seq)
                waiter.ahead = len(waiting)
                enqueue(waiter)
        elif op == "release" and holders:
            holders -= 1
            check_granted(queue.release())
        elif op == "withdraw" and waiting:
            waiter = waiting[arg % len(waiting)]
            assert queue.withdraw(waiter)
            assert not queue.withdraw(waiter)
            waiting.remove(waiter)
            withdrawn.append(waiter)
        elif op == "requeue" and withdrawn:
            # The same object back: a free slot at once, or a new place in line (its old
            # place must not count).
            waiter = withdrawn.pop(0)
            seq += 1
            if queue.try_acquire():
                assert not waiting and holders < queue.limit
                holders += 1
            else:
                waiter.priority, waiter.seq, waiter.ahead = arg, seq, len(waiting)
                enqueue(waiter)
        elif op == "limit":
            check_granted(queue.set_limit(arg))
        check_granted([])


@settings(max_examples=150)
@given(st.sampled_from(["fifo", "priority"]), st.integers(1, 5), operations)
def test_SlotQueue_grants_in_policy_order_and_never_idles_a_slot_while_someone_waits(
    policy: str, limit: int, ops: list[tuple[str, int]]
) -> None:
    replay(policy, limit, ops)


@settings(max_examples=200)
@given(st.integers(1, 5), st.integers(1, 8), operations)
def test_SlotQueue_attained_serves_least_service_first_ties_in_arrival_and_bounds_starvation(
    limit: int, age_limit: int, ops: list[tuple[str, int]]
) -> None:
    replay("attained", limit, ops, age_limit)


def test_SlotQueue_attained_serves_the_least_served_first_until_the_oldest_is_too_old() -> None:
    queue: SlotQueue[Waiter] = SlotQueue(1, "attained", age_limit=3)
    assert queue.try_acquire()
    long_run = Waiter(0, 90, 0)  # a run that has already received 90 tokens
    queue.enqueue(long_run, service=90)
    fresh = [Waiter(i, 0, i) for i in range(1, 6)]
    for w in fresh[:3]:
        queue.enqueue(w, service=w.priority)
    # Fresh runs (no service yet) go first, in arrival order...
    order = [queue.release()[0].name for _ in range(3)]
    for w in fresh[3:]:
        queue.enqueue(w, service=w.priority)
    # ...until three grants have passed since the long run queued: then it goes next.
    order += [queue.release()[0].name for _ in range(3)]
    assert order == [1, 2, 3, 0, 4, 5]


def test_SlotQueue_newcomer_does_not_overtake_a_waiter() -> None:
    queue: SlotQueue[Waiter] = SlotQueue(1)
    assert queue.try_acquire()
    first = Waiter(1, 0, 1)
    queue.enqueue(first)
    assert queue.release() == [first]
    # The slot went straight to the waiter: a newcomer finds none free.
    assert not queue.try_acquire()


def test_SlotQueue_priority_serves_highest_first_ties_in_arrival_order() -> None:
    queue: SlotQueue[Waiter] = SlotQueue(1, "priority")
    assert queue.try_acquire()
    waiters = [Waiter(i, p, i) for i, p in enumerate([0, 5, 1, 5, 3])]
    for w in waiters:
        queue.enqueue(w, w.priority)
    order = [queue.release()[0].name for _ in waiters]
    assert order == [1, 3, 4, 2, 0]


def test_SlotQueue_lowering_the_limit_takes_no_slot_back() -> None:
    queue: SlotQueue[Waiter] = SlotQueue(3)
    for _ in range(3):
        assert queue.try_acquire()
    w = Waiter(0, 0, 0)
    queue.enqueue(w)
    assert queue.set_limit(1) == []
    assert queue.in_use == 3
    assert queue.release() == []  # 2 in use, limit 1
    assert queue.release() == []  # 1 in use, limit 1
    assert queue.release() == [w]
    assert queue.in_use == 1


def test_SlotQueue_rejects_bad_limits_and_unbalanced_release() -> None:
    with pytest.raises(ValueError):
        SlotQueue(0)
    queue: SlotQueue[Waiter] = SlotQueue(1)
    with pytest.raises(ValueError):
        queue.set_limit(0)
    with pytest.raises(RuntimeError):
        queue.release()


@settings(max_examples=150)
@given(
    st.integers(1, 64),
    st.lists(st.one_of(st.just("ok"), st.integers(-2, 2)), max_size=300),
)
def test_AdaptiveLimit_stays_between_one_and_the_ceiling(
    ceiling: int, signals: list[str | int]
) -> None:
    aimd = AdaptiveLimit(ceiling)
    for signal in signals:
        if signal == "ok":
            before = aimd.limit
            after = aimd.on_success()
            assert before <= after <= before + 1
        else:
            assert isinstance(signal, int)
            before = aimd.limit
            granted = max(0, aimd.epoch + signal)
            stale = granted < aimd.epoch
            after = aimd.on_overload(granted)
            assert after <= before
            if stale:
                assert after == before
            elif before > 1:
                assert after < before
        assert 1 <= aimd.limit <= ceiling


def test_AdaptiveLimit_halves_once_per_congestion_and_grows_back() -> None:
    aimd = AdaptiveLimit(32)
    epoch = aimd.epoch
    assert aimd.on_overload(epoch) == 16
    # Requests granted before the decrease report the same congestion: ignored.
    assert aimd.on_overload(epoch) == 16
    assert aimd.on_overload(aimd.epoch) == 8
    successes = 0
    while aimd.limit < 32:
        aimd.on_success()
        successes += 1
    # About one step per window of `limit` successes: sum(8..31) = 468.
    assert 400 <= successes <= 500
    aimd.on_success()
    assert aimd.limit == 32


@pytest.mark.parametrize("policy", ["fifo", "priority", "attained"])
def test_withdrawn_waiters_do_not_pile_up_behind_a_front_that_never_moves(policy: str) -> None:
    queue: SlotQueue[object] = SlotQueue(1, policy=policy)  # type: ignore[arg-type]
    assert queue.try_acquire()
    stuck = object()
    queue.enqueue(stuck, priority=10)  # the front of the line, never granted
    for _ in range(10_000):
        waiter = object()
        queue.enqueue(waiter, priority=0)
        assert queue.withdraw(waiter)
    assert queue.waiting == 1
    assert len(queue._fifo) + len(queue._heap) + len(queue._arrivals) <= 3 * queue.waiting + 64
    assert queue.release() == [stuck]


@pytest.mark.parametrize("policy", ["fifo", "priority", "attained"])
def test_a_waiter_withdrawn_and_queued_again_is_served_at_its_new_place(policy: str) -> None:
    queue: SlotQueue[object] = SlotQueue(1, policy=policy)  # type: ignore[arg-type]
    assert queue.try_acquire()
    again, other = object(), object()
    queue.enqueue(again)
    queue.enqueue(other)
    for _ in range(200):  # enough to compact the line several times
        assert queue.withdraw(again)
        queue.enqueue(again)
    assert queue.waiting == 2
    assert len(queue._fifo) + len(queue._heap) + len(queue._arrivals) <= 3 * queue.waiting + 64
    assert queue.release() == [other]
    assert queue.release() == [again]
    assert queue.waiting == 0
    assert not queue._stale and not queue._seqs
