"""The fallback decision: which backend a request that failed for good goes to next."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentcore import ConfigError, ErrorKind, FallbackPolicy, ModelError
from agentcore._core.fallback import DEFAULT_FALLBACK_ON

kinds = st.sampled_from([k for k in ErrorKind if k is not ErrorKind.DEADLINE])


def visit(policy: FallbackPolicy, outcomes: list[ModelError | None]) -> list[int]:
    """The backends a request visits when backend ``i`` ends with ``outcomes[i]``
    (``None``: an answer)."""
    visited = [0]
    while True:
        outcome = outcomes[visited[-1]]
        if outcome is None:
            return visited
        following = policy.next(visited[-1], len(outcomes), outcome)
        if following is None:
            return visited
        visited.append(following)


@given(
    on=st.frozensets(kinds),
    outcomes=st.lists(st.none() | kinds.map(lambda k: ModelError(k, "x")), min_size=1, max_size=6),
)
def test_a_request_visits_backends_in_order_each_once_and_stops_at_the_first_answer(
    on: frozenset[ErrorKind], outcomes: list[ModelError | None]
) -> None:
    policy = FallbackPolicy(on)
    visited = visit(policy, outcomes)
    assert visited == list(range(len(visited)))
    last = outcomes[visited[-1]]
    # Every backend before the last failed with a kind the user named.
    for index in visited[:-1]:
        failure = outcomes[index]
        assert failure is not None and failure.kind in on
    # It stopped because of an answer, a kind not named, or the end of the list.
    assert last is None or last.kind not in on or visited[-1] == len(outcomes) - 1


@pytest.mark.parametrize("kind", list(ErrorKind))
def test_the_default_falls_over_on_failures_another_backend_may_not_have(kind: ErrorKind) -> None:
    moves = FallbackPolicy().next(0, 2, ModelError(kind, "x")) == 1
    assert moves == (kind in DEFAULT_FALLBACK_ON)
    expected = {"overloaded", "rate_limited", "server", "timeout", "connection", "not_found"}
    assert moves == (kind.value in expected)


def test_the_last_backend_has_nowhere_to_go() -> None:
    assert FallbackPolicy().next(1, 2, ModelError(ErrorKind.OVERLOADED, "x")) is None


@pytest.mark.parametrize(
    "on", [[ErrorKind.DEADLINE], ["overloaded"], ErrorKind.SERVER, "server"], ids=repr
)
def test_bad_fallback_kinds_are_config_errors(on: Any) -> None:
    with pytest.raises(ConfigError):
        FallbackPolicy(on)
