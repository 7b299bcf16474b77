"""Side effects are not merged silently: identical concurrent calls of a tool run once each
unless the tool is declared a read (``coalesce=True``) or deterministic (``cache=True``)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

import agentcore
from agentcore import ConfigError, Task, run_batch
from agentcore.core import AssistantMessage, CallModel, ToolCall, ToolMessage
from agentcore.testing import ScriptedModel


def _same_call_policy(name: str, arguments: dict[str, Any]) -> Any:
    def policy(call: CallModel) -> AssistantMessage | str:
        results = [m for m in call.messages if isinstance(m, ToolMessage)]
        if results:
            return results[0].content
        return AssistantMessage(tool_calls=[ToolCall("c0", name, orjson.dumps(arguments).decode())])

    return policy


async def _four_agents(tool: agentcore.Tool[..., Any]) -> tuple[list[str | None], int]:
    model = ScriptedModel(_same_call_policy(tool.name, {"to": "ops", "body": "hi"}), latency=1.0)
    task = Task(prompt="Agent {input}", tools=[tool], max_turns=2)
    stats: list[agentcore.ToolExecutorStatistics] = []
    async with agentcore.open_driver(model, tools=[tool]) as driver:
        results = await run_batch(task, range(4), driver=driver)
        stats.append(driver.executor.statistics())
    assert [r.status for r in results] == ["ok"] * 4
    return [r.output for r in results], stats[0].executions


async def test_a_tool_with_side_effects_runs_once_per_call_by_default(
    autojump_clock: object,
) -> None:
    sent: list[str] = []

    @agentcore.tool
    async def send_email(to: str, body: str) -> str:
        """Send an email. Args: to: the address. body: the text."""
        sent.append(to)
        return f"sent #{len(sent)}"

    assert send_email.options.coalesce is False
    outputs, executions = await _four_agents(send_email)
    assert executions == 4
    assert len(sent) == 4
    assert sorted(o or "" for o in outputs) == ["sent #1", "sent #2", "sent #3", "sent #4"]


async def test_a_tool_declared_a_read_shares_one_execution_among_identical_calls(
    autojump_clock: object,
) -> None:
    runs: list[str] = []

    @agentcore.tool(coalesce=True)
    async def lookup(to: str, body: str) -> str:
        """Look up. Args: to: key. body: detail."""
        runs.append(to)
        return "found"

    outputs, executions = await _four_agents(lookup)
    assert executions == 1
    assert outputs == ["found"] * 4


async def test_a_cached_tool_is_coalesced_without_saying_so(autojump_clock: object) -> None:
    @agentcore.tool(cache=True)
    async def lookup(to: str, body: str) -> str:
        """Look up. Args: to: key. body: detail."""
        return "found"

    assert lookup.options.coalesce is True
    _, executions = await _four_agents(lookup)
    assert executions == 1


def test_caching_a_tool_that_may_not_be_coalesced_is_refused() -> None:
    with pytest.raises(ConfigError, match="cache=True needs coalesce=True"):

        @agentcore.tool(cache=True, coalesce=False)
        def now() -> str:
            """The time."""
            return "12:00"
