"""Model fallback through the driver: in-process models and the simulator over HTTP."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore import (
    ConfigError,
    ErrorKind,
    Fallback,
    FallbackPolicy,
    ModelError,
    Result,
    RetryPolicy,
    Task,
    open_driver,
    run_batch,
)
from agentcore.sim import SimConfig
from agentcore.testing import ScriptedModel
from tests.driver.helpers import make_loop

OVERLOADED = ModelError(ErrorKind.OVERLOADED, "busy", status=503, retryable=True)
BAD = ModelError(ErrorKind.BAD_REQUEST, "no", status=400)
TWO_TRIES = RetryPolicy(max_attempts=2, base_delay=0.1)


async def test_a_request_that_fails_for_good_goes_to_the_next_backend(autojump_clock: Any) -> None:
    primary = ScriptedModel(lambda call: OVERLOADED, latency=1.0)
    backup = ScriptedModel(lambda call: "from backup", latency=1.0)
    async with open_driver(primary, fallback=[backup], retry=TWO_TRIES) as driver:
        result = await driver.run(make_loop(0))
        stats = driver.statistics()
    assert result.status == "ok" and result.output == "from backup"
    assert len(primary.calls) == 2  # its own retries first
    assert len(backup.calls) == 1
    # One request of the run, served by the fallback.
    assert result.turns == 1
    assert len(result.timings.ttft) == 1
    assert result.served_by == ("fallback-1",)
    assert result.timings.attempts == 3
    assert [(r.backend, r.error) for r in stats.recent_requests] == [
        ("primary", ErrorKind.OVERLOADED),
        ("fallback-1", None),
    ]
    assert stats.attempts == 3
    assert stats.served_by == {"fallback-1": 1}


async def test_a_failure_of_a_kind_not_named_is_final(autojump_clock: Any) -> None:
    primary = ScriptedModel(lambda call: BAD)
    backup = ScriptedModel(lambda call: "never")
    async with open_driver(primary, fallback=[backup]) as driver:
        result = await driver.run(make_loop(0))
    assert result.status == "failed"
    assert result.error is not None and result.error.error == BAD
    assert backup.calls == []
    assert result.served_by == ("primary",)


async def test_the_user_names_the_kinds_that_fall_over(autojump_clock: Any) -> None:
    primary = ScriptedModel(lambda call: BAD)
    backup = ScriptedModel(lambda call: "ok")
    async with open_driver(
        primary, fallback=[Fallback(backup, name="big")], fallback_on={ErrorKind.BAD_REQUEST}
    ) as driver:
        result = await driver.run(make_loop(0))
    assert result.served_by == ("big",)


async def test_the_last_backends_failure_reaches_the_run(autojump_clock: Any) -> None:
    models = [ScriptedModel(lambda call: OVERLOADED) for _ in range(3)]
    retry = RetryPolicy(max_attempts=1)
    async with open_driver(models[0], fallback=models[1:], retry=retry) as driver:
        result = await driver.run(make_loop(0))
    assert result.status == "failed"
    assert [len(m.calls) for m in models] == [1, 1, 1]
    assert result.served_by == ("fallback-2",)
    assert result.turns == 1


async def test_each_backend_keeps_its_own_slots(autojump_clock: Any) -> None:
    # The primary fails every other agent's requests; those go to a backup with 2 slots.
    primary = ScriptedModel(
        lambda call: OVERLOADED if int(call.request_id.split("-")[1][0]) % 2 else "primary",
        latency=1.0,
    )
    backup = ScriptedModel(lambda call: "backup", latency=5.0)
    retry = RetryPolicy(max_attempts=1)
    async with (
        open_driver(
            primary, max_inflight=4, fallback=[Fallback(backup, max_inflight=2)], retry=retry
        ) as driver,
        driver.stream(make_loop(i) for i in range(10)) as results,
    ):
        received = [r async for r in results]
    assert primary.peak_in_flight <= 4
    assert backup.peak_in_flight == 2
    assert sorted(r.output for r in received) == ["backup"] * 5 + ["primary"] * 5
    assert {r.served_by for r in received} == {("primary",), ("fallback-1",)}


async def test_a_batch_falls_over_from_a_failing_simulator_to_a_working_one() -> None:
    task = Task(prompt="Summarise {input}.")
    results = await run_batch(
        task,
        ["a", "b", "c"],
        backend="sim://",
        config=SimConfig(fail_rate=1.0, speedup=100.0),
        fallback=[Fallback("sim://", options={"config": SimConfig(speedup=100.0)})],
        retry=RetryPolicy(max_attempts=1),
        warm=False,
    )
    assert [r.status for r in results] == ["ok", "ok", "ok"]
    assert {r.served_by for r in results} == {("sim://#1",)}


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"fallback": "sim://"}, "list of backends"),
        ({"fallback": [42]}, "fallback must be"),
        ({"fallback": [Fallback("sim://", name="x"), Fallback("sim://", name="x")]}, "named"),
        ({"fallback": [], "fallback_on": [ErrorKind.DEADLINE]}, "deadline"),
    ],
)
async def test_bad_fallback_options_are_config_errors(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        async with open_driver("sim://", **options):
            pass


# ----------------------------------------------------------------------------- properties

KINDS = [k for k in ErrorKind if k is not ErrorKind.DEADLINE]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    outcomes=st.lists(st.none() | st.sampled_from(KINDS), min_size=1, max_size=4),
    on=st.frozensets(st.sampled_from(KINDS)),
)
def test_through_the_driver_a_request_visits_backends_as_the_pure_policy_says(
    outcomes: list[ErrorKind | None], on: frozenset[ErrorKind]
) -> None:
    # Backend i answers, or fails every attempt with outcomes[i] (retryable or not).
    models = [
        ScriptedModel(
            (lambda call, kind=kind: "ok")
            if kind is None
            else (lambda call, kind=kind: ModelError(kind, "x", retryable=True))
        )
        for kind in outcomes
    ]
    retry = RetryPolicy(max_attempts=2, base_delay=0.1)

    async def scenario() -> Result:
        async with open_driver(
            models[0], fallback=models[1:], fallback_on=on, retry=retry
        ) as driver:
            return await driver.run(make_loop(0))

    result = trio.run(scenario, clock=trio.testing.MockClock(autojump_threshold=0))
    policy = FallbackPolicy(on)
    expected = [0]
    while outcomes[expected[-1]] is not None:
        following = policy.next(
            expected[-1],
            len(outcomes),
            ModelError(outcomes[expected[-1]], "x"),  # type: ignore[arg-type]
        )
        if following is None:
            break
        expected.append(following)
    visited = [i for i, m in enumerate(models) if m.calls]
    assert visited == expected
    last = expected[-1]
    names = ["primary"] + [f"fallback-{i}" for i in range(1, len(models))]
    # Without fallbacks nothing names the backend (the common path pays nothing for it).
    assert result.served_by == ((names[last],) if len(models) > 1 else ())
    assert result.status == ("ok" if outcomes[last] is None else "failed")
    assert result.turns == 1


async def test_a_tasks_fallbacks_serve_the_batches_it_opens(autojump_clock: Any) -> None:
    primary = ScriptedModel(lambda call: OVERLOADED)
    backup = ScriptedModel(lambda call: "from the task's backup")
    task = Task(prompt="{input}", fallback=[Fallback(backup, name="backup")])
    results = await run_batch(task, [1, 2], backend=primary, retry=RetryPolicy(max_attempts=1))
    assert [r.output for r in results] == ["from the task's backup"] * 2
    assert {r.served_by for r in results} == {("backup",)}


async def test_a_task_with_fallbacks_and_an_open_driver_is_a_config_error() -> None:
    model = ScriptedModel(lambda call: "x")
    task = Task(prompt="{input}", fallback=["sim://"])
    async with open_driver(model) as driver:
        with pytest.raises(ConfigError, match="fallbacks"):
            await run_batch(task, [1], driver=driver)
    with pytest.raises(ConfigError, match="list of backends"):
        Task(prompt="{input}", fallback="sim://")
