"""A backend's circuit breaker, as pure state under explicit (virtual) time.

Closed / open / half-open with one probe; the cool-down grows after failed probes up to its
cap and resets on success; which kinds count is the error table's ``trips_breaker`` column.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentcore import CircuitBreaker, ConfigError, ErrorKind
from agentcore._core import error_policy
from agentcore._core.error_policy import kinds_where
from agentcore._core.fallback import DEFAULT_BREAKER_ON, Breaker, BreakerState

DEAD = ErrorKind.CONNECTION
ALIVE = ErrorKind.BAD_REQUEST  # the server answered: it is there


def opened_breaker(policy: CircuitBreaker, now: float = 0.0) -> Breaker:
    breaker = Breaker(policy)
    for _ in range(policy.failures):
        assert breaker.admit(now).send
        breaker.record(now, DEAD)
    assert breaker.state is BreakerState.OPEN
    return breaker


def test_a_few_counted_failures_in_a_row_open_it_and_new_requests_pass_over() -> None:
    breaker = Breaker(CircuitBreaker(failures=3, cooldown=5.0))
    for t in (0.0, 0.1):
        assert breaker.admit(t).send
        breaker.record(t, DEAD)
    assert breaker.state is BreakerState.CLOSED
    breaker.record(0.2, DEAD)
    assert breaker.state is BreakerState.OPEN
    assert [breaker.admit(t).send for t in (0.2, 3.0, 5.19)] == [False] * 3
    assert breaker.passed_over == 3
    assert breaker.opened == 1


def test_an_answer_between_failures_starts_the_count_again() -> None:
    breaker = Breaker(CircuitBreaker(failures=2))
    answered = (None, ALIVE, ErrorKind.RATE_LIMITED, ErrorKind.OVERLOADED, ErrorKind.SERVER)
    for outcome in answered:
        breaker.record(1.0, DEAD)
        breaker.record(1.0, outcome)
    assert breaker.state is BreakerState.CLOSED
    breaker.record(1.0, DEAD)
    breaker.record(1.0, ErrorKind.TIMEOUT)
    assert breaker.state is BreakerState.OPEN


def test_after_the_cool_down_one_probe_goes_and_everyone_else_passes_over() -> None:
    breaker = opened_breaker(CircuitBreaker(failures=1, cooldown=5.0))
    probe = breaker.admit(5.0)
    assert probe.send and probe.probe
    assert breaker.state is BreakerState.HALF_OPEN
    assert [breaker.admit(t).send for t in (5.0, 6.0, 100.0)] == [False] * 3
    # An attempt that was made before the breaker opened does not decide anything.
    breaker.record(6.0, None)
    assert breaker.state is BreakerState.HALF_OPEN
    breaker.record(7.0, None, probe.probe)
    assert breaker.state is BreakerState.CLOSED
    assert breaker.admit(7.0).send


def test_failed_probes_grow_the_cool_down_up_to_its_cap_and_success_resets_it() -> None:
    breaker = opened_breaker(CircuitBreaker(failures=1, cooldown=2.0, max_cooldown=10.0))
    now, cooldowns = 0.0, []
    for _ in range(5):
        assert not breaker.admit(breaker.reopens_at - 0.001).send
        now = breaker.reopens_at
        probe = breaker.admit(now)
        breaker.record(now, DEAD, probe.probe)
        cooldowns.append(breaker.reopens_at - now)
    assert cooldowns == [4.0, 8.0, 10.0, 10.0, 10.0]
    probe = breaker.admit(breaker.reopens_at)
    breaker.record(breaker.reopens_at, None, probe.probe)
    assert (breaker.state, breaker.cooldown) == (BreakerState.CLOSED, 2.0)
    breaker.record(100.0, DEAD)
    assert breaker.reopens_at == 102.0  # the first cool-down again


def test_a_probe_that_ends_without_an_outcome_hands_the_probe_on() -> None:
    breaker = opened_breaker(CircuitBreaker(failures=1, cooldown=1.0))
    first = breaker.admit(1.0)
    breaker.abandon(1.5, first.probe)
    second = breaker.admit(1.5)
    assert second.send and second.probe != first.probe
    breaker.abandon(2.0, first.probe)  # stale: the second probe is out
    assert not breaker.admit(2.0).send


def test_once_it_opens_requests_admitted_before_are_not_sent_unless_they_cannot_fall_over() -> None:
    breaker = Breaker(CircuitBreaker(failures=1), falls_over=frozenset({DEAD}))
    assert breaker.may_send(None) and breaker.may_send(DEAD)
    breaker.record(0.0, DEAD)
    assert not breaker.may_send(None)  # admitted before, not sent yet: passed over
    assert not breaker.may_send(DEAD)  # retrying: falls over instead
    assert breaker.may_send(ErrorKind.CONFLICT)  # it would have nowhere to go
    probe = breaker.admit(100.0)
    assert breaker.may_send(None, probe.probe)


def test_only_kinds_that_also_fall_over_are_counted() -> None:
    breaker = Breaker(CircuitBreaker(failures=1), falls_over=frozenset({ErrorKind.OVERLOADED}))
    breaker.record(0.0, DEAD)
    assert breaker.state is BreakerState.CLOSED
    tuned = Breaker(CircuitBreaker(failures=1, on={ErrorKind.OVERLOADED}))
    tuned.record(0.0, ErrorKind.OVERLOADED)
    assert tuned.state is BreakerState.OPEN


def test_the_counted_kinds_are_the_error_tables_trips_breaker_column(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert CircuitBreaker().on == DEFAULT_BREAKER_ON == kinds_where("trips_breaker")
    assert {ErrorKind.CONNECTION, ErrorKind.TIMEOUT} == DEFAULT_BREAKER_ON
    row = attrs.evolve(error_policy.policy_of(ErrorKind.OVERLOADED), trips_breaker=True)
    monkeypatch.setitem(error_policy._ROWS, ErrorKind.OVERLOADED, row)
    assert ErrorKind.OVERLOADED in CircuitBreaker().on


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"failures": 0}, "failures"),
        ({"failures": 1.5}, "failures"),
        ({"cooldown": 0}, "cooldown"),
        ({"cooldown": math.inf, "max_cooldown": math.inf}, "cooldown"),
        ({"cooldown": 5.0, "max_cooldown": 1.0}, "max_cooldown"),
        ({"on": ErrorKind.CONNECTION}, "on"),
        ({"on": ["connection"]}, "on"),
    ],
)
def test_bad_breaker_options_are_config_errors(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        CircuitBreaker(**options)


# ----------------------------------------------------------------------------- properties

outcomes = st.sampled_from([None, DEAD, ErrorKind.TIMEOUT, ALIVE, ErrorKind.OVERLOADED])
steps = st.lists(
    st.tuples(
        st.sampled_from(["admit", "record", "probe_outcome", "abandon"]),
        st.floats(0.0, 30.0),
        outcomes,
    ),
    max_size=60,
)


@given(
    failures=st.integers(1, 4),
    cooldown=st.floats(0.5, 10.0),
    growth_cap=st.floats(1.0, 8.0),
    steps=steps,
)
def test_invariants_hold_whatever_happens(
    failures: int, cooldown: float, growth_cap: float, steps: list[Any]
) -> None:
    policy = CircuitBreaker(
        failures=failures, cooldown=cooldown, max_cooldown=cooldown * growth_cap
    )
    breaker = Breaker(policy)
    now = 0.0
    out: int = 0  # the ticket of the probe out, if any
    in_a_row = 0  # counted failures in a row while closed, as the caller saw them
    for action, gap, outcome in steps:
        now += gap
        before = breaker.state
        if action == "admit":
            admission = breaker.admit(now)
            if admission.probe:
                # One probe at a time, and only once the cool-down is over.
                assert before is BreakerState.OPEN and out == 0
                assert now >= breaker.reopens_at
                out = admission.probe
            elif admission.send:
                assert before is BreakerState.CLOSED
            else:
                assert before is not BreakerState.CLOSED
                # Passed over: the cool-down is not over, or a probe is out.
                assert out != 0 or now < breaker.reopens_at
        elif action == "record":
            breaker.record(now, outcome)  # an ordinary attempt: only counts while closed
            if before is BreakerState.CLOSED:
                in_a_row = in_a_row + 1 if outcome in (DEAD, ErrorKind.TIMEOUT) else 0
                if in_a_row >= failures:
                    assert breaker.state is BreakerState.OPEN
                    assert breaker.reopens_at == now + cooldown
                    in_a_row = 0
                else:
                    assert breaker.state is BreakerState.CLOSED
            else:
                assert breaker.state is before
        elif action == "probe_outcome" and out:
            previous = breaker.cooldown
            breaker.record(now, outcome, out)
            out = 0
            if outcome in (DEAD, ErrorKind.TIMEOUT):
                assert breaker.state is BreakerState.OPEN
                assert breaker.cooldown == min(previous * 2, policy.max_cooldown)
            else:
                assert breaker.state is BreakerState.CLOSED
                assert breaker.cooldown == cooldown
                in_a_row = 0
        elif action == "abandon" and out:
            breaker.abandon(now, out)
            out = 0
            assert breaker.state is BreakerState.OPEN and breaker.reopens_at == now
        assert cooldown <= breaker.cooldown <= policy.max_cooldown
        assert (breaker.state is BreakerState.HALF_OPEN) == (out != 0)
