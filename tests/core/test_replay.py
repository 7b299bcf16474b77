"""The pure reuse rule: keys that keep apart what a tool declared, the tool-history digest,
and the bounded result store (LRU, time to live) against a plain model."""

from __future__ import annotations

import math
from collections import OrderedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from agentcore._core.replay import HistoryDigest, ResultStore, replay_key
from agentcore.core import AssistantMessage, LocalProtocolError, ToolCall, ToolMessage, UserMessage

MISSING = object()

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(-2, 2, allow_nan=False).map(lambda f: f + 0.0)  # no -0.0 (equal to 0.0)
    | st.text("ab\"'", max_size=3)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text("ab", max_size=2), inner),
    max_leaves=6,
)
field_values = st.lists(json_values | st.just(MISSING), min_size=0, max_size=3)


def _same_json(a: object, b: object) -> bool:
    """JSON equality that tells 1, 1.0 and true apart (as the canonical text does)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        assert isinstance(b, list)
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    return a == b


@settings(max_examples=200, deadline=None)  # the small domains give many equal pairs
@given(first=field_values, second=field_values)
def test_two_keys_are_equal_exactly_when_every_declared_value_is(
    first: list[object], second: list[object]
) -> None:
    one = replay_key(("tool", "{}"), first, MISSING)
    two = replay_key(("tool", "{}"), second, MISSING)
    # A field that leads nowhere gives no key: such a call is neither reused nor shared.
    assert (one is None) is (MISSING in first)
    assert (two is None) is (MISSING in second)
    if one is None or two is None:
        return
    same = len(first) == len(second) and all(
        _same_json(a, b) for a, b in zip(first, second, strict=True)
    )
    assert (one == two) is same


def test_a_value_without_a_canonical_form_has_no_key() -> None:
    assert replay_key(("t", "{}"), [object()], MISSING) is None
    assert replay_key(("t", "{}"), [{1, 2}], MISSING) is None


def test_a_missing_field_gives_no_key_where_every_json_value_gives_one() -> None:
    assert replay_key(("t", "{}"), [MISSING], MISSING) is None
    assert replay_key(("t", "{}"), ["a", MISSING], MISSING) is None
    for value in (None, "", 0, [], {}, False):
        assert replay_key(("t", "{}"), [value], MISSING) is not None


def _turn(name: str, arguments: str, result: str, call_id: str) -> list[object]:
    return [
        AssistantMessage("thinking " + call_id, (ToolCall(call_id, name, arguments),)),
        ToolMessage(call_id, name, result),
    ]


def test_the_history_digest_follows_calls_and_results_not_ids_or_text() -> None:
    a = [UserMessage("task A"), *_turn("ls", '{"p": 1, "q": 2}', "x", "call_0_0")]
    b = [UserMessage("task B"), *_turn("ls", '{"q":2,"p":1}', "x", "other")]
    c = [UserMessage("task A"), *_turn("ls", '{"p": 1, "q": 2}', "y", "call_0_0")]
    d = [UserMessage("task A"), *_turn("cat", '{"p": 1, "q": 2}', "x", "call_0_0")]
    digest = {
        n: HistoryDigest().up_to(m, len(m)) for n, m in {"a": a, "b": b, "c": c, "d": d}.items()
    }  # type: ignore[arg-type]
    assert digest["a"] == digest["b"]
    assert digest["a"] != digest["c"]
    assert digest["a"] != digest["d"]
    assert HistoryDigest().up_to(a, 1) == HistoryDigest().digest  # type: ignore[arg-type]


def test_the_history_digest_is_incremental_and_only_grows() -> None:
    messages = [*_turn("ls", "{}", "x", "1"), *_turn("cat", "{}", "y", "2")]
    step = HistoryDigest()
    step.up_to(messages, 2)  # type: ignore[arg-type]
    assert step.up_to(messages, 4) == HistoryDigest().up_to(messages, 4)  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError):
        step.up_to(messages, 1)  # type: ignore[arg-type]


class StoreMachine(RuleBasedStateMachine):
    """The result store against an ordered dict with expiry times."""

    def __init__(self) -> None:
        super().__init__()
        self.size = 3
        self.store = ResultStore(self.size)
        self.model: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self.now = 0.0

    @rule(
        key=st.sampled_from("abcde"),
        content=st.text("xy", max_size=2),
        ttl=st.none() | st.integers(1, 5),
    )
    def put(self, key: str, content: str, ttl: int | None) -> None:
        self.store.put(key, content, self.now, ttl)
        self.model.pop(key, None)
        self.model[key] = (content, math.inf if ttl is None else self.now + ttl)
        live = OrderedDict((k, v) for k, v in self.model.items() if v[1] > self.now)
        if len(self.model) >= 64:
            self.model = live
        while len(self.model) > self.size:
            self.model.popitem(last=False)

    @rule(key=st.sampled_from("abcde"))
    def get(self, key: str) -> None:
        entry = self.model.pop(key, None)
        expected = None
        if entry is not None and self.now < entry[1]:
            expected = entry[0]
            self.model[key] = entry
        assert self.store.get(key, self.now) == expected

    @rule(dt=st.integers(0, 3))
    def wait(self, dt: int) -> None:
        self.now += dt

    @invariant()
    def bounded(self) -> None:
        assert len(self.store) <= self.size


TestResultStore = StoreMachine.TestCase
TestResultStore.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
