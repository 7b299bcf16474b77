"""Usage budgets through the driver and the batch layer: per run, per batch, finish or cancel."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore import (
    AbortKind,
    Budget,
    ConfigError,
    Result,
    Task,
    UsageLimits,
    open_driver,
    run_batch,
)
from agentcore.core import AssistantMessage, CallModel, ToolCall, ToolMessage
from agentcore.testing import ScriptedModel
from tests.driver.helpers import agent_of, make_loop, task_census, tool_results, tool_then_answer
from tests.driver.test_batches import nap_tool


def budget_of(result: Result) -> Any:
    assert result.error is not None
    assert result.error.kind is AbortKind.BUDGET_EXHAUSTED, result.error
    return result.error.budget


async def test_a_spent_batch_budget_starts_no_new_run_and_sends_no_request_past_it(
    autojump_clock: Any,
) -> None:
    nap = nap_tool(1.0)
    # Every agent makes two requests (a tool turn, then the answer), one agent at a time.
    model = ScriptedModel(tool_then_answer("nap", lambda call: {"key": "k"}), latency=1.0)
    async with (
        open_driver(model, tools=[nap]) as driver,
        driver.stream(
            (make_loop(i, [nap]) for i in range(5)),
            max_active=1,
            budget=UsageLimits(requests=3),
        ) as results,
    ):
        received = sorted([r async for r in results], key=lambda r: r.index)
    # Agent 0 uses 2 requests; agent 1 starts (2 < 3) and sends its first request (the 3rd);
    # its second would pass the limit, so it is not sent and agent 1 ends on the budget; no
    # agent starts after it.
    assert [r.status for r in received] == ["ok", "failed", "failed", "failed", "failed"]
    assert len(model.calls) == 3
    assert received[1].turns == 1
    for result in received[1:]:
        exceeded = budget_of(result)
        assert (exceeded.budget, exceeded.scope, exceeded.limit, exceeded.used) == (
            Budget.REQUESTS,
            "batch",
            3,
            3,
        )
    for result in received[2:]:
        assert result.turns == 0
        assert result.transcript[0].content == f"task {result.index}"  # type: ignore[union-attr]
    assert driver.statistics().runs_failed == 4


async def test_a_spent_batch_budget_in_cancel_mode_ends_the_running_agents_at_once(
    autojump_clock: Any,
) -> None:
    nap = nap_tool(5.0)
    model = ScriptedModel(
        tool_then_answer("nap", lambda call: {"key": call.request_id}), latency=1.0
    )
    async with open_driver(model, tools=[nap]) as driver:
        baseline = task_census()
        async with driver.stream(
            (make_loop(i, [nap]) for i in range(5)),
            budget=UsageLimits(tool_calls=3),
            on_budget="cancel",
        ) as results:
            received = [r async for r in results]
            ended = trio.current_time()
        assert task_census() == baseline
        assert driver.limiter.statistics().in_use == 0
        assert driver.executor.statistics().flights == 0
    # All five first requests end at t=1; three tool calls start, the fourth is refused and
    # every agent ends there, without waiting for the naps.
    assert ended == 1.0
    assert driver.executor.statistics().requests == 3
    assert len(received) == 5
    for result in received:
        assert result.status == "failed"
        exceeded = budget_of(result)
        assert (exceeded.budget, exceeded.scope) == (Budget.TOOL_CALLS, "batch")


def three_naps_then_answer(call: CallModel) -> str | AssistantMessage:
    """One ``nap`` call per turn for three turns, then the answer (at once when the request
    withholds the tools: the final one)."""
    done = tool_results(call)
    if call.params.tool_choice == "none" or len(done) >= 3:
        return f"answer after {len(done)} results"
    key = f"{agent_of(call)}-{len(done)}"
    return AssistantMessage(
        tool_calls=(ToolCall(f"call_{len(done)}", "nap", f'{{"key": "{key}"}}'),)
    )


async def test_a_batch_tool_call_budget_in_finish_mode_is_an_exact_count_and_refused_agents_answer(
    autojump_clock: Any,
) -> None:
    log: list[str] = []
    nap = nap_tool(1.0, log)
    model = ScriptedModel(three_naps_then_answer, latency=1.0)
    task = Task(prompt="go {input}", tools=[nap])
    results = await run_batch(
        task, range(10), backend=model, budget=UsageLimits(tool_calls=15), on_budget="finish"
    )
    # Ten agents want 30 calls; exactly 15 run. An agent whose call found no room sees why
    # as that call's result, and its next request is the final one: it still answers.
    assert len(log) == 15
    assert [r.status for r in results] == ["ok"] * 10
    refused = [
        m
        for r in results
        for m in r.transcript
        if isinstance(m, ToolMessage) and "was not run" in m.content
    ]
    assert len(refused) == 10
    assert all(
        m.is_error and "tool_calls ran out (15 used, limit 15)" in m.content for m in refused
    )
    assert all(r.tool_failures.total == 0 for r in results)
    finals = [c for c in model.calls if c.params.tool_choice == "none"]
    assert len(finals) == 10  # every agent was refused once, then asked for its answer
    assert sorted(len(tool_results(c)) for c in finals) == [2] * 5 + [3] * 5


async def test_a_request_whose_prompt_alone_passes_a_token_budget_is_never_sent(
    autojump_clock: Any,
) -> None:
    model = ScriptedModel(
        tool_then_answer("nap", lambda call: {"key": "k"}), latency=lambda c: 1.0 + len(c.messages)
    )
    nap = nap_tool(1.0)
    async with open_driver(model, tools=[nap]) as driver:
        results = [
            r
            async for r in _stream_all(
                driver, [make_loop(i, [nap]) for i in range(3)], UsageLimits(input_tokens=1)
            )
        ]
    assert {r.status for r in results} == {"failed"}
    assert {budget_of(r).budget for r in results} == {Budget.INPUT_TOKENS}
    assert model.calls == []  # no prompt fits a one-token budget: nothing was sent


async def _stream_all(driver: Any, loops: list[Any], budget: UsageLimits) -> Any:
    async with driver.stream(loops, budget=budget, on_budget="cancel") as results:
        async for result in results:
            yield result


async def test_a_task_limit_ends_each_agent_on_its_own_budget(autojump_clock: Any) -> None:
    nap = nap_tool(1.0)
    model = ScriptedModel(tool_then_answer("nap", lambda call: {"key": "k"}, calls_per_turn=2))
    task = Task(prompt="go {input}", tools=[nap], limits=UsageLimits(tool_calls=1))
    results = await run_batch(task, [1, 2], backend=model)
    for result in results:
        exceeded = budget_of(result)
        assert (exceeded.budget, exceeded.scope, exceeded.limit, exceeded.used) == (
            Budget.TOOL_CALLS,
            "run",
            1,
            2,
        )


async def test_a_batch_budget_through_run_batch(autojump_clock: Any) -> None:
    model = ScriptedModel(lambda call: "done")
    task = Task(prompt="go {input}")
    results = await run_batch(
        task, range(4), backend=model, max_active=1, budget=UsageLimits(requests=2)
    )
    assert [r.status for r in results] == ["ok", "ok", "failed", "failed"]
    assert budget_of(results[2]).scope == "batch"


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"budget": {"requests": 1}}, "UsageLimits"),
        ({"budget": UsageLimits(requests=1), "on_budget": "stop"}, "on_budget"),
    ],
)
async def test_bad_budget_options_are_config_errors(options: dict[str, Any], match: str) -> None:
    model = ScriptedModel(lambda call: "done")
    async with open_driver(model) as driver:
        with pytest.raises(ConfigError, match=match):
            async with driver.stream([make_loop(0)], **options):
                pass


# ----------------------------------------------------------------------------- properties

PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def run_virtual(scenario: Any) -> Any:
    async def bounded() -> Any:
        with trio.fail_after(100_000):
            return await scenario()

    return trio.run(bounded, clock=trio.testing.MockClock(autojump_threshold=0))


@PROPERTY
@given(
    agents=st.integers(1, 8),
    calls_per_turn=st.integers(1, 3),
    requests=st.none() | st.integers(0, 12),
    tool_calls=st.none() | st.integers(0, 12),
    mode=st.sampled_from(["finish", "cancel"]),
    max_active=st.none() | st.integers(1, 3),
)
def test_a_batch_in_either_mode_never_starts_past_its_count_limits_and_every_input_reports(
    *,
    agents: int,
    calls_per_turn: int,
    requests: int | None,
    tool_calls: int | None,
    mode: str,
    max_active: int | None,
) -> None:
    nap = nap_tool(1.0)
    model = ScriptedModel(
        tool_then_answer(
            "nap", lambda call: {"key": call.request_id}, calls_per_turn=calls_per_turn
        ),
        latency=lambda call: 1.0 + agent_of(call) % 3,
    )
    limits = UsageLimits(requests=requests, tool_calls=tool_calls)

    async def scenario() -> tuple[list[Result], int]:
        async with open_driver(model, tools=[nap]) as driver:
            baseline = task_census()
            async with driver.stream(
                (make_loop(i, [nap]) for i in range(agents)),
                budget=limits,
                on_budget=mode,  # type: ignore[arg-type]
                max_active=max_active,
            ) as results:
                received = [r async for r in results]
            assert task_census() == baseline
            assert driver.limiter.statistics().in_use == 0
            return received, driver.executor.statistics().requests

    received, tools_run = run_virtual(scenario)
    assert sorted(r.index for r in received) == list(range(agents))
    assert requests is None or len(model.calls) <= requests
    assert tool_calls is None or tools_run <= tool_calls
    for result in received:
        assert result.status in ("ok", "failed")
        if result.status == "failed":
            assert budget_of(result).scope == "batch"
    if (requests is None or requests >= 2 * agents) and (
        tool_calls is None or tool_calls >= calls_per_turn * agents
    ):
        assert all(r.status == "ok" for r in received)


@pytest.mark.parametrize("on_budget", ["finish", "cancel"])
async def test_a_batch_passes_a_token_budget_only_by_what_in_flight_requests_use_past_reservations(
    autojump_clock: Any, on_budget: str
) -> None:
    # 200 agents with a 2,000-token batch budget (each agent needs about 20), 8 slots. Each
    # request's tokens are reserved
    # before it is sent (its prompt estimated, its reply at the batch's mean so far), so the
    # batch passes the limit at most by what the requests in flight use beyond their
    # reservations: here at most a reply's tokens plus one prompt token each (the scripted
    # model counts about four characters per token, as the estimate does).
    nap = nap_tool(1.0)
    model = ScriptedModel(tool_then_answer("nap", lambda call: {"key": "k"}), latency=1.0)
    slots = 8
    async with (
        open_driver(model, tools=[nap], max_inflight=slots) as driver,
        driver.stream(
            (make_loop(i, [nap]) for i in range(200)),
            budget=UsageLimits(total_tokens=2_000),
            on_budget=on_budget,  # type: ignore[arg-type]
        ) as results,
    ):
        received = [r async for r in results]
    used = sum(r.usage.prompt_tokens + r.usage.completion_tokens for r in received)
    largest_reply = max(r.usage.completion_tokens for r in received if r.turns)
    assert used <= 2_000 + slots * (largest_reply + 1)
    assert used > 2_000 - 2 * slots * 20  # the budget was spent, not refused early
    assert any(r.status == "ok" for r in received)
    refused = [r for r in received if r.status == "failed"]
    assert refused
    assert {budget_of(r).budget for r in refused} == {Budget.TOTAL_TOKENS}
    assert driver.limiter.statistics().in_use == 0
