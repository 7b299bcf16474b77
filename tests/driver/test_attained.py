"""The ``attained`` slot policy through the driver, in virtual time: the least served agents are
served first, and the request's priority hint carries the same order to the server."""

from __future__ import annotations

import json
import statistics
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import agentcore
from agentcore import Usage, open_driver, tool
from agentcore._driver.requests import least_served_first
from agentcore.core import AssistantMessage, CallModel, ModelResponded, ToolCall
from agentcore.testing import ScriptedModel
from tests.codecs.openai_helpers import codec, tool_turn_call
from tests.driver.helpers import agent_of, make_loop, tool_results

TOKENS = 10
"""Completion tokens of every scripted reply."""


def run_virtual(scenario: Any) -> Any:
    async def bounded() -> Any:
        with trio.fail_after(100_000):
            return await scenario()

    return trio.run(bounded, clock=trio.testing.MockClock(autojump_threshold=0))


@tool
async def step(n: int) -> str:
    """One step of work.

    Args:
        n: the step.
    """
    await trio.sleep(0.25)
    return f"step {n}"


def turns_policy(turns: dict[int, int]) -> Any:
    """Agent ``i`` calls ``step`` until it has made ``turns[i]`` requests, then answers; every
    reply is ``TOKENS`` completion tokens."""

    def policy(call: CallModel) -> ModelResponded:
        done = len(tool_results(call))
        if done + 1 >= turns[agent_of(call)]:
            message = AssistantMessage("done")
        else:
            message = AssistantMessage(
                tool_calls=(ToolCall(f"c{done}", "step", f'{{"n": {done}}}'),)
            )
        return ModelResponded(call.request_id, message, Usage(5, TOKENS), "stop")

    return policy


async def batch(
    policy: str, turns: dict[int, int], starts: dict[int, float], slots: int
) -> dict[str, Any]:
    """Run the agents (agent ``i`` starts at ``starts.get(i, 0)``) on a one-second model;
    returns the time each agent ended and the calls the model saw."""
    model = ScriptedModel(turns_policy(turns), latency=1.0)
    ended: dict[int, float] = {}
    async with open_driver(model, tools=[step], max_inflight=slots, slot_policy=policy) as driver:

        async def agent(index: int) -> None:
            await trio.sleep(starts.get(index, 0.0))
            result = await driver.run(make_loop(index, [step], max_turns=20))
            assert result.status == "ok", result.error
            ended[index] = trio.current_time()

        async with trio.open_nursery() as nursery:
            for index in turns:
                nursery.start_soon(agent, index)
    return {"ended": ended, "calls": model.calls}


def test_attained_sends_each_request_with_minus_the_tokens_its_run_received_as_priority() -> None:
    turns = {0: 5, 1: 1, 2: 3}
    out = run_virtual(lambda: batch("attained", turns, {}, 2))
    seen: dict[int, int] = {}
    for call in out["calls"]:
        agent = agent_of(call)
        assert call.hints.priority == -TOKENS * seen.get(agent, 0)
        seen[agent] = seen.get(agent, 0) + 1
    assert seen == turns


def test_priority_hints_are_left_alone_under_the_other_policies() -> None:
    turns = {0: 3, 1: 2}
    out = run_virtual(lambda: batch("fifo", turns, {}, 1))
    assert [c.hints.priority for c in out["calls"] if agent_of(c) == 0] == [0, 1, 2]


def test_attained_lets_short_agents_that_arrive_late_overtake_long_ones() -> None:
    long_agents = dict.fromkeys(range(4), 8)
    short_agents = dict.fromkeys(range(4, 10), 1)
    turns = long_agents | short_agents
    late = dict.fromkeys(short_agents, 1.5)
    outcomes = {
        policy: run_virtual(lambda policy=policy: batch(policy, turns, late, 2))
        for policy in ("fifo", "attained")
    }
    short_mean = {
        policy: statistics.mean(out["ended"][i] for i in short_agents)
        for policy, out in outcomes.items()
    }
    # Short agents arriving while long ones cycle wait behind them under FIFO, not under
    # attained service: they have received nothing yet.
    assert short_mean["attained"] < short_mean["fifo"]
    # Six one-turn agents arriving at 1.5 s take the two slots as they free (t = 2, 3, 4)
    # and are done a second later.
    assert sorted(outcomes["attained"]["ended"][i] for i in short_agents) == [3, 3, 4, 4, 5, 5]
    # The same work is done either way.
    assert len(outcomes["fifo"]["calls"]) == len(outcomes["attained"]["calls"]) == 38


def sojourns(policy: str, turns: dict[int, int], starts: dict[int, float]) -> dict[int, float]:
    """Each agent's completion time, from its own start, on one slot."""
    out = run_virtual(lambda: batch(policy, turns, starts, 1))
    return {i: end - starts.get(i, 0.0) for i, end in out["ended"].items()}


def test_attained_makes_a_long_agent_wait_for_the_short_ones_that_keep_arriving() -> None:
    # One agent of six requests, and a one-request agent arriving every second from t=0.5:
    # under attained service each newcomer goes before the long agent's next request.
    turns = {0: 6} | dict.fromkeys(range(1, 9), 1)
    starts = {i: i - 0.5 for i in range(1, 9)}
    fifo, attained = sojourns("fifo", turns, starts), sojourns("attained", turns, starts)
    assert [attained[i] for i in range(1, 9)] == [1.5] * 8  # each waits for one request only
    assert statistics.mean(attained[i] for i in range(1, 9)) < statistics.mean(
        fifo[i] for i in range(1, 9)
    )
    assert attained[0] > fifo[0]


def test_attained_can_make_an_agent_one_request_from_its_end_wait_behind_a_long_newcomer() -> None:
    # Agent 0 (two requests) is back from its tool at 1.25 while agent 1 holds the slot; agent
    # 2 (four requests) arrives at 1.3. FIFO serves agent 0's last request first, attained
    # service the newcomer (it has received nothing): agent 0 ends a second later, agent 2
    # only 0.25 s sooner, and the mean completion time rises.
    turns, starts = {0: 2, 1: 1, 2: 4}, {0: 0.0, 1: 0.1, 2: 1.3}
    fifo, attained = sojourns("fifo", turns, starts), sojourns("attained", turns, starts)
    assert fifo == pytest.approx({0: 3.0, 1: 1.9, 2: 6.45})
    assert attained == pytest.approx({0: 4.0, 1: 1.9, 2: 6.2})
    assert statistics.mean(attained.values()) > statistics.mean(fifo.values())


@pytest.mark.parametrize("policy", ["fifo", "attained"])
def test_agents_started_at_once_have_every_first_request_served_before_any_second(
    policy: str,
) -> None:
    # Why attained service changes little on an offline batch: FIFO gives the same start.
    turns = {i: 8 if i % 4 == 0 else 1 + i % 2 for i in range(16)}
    out = run_virtual(lambda: batch(policy, turns, {}, 2))
    seen: dict[int, int] = {}
    order = []
    for call in out["calls"]:
        agent = agent_of(call)
        seen[agent] = seen.get(agent, 0) + 1
        order.append(seen[agent])
    assert order[:16] == [1] * 16
    assert 1 not in order[16:]


def test_attained_changes_nothing_while_no_request_waits_for_a_slot() -> None:
    # Each agent is done before the next arrives: no line, no order to change.
    turns, starts = {0: 6, 1: 1, 2: 3}, {0: 0.0, 1: 20.0, 2: 40.0}
    fifo = run_virtual(lambda: batch("fifo", turns, starts, 1))
    attained = run_virtual(lambda: batch("attained", turns, starts, 1))
    assert fifo["ended"] == attained["ended"] == {0: 7.25, 1: 21.0, 2: 43.5}


@settings(max_examples=25, deadline=None)
@given(
    st.dictionaries(st.integers(0, 7), st.integers(1, 6), min_size=1, max_size=8),
    st.integers(1, 3),
)
def test_attained_finishes_every_agent_and_each_request_carries_its_runs_service(
    turns: dict[int, int], slots: int
) -> None:
    out = run_virtual(lambda: batch("attained", turns, {}, slots))
    per_agent: dict[int, list[int]] = {}
    for call in out["calls"]:
        per_agent.setdefault(agent_of(call), []).append(-call.hints.priority)
    assert set(out["ended"]) == set(turns)
    for agent, services in per_agent.items():
        assert services == [TOKENS * n for n in range(turns[agent])]


@pytest.mark.parametrize("policy", ["fifo", "priority", "attained"])
def test_every_slot_policy_is_accepted_by_open_driver(policy: str) -> None:
    async def scenario() -> str:
        async with open_driver(ScriptedModel(["hi"]), slot_policy=policy) as driver:
            return driver.limiter.policy

    assert run_virtual(scenario) == policy


@pytest.mark.parametrize(
    ("dialect", "on_the_wire"),
    [("vllm", 30), ("sim", 30), ("sglang", -30), ("dynamo", -30)],
)
def test_the_attained_order_reaches_each_engine_in_its_own_direction(
    dialect: str, on_the_wire: int
) -> None:
    """A run that has received 30 tokens: vLLM (lower first) gets 30, SGLang and Dynamo
    (higher first) get -30, so less service is served sooner everywhere."""
    call = least_served_first(tool_turn_call(), 30)
    body = json.loads(codec(dialect, priority=True).encode(call).body)
    sent = body["nvext"]["agent_hints"]["priority"] if dialect == "dynamo" else body["priority"]
    assert sent == on_the_wire


def test_run_batch_takes_the_attained_policy() -> None:
    turns = {0: 3, 1: 1, 2: 2}

    async def scenario() -> list[CallModel]:
        model = ScriptedModel(turns_policy(turns), latency=1.0)
        task = agentcore.Task(prompt="task {n}", tools=[step], max_turns=5)
        results = await agentcore.run_batch(
            task, [{"n": i} for i in turns], backend=model, slot_policy="attained"
        )
        assert [r.status for r in results] == ["ok"] * len(turns)
        return model.calls

    calls = run_virtual(scenario)
    assert sorted(c.hints.priority for c in calls) == [-20, -10, -10, 0, 0, 0]
