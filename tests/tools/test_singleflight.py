"""The pure singleflight table, checked against a reference model, and the canonical key."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from agentcore._core.singleflight import SingleflightTable, canonical_arguments, tool_key
from agentcore.core import LocalProtocolError

# ----------------------------------------------------------------------------- canonical key

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text('aé☕\\"', max_size=4)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text("abc", max_size=3), inner, max_size=4)
    ),
    max_leaves=8,
)
json_objects = st.dictionaries(st.text("abc", max_size=3), json_values, max_size=5)


def _reversed_insertion(value: Any) -> Any:
    """The same JSON value, with every object's keys inserted in reverse order."""
    if isinstance(value, dict):
        return {k: _reversed_insertion(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed_insertion(v) for v in value]
    return value


@settings(max_examples=50)
@given(json_objects)
def test_canonical_arguments_ignore_key_order_and_round_trip(arguments: dict[str, Any]) -> None:
    text = canonical_arguments(arguments)
    assert text == canonical_arguments(_reversed_insertion(arguments))
    assert json.loads(text) == arguments


def test_canonical_arguments_are_compact_and_keep_non_ascii_text() -> None:
    assert canonical_arguments({"b": [1, 2], "a": "café ☕"}) == '{"a":"café ☕","b":[1,2]}'


def test_canonical_arguments_keep_json_types_apart() -> None:
    texts = {canonical_arguments({"x": v}) for v in (1, 1.0, True, "1")}
    assert len(texts) == 4


def test_tool_key_distinguishes_tools_with_the_same_arguments() -> None:
    assert tool_key("search", {"q": "x"}) != tool_key("fetch", {"q": "x"})
    assert tool_key("search", {"q": "x"}) == ("search", '{"q":"x"}')


def test_canonical_arguments_reject_values_that_are_not_json() -> None:
    with pytest.raises(TypeError):
        canonical_arguments({"x": {1, 2}})


# ----------------------------------------------------------------------------- table basics


def test_first_caller_leads_and_later_callers_join() -> None:
    table: SingleflightTable[str] = SingleflightTable()
    assert table.join("k", "a") is True
    assert table.join("k", "b") is False
    assert table.join("other", "c") is True
    assert table.waiters("k") == ("a", "b")
    assert table.complete("k") == ("a", "b")
    stats = table.statistics()
    assert (stats.flights, stats.waiters, stats.led, stats.coalesced, stats.completed) == (
        1,
        1,
        2,
        1,
        1,
    )


def test_completion_forgets_the_key_so_the_next_call_executes_again() -> None:
    table: SingleflightTable[str] = SingleflightTable()
    table.join("k", "a")
    table.complete("k")
    assert "k" not in table
    assert table.join("k", "b") is True


def test_only_the_last_waiter_leaving_abandons_the_execution() -> None:
    table: SingleflightTable[str] = SingleflightTable()
    table.join("k", "a")
    table.join("k", "b")
    assert table.leave("k", "a") is False
    assert "k" in table
    assert table.leave("k", "b") is True
    assert "k" not in table
    assert table.statistics().abandoned == 1


def test_misuse_raises_local_protocol_error() -> None:
    table: SingleflightTable[str] = SingleflightTable()
    with pytest.raises(LocalProtocolError):
        table.complete("k")
    with pytest.raises(LocalProtocolError):
        table.leave("k", "a")
    table.join("k", "a")
    with pytest.raises(LocalProtocolError):
        table.join("k", "a")
    with pytest.raises(LocalProtocolError):
        table.leave("k", "b")
    table.complete("k")
    with pytest.raises(LocalProtocolError):
        table.leave("k", "a")


# ----------------------------------------------------------------------------- stateful model

KEYS = [tool_key("search", {"q": q}) for q in ("a", "b", "c")] + [tool_key("fetch", {"q": "a"})]


class SingleflightAgainstReference(RuleBasedStateMachine):
    """Drive the table with random joins, leaves and completions; compare with a plain model.

    The model keeps, per key, the list of waiting waiters of the one execution in flight. It
    also counts executions in flight per key and how often each waiter was released (by a
    completion or by its own leave), which the invariants check.
    """

    def __init__(self) -> None:
        super().__init__()
        self.table: SingleflightTable[int] = SingleflightTable()
        self.flights: dict[tuple[str, str], list[int]] = {}
        self.executions_in_flight: Counter[tuple[str, str]] = Counter()
        self.released: Counter[int] = Counter()
        self.joined = 0
        self.completions = 0

    @rule(key=st.sampled_from(KEYS))
    def join(self, key: tuple[str, str]) -> None:
        waiter = self.joined
        self.joined += 1
        leads = self.table.join(key, waiter)
        assert leads == (key not in self.flights)
        self.flights.setdefault(key, []).append(waiter)
        if leads:
            self.executions_in_flight[key] += 1

    @precondition(lambda self: bool(self.flights))
    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.flights)))
        waiter = data.draw(st.sampled_from(self.flights[key]))
        last = self.table.leave(key, waiter)
        self.flights[key].remove(waiter)
        self.released[waiter] += 1
        assert last == (not self.flights[key])
        if last:
            del self.flights[key]
            self.executions_in_flight[key] -= 1  # cancelled

    @precondition(lambda self: bool(self.flights))
    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.flights)))
        waiters = self.table.complete(key)
        assert list(waiters) == self.flights.pop(key)
        for waiter in waiters:
            self.released[waiter] += 1
        self.executions_in_flight[key] -= 1
        self.completions += 1

    @rule(key=st.sampled_from(KEYS))
    def completing_a_key_without_flight_is_refused(self, key: tuple[str, str]) -> None:
        if key in self.flights:
            return
        with pytest.raises(LocalProtocolError):
            self.table.complete(key)

    @invariant()
    def at_most_one_execution_per_key(self) -> None:
        assert all(n in (0, 1) for n in self.executions_in_flight.values())
        for key in KEYS:
            assert (key in self.table) == (self.executions_in_flight[key] == 1)

    @invariant()
    def waiters_match_the_model(self) -> None:
        for key in KEYS:
            assert list(self.table.waiters(key)) == self.flights.get(key, [])
        stats = self.table.statistics()
        assert stats.flights == len(self.flights)
        assert stats.waiters == sum(len(w) for w in self.flights.values())
        assert stats.completed == self.completions

    @invariant()
    def no_waiter_is_released_twice(self) -> None:
        assert all(n == 1 for n in self.released.values())

    def teardown(self) -> None:
        # Finish everything still in flight: every waiter must then have been released once.
        for key in list(self.flights):
            for waiter in self.table.complete(key):
                self.released[waiter] += 1
            del self.flights[key]
        assert len(self.table) == 0
        assert sorted(self.released) == list(range(self.joined))
        assert all(n == 1 for n in self.released.values())


TestSingleflightAgainstReference = SingleflightAgainstReference.TestCase
TestSingleflightAgainstReference.settings = settings(max_examples=60, stateful_step_count=30)
