"""The one-agent surface: Agent.run and Agent.watch on ScriptedModel and sim://."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio

import agentcore
from agentcore import Agent, ConfigError, ModelDelta, RunFinished, open_driver, tool
from agentcore.core import AssistantMessage, CallModel, SystemMessage, ToolCall, UserMessage
from agentcore.testing import ScriptedModel
from tests.driver.helpers import tool_results


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


@attrs.frozen
class Sum:
    value: int


def calculator(call: CallModel) -> str | AssistantMessage:
    results = tool_results(call)
    if not results:
        return AssistantMessage(tool_calls=[ToolCall("c1", "add", '{"a": 2, "b": 3}')])
    return f'{{"value": {results[0].content}}}'


async def test_agent_run_answers_with_its_tool_and_output_type(autojump_clock: Any) -> None:
    agent = Agent(instructions="You are a calculator.", tools=[add], output=Sum)
    model = ScriptedModel(calculator, latency=1.0)
    async with open_driver(model, tools=agent.tools) as driver:
        result = await agent.run("What is 2 + 3?", driver=driver)
    assert result.status == "ok"
    assert result.output == Sum(5)
    first = model.calls[0].messages
    assert isinstance(first[0], SystemMessage)
    assert first[0].content.startswith("You are a calculator.")
    assert first[1] == UserMessage("What is 2 + 3?")
    assert model.calls[0].hints.session_id.startswith("agent-")


async def test_agent_watch_streams_its_steps_and_text(autojump_clock: Any) -> None:
    agent = Agent(tools=[add], output=Sum)
    model = ScriptedModel(calculator, latency=1.0, chunk=3)
    async with (
        open_driver(model, tools=agent.tools) as driver,
        agent.watch("2 + 3?", driver=driver, deltas=True) as steps,
    ):
        events = [e async for e in steps]
    text = "".join(e.text for e in events if isinstance(e, ModelDelta))
    assert text == '{"value": 5}'
    assert isinstance(events[-1], RunFinished)
    assert steps.result is not None
    assert steps.result.output == Sum(5)


async def test_many_agents_run_at_once_on_one_driver(autojump_clock: Any) -> None:
    agent = Agent(tools=[add], output=Sum)
    model = ScriptedModel(calculator, latency=1.0)
    results: list[Any] = []
    async with open_driver(model, tools=agent.tools, max_inflight=4) as driver:

        async def one(n: int) -> None:
            results.append(await agent.run(f"question {n}", driver=driver))

        async with trio.open_nursery() as nursery:
            for n in range(10):
                nursery.start_soon(one, n)
    assert [r.output for r in results] == [Sum(5)] * 10
    assert len({c.hints.session_id for c in model.calls}) == 10
    assert model.peak_in_flight == 4


async def test_agent_on_a_driver_without_its_tools_is_a_config_error() -> None:
    agent = Agent(tools=[add])
    async with open_driver(ScriptedModel(["x"])) as driver:
        with pytest.raises(ConfigError, match=r"tools=agent\.tools"):
            await agent.run("hi", driver=driver)
        with pytest.raises(ConfigError):
            await agent.run(42, driver=driver)  # type: ignore[arg-type]


def test_agent_budgets_are_checked_when_it_is_made() -> None:
    with pytest.raises(ConfigError):
        Agent(max_turns=-1)
    with pytest.raises(ConfigError):
        Agent(tools=["add"])  # type: ignore[list-item]


async def test_hello_world_on_the_simulator() -> None:
    agent = agentcore.Agent(instructions="You are a careful calculator.", tools=[add])
    async with agentcore.open_driver("sim://", tools=agent.tools) as driver:
        result = await agent.run("What is 2 + 3?", driver=driver)
        async with agent.watch("What is 2 + 3?", driver=driver, deltas=True) as steps:
            names = [step.name async for step in steps]
    assert result.status == "ok"
    assert result.turns == 2  # the simulated model called the tool, then answered
    assert names[:3] == ["run_started", "request_queued", "request_started"]
    assert "tool_ended" in names
    assert "model_delta" in names
    assert names[-1] == "run_finished"


async def test_an_agent_with_planning_plans_first_and_keeps_the_plan(autojump_clock: Any) -> None:
    agent = Agent(tools=[add], output=Sum, planning_interval=1)

    def policy(call: CallModel) -> str | AssistantMessage:
        if call.params.tool_choice == "none":
            return "Plan: add 2 and 3 with the tool."
        return calculator(call)

    model = ScriptedModel(policy, latency=1.0)
    async with open_driver(model, tools=agent.tools) as driver:
        result = await agent.run("2 + 3?", driver=driver)
    assert result.output == Sum(5)
    assert result.turns == 4  # plan, tool turn, plan, answer
    plans = [
        m for m in result.transcript if m == AssistantMessage("Plan: add 2 and 3 with the tool.")
    ]
    assert len(plans) == 2
    assert [c.params.tool_choice for c in model.calls] == ["none", None, "none", None]
    assert all(c.tools == model.calls[0].tools for c in model.calls)
