"""A typed user program: a type checker must follow each task's output type to its results.

``tests/typecheck/test_py`` runs ``mypy --strict`` over this file and compares every
``reveal_type`` with the ``# revealed:`` comment on its line, and every ``# error:`` comment
with an error mypy reports on that line. It is also executed on the simulated backend, so
the types it states are the ones the program really gets.
"""

from __future__ import annotations

from typing import reveal_type

import attrs
import trio

import agentcore


@attrs.frozen
class Plan:
    items: list[str]


@attrs.frozen
class Finding:
    item: str
    answer: str


@attrs.frozen
class Approvals:
    granted: tuple[str, ...]


@agentcore.tool
def lookup(term: str) -> str:
    """Look a term up. Args: term: what to look up."""
    return f"{term}: found"


@agentcore.tool
def approve(ctx: agentcore.RunContext[Approvals], request: str) -> str:
    """Ask whether a request is approved. Args: request: what to approve."""
    return "approved" if request in ctx.deps.granted else "refused"


PLAN = agentcore.Task(prompt="Plan: {input}", output=Plan, max_turns=1)
MAP = agentcore.Task(prompt="Research: {input}", output=Finding, max_turns=1)
REDUCE = agentcore.Task(prompt="Answers: {answers}", max_turns=1)
LISTS = agentcore.Task(prompt="List: {input}", output=list[str], max_turns=1)
AGENT = agentcore.Agent(output=Finding, max_turns=1)
TEXT_AGENT = agentcore.Agent(max_turns=1)
RESEARCH = agentcore.Task(prompt="Research: {input}", tools=[lookup], output=Finding)
APPROVING = agentcore.Task(prompt="Approve: {input}", tools=[approve], max_turns=2)
# Tools with and without a typed context in one list: the deps type is stated.
MIXED: agentcore.Task[str, Approvals] = agentcore.Task(prompt="{input}", tools=[lookup, approve])
APPROVER = agentcore.Agent(tools=[approve], max_turns=2)


async def main() -> None:
    reveal_type(PLAN)  # revealed: agentcore._tasks.task.Task[Plan, object]
    reveal_type(REDUCE)  # revealed: agentcore._tasks.task.Task[str, object]

    results = await agentcore.run_batch(MAP, ["a", "b"], backend="sim://", model="sim")
    first = results[0]
    reveal_type(first)  # revealed: agentcore._core.results.Result[Finding]
    reveal_type(first.output)  # revealed: Finding | None
    wrong: int = first.output  # error: Incompatible types in assignment
    assert first.status == "ok" and isinstance(first.output, Finding), first

    texts = await agentcore.run_batch(REDUCE, [{"answers": "[]"}], backend="sim://", model="sim")
    reveal_type(texts[0].output)  # revealed: str | None

    lists = await agentcore.run_batch(LISTS, ["x"], backend="sim://", model="sim")
    reveal_type(lists[0].output)  # revealed: list[str] | None
    assert isinstance(lists[0].output, list), lists[0]

    async with agentcore.open_batch(MAP, ["c"], backend="sim://", model="sim") as stream:
        reveal_type(stream)  # revealed: agentcore._tasks.batch.BatchStream[Finding]
        async for result in stream:
            reveal_type(result)  # revealed: agentcore._core.results.Result[Finding]

    def progress(result: agentcore.Result[Finding]) -> None:
        print(result.index, result.status)

    await agentcore.run_batch(MAP, ["d"], backend="sim://", model="sim", on_result=progress)

    reveal_type(AGENT)  # revealed: agentcore._tasks.agent.Agent[Finding, object]
    reveal_type(TEXT_AGENT)  # revealed: agentcore._tasks.agent.Agent[str, object]
    async with agentcore.open_driver("sim://", model="sim") as driver:
        answer = await AGENT.run("a", driver=driver, deps="request-1")
        reveal_type(answer)  # revealed: agentcore._core.results.Result[Finding]
        reveal_type(answer.output)  # revealed: Finding | None
        assert answer.status == "ok" and isinstance(answer.output, Finding), answer
        text = await TEXT_AGENT.run("b", driver=driver)
        reveal_type(text.output)  # revealed: str | None
        misfit: Finding = text.output  # error: Incompatible types in assignment

    plan, answers, summary = await agentcore.map_reduce(
        plan=PLAN, map=MAP, reduce=REDUCE, input="topic", backend="sim://", model="sim"
    )
    outcome = await agentcore.map_reduce(
        plan=PLAN,
        map=MAP,
        reduce=REDUCE,
        input="topic",
        items=lambda p: p.items,
        backend="sim://",
        model="sim",
    )
    same: agentcore.MapReduceResult[Plan, Finding, str] = outcome
    other: agentcore.MapReduceResult[Plan, Plan, str] = outcome  # error: Incompatible types
    reveal_type(outcome.plan.output)  # revealed: Plan | None
    reveal_type(outcome.answers)  # revealed: tuple[agentcore._core.results.Result[Finding], ...]
    reveal_type(outcome.summary)  # revealed: agentcore._core.results.Result[str] | None
    assert isinstance(outcome.plan.output, Plan), outcome.plan
    assert all(isinstance(a.output, Finding) for a in outcome.answers if a.status == "ok")
    reveal_type(plan)  # revealed: agentcore._core.results.Result[Plan]
    reveal_type(answers)  # revealed: tuple[agentcore._core.results.Result[Finding], ...]
    reveal_type(summary)  # revealed: agentcore._core.results.Result[str] | None
    print(plan.status, len(answers), summary is not None, wrong, same, other, misfit)

    reveal_type(lookup)  # revealed: agentcore._tools.spec.Tool[[term: str], str, object]
    reveal_type(approve)  # revealed: agentcore._tools.spec.Tool[[agentcore._tools.context.RunContext[Approvals], request: str], str, Approvals]  # noqa: E501  # fmt: skip
    reveal_type(RESEARCH)  # revealed: agentcore._tasks.task.Task[Finding, object]
    reveal_type(RESEARCH.tools)  # revealed: tuple[agentcore._tools.spec.ToolBase[object], ...]
    reveal_type(APPROVING)  # revealed: agentcore._tasks.task.Task[str, Approvals]
    reveal_type(APPROVER)  # revealed: agentcore._tasks.agent.Agent[str, Approvals]
    granted = Approvals(("a",))
    researched = await agentcore.run_batch(RESEARCH, ["a"], backend="sim://", model="sim")
    reveal_type(researched[0].output)  # revealed: Finding | None
    approvals = await agentcore.run_batch(
        APPROVING, ["a", "b"], backend="sim://", model="sim", deps=granted
    )
    mixed = await agentcore.run_batch(MIXED, ["a"], backend="sim://", model="sim", deps=granted)
    assert all(r.status == "ok" for r in researched), researched
    assert all(r.status == "ok" for r in approvals), approvals
    assert all(r.status == "ok" for r in mixed), mixed
    async with agentcore.open_driver("sim://", model="sim", tools=[lookup, approve]) as driver:
        approved = await APPROVER.run("a", driver=driver, deps=granted)
        assert approved.status == "ok", approved


async def misuse(driver: agentcore.Driver) -> None:
    """Deps that the tools cannot take (type-checked, never run)."""
    await agentcore.run_batch(APPROVING, ["a"], deps=42)  # error: Cannot infer value of type
    await APPROVER.run("a", driver=driver, deps="u")  # error: Argument "deps" to "run" of "Agent"
    # A mixed list whose deps type is not stated: a type checker cannot infer it.
    agentcore.Task(prompt="{input}", tools=[lookup, approve])  # error: List item 1 has incompatible


if __name__ == "__main__":
    trio.run(main)
