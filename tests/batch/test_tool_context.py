"""Tools that know which run they serve: a ``RunContext`` parameter with the run's index,
input, ids and the user's ``deps``, kept out of the schema and of the coalescing key."""

from __future__ import annotations

from typing import Any

import attrs
import orjson
import pytest
import trio

import agentcore
from agentcore import ConfigError, RunContext, Task, open_batch, run_batch
from agentcore.core import AssistantMessage, CallModel, ToolCall, ToolMessage
from agentcore.testing import ScriptedModel


@attrs.define
class Approvals:
    """A user's dependency: one approval event per run, set by a human elsewhere."""

    granted: dict[int, trio.Event] = attrs.field(factory=dict)
    seen: list[tuple[int, str, Any]] = attrs.field(factory=list)

    def event(self, index: int) -> trio.Event:
        return self.granted.setdefault(index, trio.Event())


@agentcore.tool
async def approve(ctx: RunContext[Approvals], request: str) -> str:
    """Ask a human to approve a request.

    Args:
        request: what to approve.
    """
    ctx.deps.seen.append((ctx.index, ctx.run_id, ctx.input))
    await ctx.deps.event(ctx.index).wait()
    return f"approved for run {ctx.index}: {request}"


def _call_then_echo(name: str, arguments: dict[str, Any]) -> Any:
    def policy(call: CallModel) -> AssistantMessage | str:
        results = [m for m in call.messages if isinstance(m, ToolMessage)]
        if results:
            return results[0].content
        return AssistantMessage(tool_calls=[ToolCall("c0", name, orjson.dumps(arguments).decode())])

    return policy


def test_the_context_parameter_is_not_in_the_schema_or_the_validator() -> None:
    assert approve.takes_context
    assert approve.spec.parameters["properties"].keys() == {"request"}
    assert approve.spec.parameters["required"] == ["request"]
    assert [f.name for f in attrs.fields(approve.arguments_type)] == ["request"]


def test_two_context_parameters_are_refused() -> None:
    with pytest.raises(ConfigError, match="two RunContext parameters"):

        @agentcore.tool
        def both(a: RunContext, b: RunContext[int], x: int) -> str:
            """Both."""
            return ""


async def test_each_run_gets_its_own_index_input_and_the_batch_deps(
    autojump_clock: object,
) -> None:
    deps = Approvals()
    model = ScriptedModel(_call_then_echo("approve", {"request": "deploy"}), latency=1.0)
    task = Task(prompt="Handle {ticket}", tools=[approve], max_turns=2)
    inputs = [{"ticket": "a"}, {"nothing": 0}, {"ticket": "c"}]
    async with trio.open_nursery() as nursery:

        async def grant_later() -> None:
            await trio.sleep(5)
            deps.event(2).set()
            await trio.sleep(5)
            deps.event(0).set()

        nursery.start_soon(grant_later)
        results = await run_batch(task, inputs, backend=model, deps=deps)
    assert [r.status for r in results] == ["ok", "failed", "ok"]
    assert results[0].output == "approved for run 0: deploy"
    assert results[2].output == "approved for run 2: deploy"
    # The invalid input 1 never ran; the others carry their own input index and input.
    assert sorted((i, inp) for i, _, inp in deps.seen) == [(0, inputs[0]), (2, inputs[2])]
    run_ids = {i: rid for i, rid, _ in deps.seen}
    assert run_ids[0].endswith("-0") and run_ids[2].endswith("-2")


async def test_a_tool_taking_the_context_is_not_coalesced_across_runs_by_default(
    autojump_clock: object,
) -> None:
    served: list[int] = []

    @agentcore.tool
    async def whoami(ctx: RunContext, key: str) -> str:
        """Who asks. Args: key: a key."""
        served.append(ctx.index)
        await trio.sleep(1)
        return f"run {ctx.index}"

    model = ScriptedModel(_call_then_echo("whoami", {"key": "same"}), latency=1.0)
    task = Task(prompt="{input}", tools=[whoami], max_turns=2)
    results = await run_batch(task, range(3), backend=model)
    assert [r.output for r in results] == ["run 0", "run 1", "run 2"]
    assert sorted(served) == [0, 1, 2]


async def test_a_coalesced_context_tool_keyed_on_no_context_field_shares_the_leaders_execution(
    autojump_clock: object,
) -> None:
    served: list[int] = []

    # It says its result depends on no context field; undeclared, it would be refused.
    @agentcore.tool(coalesce=True, cache=False, replay_safe=())
    async def shared(ctx: RunContext, key: str) -> str:
        """Shared. Args: key: a key."""
        served.append(ctx.index)
        await trio.sleep(1)
        return f"served by run {ctx.index}"

    model = ScriptedModel(_call_then_echo("shared", {"key": "same"}), latency=1.0)
    task = Task(prompt="{input}", tools=[shared], max_turns=2)
    results = await run_batch(task, range(3), backend=model)
    assert len(served) == 1
    assert {r.output for r in results} == {f"served by run {served[0]}"}


async def test_driver_deps_reach_tools_of_direct_runs_and_batch_deps_override_them(
    autojump_clock: object,
) -> None:
    seen: list[Any] = []

    @agentcore.tool
    def note(ctx: RunContext[str], text: str) -> str:
        """Note. Args: text: the note."""
        seen.append((ctx.deps, ctx.input))
        return "ok"

    model = ScriptedModel(_call_then_echo("note", {"text": "x"}), latency=1.0)
    task = Task(prompt="{input}", tools=[note], max_turns=2)
    async with agentcore.open_driver(model, tools=[note], deps="driver deps") as driver:
        await run_batch(task, ["in"], driver=driver)
        async with open_batch(task, ["in2"], driver=driver, deps="batch deps") as stream:
            [r async for r in stream]
    assert seen == [("driver deps", "in"), ("batch deps", "in2")]
