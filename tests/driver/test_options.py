"""DriverOptions: one frozen, checked value that every entry point opening a driver takes."""

from __future__ import annotations

import threading
from typing import Any

import attrs
import pytest
import trio

import agentcore
from agentcore import ConfigError, DriverOptions, RunContext, Task, open_batch, run_batch
from agentcore.core import CallModel, CallTool
from agentcore.testing import ScriptedModel
from tests.driver.helpers import tool_then_answer


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("model", 3),
        ("max_inflight", 0),
        ("max_inflight", True),
        ("max_inflight", "8"),
        ("slot_policy", "lifo"),
        ("adaptive", "yes"),
        ("stream", "sometimes"),
        ("retry", 3),
        ("timeouts", 1.0),
        ("transport", "tcp"),
        ("api_key", 5),
        ("seed", "x"),
        ("seed", 1.5),
        ("fallback", "http://other:8000"),
        ("fallback", [3]),
        ("fallback_on", ["not a kind"]),
        ("mcp", ["server"]),
        ("trace", 3),
        ("otel", 1),
        ("requests_per_minute", 0),
        ("tokens_per_minute", -1),
        ("thread_limit", 0),
        ("thread_limit", 2.5),
        ("cache_size", 0),
        ("cache_size", True),
        ("backend_options", 3),
        ("prices", 3),
        ("prices", {"m": {"standard": {"input": -1.0, "output": 1.0}}}),
        ("exact_cost", "yes"),
    ],
)
def test_an_invalid_option_is_a_config_error_when_the_value_is_built(
    field: str, value: Any
) -> None:
    with pytest.raises(ConfigError, match=field):
        DriverOptions(**{field: value})


def test_options_are_frozen_and_keep_the_api_key_out_of_their_repr() -> None:
    options = DriverOptions(api_key="sk-secret", max_inflight=4)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        options.max_inflight = 8  # type: ignore[misc]
    assert "sk-secret" not in repr(options)
    assert "max_inflight=4" in repr(options)


async def test_thread_limit_and_cache_size_reach_the_tool_executor_through_open_driver() -> None:
    lock = threading.Lock()
    running = peak = 0
    release = threading.Event()

    @agentcore.tool
    def work(n: int) -> int:
        """Work. Args: n: a number."""
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        release.wait(5)
        with lock:
            running -= 1
        return n

    @agentcore.tool(cache=True)
    async def square(n: int) -> int:
        """Square. Args: n: a number."""
        return n * n

    model = ScriptedModel(lambda call: "done")
    async with agentcore.open_driver(
        model, tools=[work, square], thread_limit=2, options=DriverOptions(cache_size=3)
    ) as driver:
        executor = driver.executor
        for n in range(10):
            await executor.call(CallTool(f"c{n}", "square", {"n": n}))
        assert executor.statistics().cached_results == 3
        async with trio.open_nursery() as nursery:
            for n in range(6):
                nursery.start_soon(executor.call, CallTool(f"w{n}", "work", {"n": n}))
            while True:
                with lock:
                    if running >= 2:
                        break
                await trio.sleep(0.001)
            await trio.sleep(0.05)  # room for a thread beyond the limit to show up
            release.set()
    assert peak == 2


async def test_a_keyword_replaces_its_field_of_the_options(autojump_clock: object) -> None:
    model = ScriptedModel(lambda call: "done")
    options = DriverOptions(max_inflight=4, slot_policy="priority")
    async with agentcore.open_driver(model, options=options, max_inflight=7) as driver:
        slots = driver.limiter.statistics()
    assert slots.max_inflight == 7
    assert options.max_inflight == 4  # the value given is left as it was


async def test_options_that_are_not_an_options_value_are_refused() -> None:
    with pytest.raises(ConfigError, match="DriverOptions"):
        async with agentcore.open_driver(ScriptedModel(lambda c: "x"), options={"model": "m"}):  # type: ignore[arg-type]
            pass


async def test_a_keyword_that_is_no_option_is_an_option_of_the_backend() -> None:
    # Backend options apply to backends given by URL or Backend, so a model client refuses
    # them by name; a name no backend takes is refused before that.
    with pytest.raises(ConfigError, match="priority apply to backends given by URL"):
        async with agentcore.open_driver(ScriptedModel(lambda c: "x"), priority=True):
            pass
    with pytest.raises(ConfigError, match="'reasoning_effort' is no option of any backend"):
        async with agentcore.open_driver(ScriptedModel(lambda c: "x"), reasoning_effort="low"):
            pass


@agentcore.tool
async def peek(ctx: RunContext[str]) -> str:
    """The driver's deps."""
    return f"deps={ctx.deps}"


def _model() -> ScriptedModel:
    return ScriptedModel(tool_then_answer("peek", lambda call: {}), latency=1.0)


TASK = Task(prompt="{input}", tools=[peek], max_turns=2)
OPTIONS = DriverOptions(deps="from options", max_inflight=2)


async def test_open_driver_takes_the_options(autojump_clock: object) -> None:
    loop = agentcore.Agent(tools=[peek], max_turns=2).loop("x")
    async with agentcore.open_driver(_model(), tools=[peek], options=OPTIONS) as driver:
        result = await driver.run(loop)
        assert driver.limiter.statistics().max_inflight == 2
    assert result.output == "answer: deps=from options"


async def test_run_batch_and_open_batch_take_the_options(autojump_clock: object) -> None:
    results = await run_batch(TASK, ["a", "b"], backend=_model(), options=OPTIONS)
    assert [r.output for r in results] == ["answer: deps=from options"] * 2
    async with open_batch(TASK, ["c"], backend=_model(), options=OPTIONS) as stream:
        outputs = [r.output async for r in stream]
    assert outputs == ["answer: deps=from options"]


async def _served(options: DriverOptions | None, **keywords: Any) -> list[str]:
    """The session of each request of a 3-agent, 2-turn batch on one slot, in serving order."""
    model = ScriptedModel(tool_then_answer("peek", lambda call: {}), latency=1.0)
    await run_batch(TASK, ["a", "b", "c"], backend=model, options=options, **keywords)
    sessions = [call.hints.session_id for call in model.calls]
    names = {session: f"s{n}" for n, session in enumerate(dict.fromkeys(sessions))}
    return [names[s] for s in sessions]


async def test_a_batch_serves_near_done_agents_first_unless_the_options_name_a_policy(
    autojump_clock: object,
) -> None:
    # s1's first request takes the slot s0's first one frees; then s0's second request
    # (turn 1) goes before s2's first (turn 0) under the priority line, not under FIFO.
    by_turn = ["s0", "s1", "s0", "s1", "s2", "s2"]
    in_arrival = ["s0", "s1", "s2", "s0", "s1", "s2"]
    assert await _served(None, max_inflight=1) == by_turn
    assert await _served(DriverOptions(max_inflight=1)) == by_turn
    assert await _served(DriverOptions(max_inflight=1, slot_policy="fifo")) == in_arrival
    assert await _served(None, max_inflight=1, slot_policy="fifo") == in_arrival


async def test_map_reduce_takes_the_options(autojump_clock: object) -> None:
    def policy(call: CallModel) -> Any:
        text = call.messages[-1].content if call.messages else ""
        if "plan" in str(text):
            return '["one", "two"]'
        return tool_then_answer("peek", lambda c: {})(call)

    plan = Task(prompt="plan {input}", output=list[str])
    mapper = Task(prompt="{input}", tools=[peek], max_turns=2)
    reducer = Task(prompt="reduce {answers}")
    result = await agentcore.map_reduce(
        plan=plan,
        map=mapper,
        reduce=reducer,
        input="x",
        backend=ScriptedModel(policy, latency=1.0),
        options=OPTIONS,
    )
    assert [r.output for r in result.answers] == ["answer: deps=from options"] * 2


async def test_a_given_driver_and_driver_options_are_refused_together(
    autojump_clock: object,
) -> None:
    async with agentcore.open_driver(_model(), tools=[peek]) as driver:
        with pytest.raises(ConfigError, match="not both"):
            await run_batch(TASK, ["a"], driver=driver, options=OPTIONS)
        with pytest.raises(ConfigError, match="not both"):
            await run_batch(TASK, ["a"], driver=driver, thread_limit=4)
