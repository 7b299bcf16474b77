"""Many agents at once: streaming, cancellation, coalesced tools, slot policies."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest
import trio

from agentcore import ErrorKind, ModelError, Result, open_driver, tool
from agentcore.core import AssistantMessage, CallModel, ToolCall
from agentcore.testing import ScriptedModel
from tests.driver.helpers import agent_of, make_loop, task_census, tool_results, tool_then_answer


def nap_tool(seconds: float, log: list[str] | None = None):  # type: ignore[no-untyped-def]
    @tool
    async def nap(key: str) -> str:
        """Sleep, then echo.

        Args:
            key: echoed back.
        """
        if log is not None:
            log.append(key)
        await trio.sleep(seconds)
        return f"slept on {key}"

    return nap


async def test_results_stream_in_completion_order(autojump_clock: Any) -> None:
    # Agent i answers after (5 - i) seconds: the last agent finishes first.
    model = ScriptedModel(lambda call: "done", latency=lambda call: 5.0 - agent_of(call))
    async with (
        open_driver(model) as driver,
        driver.stream(make_loop(i) for i in range(5)) as results,
    ):
        order = [r.index async for r in results]
    assert order == [4, 3, 2, 1, 0]


async def test_cancelling_a_batch_ends_every_agent_promptly_and_keeps_finished_results(
    autojump_clock: Any,
) -> None:
    nap = nap_tool(100.0)
    fast = set(range(5))

    def policy(call: CallModel) -> str | AssistantMessage:
        if agent_of(call) in fast:
            return "quick answer"
        return AssistantMessage(
            tool_calls=[ToolCall("c", "nap", f'{{"key": "{call.request_id}"}}')]
        )

    model = ScriptedModel(policy, latency=lambda call: 1.0 + agent_of(call) % 3)
    async with open_driver(model, tools=[nap], max_inflight=4) as driver:
        baseline = task_census()
        received: list[Result] = []
        async with driver.stream(make_loop(i, [nap]) for i in range(20)) as results:
            async for result in results:
                received.append(result)
                if len(received) == len(fast):
                    cancelled_at = trio.current_time()
                    results.cancel()
            ended_at = trio.current_time()
        assert task_census() == baseline
        assert driver.limiter.statistics().in_use == 0
        assert driver.executor.statistics().flights == 0
    assert ended_at == cancelled_at  # nothing waited for anything
    assert sorted(r.index for r in received) == list(range(20))
    assert {r.index for r in received if r.status == "ok"} == fast
    cancelled = [r for r in received if r.index not in fast]
    assert all(r.status == "cancelled" for r in cancelled)
    # The cancelled runs keep their transcript so far.
    assert all(r.transcript[0].content == f"task {r.index}" for r in cancelled)  # type: ignore[union-attr]


async def test_driver_cancel_also_ends_runs_started_afterwards(autojump_clock: Any) -> None:
    model = ScriptedModel(lambda call: "late", latency=10.0)
    async with open_driver(model) as driver:
        async with trio.open_nursery() as nursery:
            outcomes: list[Result] = []

            async def one(i: int) -> None:
                outcomes.append(await driver.run(make_loop(i), index=i))

            for i in range(3):
                nursery.start_soon(one, i)
            await trio.sleep(1.0)
            driver.cancel()
        after = await driver.run(make_loop(9), index=9)
        assert trio.current_time() == pytest.approx(1.0)
    assert [r.status for r in outcomes] == ["cancelled"] * 3
    assert after.status == "cancelled"
    assert after.turns == 0  # ended before its first request was sent


async def test_leaving_the_stream_early_leaves_no_task_behind(autojump_clock: Any) -> None:
    nap = nap_tool(30.0)
    model = ScriptedModel(tool_then_answer("nap", lambda c: {"key": c.request_id}), latency=1.0)
    async with open_driver(model, tools=[nap], max_inflight=2) as driver:
        baseline = task_census()
        async with driver.stream(make_loop(i, [nap]) for i in range(10)) as results:
            async for _ in results:
                break
        assert task_census() == baseline
        stats = driver.limiter.statistics()
        assert stats.in_use == 0
        assert stats.waiting == 0


async def test_max_active_bounds_the_runs_in_progress(autojump_clock: Any) -> None:
    active = 0
    peak = 0

    @tool
    async def track(key: str) -> str:
        """Track.

        Args:
            key: unused.
        """
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await trio.sleep(5.0)
        active -= 1
        return key

    model = ScriptedModel(tool_then_answer("track", lambda c: {"key": c.request_id}))
    async with (
        open_driver(model, tools=[track]) as driver,
        driver.stream((make_loop(i, [track]) for i in range(12)), max_active=3) as rs,
    ):
        done = [r async for r in rs]
    assert len(done) == 12
    assert all(r.status == "ok" for r in done)
    assert peak == 3


async def test_cancelling_one_agent_leaves_the_others_results_intact(autojump_clock: Any) -> None:
    nap = nap_tool(3.0)

    async def run_all(cancel_one: bool) -> dict[int, Result]:
        model = ScriptedModel(
            tool_then_answer("nap", lambda c: {"key": f"agent {agent_of(c)}"}), latency=1.0
        )
        results: dict[int, Result] = {}
        async with (
            open_driver(model, tools=[nap], max_inflight=2) as driver,
            trio.open_nursery() as nursery,
        ):

            async def one(i: int) -> None:
                with trio.CancelScope() as scope:
                    if cancel_one and i == 2:
                        scope.deadline = trio.current_time() + 2.5
                    results[i] = await driver.run(make_loop(i, [nap]), index=i)

            for i in range(5):
                nursery.start_soon(one, i)
        return results

    reference = await run_all(False)
    with_cancel = await run_all(True)
    assert 2 not in with_cancel  # its caller cancelled it: trio semantics, no result
    for i in (0, 1, 3, 4):
        assert with_cancel[i].status == reference[i].status == "ok"
        assert with_cancel[i].output == reference[i].output
        assert with_cancel[i].transcript == reference[i].transcript


@pytest.mark.parametrize("fails", [False, True])
async def test_every_coalesced_waiter_gets_one_shared_outcome_even_when_the_leader_leaves(
    autojump_clock: Any, fails: bool
) -> None:
    executions = 0

    @tool(coalesce=True)
    async def fetch(url: str) -> str:
        """Fetch.

        Args:
            url: where.
        """
        nonlocal executions
        executions += 1
        await trio.sleep(10.0)
        if fails:
            raise ConnectionError(f"{url} unreachable")
        return f"<html>{url}</html>"

    # Agent 0 asks first (shortest latency) and so starts the shared execution; its deadline
    # cuts it off while the execution is in flight, and the execution goes on for agents 1 to 3.
    model = ScriptedModel(
        tool_then_answer("fetch", lambda c: {"url": "http://x"}),
        latency=lambda call: 1.0 + agent_of(call) * 0.1 if not tool_results(call) else 0.0,
    )
    async with open_driver(model, tools=[fetch], max_inflight=8) as driver:
        # A waiter left hanging by a bug fails the test instead of blocking it forever.
        with trio.fail_after(1000):
            async with trio.open_nursery() as nursery:
                results: dict[int, Result] = {}

                async def one(i: int) -> None:
                    deadline = trio.current_time() + 3.0 if i == 0 else None
                    loop = make_loop(i, [fetch])
                    results[i] = await driver.run(loop, index=i, deadline=deadline)

                for i in range(4):
                    nursery.start_soon(one, i)
        tools = driver.executor.statistics()
    assert executions == 1
    assert tools.tools["fetch"].coalesced == 3
    assert results[0].status == "failed"
    contents = set()
    for i in (1, 2, 3):
        assert results[i].status == "ok"
        second_request = [c for c in model.calls if agent_of(c) == i][1]
        [message] = tool_results(second_request)
        assert message.is_error is fails
        contents.add(message.content)
    assert len(contents) == 1
    assert ("unreachable" if fails else "<html>http://x</html>") in contents.pop()


async def test_a_deadline_on_the_agent_that_started_a_shared_read_does_not_restart_it(
    autojump_clock: Any,
) -> None:
    # 20 agents read the same thing at once through a 1 s coalesced tool; the agent whose call
    # started the execution hits its deadline at 0.5 s. The execution goes on for the 19 others:
    # it runs once and is never cancelled, and the first agent still ends at its own deadline.
    executions = 0
    cancelled = 0

    @tool(coalesce=True)
    async def lookup(q: str) -> str:
        """Look something up.

        Args:
            q: what.
        """
        nonlocal executions, cancelled
        executions += 1
        try:
            await trio.sleep(1.0)
        except trio.Cancelled:
            cancelled += 1
            raise
        return f"answer to {q}"

    model = ScriptedModel(
        tool_then_answer("lookup", lambda c: {"q": "same"}),
        latency=lambda call: 0.0 if tool_results(call) else 0.001 * (1 + agent_of(call)),
    )
    results: dict[int, Result] = {}
    async with open_driver(model, tools=[lookup], max_inflight=32) as driver:
        with trio.fail_after(100):
            async with trio.open_nursery() as nursery:

                async def one(i: int) -> None:
                    deadline = trio.current_time() + 0.5 if i == 0 else None
                    results[i] = await driver.run(
                        make_loop(i, [lookup]), index=i, deadline=deadline
                    )

                for i in range(20):
                    nursery.start_soon(one, i)
    assert (executions, cancelled) == (1, 0)
    assert results[0].status == "failed"
    assert results[0].timings.ended == pytest.approx(0.5)
    for i in range(1, 20):
        assert results[i].status == "ok"
        second = [c for c in model.calls if agent_of(c) == i][1]
        assert [m.content for m in tool_results(second)] == ["answer to same"]


async def test_priority_policy_serves_the_highest_priority_waiting_first(
    autojump_clock: Any,
) -> None:
    model = ScriptedModel(lambda call: "ok", latency=1.0)
    priorities = {1: 0, 2: 5, 3: 1, 4: 5, 5: 3}
    async with (
        open_driver(model, max_inflight=1, slot_policy="priority") as driver,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(driver.run, make_loop(0))  # takes the only slot
        await trio.sleep(0.1)
        for i, p in priorities.items():
            nursery.start_soon(driver.run, make_loop(i, base_priority=p))
            await trio.sleep(0.01)  # arrive in index order
    served = [agent_of(c) for c in model.calls]
    assert served == [0, 2, 4, 5, 3, 1]


async def test_fifo_policy_serves_in_arrival_order(autojump_clock: Any) -> None:
    model = ScriptedModel(lambda call: "ok", latency=1.0)
    async with open_driver(model, max_inflight=1) as driver, trio.open_nursery() as nursery:
        for i in range(6):
            nursery.start_soon(driver.run, make_loop(i, base_priority=i))
            await trio.sleep(0.01)
    assert [agent_of(c) for c in model.calls] == list(range(6))


async def test_adaptive_limit_shrinks_on_overload_and_grows_back(autojump_clock: Any) -> None:
    overloaded = ModelError(ErrorKind.RATE_LIMITED, "429", status=429, retryable=True)
    busy_until = 20.0
    limits: list[int] = []

    def policy(call: CallModel) -> str | ModelError:
        return overloaded if trio.current_time() < busy_until else "ok"

    model = ScriptedModel(policy, latency=1.0)
    async with open_driver(model, max_inflight=8, adaptive=True, seed=7) as driver:

        async def sample() -> None:
            while True:
                limits.append(driver.limiter.limit)
                await trio.sleep(0.5)

        async with trio.open_nursery() as outer:
            outer.start_soon(sample)
            async with driver.stream(make_loop(i) for i in range(40)) as results:
                statuses = [r.status async for r in results]
            outer.cancel_scope.cancel()
    assert model.peak_in_flight <= 8
    assert max(limits) <= 8
    assert min(limits) < 8  # it shrank under 429s
    assert limits[-1] > min(limits)  # and grew back once the server recovered
    assert driver.limiter.statistics().overloads > 0
    assert statuses.count("ok") + statuses.count("failed") == 40


async def test_runs_not_started_when_a_batch_is_cancelled_report_cancelled(
    autojump_clock: Any,
) -> None:
    model = ScriptedModel(lambda call: "slow answer", latency=10.0)
    async with open_driver(model) as driver:
        loops = (make_loop(i) for i in range(6))
        async with driver.stream(loops, max_active=2) as results:
            await trio.sleep(1.0)
            results.cancel()
            received = [r async for r in results]
        assert trio.current_time() == pytest.approx(1.0)
    assert sorted(r.index for r in received) == list(range(6))
    assert all(r.status == "cancelled" for r in received)
    assert sorted(r.turns for r in received) == [0, 0, 0, 0, 1, 1]
    assert len(model.calls) == 2


async def test_a_delivered_result_is_not_kept_by_the_driver_while_the_batch_goes_on(
    autojump_clock: Any,
) -> None:
    # Agent 0 takes an hour; the others end in seconds. Once the consumer has dropped their
    # results, nothing of those runs stays in memory: a worker resting between runs keeps
    # neither the last run it carried (its transcript) nor its end (its output).
    model = ScriptedModel(lambda call: "x" * 1000,
                          latency=lambda call: 3600.0 if agent_of(call) == 0 else 1.0)  # fmt: skip
    gone: list[weakref.ref[AssistantMessage]] = []
    async with (
        open_driver(model, max_inflight=4) as driver,
        driver.stream(make_loop(i) for i in range(20)) as results,
    ):
        async for result in results:
            if result.index == 0:
                break
            message = result.transcript[-1]
            assert isinstance(message, AssistantMessage)
            gone.append(weakref.ref(message))
            del result, message
            if len(gone) == 19:
                gc.collect()
                assert [ref() for ref in gone] == [None] * 19
    assert len(gone) == 19
