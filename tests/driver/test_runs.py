"""Driving single agents with ScriptedModel under a MockClock: effects, retries, deadlines."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import agentcore
from agentcore import AbortKind, ErrorKind, ModelError, RetryPolicy, Usage, open_driver, tool
from agentcore.core import (
    AgentLoop,
    AssistantMessage,
    CallModel,
    ModelResponded,
    ToolCall,
    UserMessage,
)
from agentcore.testing import ScriptedModel
from tests.driver.helpers import agent_of, make_loop, tool_results, tool_then_answer


@tool
async def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: what to look up.
    """
    await trio.sleep(2.0)
    return f"value of {key}"


async def test_two_turn_agent_calls_its_tool_and_finishes(autojump_clock: Any) -> None:
    model = ScriptedModel(tool_then_answer("lookup", lambda c: {"key": "k"}), latency=1.0)
    async with open_driver(model, tools=[lookup], max_inflight=4) as driver:
        result = await driver.run(make_loop(0, [lookup]), index=7)
    assert result.status == "ok"
    assert result.index == 7
    assert result.output == "answer: value of k"
    assert result.error is None
    assert result.turns == 2
    assert [m.content for m in tool_results(model.calls[1])] == ["value of k"]
    timings = result.timings
    assert timings.wall == pytest.approx(4.0)
    assert timings.model_time == pytest.approx(2.0)
    assert timings.tool_time == pytest.approx(2.0)
    assert timings.slot_wait == 0.0
    assert timings.attempts == 2
    assert result.usage.prompt_tokens > 0


async def test_parallel_tool_calls_run_at_once_and_results_keep_model_order(
    autojump_clock: Any,
) -> None:
    delays = {"a": 3.0, "b": 1.0, "c": 2.0}

    @tool
    async def wait(key: str) -> str:
        """Wait.

        Args:
            key: which delay.
        """
        await trio.sleep(delays[key])
        return key

    def policy(call: CallModel) -> str | AssistantMessage:
        if tool_results(call):
            return ",".join(m.content for m in tool_results(call))
        return AssistantMessage(
            tool_calls=[ToolCall(f"c{k}", "wait", f'{{"key": "{k}"}}') for k in "abc"]
        )

    model = ScriptedModel(policy)
    async with open_driver(model, tools=[wait]) as driver:
        result = await driver.run(make_loop(0, [wait]))
    assert result.output == "a,b,c"
    assert result.timings.tool_time == pytest.approx(3.0)  # overlapped, not 6 s


async def test_tool_exception_is_reported_to_the_model(autojump_clock: Any) -> None:
    @tool
    def explode(key: str) -> str:
        """Fail.

        Args:
            key: ignored.
        """
        raise ValueError(f"cannot handle {key}")

    model = ScriptedModel(tool_then_answer("explode", lambda c: {"key": "x"}))
    async with open_driver(model, tools=[explode]) as driver:
        result = await driver.run(make_loop(0, [explode]))
    assert result.status == "ok"
    [message] = tool_results(model.calls[1])
    assert message.is_error
    assert "ValueError" in message.content
    assert "cannot handle x" in message.content


async def test_tool_timeout_is_reported_to_the_model(autojump_clock: Any) -> None:
    @tool(timeout=5)
    async def hang(key: str) -> str:
        """Hang.

        Args:
            key: ignored.
        """
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    model = ScriptedModel(tool_then_answer("hang", lambda c: {"key": "x"}))
    async with open_driver(model, tools=[hang]) as driver:
        result = await driver.run(make_loop(0, [hang]))
    assert result.status == "ok"
    [message] = tool_results(model.calls[1])
    assert message.is_error
    assert "timeout" in message.content
    assert result.timings.tool_time == pytest.approx(5.0)


async def test_retry_follows_retry_after_without_holding_a_slot(autojump_clock: Any) -> None:
    limited = ModelError(
        ErrorKind.RATE_LIMITED, "slow down", status=429, retryable=True, retry_after=2.5
    )
    model = ScriptedModel([limited, limited, "fine"], latency=0.5)
    seen_in_use: list[int] = []
    async with open_driver(model, max_inflight=1) as driver:

        async def watch() -> None:
            # Sample the limiter in the middle of each back-off sleep.
            await trio.sleep(0.5 + 1.0)
            seen_in_use.append(driver.limiter.statistics().in_use)
            await trio.sleep(0.5 + 2.5)
            seen_in_use.append(driver.limiter.statistics().in_use)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            start = trio.current_time()
            result = await driver.run(make_loop(0))
            elapsed = trio.current_time() - start
    assert result.status == "ok"
    assert result.timings.attempts == 3
    # Three exchanges of 0.5 s separated by exactly the two 2.5 s waits the server asked for.
    assert elapsed == pytest.approx(3 * 0.5 + 2 * 2.5)
    assert seen_in_use == [0, 0]
    stats = driver.statistics()
    assert stats.attempts == 3
    [request] = stats.recent_requests
    assert request.attempts == 3
    assert request.error is None


async def test_final_model_failure_reaches_the_loop_as_model_failed(autojump_clock: Any) -> None:
    bad = ModelError(ErrorKind.BAD_REQUEST, "malformed", status=400)
    model = ScriptedModel([bad])
    async with open_driver(model) as driver:
        result = await driver.run(make_loop(0))
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.kind is AbortKind.MODEL_FAILED
    assert result.error.error == bad
    assert result.timings.attempts == 1
    assert result.transcript == (UserMessage("task 0"),)


async def test_retries_stop_after_the_attempt_budget(autojump_clock: Any) -> None:
    # A different message each time: an identical one twice is final (test_driver_rejections).
    count = iter(range(100))
    model = ScriptedModel(
        lambda call: ModelError(ErrorKind.SERVER, f"boom {next(count)}", status=500, retryable=True)
    )
    async with open_driver(model, retry=RetryPolicy(max_attempts=4), seed=1) as driver:
        result = await driver.run(make_loop(0))
    assert result.status == "failed"
    assert result.timings.attempts == 4
    assert len(model.calls) == 4
    assert driver.statistics().failed_requests == 1


async def test_deadline_during_a_model_request_fails_the_run_promptly(
    autojump_clock: Any,
) -> None:
    model = ScriptedModel(["never seen"], latency=100.0)
    async with open_driver(model) as driver:
        deadline = trio.current_time() + 3.0
        result = await driver.run(make_loop(0), deadline=deadline)
        assert trio.current_time() == pytest.approx(deadline)
        assert driver.limiter.statistics().in_use == 0
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.kind is AbortKind.MODEL_FAILED
    assert result.error.error is not None
    assert result.error.error.kind is ErrorKind.DEADLINE


async def test_deadline_during_back_off_fails_at_once_with_the_real_error(
    autojump_clock: Any,
) -> None:
    limited = ModelError(ErrorKind.RATE_LIMITED, "later", retryable=True, retry_after=30.0)
    model = ScriptedModel([limited, "too late"], latency=1.0)
    async with open_driver(model) as driver:
        start = trio.current_time()
        result = await driver.run(make_loop(0), deadline=start + 10.0)
        # No point sleeping 30 s with 9 s left: the request fails now with the 429.
        assert trio.current_time() == pytest.approx(start + 1.0)
    assert result.error is not None
    assert result.error.error == limited


async def test_deadline_during_tools_drops_their_late_results(autojump_clock: Any) -> None:
    finished: list[str] = []

    @tool
    async def slow(key: str) -> str:
        """Slow.

        Args:
            key: how slow.
        """
        await trio.sleep(1.0 if key == "fast" else 50.0)
        finished.append(key)
        return key

    def policy(call: CallModel) -> AssistantMessage:
        return AssistantMessage(
            tool_calls=[
                ToolCall("c1", "slow", '{"key": "fast"}'),
                ToolCall("c2", "slow", '{"key": "slow"}'),
            ]
        )

    async with open_driver(ScriptedModel(policy), tools=[slow]) as driver:
        start = trio.current_time()
        result = await driver.run(make_loop(0, [slow]), deadline=start + 5.0)
        assert trio.current_time() == pytest.approx(start + 5.0)
        await trio.sleep(100.0)  # the abandoned execution was cancelled, nothing comes late
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.kind is AbortKind.CANCELLED
    assert finished == ["fast"]
    assert result.timings.tool_time == pytest.approx(5.0)  # interrupted tools count too


async def test_call_model_makes_one_request_through_a_slot_with_retries(
    autojump_clock: Any,
) -> None:
    overloaded = ModelError(ErrorKind.OVERLOADED, "busy", status=529, retryable=True)
    model = ScriptedModel([overloaded, "warm"], latency=1.0)
    async with open_driver(model, seed=3) as driver:
        call = CallModel("warm-1", (UserMessage("prefix"),))
        event = await driver.call_model(call)
        assert isinstance(event, ModelResponded)
        assert event.request_id == "warm-1"
        assert event.message.content == "warm"
        [request] = driver.statistics().recent_requests
    assert request.index is None
    assert request.attempts == 2


async def test_call_model_deadline_gives_a_deadline_failure(autojump_clock: Any) -> None:
    async with open_driver(ScriptedModel(["x"], latency=10.0)) as driver:
        event = await driver.call_model(
            CallModel("r", (UserMessage("hi"),)), deadline=trio.current_time() + 1.0
        )
    assert isinstance(event, agentcore.core.ModelFailed)
    assert event.error.kind is ErrorKind.DEADLINE


async def test_statistics_account_tokens_cache_ratio_and_slot_utilisation(
    autojump_clock: Any,
) -> None:
    def policy(call: CallModel) -> ModelResponded:
        cached = None if agent_of(call) == 2 else 60
        return ModelResponded("", AssistantMessage(content="ok"), Usage(100, 10, cached), "stop")

    model = ScriptedModel(policy, latency=2.0, ttft=0.5)
    async with open_driver(model, max_inflight=4) as driver:
        async with driver.stream(make_loop(i) for i in range(3)) as results:
            statuses = [r.status async for r in results]
        await trio.sleep(2.0)
        stats = driver.statistics()
    assert statuses == ["ok"] * 3
    assert stats.runs == stats.runs_ok == 3
    assert stats.prompt_tokens == 300
    assert stats.completion_tokens == 30
    # Agent 2's server did not say how many tokens were cached: it is left out of the ratio.
    assert stats.cached_tokens == 120
    assert stats.cached_ratio == pytest.approx(0.6)
    assert stats.ttft.count == 3
    # Percentiles come from a sketch, within 1 % of the exact value.
    assert stats.ttft.p50 == pytest.approx(0.5, rel=0.01)
    assert stats.latency.p95 == pytest.approx(2.0, rel=0.01)
    assert stats.latency.max == 2.0
    # 3 slots busy for 2 s out of 4 slots over 4 s.
    assert stats.wall_time == pytest.approx(4.0)
    assert stats.slot_utilisation == pytest.approx(6.0 / 16.0)
    assert stats.slots.peak_in_use == 3
    assert stats.dedup_ratio is None


async def test_an_error_in_the_drivers_block_reaches_the_caller_unwrapped(
    autojump_clock: Any,
) -> None:
    with pytest.raises(KeyError):
        async with open_driver(ScriptedModel([])):
            raise KeyError("mine")
    with pytest.raises(KeyError):
        async with (
            open_driver(ScriptedModel(["a"])) as driver,
            driver.stream([make_loop(0)]) as results,
        ):
            async for _ in results:
                raise KeyError("mine")


async def test_bad_driver_options_raise_config_errors() -> None:
    with pytest.raises(agentcore.ConfigError):
        async with open_driver(ScriptedModel([]), max_inflight=0):
            pass
    with pytest.raises(agentcore.ConfigError):
        async with open_driver(ScriptedModel([]), slot_policy="lifo"):  # type: ignore[arg-type]
            pass
    with pytest.raises(agentcore.ConfigError):
        async with open_driver(ScriptedModel([]), api_key="secret"):
            pass


async def test_a_restored_loop_resumes_with_its_outstanding_tool_calls(
    autojump_clock: Any,
) -> None:
    model = ScriptedModel(tool_then_answer("lookup", lambda c: {"key": "k"}))
    original = make_loop(0, [lookup])
    # Drive the first turn by hand, then snapshot while the tool call is outstanding.
    [first] = original.start()
    assert isinstance(first, CallModel)
    exchange = await model.exchange(first)
    [tool_call] = original.handle(exchange.event)
    assert tool_call.name == "lookup"  # type: ignore[union-attr]
    restored = AgentLoop.restore(original.config, original.snapshot())
    async with open_driver(model, tools=[lookup]) as driver:
        result = await driver.run(restored)
    assert result.status == "ok"
    assert result.output == "answer: value of k"
    assert result.turns == 1  # only the request after the tool was made by the driver
    assert len(model.calls) == 2


async def test_running_a_loop_that_already_ended_is_refused(autojump_clock: Any) -> None:
    async with open_driver(ScriptedModel(["done"])) as driver:
        loop = make_loop(0)
        assert (await driver.run(loop)).status == "ok"
        with pytest.raises(agentcore.core.LocalProtocolError):
            await driver.run(loop)
