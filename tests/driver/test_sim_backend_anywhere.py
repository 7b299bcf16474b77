"""A ``sim://`` backend configured beforehand (``wire.backend("sim://", config=SimConfig(...))``,
as docs/sim.md shows) is taken wherever a URL is, and its SimConfig takes effect."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

import agentcore
from agentcore import Agent, Fallback, Result, RetryPolicy, Task
from agentcore.sim import SimConfig
from agentcore.testing import ScriptedModel

ANSWER_TOKENS = 7  # the simulator's default answer is 48 tokens long
CONFIG = SimConfig(answer_tokens=ANSWER_TOKENS, tool_rounds=0)


def _sim() -> agentcore.wire.Backend:
    return agentcore.wire.backend("sim://", model="sim", config=CONFIG)


def _configured(results: Sequence[Result[Any]]) -> bool:
    return bool(results) and all(
        r.status == "ok" and r.usage.completion_tokens == ANSWER_TOKENS for r in results
    )


async def test_open_driver_starts_the_simulator_of_a_configured_backend() -> None:
    async with agentcore.open_driver(_sim()) as driver:
        result = await Agent().run("What is 2 + 3?", driver=driver)
    assert _configured([result])


async def test_run_batch_and_open_batch_take_a_configured_sim_backend() -> None:
    task = Task(prompt="Say something about {topic}")
    inputs = [{"topic": "owls"}, {"topic": "tea"}]
    assert _configured(await agentcore.run_batch(task, inputs, backend=_sim()))
    async with agentcore.open_batch(task, inputs, backend=_sim()) as stream:
        assert _configured([r async for r in stream])


async def test_map_reduce_takes_a_configured_sim_backend() -> None:
    done = await agentcore.map_reduce(
        plan=Task(prompt="List topics about {input}", output=list[str]),
        map=Task(prompt="Say something about {input}"),
        reduce=Task(prompt="Summarise {answers}"),
        input="birds",
        backend=_sim(),
    )
    assert done.plan.status == "ok" and done.summary is not None
    assert _configured([*done.answers, done.summary])


async def test_a_configured_sim_backend_serves_as_a_fallback() -> None:
    broken = ScriptedModel(
        lambda call: agentcore.ModelError(
            agentcore.ErrorKind.OVERLOADED, "busy", status=503, retryable=True
        )
    )
    retry = RetryPolicy(max_attempts=1)
    async with agentcore.open_driver(
        broken, fallback=[Fallback(_sim(), name="sim")], retry=retry
    ) as driver:
        result = await Agent().run("hello", driver=driver)
    assert _configured([result]) and result.served_by == ("sim",)


async def test_a_configured_sim_backend_keeps_its_model_and_options() -> None:
    configured = attrs.evolve(_sim())
    async with agentcore.open_driver(configured) as driver:
        assert driver.backend is not None
        assert driver.backend.base_url.startswith("http://127.0.0.1:")
        assert getattr(driver.backend.codec, "model", None) == "sim"
        assert driver.backend.options["config"] is CONFIG
