"""The circuit breaker of model fallback, through the driver and under virtual time.

A backend that fails a few attempts in a row (nothing listens, nothing answers) is passed
over for a cool-down: new requests start on the next backend at once, requests retrying on it
stop and fall over, then one probe tries it again.
"""

from __future__ import annotations

import socket
from typing import Any

import pytest
import trio

from agentcore import (
    CircuitBreaker,
    ConfigError,
    ErrorKind,
    ModelError,
    RetryPolicy,
    Task,
    open_driver,
    run_batch,
    tool,
)
from agentcore.core import CallModel, ModelResponded
from agentcore.testing import ScriptedModel
from tests.driver.helpers import make_loop

REFUSED = ModelError(ErrorKind.CONNECTION, "connection refused", retryable=True)
DEFAULT_RETRY_BUDGET = sum(0.5 * 2**n for n in range(RetryPolicy().max_attempts - 1))
"""The longest back-off the default retry policy may sleep over one request (15.5 s)."""


def dead() -> ScriptedModel:
    return ScriptedModel(lambda call: REFUSED)


def backup() -> ScriptedModel:
    return ScriptedModel(lambda call: "from backup", latency=0.2)


async def test_a_dead_primary_costs_a_few_attempts_then_requests_go_to_the_fallback(
    autojump_clock: Any,
) -> None:
    primary, fallback = dead(), backup()
    async with open_driver(primary, fallback=[fallback], max_inflight=4) as driver:
        start = trio.current_time()
        async with driver.stream(make_loop(i, max_turns=3) for i in range(12)) as results:
            found = [r async for r in results]
        elapsed = trio.current_time() - start
    assert [r.status for r in found] == ["ok"] * 12
    assert {r.output for r in found} == {"from backup"}
    # The first attempts in flight when it opened reached the primary; nothing after them.
    assert len(primary.calls) <= 4
    assert len(fallback.calls) == 12
    # Far from the default retries' back-off on each request.
    assert elapsed < 1.0 < DEFAULT_RETRY_BUDGET


async def test_a_request_retrying_alone_stops_once_the_breaker_opens(autojump_clock: Any) -> None:
    primary, fallback = dead(), backup()
    async with open_driver(primary, fallback=[fallback], seed=1) as driver:
        result = await driver.run(make_loop(0))
    assert result.status == "ok" and result.served_by == ("fallback-1",)
    # Three failed attempts open it (not the policy's six); the request falls over then.
    assert len(primary.calls) == CircuitBreaker().failures == 3


async def test_a_back_off_in_progress_is_cut_short_when_the_breaker_opens(
    autojump_clock: Any,
) -> None:
    slow_retry = ModelError(ErrorKind.CONNECTION, "refused", retryable=True, retry_after=30.0)
    primary = ScriptedModel(lambda call: slow_retry)
    ended: dict[str, float] = {}
    async with open_driver(primary, fallback=[backup()]) as driver:

        async def call(name: str, at: float) -> None:
            await trio.sleep(at)
            event = await driver.call_model(CallModel(name, ()))
            assert isinstance(event, ModelResponded)
            ended[name] = trio.current_time()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, "early", 0.0)  # fails, then sleeps 30 s before its retry
            nursery.start_soon(call, "second", 1.0)
            nursery.start_soon(call, "third", 1.0)
    # The second and third failures at t=1 open the breaker; "early" falls over at once.
    assert ended["early"] == pytest.approx(1.2)
    assert len(primary.calls) == 3


async def test_after_the_cool_down_a_probe_tries_the_primary_again(autojump_clock: Any) -> None:
    recovered_at = 10.0

    def primary_policy(call: CallModel) -> Any:
        return "from primary" if trio.current_time() >= recovered_at else REFUSED

    primary = ScriptedModel(primary_policy, latency=1.0)
    breaker = CircuitBreaker(failures=1, cooldown=5.0, max_cooldown=60.0)
    served: list[tuple[float, str]] = []
    async with open_driver(
        primary, fallback=[backup()], circuit_breaker=breaker, retry=RetryPolicy(max_attempts=1)
    ) as driver:

        async def call(at: float) -> None:
            await trio.sleep(at - trio.current_time())
            event = await driver.call_model(CallModel(f"at-{at}", ()))
            assert isinstance(event, ModelResponded)
            served.append((at, event.message.content or ""))

        async with trio.open_nursery() as nursery:
            for at in (0.0, 3.0, 7.0, 12.0, 18.0, 18.5, 25.0):
                nursery.start_soon(call, at)
    assert sorted(served) == [
        (0.0, "from backup"),  # fails (ends at 1): the breaker opens until 6
        (3.0, "from backup"),  # passed over
        (7.0, "from backup"),  # the probe: still dead (ends at 8), open again for 10 s
        (12.0, "from backup"),  # passed over
        (18.0, "from primary"),  # the probe: the primary is back, the breaker closes at 19
        (18.5, "from backup"),  # a probe is out: passed over
        (25.0, "from primary"),
    ]
    assert len(primary.calls) == 4


async def test_a_probe_cancelled_before_its_outcome_hands_the_probe_on(autojump_clock: Any) -> None:
    def primary_policy(call: CallModel) -> Any:
        return REFUSED if call.request_id == "first" else "from primary"

    primary = ScriptedModel(primary_policy, latency=3.0)
    breaker = CircuitBreaker(failures=1, cooldown=5.0)
    async with open_driver(
        primary, fallback=[backup()], circuit_breaker=breaker, retry=RetryPolicy(max_attempts=1)
    ) as driver:
        await driver.call_model(CallModel("first", ()))  # opens it at 3, until 8
        await trio.sleep(10.0 - trio.current_time())
        # The probe's deadline ends it mid-attempt: no verdict.
        cut = await driver.call_model(CallModel("probe", ()), deadline=trio.current_time() + 1)
        after = await driver.call_model(CallModel("next", ()))
    assert not isinstance(cut, ModelResponded)
    assert isinstance(after, ModelResponded) and after.message.content == "from primary"
    assert [c.request_id for c in primary.calls] == ["first", "probe", "next"]


async def test_without_a_breaker_every_request_spends_the_primarys_retries(
    autojump_clock: Any,
) -> None:
    primary = dead()
    async with open_driver(primary, fallback=[backup()], circuit_breaker=None) as driver:
        first = await driver.run(make_loop(0, max_turns=1))
        second = await driver.run(make_loop(1, max_turns=1))
    assert first.status == second.status == "ok"
    assert len(primary.calls) == 2 * RetryPolicy().max_attempts


async def test_failures_that_do_not_fall_over_never_open_it(autojump_clock: Any) -> None:
    primary = dead()
    async with open_driver(
        primary, fallback=[backup()], fallback_on={ErrorKind.OVERLOADED}, seed=0
    ) as driver:
        results = [await driver.run(make_loop(i, max_turns=1)) for i in range(2)]
    # Connection failures are final here, so the primary is never passed over.
    assert [r.status for r in results] == ["failed", "failed"]
    assert len(primary.calls) == 2 * RetryPolicy().max_attempts


@pytest.mark.parametrize("bad", ["on", 3, CircuitBreaker])
async def test_a_breaker_option_that_is_not_a_circuit_breaker_is_a_config_error(bad: Any) -> None:
    with pytest.raises(ConfigError, match="circuit_breaker"):
        async with open_driver(dead(), fallback=[backup()], circuit_breaker=bad):
            pass


# ------------------------------------------------------------- the reported scenario, end to end


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def port_where_nothing_listens() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed again: every connection is refused


async def test_agents_fall_over_from_a_primary_where_nothing_listens_to_the_simulator(
    autojump_clock: Any,
) -> None:
    task = Task(prompt="What is {input}? Use the tool.", tools=[add], max_turns=4)
    start = trio.current_time()
    results = await run_batch(
        task,
        [f"{i} + {i}" for i in range(3)],
        backend=f"http://127.0.0.1:{port_where_nothing_listens()}/v1",
        model="sim",
        fallback=["sim://"],
    )
    elapsed = trio.current_time() - start
    assert [r.status for r in results] == ["ok"] * 3
    assert all(set(r.served_by or ()) == {"sim://"} for r in results)
    # Each agent makes a few requests; without the breaker each would spend the primary's
    # retries (up to 15.5 s of back-off). With it the primary costs the first few attempts.
    assert all(r.turns >= 2 for r in results)
    assert elapsed < DEFAULT_RETRY_BUDGET / 3
