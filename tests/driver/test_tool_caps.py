"""Tool concurrency caps in the driver: per agent turn, per tool across the driver, per batch
across all tools. Waits hold no inference slot and show as ``ToolWaited`` step events and in
the trace. Virtual time throughout."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import agentcore
from agentcore import StepEvent, ToolEnded, ToolStarted, ToolWaited, open_batch, open_driver
from agentcore._observe.trace import TOOL_WAITS_PID, TOOLS_PID, read_trace
from agentcore.core import AssistantMessage, CallModel, ToolCall, ToolMessage
from agentcore.testing import ScriptedModel
from tests.driver.helpers import make_loop


class Probe:
    """What a tool saw: calls in progress at once, start and end order."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.log: list[tuple[str, int]] = []

    async def work(self, i: int, seconds: float) -> str:
        self.running += 1
        self.peak = max(self.peak, self.running)
        self.log.append(("start", i))
        try:
            await trio.sleep(seconds)
        finally:
            self.running -= 1
            self.log.append(("end", i))
        return f"done {i}"


def fan_out(name: str, n: int) -> Any:
    """A policy: the first reply asks for ``n`` parallel calls of ``name``; then it answers
    with how many results it got."""

    def policy(call: CallModel) -> str | AssistantMessage:
        results = [m for m in call.messages if isinstance(m, ToolMessage)]
        if results:
            return json.dumps([m.content for m in results])
        return AssistantMessage(
            tool_calls=tuple(ToolCall(f"c{i}", name, json.dumps({"i": i})) for i in range(n))
        )

    return policy


async def test_eight_hundred_parallel_calls_run_under_the_per_turn_cap_in_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()

    @agentcore.tool(max_per_turn=10)
    async def fetch(i: int) -> str:
        """Fetch. Args: i: which."""
        return await probe.work(i, 1.0 + (i * 7919 % 13) / 10)

    model = ScriptedModel(fan_out("fetch", 800), latency=0.5)
    async with open_driver(model, tools=[fetch]) as driver:
        events: list[StepEvent] = []
        async with driver.watch(make_loop(0, [fetch]), index=0) as steps:
            async for step in steps:
                events.append(step)
                if isinstance(step, ToolWaited):
                    # the wait holds no inference slot
                    assert driver.statistics().slots.in_use == 0
        result = steps.result
    assert result is not None and result.status == "ok"
    assert probe.peak == 10
    starts = [i for kind, i in probe.log if kind == "start"]
    assert sorted(starts) == list(range(800))  # none dropped, none duplicated
    # in the model's order: calls admitted at one instant may start in any order among
    # themselves (at most 10 of them), but every call ten or more places earlier started
    # first, and a call starts only once as many calls ended as it is places beyond the cap
    started_at = {i: n for n, (kind, i) in enumerate(probe.log) if kind == "start"}
    earliest_later = min(started_at[j] for j in range(790, 800))
    for j in range(799, 9, -1):
        earliest_later = min(earliest_later, started_at[j])
        assert started_at[j - 10] < earliest_later
        ends_before = sum(1 for kind, _ in probe.log[: started_at[j]] if kind == "end")
        assert ends_before >= j - 9
    assert json.loads(result.output) == [f"done {i}" for i in range(800)]
    waited = [e for e in events if isinstance(e, ToolWaited)]
    assert len(waited) == 790 and {e.cap for e in waited} == {"turn"}
    assert all(e.wait > 0 for e in waited)
    started = {e.call_id: n for n, e in enumerate(events) if isinstance(e, ToolStarted)}
    for n, e in enumerate(events):
        if isinstance(e, ToolWaited):
            assert started[e.call_id] > n  # the turn's wait comes before the call starts


async def test_a_turn_cap_of_one_tool_does_not_hold_back_another(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()

    @agentcore.tool(max_per_turn=1)
    async def slow(i: int) -> str:
        """Slow. Args: i: which."""
        return await probe.work(i, 10.0)

    @agentcore.tool
    async def quick(i: int) -> str:
        """Quick. Args: i: which."""
        return await probe.work(100 + i, 1.0)

    def policy(call: CallModel) -> str | AssistantMessage:
        if any(isinstance(m, ToolMessage) for m in call.messages):
            return "ok"
        return AssistantMessage(
            tool_calls=(
                ToolCall("a", "slow", '{"i": 0}'),
                ToolCall("b", "slow", '{"i": 1}'),
                ToolCall("c", "quick", '{"i": 0}'),
                ToolCall("d", "quick", '{"i": 1}'),
            )
        )

    async with open_driver(ScriptedModel(policy), tools=[slow, quick]) as driver:
        start = trio.current_time()
        result = await driver.run(make_loop(0, [slow, quick]))
    assert result.status == "ok"
    assert trio.current_time() - start == 20.0  # the two slow calls one after the other
    assert probe.peak == 3  # one slow call and both quick ones at once


@settings(max_examples=25, deadline=None)
@given(
    cap=st.integers(1, 4),
    agents=st.integers(1, 6),
    calls=st.integers(1, 5),
    seconds=st.lists(st.integers(1, 9), min_size=1, max_size=7),
)
def test_a_batch_cap_bounds_tool_calls_in_progress_over_all_its_agents(
    cap: int, agents: int, calls: int, seconds: list[int]
) -> None:
    """Whatever the fan-out and the latencies, at most ``cap`` tool calls of the batch are in
    progress at once, every call runs once, and each wait is reported."""
    probe = Probe()

    @agentcore.tool
    async def work(i: int) -> str:
        """Work. Args: i: which."""
        return await probe.work(i, seconds[i % len(seconds)])

    @agentcore.tool
    async def other(i: int) -> str:
        """Other work. Args: i: which."""
        return await probe.work(1000 + i, 1)

    def policy(call: CallModel) -> str | AssistantMessage:
        if any(isinstance(m, ToolMessage) for m in call.messages):
            return "ok"
        agent = int(call.messages[-1].content.rsplit(" ", 1)[1])  # type: ignore[union-attr]
        return AssistantMessage(
            tool_calls=tuple(
                ToolCall(
                    f"c{k}", "work" if k % 2 == 0 else "other", json.dumps({"i": agent * 10 + k})
                )
                for k in range(calls)
            )
        )

    task = agentcore.Task(prompt="agent {n}", tools=[work, other])

    async def main() -> None:
        waits: list[ToolWaited] = []

        class Sink:
            deltas = False

            def push(self, event: StepEvent) -> None:
                if isinstance(event, ToolWaited):
                    waits.append(event)

            async def settle(self) -> None:
                pass

        model = ScriptedModel(policy, latency=0.25)
        async with (
            open_driver(model, tools=[work, other], max_inflight=2) as driver,
            open_batch(
                task,
                [{"n": a} for a in range(agents)],
                driver=driver,
                max_tool_concurrency=cap,
                steps=Sink(),
            ) as results,
        ):
            statuses = [r.status async for r in results]
        assert statuses == ["ok"] * agents
        assert probe.peak <= cap
        starts = [i for kind, i in probe.log if kind == "start"]
        assert len(starts) == len(set(starts)) == agents * calls
        assert {w.cap for w in waits} <= {"batch"}
        if agents * calls <= cap:
            assert not waits

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_the_tools_own_cap_wait_is_a_step_event_and_a_trace_slice(
    autojump_clock: trio.testing.MockClock, tmp_path: Any
) -> None:
    @agentcore.tool(max_concurrency=1)
    async def single(i: int) -> str:
        """One at a time, across the driver. Args: i: which."""
        await trio.sleep(2.0)
        return str(i)

    trace = tmp_path / "trace.json"
    model = ScriptedModel(fan_out("single", 3), latency=0.5)
    async with open_driver(model, tools=[single], trace=trace) as driver:
        events: list[StepEvent] = []
        async with driver.watch(make_loop(0, [single])) as steps:
            async for step in steps:
                events.append(step)
    waited = [e for e in events if isinstance(e, ToolWaited)]
    assert [(e.cap, e.wait) for e in waited] == [("tool", 2.0), ("tool", 4.0)]
    ended = {e.call_id: e for e in events if isinstance(e, ToolEnded)}
    for e in waited:
        assert ended[e.call_id].duration == e.wait + 2.0  # the call's duration includes it
    slices = [e for e in read_trace(trace) if e.get("ph") == "X"]
    waits = [e for e in slices if e["pid"] == TOOL_WAITS_PID]
    runs = [e for e in slices if e["pid"] == TOOLS_PID]
    assert sorted(e["dur"] for e in waits) == [2e6, 4e6]
    assert [e["dur"] for e in runs] == [2e6, 2e6, 2e6]  # executions drawn without the wait
    assert sorted(e["ts"] for e in runs) == [e["ts"] for e in sorted(runs, key=lambda e: e["ts"])]


async def test_a_bad_batch_cap_is_refused_before_any_request() -> None:
    model = ScriptedModel(lambda call: "never")
    task = agentcore.Task(prompt="x")
    for bad in (0, -2, 1.5, True):
        with pytest.raises(agentcore.ConfigError, match="max_tool_concurrency"):
            async with open_batch(task, [{}], backend=model, max_tool_concurrency=bad):
                pass
    assert model.calls == []


def test_a_per_turn_cap_is_a_positive_integer() -> None:
    for bad in (0, 2.0, False):
        with pytest.raises(agentcore.ConfigError, match="max_per_turn"):
            agentcore.tool(max_per_turn=bad)(lambda i: i)  # type: ignore[arg-type]
