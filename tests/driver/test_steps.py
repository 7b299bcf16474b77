"""Step events of runs, pushed as they happen: order, content, back-pressure, batches."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from agentcore import (
    ErrorKind,
    ModelDelta,
    ModelError,
    ModelReplied,
    RequestFailed,
    RequestStarted,
    RetryPolicy,
    RetryScheduled,
    RunAborted,
    RunFinished,
    RunStarted,
    StepEvent,
    ToolEnded,
    ToolStarted,
    open_driver,
    tool,
)
from agentcore.core import AssistantMessage, CallModel, ToolCall, dumps
from agentcore.testing import ScriptedModel
from agentcore.wire import TextDelta
from tests.driver.helpers import make_loop, task_census, tool_results, tool_then_answer

RETRY = RetryPolicy(max_attempts=3, base_delay=0.5, max_delay=1.0)


@tool
async def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: what to look up.
    """
    await trio.sleep(1.0)
    return f"value of {key}"


@tool
async def broken(key: str) -> str:
    """Always fails.

    Args:
        key: ignored.
    """
    await trio.sleep(0)
    raise RuntimeError("out of order")


@tool(cache=True)
async def cached(key: str) -> str:
    """A cached lookup.

    Args:
        key: what to look up.
    """
    await trio.sleep(1.0)
    return f"cached {key}"


def names(events: list[StepEvent]) -> list[str]:
    return [e.name for e in events]


async def test_watching_a_run_gives_each_step_in_order(autojump_clock: Any) -> None:
    model = ScriptedModel(tool_then_answer("lookup", lambda c: {"key": "k"}), latency=1.0)
    async with open_driver(model, tools=[lookup]) as driver:
        seen: list[tuple[float, StepEvent]] = []
        async with driver.watch(make_loop(0, [lookup]), index=3) as steps:
            async for step in steps:
                seen.append((trio.current_time(), step))
    events = [e for _, e in seen]
    assert names(events) == [
        "run_started",
        "request_queued",
        "request_started",
        "model_replied",
        "tool_started",
        "tool_ended",
        "request_queued",
        "request_started",
        "model_replied",
        "run_finished",
    ]
    opened = events[0]
    assert isinstance(opened, RunStarted)
    assert (opened.run, opened.index) == (0, 3)  # the driver's first run, input index 3
    assert all(e.run == 0 for e in events)
    times = [0.0, 0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 2.0, 3.0, 3.0]
    assert [t for t, _ in seen] == pytest.approx(times)
    _, _, first, replied, started, ended, _, second, _, finished = events
    assert isinstance(first, RequestStarted)
    assert (first.turn, first.attempt, first.slot_wait) == (0, 1, 0.0)
    assert isinstance(replied, ModelReplied)
    assert replied.message.tool_calls[0].name == "lookup"
    assert replied.usage.prompt_tokens > 0
    assert isinstance(started, ToolStarted)
    assert (started.tool, dict(started.arguments)) == ("lookup", {"key": "k"})
    assert isinstance(ended, ToolEnded)
    assert (ended.content, ended.error, ended.source) == ("value of k", None, "executed")
    assert ended.duration == pytest.approx(1.0)
    assert isinstance(second, RequestStarted)
    assert second.turn == 1
    assert isinstance(finished, RunFinished)
    assert finished.output == "answer: value of k"
    assert steps.result is not None
    assert steps.result.output == finished.output
    assert steps.result.index == 3
    assert finished.status == steps.result.status == "ok"  # either end answers ``status``


async def test_deltas_are_pushed_only_when_asked_for(autojump_clock: Any) -> None:
    model = ScriptedModel(["a streamed answer", "a streamed answer"], latency=1.0, chunk=3)
    async with open_driver(model) as driver:
        async with driver.watch(make_loop(0)) as steps:
            plain = [e async for e in steps]
        async with driver.watch(make_loop(1), deltas=True) as steps:
            streamed = [e async for e in steps]
    assert names(plain) == [
        "run_started",
        "request_queued",
        "request_started",
        "model_replied",
        "run_finished",
    ]
    deltas = [e for e in streamed if isinstance(e, ModelDelta)]
    assert names(streamed) == [
        "run_started",
        "request_queued",
        "request_started",
        *["model_delta"] * len(deltas),
        "model_replied",
        "run_finished",
    ]
    assert len(deltas) == 6
    assert "".join(d.delta.text for d in deltas if isinstance(d.delta, TextDelta)) == (
        "a streamed answer"
    )
    replied = streamed[-2]
    assert isinstance(replied, ModelReplied)
    assert replied.ttft == 0.0


async def test_retries_are_reported_with_error_and_delay(autojump_clock: Any) -> None:
    busy = ModelError(kind=ErrorKind.OVERLOADED, message="busy", retryable=True, retry_after=2.0)
    model = ScriptedModel([busy, "done"], latency=1.0)
    async with open_driver(model, retry=RETRY) as driver, driver.watch(make_loop(0)) as steps:
        events = [e async for e in steps]
    assert names(events) == [
        "run_started",
        "request_queued",
        "request_started",
        "retry_scheduled",
        "request_queued",
        "request_started",
        "model_replied",
        "run_finished",
    ]
    retry = events[3]
    assert isinstance(retry, RetryScheduled)
    assert (retry.attempt, retry.error.kind, retry.delay) == (1, ErrorKind.OVERLOADED, 2.0)
    again = events[5]
    assert isinstance(again, RequestStarted)
    assert (again.attempt, again.at) == (2, 3.0)
    replied = events[6]
    assert isinstance(replied, ModelReplied)
    assert replied.attempts == 2


async def test_a_failed_model_request_ends_with_request_failed_then_run_aborted(
    autojump_clock: Any,
) -> None:
    model = ScriptedModel([ModelError(kind=ErrorKind.AUTH, message="no key")])
    async with open_driver(model) as driver, driver.watch(make_loop(0)) as steps:
        events = [e async for e in steps]
    assert names(events) == [
        "run_started",
        "request_queued",
        "request_started",
        "request_failed",
        "run_aborted",
    ]
    failed, aborted = events[-2], events[-1]
    assert isinstance(failed, RequestFailed)
    assert failed.error.kind is ErrorKind.AUTH
    assert isinstance(aborted, RunAborted)
    assert aborted.status == "failed"
    assert steps.result is not None
    assert steps.result.status == "failed"


async def test_tool_failures_coalesced_and_cached_calls_are_told_apart(
    autojump_clock: Any,
) -> None:
    def policy(call: CallModel) -> str | AssistantMessage:
        if tool_results(call):
            return "done"
        return AssistantMessage(
            tool_calls=[
                ToolCall("a", "cached", '{"key": "x"}'),
                ToolCall("b", "cached", '{"key": "x"}'),
                ToolCall("c", "broken", '{"key": "x"}'),
            ]
        )

    model = ScriptedModel(policy, latency=1.0)
    async with open_driver(model, tools=[cached, broken]) as driver:
        async with driver.watch(make_loop(0, [cached, broken])) as steps:
            first = [e async for e in steps]
        async with driver.watch(make_loop(1, [cached, broken])) as steps:
            second = [e async for e in steps]
    ended = {e.call_id: e for e in first if isinstance(e, ToolEnded)}
    # trio starts the two identical calls in either order: one executes, the other joins it
    assert sorted([ended["a"].source, ended["b"].source]) == ["coalesced", "executed"]
    assert ended["c"].failed
    assert ended["c"].error is not None
    assert ended["c"].error.type == "RuntimeError"
    assert len([e for e in first if isinstance(e, ToolStarted)]) == 3
    again = {e.call_id: e.source for e in second if isinstance(e, ToolEnded)}
    assert again["a"] == again["b"] == "cached"


async def test_every_step_event_encodes_as_json(autojump_clock: Any) -> None:
    busy = ModelError(kind=ErrorKind.OVERLOADED, message="busy", retryable=True)
    replies = iter([busy])

    def policy(call: CallModel) -> Any:
        if call.hints.turn == 0:
            return next(replies, None) or AssistantMessage(
                tool_calls=[ToolCall("a", "lookup", '{"key": "k"}')]
            )
        return "final"

    model = ScriptedModel(policy, latency=1.0)
    async with (
        open_driver(model, tools=[lookup], retry=RETRY) as driver,
        driver.watch(make_loop(0, [lookup]), deltas=True) as steps,
    ):
        events = [e async for e in steps]
    kinds = {type(e) for e in events}
    assert kinds >= {RequestStarted, RetryScheduled, ModelDelta, ModelReplied, ToolStarted}
    assert kinds >= {ToolEnded, RunFinished}
    for event in events:
        decoded = json.loads(dumps(event))
        assert decoded["run"] == 0


async def test_a_slow_consumer_slows_its_own_run_and_no_other(autojump_clock: Any) -> None:
    policy = tool_then_answer("lookup", lambda c: {"key": "k"})

    async def scenario(consumer_delay: float) -> tuple[float, float, int]:
        model = ScriptedModel(policy, latency=1.0, chunk=2)
        async with open_driver(model, tools=[lookup], max_inflight=1) as driver:
            watched_wall = 0.0
            count = 0

            async def watched() -> None:
                nonlocal watched_wall, count
                start = trio.current_time()
                async with driver.watch(make_loop(0, [lookup]), deltas=True, buffer=1) as steps:
                    async for _ in steps:
                        count += 1
                        await trio.sleep(consumer_delay)
                watched_wall = trio.current_time() - start

            others: list[float] = []

            async def other(index: int) -> None:
                result = await driver.run(make_loop(index, [lookup]))
                assert result.status == "ok"
                others.append(result.timings.wall)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(watched)
                for index in range(1, 4):
                    nursery.start_soon(other, index)
            assert driver.limiter.statistics().in_use == 0
        return watched_wall, max(others), count

    fast_watched, fast_others, fast_count = await scenario(0.0)
    slow_watched, slow_others, slow_count = await scenario(5.0)
    assert slow_count == fast_count  # nothing was dropped
    assert slow_watched >= fast_watched + 5.0 * (slow_count - 2)
    assert slow_others <= fast_others  # the other runs did not wait for that consumer


async def test_leaving_the_watch_early_cancels_the_run(autojump_clock: Any) -> None:
    model = ScriptedModel(["never seen"], latency=10.0)
    async with open_driver(model) as driver:
        async with driver.watch(make_loop(0)) as steps:
            async for step in steps:
                if isinstance(step, RequestStarted):
                    break
        assert driver.limiter.statistics().in_use == 0
        assert task_census() == 0
        assert trio.current_time() < 10.0


async def test_a_batch_pushes_every_runs_steps_to_one_sink_in_run_order(
    autojump_clock: Any,
) -> None:
    class Recorder:
        deltas = False

        def __init__(self) -> None:
            self.events: list[StepEvent] = []
            self.settled = 0

        def push(self, event: StepEvent) -> None:
            self.events.append(event)

        async def settle(self) -> None:
            self.settled += 1

    recorder = Recorder()
    model = ScriptedModel(tool_then_answer("lookup", lambda c: {"key": "k"}), latency=1.0)
    async with open_driver(model, tools=[lookup], max_inflight=2) as driver:
        loops = [make_loop(i, [lookup]) for i in range(5)]
        async with driver.stream(loops, steps=recorder) as results:
            done = [r async for r in results]
    assert len(done) == 5
    run_ids = {e.index: e.run for e in recorder.events if isinstance(e, RunStarted)}
    assert sorted(run_ids) == list(range(5))
    assert len(set(run_ids.values())) == 5  # one id per run
    for index in range(5):
        own = [e for e in recorder.events if e.run == run_ids[index]]
        assert names(own) == [
            "run_started",
            "request_queued",
            "request_started",
            "model_replied",
            "tool_started",
            "tool_ended",
            "request_queued",
            "request_started",
            "model_replied",
            "run_finished",
        ]
    assert recorder.settled > 0


async def test_a_deadline_or_a_cancel_ends_the_watched_run_with_run_aborted(
    autojump_clock: Any,
) -> None:
    model = ScriptedModel(["slow", "slow"], latency=10.0)
    async with open_driver(model) as driver:
        async with driver.watch(make_loop(0), deadline=trio.current_time() + 1.0) as steps:
            timed_out = [e async for e in steps]
        async with driver.watch(make_loop(1)) as steps:
            cancelled: list[StepEvent] = []
            async for event in steps:
                cancelled.append(event)
                if isinstance(event, RequestStarted):
                    driver.cancel()
        assert driver.limiter.statistics().in_use == 0
    assert [e.name for e in timed_out] == [
        "run_started",
        "request_queued",
        "request_started",
        "run_aborted",
    ]
    end = timed_out[-1]
    assert isinstance(end, RunAborted)
    assert end.status == "failed"
    assert end.reason.error is not None
    assert end.reason.error.kind is ErrorKind.DEADLINE
    last = cancelled[-1]
    assert isinstance(last, RunAborted)
    assert last.status == "cancelled"
