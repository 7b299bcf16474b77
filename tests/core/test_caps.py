"""The pure concurrency caps: the FIFO cap queue (a tool's cap, a batch's cap) against a
reference model, and the per-turn caps over any order of calls ending."""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from agentcore import ConfigError
from agentcore._core.caps import CapQueue, TurnCaps, check_cap
from agentcore.core import LocalProtocolError

# ----------------------------------------------------------------------------- CapQueue


class CapQueueMachine(RuleBasedStateMachine):
    """Random acquire / release / withdraw sequences against a plain model of a FIFO cap."""

    def __init__(self) -> None:
        super().__init__()
        self.queue: CapQueue[int] = CapQueue(1)
        self.limit = 1
        self.holders: set[int] = set()
        self.waiting: deque[int] = deque()
        self.asked: list[int] = []
        self.granted: list[int] = []
        self.withdrawn: set[int] = set()
        self.next = 0

    @initialize(limit=st.integers(1, 4))
    def start(self, limit: int) -> None:
        self.queue = CapQueue(limit)
        self.limit = limit

    @rule()
    def acquire(self) -> None:
        waiter = self.next
        self.next += 1
        self.asked.append(waiter)
        free = len(self.holders) < self.limit and not self.waiting
        assert self.queue.acquire(waiter) is free
        if free:
            self.holders.add(waiter)
            self.granted.append(waiter)
        else:
            self.waiting.append(waiter)

    @precondition(lambda self: self.holders)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        holder = data.draw(st.sampled_from(sorted(self.holders)))
        self.holders.remove(holder)
        follower = self.queue.release()
        if self.waiting:
            expected = self.waiting.popleft()
            assert follower == expected  # the unit goes to the head of the queue
            self.holders.add(expected)
            self.granted.append(expected)
        else:
            assert follower is None

    @precondition(lambda self: self.waiting)
    @rule(data=st.data())
    def withdraw(self, data: st.DataObject) -> None:
        waiter = data.draw(st.sampled_from(list(self.waiting)))
        self.waiting.remove(waiter)
        self.withdrawn.add(waiter)
        self.queue.withdraw(waiter)

    @invariant()
    def never_more_than_the_limit(self) -> None:
        assert self.queue.held == len(self.holders) <= self.limit

    @invariant()
    def no_waiter_while_a_unit_is_free(self) -> None:
        assert not (self.waiting and len(self.holders) < self.limit)
        assert self.queue.waiting == len(self.waiting)

    @invariant()
    def granted_in_the_order_asked_and_once(self) -> None:
        assert len(set(self.granted)) == len(self.granted)
        assert not set(self.granted) & self.withdrawn
        order = [w for w in self.asked if w in set(self.granted)]
        assert self.granted == order


TestCapQueue = CapQueueMachine.TestCase
TestCapQueue.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


def test_cap_queue_refuses_misuse() -> None:
    queue: CapQueue[str] = CapQueue(1)
    with pytest.raises(LocalProtocolError):
        queue.release()
    assert queue.acquire("a")
    assert not queue.acquire("b")
    with pytest.raises(LocalProtocolError):
        queue.acquire("b")
    with pytest.raises(LocalProtocolError):
        queue.withdraw("c")


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_a_cap_is_a_positive_integer(bad: object) -> None:
    with pytest.raises(ConfigError):
        check_cap("max_tool_concurrency", bad)
    with pytest.raises(ConfigError):
        CapQueue(bad)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- TurnCaps


@settings(max_examples=200, deadline=None)
@given(
    tools=st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=60),
    caps=st.fixed_dictionaries({"a": st.integers(1, 4), "b": st.integers(1, 2)}),
    data=st.data(),
)
def test_turn_caps_start_every_call_once_in_order_under_the_cap(
    tools: list[str], caps: dict[str, int], data: st.DataObject
) -> None:
    """Whatever order the calls end in: at most ``cap`` calls of a tool run at once, each call
    starts exactly once, none is dropped, calls of one tool start in the model's order, and
    an uncapped tool ("c") is never held back."""
    calls = [(f"call_{i}", tool) for i, tool in enumerate(tools)]
    turn = TurnCaps(caps)
    started: list[str] = list(turn.admit(calls))
    tool_of = dict(calls)
    running = set(started)
    assert all(c in started for c, t in calls if t == "c")
    while running:
        ended = data.draw(st.sampled_from(sorted(running)))
        running.remove(ended)
        follower = turn.ended(ended)
        if follower is not None:
            assert tool_of[follower] == tool_of[ended]
            started.append(follower)
            running.add(follower)
        for tool, cap in caps.items():
            assert sum(1 for c in running if tool_of[c] == tool) <= cap
            assert turn.running(tool) == sum(1 for c in running if tool_of[c] == tool)
    assert sorted(started) == sorted(c for c, _ in calls)  # each once, none dropped
    for tool in ("a", "b", "c"):
        listed = [c for c, t in calls if t == tool]
        assert [c for c in started if tool_of[c] == tool] == listed  # the model's order
    assert turn.waiting == 0


def test_eight_hundred_calls_under_a_cap_of_ten_run_ten_at_a_time() -> None:
    calls = [(f"call_{i}", "fetch") for i in range(800)]
    turn = TurnCaps({"fetch": 10})
    running = deque(turn.admit(calls))
    assert list(running) == [f"call_{i}" for i in range(10)]
    assert turn.waiting == 790
    order = list(running)
    while running:
        follower = turn.ended(running.popleft())
        if follower is not None:
            running.append(follower)
            order.append(follower)
        assert len(running) <= 10
    assert order == [c for c, _ in calls]


def test_turn_caps_refuse_a_call_id_twice_and_an_unknown_end() -> None:
    turn = TurnCaps({"a": 1})
    turn.admit([("x", "a"), ("y", "a")])
    with pytest.raises(LocalProtocolError):
        turn.admit([("y", "a")])
    with pytest.raises(LocalProtocolError):
        turn.ended("y")  # held, not started
