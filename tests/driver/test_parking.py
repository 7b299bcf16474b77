"""Runs of a stream wait for a slot without a task: parked in the slot line as data.

What must hold whatever carries them: a queued run keeps no task, is served in line order, is
cancelled and times out while queued exactly as a run with a task would, and leaves the line
(and its rate charge) when its stream is left early.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from agentcore import open_driver, tool
from agentcore.core import AssistantMessage, CallModel, ToolCall
from agentcore.testing import ScriptedModel
from tests.driver.helpers import agent_of, make_loop, task_census


class GatedModel(ScriptedModel):
    """Answers once ``gate`` is set; counts the calls it is working on."""

    def __init__(self) -> None:
        super().__init__(lambda call: "done")
        self.gate = trio.Event()
        self.working = 0

    async def exchange(self, call: CallModel) -> Any:
        self.working += 1
        try:
            await self.gate.wait()
            return await super().exchange(call)
        finally:
            self.working -= 1


async def test_runs_queued_for_a_slot_keep_no_task() -> None:
    model = GatedModel()
    async with open_driver(model, max_inflight=4) as driver:
        baseline = task_census()
        async with driver.stream(make_loop(i) for i in range(200)) as results:
            with trio.fail_after(10):  # until every run is in the model or in line
                while model.working < 4 or driver.limiter.statistics().waiting < 196:
                    await trio.sleep(0.01)
            assert model.working == 4
            assert driver.limiter.statistics().waiting == 196
            # 4 runs hold a slot (a task each) plus the stream's own few tasks; the 196
            # runs in line have none.
            assert task_census() - baseline <= 4 + 4
            model.gate.set()
            statuses = [r.status async for r in results]
        assert statuses == ["ok"] * 200
        assert task_census() == baseline


async def test_queued_runs_are_served_in_line_order(autojump_clock: Any) -> None:
    model = ScriptedModel(lambda call: "done", latency=1.0)
    async with (
        open_driver(model, max_inflight=2) as driver,
        driver.stream(make_loop(i) for i in range(10)) as results,
    ):
        ended = {r.index: trio.current_time() async for r in results}
    assert [agent_of(call) for call in model.calls] == list(range(10))
    assert ended == {i: pytest.approx(1.0 + i // 2) for i in range(10)}


async def test_a_fresh_run_queued_for_its_first_slot_builds_its_request_when_served(
    autojump_clock: Any,
) -> None:
    # A run waiting for its first slot is its loop and its place in line: the loop starts
    # (and its request is built) when the slot is granted, at the priority it announced.
    model = ScriptedModel(lambda call: "done", latency=1.0)
    loops = [make_loop(i, base_priority=i % 3) for i in range(9)]
    assert [loop.opening_priority for loop in loops] == [i % 3 for i in range(9)]
    async with (
        open_driver(model, max_inflight=1, slot_policy="priority") as driver,
        driver.stream(loops) as results,
    ):
        await trio.sleep(0.5)
        assert [loop.state.name for loop in loops].count("IDLE") == 8
        statuses = [r.status async for r in results]
    assert statuses == ["ok"] * 9
    # The first took the free slot; the rest by priority, ties in arrival order.
    assert [agent_of(call) for call in model.calls] == [0, 2, 5, 8, 1, 4, 7, 3, 6]
    assert [call.hints.priority for call in model.calls] == [0, 2, 2, 2, 1, 1, 1, 0, 0]


async def test_a_queued_run_times_out_at_its_deadline_while_in_line(
    autojump_clock: Any,
) -> None:
    model = ScriptedModel(lambda call: "slow answer", latency=10.0)
    async with open_driver(model, max_inflight=1) as driver:
        ended: dict[int, float] = {}
        async with driver.stream((make_loop(i) for i in range(4)), timeout=3.0) as results:
            async for result in results:
                ended[result.index] = trio.current_time()
                if result.index:
                    assert result.status == "failed"
                    assert result.error is not None
                    assert result.error.kind.value == "model_failed"
                    assert "deadline" in str(result.error)
    # The slot holder times out too (its exchange takes 10 s); every queued run ends at its
    # own deadline, not when a slot frees.
    assert ended == {0: pytest.approx(3.0), 1: pytest.approx(3.0), 2: pytest.approx(3.0),
                     3: pytest.approx(3.0)}  # fmt: skip
    assert driver.limiter.statistics().waiting == 0


async def test_deadlines_of_runs_queued_at_different_times_each_fire_on_time(
    autojump_clock: Any,
) -> None:
    # Runs 0-1 answer; run 1's second request queues later than the others' first ones.
    model = ScriptedModel(lambda call: "done", latency=2.0)
    async with open_driver(model, max_inflight=1) as driver:
        ended: dict[int, tuple[str, float]] = {}
        async with driver.stream((make_loop(i) for i in range(5)), timeout=5.0) as results:
            async for result in results:
                ended[result.index] = (result.status, trio.current_time())
    assert ended[0] == ("ok", pytest.approx(2.0))
    assert ended[1] == ("ok", pytest.approx(4.0))
    # Run 2 got the slot at 4 s and is cut at its 5 s deadline; 3 and 4 never got one.
    for index in (2, 3, 4):
        assert ended[index] == ("failed", pytest.approx(5.0))


async def test_cancelling_a_stream_ends_queued_runs_at_once(autojump_clock: Any) -> None:
    model = ScriptedModel(lambda call: "slow answer", latency=10.0)
    async with open_driver(model, max_inflight=2) as driver:
        async with driver.stream(make_loop(i) for i in range(50)) as results:
            await trio.sleep(1.0)
            results.cancel()
            received = [r async for r in results]
        assert trio.current_time() == pytest.approx(1.0)
        assert sorted(r.index for r in received) == list(range(50))
        assert {r.status for r in received} == {"cancelled"}
        assert sorted(r.turns for r in received) == [0] * 48 + [1, 1]
        stats = driver.limiter.statistics()
        assert (stats.in_use, stats.waiting) == (0, 0)


async def test_leaving_a_stream_early_takes_its_queued_runs_out_of_the_line(
    autojump_clock: Any,
) -> None:
    model = ScriptedModel(lambda call: "answer", latency=1.0)
    async with open_driver(model, max_inflight=2) as driver:
        baseline = task_census()
        async with driver.stream(make_loop(i) for i in range(30)) as results:
            async for _ in results:
                break
        stats = driver.limiter.statistics()
        assert (stats.in_use, stats.waiting) == (0, 0)
        assert task_census() == baseline
        # The line is usable afterwards: a new stream on the same driver runs to the end.
        async with driver.stream(make_loop(i) for i in range(6)) as results:
            assert sorted([r.status async for r in results]) == ["ok"] * 6


async def test_a_slow_consumer_does_not_hold_the_slots_back(autojump_clock: Any) -> None:
    # Results wait for the consumer; the runs that produced them do not, so the remaining
    # runs keep using the slots meanwhile.
    model = ScriptedModel(lambda call: "done", latency=1.0)
    async with (
        open_driver(model, max_inflight=2) as driver,
        driver.stream(make_loop(i) for i in range(10)) as results,
    ):
        await trio.sleep(100.0)  # consume nothing while every run could finish
        assert len(model.calls) == 10
        done = trio.current_time()
        received = [r.index async for r in results]
        assert trio.current_time() == done
    assert sorted(received) == list(range(10))


async def test_a_large_stream_sends_its_first_requests_before_it_has_read_every_input() -> None:
    # Without ``max_active`` every loop starts as the stream reads it, but the stream lets the
    # runs started so far go on every 64: the first request does not wait for all 2,000.
    read = 0
    seen_at_first_request: list[int] = []

    def loops() -> Any:
        nonlocal read
        for i in range(2000):
            read += 1
            yield make_loop(i)

    def policy(call: CallModel) -> str:
        if not seen_at_first_request:
            seen_at_first_request.append(read)
        return "done"

    async with (
        open_driver(ScriptedModel(policy), max_inflight=8) as driver,
        driver.stream(loops()) as results,
    ):
        statuses = [r.status async for r in results]
    assert statuses == ["ok"] * 2000
    assert seen_at_first_request[0] <= 1000


async def test_a_consumer_takes_results_already_there_in_bulk_yet_lets_others_run() -> None:
    # 300 results wait while the consumer sleeps. Taking them costs no task switch each (a
    # result per scheduler pass would let a fast batch outrun its consumer), yet the
    # consumer yields to the other tasks at least once per 64 results (so another task runs
    # within any 128: it may run just before the consumer in one scheduler pass and just
    # after it in the next).
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await trio.lowlevel.checkpoint()
            ticks += 1

    model = ScriptedModel(lambda call: "done")
    async with (
        open_driver(model, max_inflight=300) as driver,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(ticker)
        async with driver.stream(make_loop(i) for i in range(300)) as results:
            while len(model.calls) < 300:
                await trio.sleep(0.01)
            await trio.sleep(0.05)
            seen: list[int] = []
            async for _ in results:
                seen.append(ticks)
        nursery.cancel_scope.cancel()
    assert len(seen) == 300
    assert seen[-1] - seen[0] <= 300 // 64 + 1  # in bulk
    assert all(seen[k + 128] > seen[k] for k in range(len(seen) - 128))  # never starving


async def test_queued_runs_give_back_their_rate_charge_when_cancelled(
    autojump_clock: Any,
) -> None:
    model = ScriptedModel(lambda call: "slow answer", latency=10.0)
    async with open_driver(model, max_inflight=1, requests_per_minute=600) as driver:
        async with driver.stream(make_loop(i) for i in range(5)) as results:
            await trio.sleep(0.5)
            results.cancel()
            statuses = [r.status async for r in results]
        assert statuses == ["cancelled"] * 5
        # The 4 queued requests were charged and never sent: their charge came back, so the
        # next requests pass without waiting for budget.
        start = trio.current_time()
        async with driver.stream(make_loop(i) for i in range(4)) as results:
            assert [r.status async for r in results] == ["ok"] * 4
        assert trio.current_time() - start == pytest.approx(40.0)
        assert driver.statistics().rates.waits == 0


async def test_a_run_granted_a_slot_starts_at_once_while_every_worker_is_in_a_tool(
    autojump_clock: Any,
) -> None:
    # One slot. Each run asks for a 100 s tool, then answers. The worker carrying a run goes
    # on into that run's tool right after giving the slot back, so the next run in line
    # must get a worker of its own at once, not when a tool ends.
    @tool
    async def nap(key: str) -> str:
        """Sleep.

        Args:
            key: echoed back.
        """
        await trio.sleep(100.0)
        return key

    def policy(call: CallModel) -> str | AssistantMessage:
        if any(isinstance(m, AssistantMessage) for m in call.messages):
            return "done"
        return AssistantMessage(tool_calls=[ToolCall("c", "nap", '{"key": "k"}')])

    model = ScriptedModel(policy, latency=1.0)
    sent: list[float] = []
    original = model.exchange

    async def exchange(call: CallModel) -> Any:
        sent.append(trio.current_time())
        return await original(call)

    model.exchange = exchange  # type: ignore[method-assign]
    async with (
        open_driver(model, max_inflight=1, tools=[nap]) as driver,
        driver.stream(make_loop(i, [nap]) for i in range(4)) as results,
    ):
        statuses = [r.status async for r in results]
    assert statuses == ["ok"] * 4
    # The four first requests go one per second; the second requests after each tool.
    assert sent[:4] == [pytest.approx(t) for t in (0.0, 1.0, 2.0, 3.0)]
