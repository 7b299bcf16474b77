"""``Agent`` is a peer of ``Task``: per-call ``deps`` (run and watch) reach the tools'
RunContext, and the task's budgets and final-turn settings mean the same on an agent."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import agentcore
from agentcore import AbortKind, AbortReason, Agent, RunContext, Task, UsageLimits, open_driver
from agentcore.core import AssistantMessage, CallModel, ToolCall, UserMessage
from agentcore.testing import ScriptedModel
from tests.driver.helpers import tool_then_answer


@agentcore.tool
async def whose(ctx: RunContext[str]) -> str:
    """Whose request this is."""
    await trio.sleep(1.0)  # both runs are in their tool call at once
    return f"deps={ctx.deps}"


@agentcore.tool
def broken() -> str:
    """Always fails."""
    raise RuntimeError("disk on fire")


def _model(name: str = "whose") -> ScriptedModel:
    return ScriptedModel(tool_then_answer(name, lambda call: {}), latency=1.0)


async def test_each_run_of_a_shared_driver_gets_its_own_deps(autojump_clock: Any) -> None:
    agent = Agent(tools=[whose], max_turns=2)
    outputs: dict[str, Any] = {}

    async def ask(user: str) -> None:
        result = await agent.run("who?", driver=driver, deps=user)
        outputs[user] = result.output

    async with open_driver(_model(), tools=agent.tools, deps="the driver's") as driver:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, "alice")
            nursery.start_soon(ask, "bob")
        fallback = await agent.run("who?", driver=driver)
    assert outputs == {"alice": "answer: deps=alice", "bob": "answer: deps=bob"}
    assert fallback.output == "answer: deps=the driver's"


async def test_a_watched_agent_gets_its_own_deps(autojump_clock: Any) -> None:
    agent = Agent(tools=[whose], max_turns=2)
    async with (
        open_driver(_model(), tools=agent.tools, deps="the driver's") as driver,
        agent.watch("who?", driver=driver, deps="carol") as steps,
    ):
        names = [step.name async for step in steps]
    assert names and steps.result is not None
    assert steps.result.output == "answer: deps=carol"


async def test_an_agents_limits_bound_each_run(autojump_clock: Any) -> None:
    agent = Agent(tools=[whose], max_turns=3, limits=UsageLimits(requests=1))
    async with open_driver(_model(), tools=agent.tools) as driver:
        result = await agent.run("who?", driver=driver)
    assert result.status == "failed"
    assert isinstance(result.error, AbortReason)
    assert result.error.kind is AbortKind.BUDGET_EXHAUSTED


async def test_an_agent_fails_when_its_tools_keep_failing(autojump_clock: Any) -> None:
    agent = Agent(tools=[broken], max_turns=3, max_tool_failures=0)
    async with open_driver(_model("broken"), tools=agent.tools) as driver:
        result = await agent.run("go", driver=driver)
    assert result.status == "failed"
    assert isinstance(result.error, AbortReason)
    assert result.error.kind is AbortKind.TOOL_FAILURES


async def test_an_agents_final_instruction_is_the_forced_last_request(
    autojump_clock: Any,
) -> None:
    def always_a_tool(call: CallModel) -> str | AssistantMessage:
        if not call.tools or call.params.tool_choice == "none":
            return "done"
        return AssistantMessage(tool_calls=[ToolCall(f"c{len(call.messages)}", "whose", "{}")])

    model = ScriptedModel(always_a_tool, latency=1.0)
    agent = Agent(tools=[whose], max_turns=1, final_instruction="Answer now, in one word.")
    async with open_driver(model, tools=agent.tools) as driver:
        result = await agent.run("who?", driver=driver)
    assert result.output == "done"
    assert model.calls[-1].messages[-1] == UserMessage("Answer now, in one word.")


def test_an_agent_is_the_task_of_the_same_fields() -> None:
    limits = UsageLimits(tool_calls=4)
    agent = Agent(
        instructions="Be brief.",
        tools=[whose],
        max_tool_failures=2,
        expected_output_tokens=50,
        final_instruction=None,
        on_truncated="fail",
        limits=limits,
        name="helper",
    )
    assert agent.task == Task(
        prompt="{input}",
        system="Be brief.",
        tools=[whose],
        max_tool_failures=2,
        expected_output_tokens=50,
        final_instruction=None,
        on_truncated="fail",
        limits=limits,
        name="helper",
    )


def test_an_agents_fields_are_checked_as_a_tasks_are() -> None:
    with pytest.raises(agentcore.ConfigError):
        Agent(on_truncated="shrug")  # type: ignore[arg-type]
