"""Service tiers through the driver on the simulator: flex refusals, routing and the ledger."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from agentcore import ConfigError, Fallback, RetryPolicy, Task, open_driver, run_batch, tool
from agentcore.sim import SimConfig

# The simulator's model is named "sim" on the wire; flex at half the standard price, as
# OpenAI prices flex at Batch API rates.
PRICES = {
    "sim": {
        "standard": {"input": 2.0, "output": 8.0, "cached_input": 0.5},
        "flex": {"input": 1.0, "output": 4.0, "cached_input": 0.25},
    }
}
ONE_TRY = RetryPolicy(max_attempts=1)


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: the key.
    """
    return f"value of {key}"


TASK = Task(system="You look things up.", prompt="Find {x}.", tools=[lookup])
INPUTS = [{"x": n} for n in range(40)]


def sim(**knobs: Any) -> SimConfig:
    return SimConfig(speedup=200.0, tool_rounds=2, **knobs)


async def test_flex_then_standard_loses_no_agent_when_flex_refuses_a_third_of_calls() -> None:
    config = sim(flex_refuse_rate=0.3)
    async with open_driver(
        "sim://", tools=[lookup], config=config, service_tier="flex-then-standard",
        prices=PRICES, retry=ONE_TRY,
    ) as driver:  # fmt: skip
        results = await run_batch(TASK, INPUTS, driver=driver)
        stats = driver.statistics()
    assert [r.status for r in results] == ["ok"] * len(INPUTS)
    cost = stats.cost
    assert cost is not None
    # Each refusal was routed, not retried: one attempt per request, and every request of
    # the batch was answered once, on flex or on standard.
    assert stats.attempts == stats.requests
    assert sum(t.requests for t in cost.tiers.values()) == stats.requests
    assert cost.tiers["standard"].requests == cost.flex_refused > 0
    assert cost.fallback_rate is not None
    assert 0.15 < cost.fallback_rate < 0.45
    assert cost.savings_ratio is not None
    assert 0.0 < cost.savings_ratio < 0.5


async def test_flex_without_refusals_saves_half_the_token_cost() -> None:
    async with open_driver(
        "sim://", tools=[lookup], config=sim(), service_tier="flex", prices=PRICES
    ) as driver:
        results = await run_batch(TASK, INPUTS, driver=driver)
        stats = driver.statistics()
    assert all(r.status == "ok" for r in results)
    cost = stats.cost
    assert cost is not None
    assert set(cost.tiers) == {"flex"}
    assert cost.fallback_rate == 0.0
    assert cost.savings_ratio is not None
    assert cost.savings_ratio >= 0.45


async def test_standard_sends_no_flex_request_and_reports_its_cost() -> None:
    config = sim(flex_refuse_rate=1.0)
    async with open_driver(
        "sim://", tools=[lookup], config=config, service_tier="standard", prices=PRICES
    ) as driver:
        results = await run_batch(TASK, INPUTS[:5], driver=driver)
        stats = driver.statistics()
    assert all(r.status == "ok" for r in results)
    assert stats.cost is not None
    assert set(stats.cost.tiers) == {"standard"}
    assert stats.cost.savings == pytest.approx(0.0)
    assert stats.cost.flex_attempts == 0


async def test_flex_alone_waits_out_capacity_refusals_with_retries() -> None:
    config = sim(flex_refuse_rate=0.3, flex_refusal_status=498)
    retry = RetryPolicy(max_attempts=12, base_delay=0.001, max_delay=0.01)
    async with open_driver(
        "sim://", tools=[lookup], config=config, service_tier="flex", prices=PRICES, retry=retry
    ) as driver:
        results = await run_batch(TASK, INPUTS[:10], driver=driver)
        stats = driver.statistics()
    assert all(r.status == "ok" for r in results)
    assert stats.attempts > stats.requests  # Groq's 498 refusals were retried on flex
    assert stats.cost is not None
    assert set(stats.cost.tiers) == {"flex"}
    assert stats.cost.flex_refused == 0


async def test_a_model_without_flex_is_a_config_error_before_the_batch_spends_anything() -> None:
    config = sim(flex_models=["some-other-model"])
    async with open_driver(
        "sim://", tools=[lookup], config=config, service_tier="flex-then-standard"
    ) as driver:
        with pytest.raises(ConfigError, match="flex"):
            await run_batch(TASK, INPUTS, driver=driver)
        stats = driver.statistics()
    assert stats.requests <= 1  # the one refused request (refusals are not charged)
    assert stats.cost is not None
    assert stats.cost.tiers == {}


async def test_without_a_tier_or_prices_there_is_no_ledger() -> None:
    async with open_driver("sim://", tools=[lookup], config=sim()) as driver:
        await run_batch(TASK, INPUTS[:2], driver=driver)
        assert driver.statistics().cost is None


async def test_a_fallback_backend_takes_its_own_tier() -> None:
    fallback = Fallback("sim://", options={"config": sim(), "service_tier": "flex"})
    async with open_driver(
        "sim://", tools=[lookup], config=sim(fail_rate=1.0), fallback=[fallback],
        prices=PRICES, retry=ONE_TRY,
    ) as driver:  # fmt: skip
        results = await run_batch(TASK, INPUTS[:4], driver=driver)
        stats = driver.statistics()
    assert all(r.status == "ok" for r in results)
    assert stats.cost is not None
    assert set(stats.cost.tiers) == {"flex"}


@pytest.mark.parametrize("tier", ["Flex", "priority", 3])
async def test_an_unknown_tier_is_a_config_error(tier: object) -> None:
    with pytest.raises(ConfigError, match="service_tier"):
        async with open_driver("sim://", service_tier=tier):
            pass


async def test_flex_on_anthropic_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no flex tier"):
        async with open_driver(
            "http://127.0.0.1:9/", model="m", dialect="anthropic", service_tier="flex"
        ):
            pass


async def test_without_a_warm_up_the_first_flex_request_goes_alone_and_stops_the_batch() -> None:
    config = sim(flex_models=["some-other-model"])
    async with open_driver(
        "sim://", tools=[lookup], config=config, service_tier="flex", max_inflight=16
    ) as driver:
        with pytest.raises(ConfigError, match="flex"):
            await run_batch(TASK, INPUTS, driver=driver, warm=False)
        stats = driver.statistics()
    assert stats.attempts == 1


async def test_flex_requests_wait_at_least_fifteen_minutes_for_an_answer() -> None:
    from agentcore._backends.tiers import FLEX_TIMEOUT
    from agentcore._transports.tiered import TieredModelClient

    async with open_driver("sim://", service_tier="flex-then-standard") as driver:
        client = driver.client
        assert isinstance(client, TieredModelClient)
        flex, standard = client._clients["flex"], client._clients["standard"]
    assert FLEX_TIMEOUT == 900.0
    assert flex.timeouts.read is not None
    assert flex.timeouts.read >= FLEX_TIMEOUT
    assert standard.timeouts.read is not None
    assert standard.timeouts.read < FLEX_TIMEOUT


async def test_sim_replies_name_the_tier_that_served_them() -> None:
    import httpx

    from agentcore.sim import open_sim_server

    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    async with open_sim_server(config=sim()) as server, httpx.AsyncClient() as http:
        flex = await http.post(
            f"{server.url}/chat/completions", json={**body, "service_tier": "flex"}
        )
        plain = await http.post(f"{server.url}/chat/completions", json=body)
    assert flex.json()["service_tier"] == "flex"
    assert plain.json()["service_tier"] == "default"


class _ServedOnDefault:
    """A transport through which every flex reply says it was served on the default tier (as
    OpenAI's may: the reply's ``service_tier`` is the tier it is billed at)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def send(self, request: Any, timeouts: Any) -> Any:
        from agentcore._codecs.http import HttpResponse

        response = await self.inner.send(request, timeouts)
        body = response.body.replace(b'"service_tier":"flex"', b'"service_tier":"default"')
        return HttpResponse(response.status, response.headers, body)

    def open_stream(self, request: Any, timeouts: Any) -> Any:
        raise AssertionError("not streamed here")

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_the_ledger_bills_the_tier_a_reply_says_it_was_served_on() -> None:
    from agentcore._transports.tiered import TieredModelClient

    async with open_driver(
        "sim://", tools=[lookup], config=sim(), service_tier="flex", prices=PRICES, stream=False
    ) as driver:
        client = driver.client
        assert isinstance(client, TieredModelClient)
        for tier in client._clients.values():
            tier.transport = _ServedOnDefault(tier.transport)
        results = await run_batch(TASK, INPUTS[:4], driver=driver)
        cost = driver.statistics().cost
    assert all(r.status == "ok" for r in results)
    assert cost is not None
    assert set(cost.tiers) == {"standard"}  # sent on flex, served (and billed) on default
    assert cost.flex_attempts == cost.tiers["standard"].requests


async def test_a_resumed_runs_cost_prices_every_reply_its_step_journal_restored(
    tmp_path: Path,
) -> None:
    # A batch on flex is stopped mid-way and resumed from its step journal: each agent's
    # cost (its results record's) prices all of its replies, those received before the stop
    # included, which the resumed batch does not ask for again.
    from agentcore._tasks.fingerprint import task_description
    from agentcore._tasks.journal import open_step_journal
    from agentcore._tasks.task import job_run_id

    path, inputs = tmp_path / "steps.sqlite", INPUTS[:10]
    description = task_description(TASK)
    async with (
        open_step_journal(path, description, new_batch_id="b1") as journal,
        open_driver("sim://", tools=[lookup], config=sim(), service_tier="flex",
                    prices=PRICES) as driver,
    ):  # fmt: skip

        async def stop(scope: trio.CancelScope) -> None:
            while journal.statistics().steps < 15:
                await trio.sleep(0.01)
            scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(stop, nursery.cancel_scope)
            await run_batch(TASK, inputs, driver=driver, step_journal=journal)
    async with (
        open_step_journal(path, description) as journal,
        open_driver("sim://", tools=[lookup], config=sim(), service_tier="flex",
                    prices=PRICES) as driver,
    ):  # fmt: skip
        results = await run_batch(TASK, inputs, driver=driver, step_journal=journal)
        ledger = driver.cost
        assert ledger is not None
        costs = [ledger.take_run(job_run_id("b1", r.index)) for r in results]
        report = ledger.report()
    assert [r.status for r in results] == ["ok"] * len(inputs)
    assert report.replayed_requests > 0  # replies restored, not asked for again
    flex = PRICES["sim"]["flex"]
    for result, cost in zip(results, costs, strict=True):
        usage = result.usage
        cached = usage.cached_tokens or 0
        priced = ((usage.prompt_tokens - cached) * flex["input"] + cached * flex["cached_input"]
                  + usage.completion_tokens * flex["output"]) * 1e-6  # fmt: skip
        assert cost is not None and cost.usd == pytest.approx(priced, rel=1e-9)
        assert cost.requests == {"flex": result.turns}
