"""Property tests of the driver: each example is a fresh trio.run under its own MockClock."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore import ErrorKind, ModelError, Result, RetryPolicy, open_driver, tool
from agentcore.core import AssistantMessage, CallModel, ToolCall
from agentcore.testing import ScriptedModel
from tests.driver.helpers import agent_of, make_loop, task_census, tool_results, tool_then_answer

PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def run_virtual(scenario: Any) -> Any:
    """Run ``scenario`` in virtual time; a deadlock fails at once instead of hanging."""

    async def bounded() -> Any:
        with trio.fail_after(100_000):
            return await scenario()

    return trio.run(bounded, clock=trio.testing.MockClock(autojump_threshold=0))


@st.composite
def workloads(draw: st.DrawFn) -> dict[str, Any]:
    agents = draw(st.integers(1, 10))
    return {
        "agents": agents,
        "max_inflight": draw(st.integers(1, 4)),
        "policy": draw(st.sampled_from(["fifo", "priority", "attained"])),
        "adaptive": draw(st.booleans()),
        "turns": [draw(st.integers(0, 3)) for _ in range(agents)],
        "parallel": [draw(st.integers(1, 3)) for _ in range(agents)],
        "model_latency": draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0]), min_size=1)),
        "tool_latency": draw(st.lists(st.sampled_from([0.0, 0.2, 2.0, 7.0]), min_size=1)),
        "overload_every": draw(st.sampled_from([0, 3, 5])),
        "seed": draw(st.integers(0, 2**16)),
    }


@PROPERTY
@given(workloads())
def test_slot_cap_is_never_exceeded_and_no_slot_is_held_during_a_tool(w: dict[str, Any]) -> None:
    violations: list[str] = []
    counter = iter(range(10**9))
    driver_box: list[Any] = []

    @tool
    async def work(agent: int, n: int) -> str:
        """Work.

        Args:
            agent: the calling agent.
            n: a counter.
        """
        holders = driver_box[0].limiter.statistics().holders
        if agent in holders:
            violations.append(f"agent {agent} holds a slot during a tool")
        await trio.sleep(w["tool_latency"][n % len(w["tool_latency"])])
        return f"{agent}/{n}"

    def policy(call: CallModel) -> str | AssistantMessage | ModelError:
        stats = driver_box[0].limiter.statistics()
        if stats.in_use > w["max_inflight"]:
            violations.append(f"{stats.in_use} slots in use")
        if not 1 <= stats.limit <= w["max_inflight"]:
            violations.append(f"adaptive limit at {stats.limit}")
        n = next(counter)
        if w["overload_every"] and n % w["overload_every"] == 1:
            return ModelError(ErrorKind.RATE_LIMITED, "busy", status=429, retryable=True)
        agent = agent_of(call)
        if call.hints.turn >= w["turns"][agent] or call.hints.final:
            return f"done {agent}"
        return AssistantMessage(
            tool_calls=[
                ToolCall(f"c{k}", "work", json.dumps({"agent": agent, "n": next(counter)}))
                for k in range(w["parallel"][agent])
            ]
        )

    model = ScriptedModel(
        policy, latency=lambda call: w["model_latency"][len(model.calls) % len(w["model_latency"])]
    )

    async def scenario() -> list[Result]:
        async with open_driver(
            model,
            tools=[work],
            max_inflight=w["max_inflight"],
            slot_policy=w["policy"],
            adaptive=w["adaptive"],
            retry=RetryPolicy(max_attempts=20, base_delay=0.1),
            seed=w["seed"],
        ) as driver:
            driver_box.append(driver)
            loops = (make_loop(i, [work], base_priority=i % 3) for i in range(w["agents"]))
            async with driver.stream(loops) as results:
                return [r async for r in results]

    results = run_virtual(scenario)
    assert violations == []
    assert model.peak_in_flight <= w["max_inflight"]
    assert sorted(r.index for r in results) == list(range(w["agents"]))
    assert all(r.status == "ok" for r in results)


@PROPERTY
@given(
    agents=st.integers(1, 12),
    max_inflight=st.integers(1, 4),
    cancel_at=st.floats(0.0, 20.0),
    tool_latency=st.sampled_from([0.5, 3.0, 9.0]),
)
def test_cancel_mid_batch_returns_promptly_with_cancelled_statuses_and_no_leaks(
    agents: int, max_inflight: int, cancel_at: float, tool_latency: float
) -> None:
    @tool
    async def step(key: str) -> str:
        """Step.

        Args:
            key: echoed.
        """
        await trio.sleep(tool_latency)
        return key

    def policy(call: CallModel) -> str | AssistantMessage:
        if call.hints.turn >= 2:
            return "done"
        return AssistantMessage(
            tool_calls=[ToolCall("c", "step", f'{{"key": "{call.request_id}"}}')]
        )

    model = ScriptedModel(policy, latency=lambda call: 0.5 + agent_of(call) % 3)

    async def scenario() -> tuple[list[Result], float, float, bool, int, int]:
        async with open_driver(model, tools=[step], max_inflight=max_inflight) as driver:
            baseline = task_census()
            received: list[Result] = []
            async with driver.stream(make_loop(i, [step]) for i in range(agents)) as results:

                async def canceller() -> None:
                    await trio.sleep(cancel_at)
                    results.cancel()

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(canceller)
                    async for result in results:
                        received.append(result)
                    ended = trio.current_time()
                    nursery.cancel_scope.cancel()
            stats = driver.limiter.statistics()
            clean = stats.in_use == 0 and stats.waiting == 0
            return received, ended, cancel_at, clean, baseline, task_census()

    received, ended, cancelled_at, clean, before, after = run_virtual(scenario)
    assert sorted(r.index for r in received) == list(range(agents))
    assert clean
    assert before == after
    for r in received:
        # Nothing outlives the cancellation, and only runs cut short by it are cancelled.
        assert r.timings.ended <= cancelled_at
        assert r.status == "ok" if r.timings.ended < cancelled_at else r.status != "failed"
    assert ended <= cancelled_at


@PROPERTY
@given(
    waiters=st.integers(2, 8),
    cancelled=st.sets(st.integers(0, 7)),
    fails=st.booleans(),
    join_gap=st.sampled_from([0.0, 0.3, 1.0]),
)
def test_every_remaining_coalesced_waiter_gets_the_same_outcome(
    waiters: int, cancelled: set[int], fails: bool, join_gap: float
) -> None:
    executions = 0

    @tool(coalesce=True)
    async def shared(key: str) -> str:
        """Shared.

        Args:
            key: the same for everyone.
        """
        nonlocal executions
        executions += 1
        await trio.sleep(10.0)
        if fails:
            raise RuntimeError("backend exploded")
        return "the one result"

    def policy(call: CallModel) -> str | AssistantMessage:
        if tool_results(call):
            return tool_results(call)[0].content
        return AssistantMessage(tool_calls=[ToolCall("c", "shared", '{"key": "k"}')])

    model = ScriptedModel(
        policy,
        latency=lambda call: 0.0 if tool_results(call) else 1.0 + agent_of(call) * join_gap,
    )

    async def scenario() -> dict[int, Result]:
        out: dict[int, Result] = {}
        async with (
            open_driver(model, tools=[shared], max_inflight=8) as driver,
            trio.open_nursery() as nursery,
        ):

            async def one(i: int) -> None:
                # Cancelled agents leave while the shared execution is in flight.
                deadline = trio.current_time() + 1.0 + i * join_gap + 2.0
                out[i] = await driver.run(
                    make_loop(i, [shared]),
                    index=i,
                    deadline=deadline if i in cancelled else None,
                )

            for i in range(waiters):
                nursery.start_soon(one, i)
        return out

    results = run_virtual(scenario)
    # Every agent joins while the execution is in flight (the joins overlap), so it runs exactly
    # once, whoever leaves: a shared execution runs until its last waiter is gone.
    assert executions == 1
    remaining = [i for i in range(waiters) if i not in cancelled]
    outputs = {results[i].output for i in remaining}
    assert all(results[i].status == "ok" for i in remaining)
    assert len(outputs) <= 1
    if remaining:
        [output] = outputs
        assert ("backend exploded" in output) if fails else (output == "the one result")
    assert all(results[i].status == "failed" for i in cancelled if i < waiters)


@PROPERTY
@given(
    retry_after=st.lists(st.sampled_from([0.0, 0.25, 1.0, 4.0, 30.0]), min_size=1, max_size=4),
    latency=st.sampled_from([0.0, 0.5, 2.0]),
)
def test_retries_wait_exactly_what_the_server_asked(
    retry_after: list[float], latency: float
) -> None:
    replies: list[ModelError | str] = [
        ModelError(ErrorKind.RATE_LIMITED, "later", status=429, retryable=True, retry_after=s)
        for s in retry_after
    ]
    model = ScriptedModel([*replies, "finally"], latency=latency)
    starts: list[float] = []
    original = model.exchange

    async def timed(call: CallModel) -> Any:
        starts.append(trio.current_time())
        return await original(call)

    model.exchange = timed  # type: ignore[method-assign]

    async def scenario() -> Result:
        async with open_driver(model, retry=RetryPolicy(max_attempts=10)) as driver:
            return await driver.run(make_loop(0))

    result = run_virtual(scenario)
    assert result.status == "ok"
    gaps = [b - a - latency for a, b in itertools.pairwise(starts)]
    assert gaps == pytest.approx([min(s, 60.0) for s in retry_after])


@pytest.mark.parametrize(
    ("agents", "slots", "latency", "tool_latency"),
    [(40, 4, 0.05, 0.1), (100, 32, 0.05, 0.1), (7, 2, 1.0, 0.0), (30, 8, 0.5, 3.0)],
)
def test_driver_schedule_matches_a_hand_written_loop(
    agents: int, slots: int, latency: float, tool_latency: float
) -> None:
    """The virtual makespan equals that of the minimal loop (a semaphore around each request):
    the driver adds no waiting of its own."""

    async def minimal() -> float:
        semaphore = trio.Semaphore(slots)

        async def agent() -> None:
            for turn in range(2):
                async with semaphore:
                    await trio.sleep(latency)
                if turn == 0:
                    await trio.sleep(tool_latency)

        async with trio.open_nursery() as nursery:
            for _ in range(agents):
                nursery.start_soon(agent)
        return trio.current_time()

    @tool
    async def lookup(key: str) -> str:
        """Look up.

        Args:
            key: the key.
        """
        await trio.sleep(tool_latency)
        return key

    async def driven() -> float:
        model = ScriptedModel(
            tool_then_answer("lookup", lambda c: {"key": c.hints.session_id}), latency=latency
        )
        async with open_driver(model, tools=[lookup], max_inflight=slots) as driver:
            loops = (make_loop(i, [lookup]) for i in range(agents))
            async with driver.stream(loops) as results:
                assert all([r.status == "ok" async for r in results])
        return trio.current_time()

    assert run_virtual(driven) == pytest.approx(run_virtual(minimal))


@PROPERTY
@given(
    agents=st.integers(1, 40),
    slots=st.integers(1, 5),
    timeout=st.sampled_from([None, 0.5, 2.0, 5.0]),
    max_active=st.sampled_from([None, 1, 3]),
    ending=st.sampled_from(["consume", "cancel", "driver_cancel", "leave"]),
    at=st.floats(0.0, 5.0),
    seed=st.integers(0, 2**16),
)
def test_streams_of_parked_runs_deliver_every_result_and_leave_nothing_behind(  # noqa: PLR0917
    agents: int,
    slots: int,
    timeout: float | None,
    max_active: int | None,
    ending: str,
    at: float,
    seed: int,
) -> None:
    # Runs park for slots, nap in tools, time out while parked or in a tool, and are
    # cancelled or abandoned at an arbitrary moment: every result still arrives (unless the
    # stream was left), and no slot, waiter or task is left behind.
    rng = random.Random(seed)

    @tool
    async def nap(key: str) -> str:
        """Sleep.

        Args:
            key: seconds.
        """
        await trio.sleep(float(key))
        return key

    def policy(call: CallModel) -> str | AssistantMessage:
        if sum(isinstance(m, AssistantMessage) for m in call.messages) >= rng.randint(0, 2):
            return "done"
        seconds = rng.choice(["0", "0.5", "3"])
        return AssistantMessage(tool_calls=[ToolCall("c", "nap", f'{{"key": "{seconds}"}}')])

    model = ScriptedModel(policy, latency=lambda call: rng.choice([0.0, 0.1, 1.0]))

    async def scenario() -> None:
        async with open_driver(model, max_inflight=slots, tools=[nap]) as driver:
            baseline = task_census()
            received: list[Result] = []
            loops = (make_loop(i, [nap]) for i in range(agents))
            async with driver.stream(loops, timeout=timeout, max_active=max_active) as results:
                with trio.move_on_after(at) as early:
                    async for result in results:
                        received.append(result)
                if early.cancelled_caught and ending != "leave":
                    if ending == "cancel":
                        results.cancel()
                    elif ending == "driver_cancel":
                        driver.cancel()
                    received += [r async for r in results]
            if ending != "leave" or not early.cancelled_caught:
                assert sorted(r.index for r in received) == list(range(agents))
            stats = driver.limiter.statistics()
            assert (stats.in_use, stats.waiting) == (0, 0)
            assert task_census() == baseline

    run_virtual(scenario)
