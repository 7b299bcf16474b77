"""run_batch, open_batch and map_reduce over the in-process scripted model (virtual time)."""

from __future__ import annotations

import attrs
import orjson
import trio

import agentcore
from agentcore import Task, map_reduce, open_batch, run_batch
from agentcore.testing import ScriptedModel


@agentcore.tool
async def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: the topic.
    """
    await trio.sleep(1.0)
    if topic == "boom":
        raise RuntimeError("library offline")
    return f"facts on {topic}"


@attrs.frozen
class Note:
    topic: str
    words: int


def _user_text(call: agentcore.core.CallModel) -> str:
    return next(m.content for m in call.messages if isinstance(m, agentcore.core.UserMessage))


def _topic(call: agentcore.core.CallModel) -> str:
    return _user_text(call).rsplit(" ", 1)[-1]


def research_policy(call: agentcore.core.CallModel) -> agentcore.core.AssistantMessage | str:
    """Call lookup once, then answer with a Note whose length depends on the topic."""
    results = [m for m in call.messages if isinstance(m, agentcore.core.ToolMessage)]
    topic = _topic(call)
    if call.tools and not results:
        args = orjson.dumps({"topic": topic}).decode()
        return agentcore.core.AssistantMessage(
            tool_calls=[agentcore.core.ToolCall("c0", "lookup", args)]
        )
    return orjson.dumps({"topic": topic, "words": len(topic)}).decode()


TASK = Task(system="Research.", prompt="Topic: {topic}", tools=[lookup], output=Note)


def _latency(call: agentcore.core.CallModel) -> float:
    # Longer topics take longer, so completion order differs from input order.
    return 0.5 * len(_topic(call))


async def test_run_batch_returns_results_in_input_order(autojump_clock: object) -> None:
    topics = ["cccccc", "a", "bbb"]
    model = ScriptedModel(research_policy, latency=_latency)
    results = await run_batch(TASK, [{"topic": t} for t in topics], backend=model)
    assert [r.index for r in results] == [0, 1, 2]
    assert [r.status for r in results] == ["ok", "ok", "ok"]
    assert [r.output for r in results] == [Note(t, len(t)) for t in topics]


async def test_open_batch_streams_in_completion_order(autojump_clock: object) -> None:
    topics = ["cccccc", "a", "bbb"]
    model = ScriptedModel(research_policy, latency=_latency)
    seen = []
    async with open_batch(TASK, [{"topic": t} for t in topics], backend=model) as results:
        async for result in results:
            seen.append(result.index)
    assert seen == [1, 2, 0]


async def test_bad_inputs_and_failing_tools_do_not_fail_the_batch(autojump_clock: object) -> None:
    inputs = [{"topic": "fine"}, {"nothing": 1}, {"topic": "boom"}]
    model = ScriptedModel(research_policy, latency=0.1)
    results = await run_batch(TASK, inputs, backend=model)
    assert [r.status for r in results] == ["ok", "failed", "ok"]
    assert results[1].error is not None
    assert results[1].error.kind is agentcore.AbortKind.INVALID_INPUT
    # The failing tool's error reached the model as an error tool message.
    failed_tool = [
        m for m in results[2].transcript if isinstance(m, agentcore.core.ToolMessage) and m.is_error
    ]
    assert failed_tool and "library offline" in failed_tool[0].content


async def test_warming_sends_one_one_token_prefix_request_first(autojump_clock: object) -> None:
    model = ScriptedModel(research_policy, latency=0.1)
    await run_batch(TASK, [{"topic": "a"}, {"topic": "b"}], backend=model, warm=True)
    first = model.calls[0]
    assert first.params.max_tokens == 1
    assert _user_text(first) == TASK.prefix_text
    assert all(c.params.max_tokens is None for c in model.calls[1:])
    assert len(model.calls) == 1 + 2 * 2


async def test_model_clients_are_not_warmed_by_default(autojump_clock: object) -> None:
    model = ScriptedModel(research_policy, latency=0.1)
    await run_batch(TASK, [{"topic": "a"}], backend=model)
    assert all(c.params.max_tokens != 1 for c in model.calls)


async def test_a_driver_for_a_model_client_is_not_warmed_by_default(
    autojump_clock: object,
) -> None:
    model = ScriptedModel(research_policy, latency=0.1)
    async with agentcore.open_driver(model, tools=[lookup]) as driver:
        assert not driver.self_hosted
        await run_batch(TASK, [{"topic": "a"}], driver=driver)
    assert all(c.params.max_tokens != 1 for c in model.calls)


def _warm_requests(driver: agentcore.Driver) -> list[str]:
    # Requests made outside any run (``Driver.call_model``): the warm-up.
    return [r.request_id for r in driver.statistics().recent_requests if r.index is None]


async def test_a_driver_for_a_self_hosted_backend_warms_by_default() -> None:
    task = Task(system="Research.", prompt="Topic: {topic}")
    async with agentcore.open_driver("sim://", max_inflight=4) as driver:
        assert driver.self_hosted
        results = await run_batch(task, [{"topic": "a"}, {"topic": "b"}], driver=driver)
        warm = _warm_requests(driver)
        assert len(warm) == 1
        assert warm[0].endswith("-warm/0")
        await run_batch(task, [{"topic": "c"}], driver=driver, warm=False)
        assert _warm_requests(driver) == warm
    assert [r.status for r in results] == ["ok", "ok"]


async def test_cancelling_a_batch_keeps_finished_results(autojump_clock: object) -> None:
    topics = ["a", "bbbbbbbbbbbbbbbbbbbb", "cccccccccccccccccccc"]
    model = ScriptedModel(research_policy, latency=_latency)
    seen: dict[int, str] = {}
    start = trio.current_time()
    async with open_batch(TASK, [{"topic": t} for t in topics], backend=model) as results:
        async for result in results:
            seen[result.index] = result.status
            if result.index == 0:
                results.cancel()
    assert seen == {0: "ok", 1: "cancelled", 2: "cancelled"}
    # The long agents would need 20+ virtual seconds; cancellation ended them at once.
    assert trio.current_time() - start < 5


@attrs.frozen
class Plan:
    topics: list[str]


@attrs.frozen
class Digest:
    text: str
    count: int


def map_reduce_policy(call: agentcore.core.CallModel) -> str:
    text = _user_text(call)
    if text.startswith("Plan"):
        return orjson.dumps({"topics": ["alpha", "broken", "gamma"]}).decode()
    if text.startswith("Summarise"):
        answers = orjson.loads(text.split("\n", 1)[1].rsplit("\n", 1)[0])
        return orjson.dumps({"text": text.rsplit("\n", 1)[1], "count": len(answers)}).decode()
    topic = _topic(call)
    if topic == "broken":
        return "this is not JSON"
    return orjson.dumps({"topic": topic, "words": len(topic)}).decode()


async def test_map_reduce_reduces_over_the_answers_that_exist(autojump_clock: object) -> None:
    model = ScriptedModel(map_reduce_policy, latency=0.2)
    plan_task = Task(prompt="Plan {input}", output=Plan)
    map_task = Task(prompt="Topic: {input}", output=Note, max_output_retries=0)
    reduce_task = Task(prompt="Summarise\n{answers}\nfailed={failed}", output=Digest)
    plan, answers, summary = await map_reduce(
        plan=plan_task, map=map_task, reduce=reduce_task, input="x", backend=model
    )
    assert plan.output == Plan(["alpha", "broken", "gamma"])
    assert [a.status for a in answers] == ["ok", "failed", "ok"]
    assert summary is not None and summary.status == "ok"
    assert summary.output == Digest(text="failed=1", count=2)
    # Map agents are children of the plan's session.
    map_calls = [c for c in model.calls if _user_text(c).startswith("Topic")]
    plan_sessions = {c.hints.session_id for c in model.calls if _user_text(c).startswith("Plan")}
    assert len(plan_sessions) == 1
    assert map_calls and {c.hints.parent_session_id for c in map_calls} == plan_sessions
    assert all(c.hints.session_id not in plan_sessions for c in map_calls)
