"""Request and token budgets in the driver: waits hold no slot, usage corrects reservations."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from agentcore import ConfigError, ErrorKind, ModelError, Usage, open_driver
from agentcore._codecs.ratelimits import read_rate_headers
from agentcore._driver.rate_limiter import RateLimiter
from agentcore.core import (
    AssistantMessage,
    CallModel,
    ModelResponded,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from agentcore.testing import ScriptedModel

from .helpers import make_loop


def answer_using(tokens: int) -> Any:
    def policy(call: CallModel) -> ModelResponded:
        usage = Usage(tokens - 10, 10)
        return ModelResponded("", AssistantMessage(content="ok"), usage, "stop")

    return policy


async def test_requests_per_minute_spaces_requests_at_the_refill_rate(
    autojump_clock: Any,
) -> None:
    model = ScriptedModel(answer_using(100), latency=0.5)
    async with open_driver(model, requests_per_minute=10) as driver:
        start = trio.current_time()
        async with driver.stream(make_loop(i) for i in range(30)) as results:
            ended = [trio.current_time() - start async for _ in results]
        stats = driver.statistics()
    # The first minute's ten go at once; then one every six seconds.
    assert max(ended) == pytest.approx(20 * 6.0 + 0.5)
    assert sorted(ended)[:10] == [pytest.approx(0.5)] * 10
    assert stats.rates is not None
    assert stats.rates.requests_per_minute == 10
    assert stats.rates.waits == 20


async def test_waiting_for_token_budget_holds_no_inference_slot(autojump_clock: Any) -> None:
    model = ScriptedModel(answer_using(300), latency=1.0)
    seen: list[tuple[int, int]] = []
    async with open_driver(model, max_inflight=4, tokens_per_minute=3_000) as driver:

        async def watch() -> None:
            for _ in range(10):
                await trio.sleep(7.0)
                slots = driver.limiter.statistics()
                seen.append((slots.in_use, slots.waiting))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            start = trio.current_time()
            async with driver.stream(make_loop(i) for i in range(40)) as results:
                statuses = [r.status async for r in results]
            elapsed = trio.current_time() - start
        stats = driver.statistics()
    assert statuses == ["ok"] * 40
    # 12,000 tokens at 3,000 a minute, the first 3,000 at once: three minutes. All forty
    # reserve at once, before any reply taught the estimator, with estimates about 10 % short
    # of the usage; the corrections only delay the requests reserved after them.
    assert 135.0 <= elapsed <= 185.0
    # Whenever we looked, agents were waiting for budget, not queued for (or holding) slots.
    assert all(waiting == 0 and in_use <= 1 for in_use, waiting in seen)
    assert stats.rates is not None and stats.rates.wait_time > 0


@pytest.mark.parametrize("limited_api", [True, False])
async def test_a_429_from_a_rate_limited_api_holds_every_sender_back_for_retry_after(
    autojump_clock: Any, limited_api: bool
) -> None:
    limited = ModelError(
        ErrorKind.RATE_LIMITED, "slow down", status=429, retryable=True, retry_after=30.0
    )
    answered: dict[str, float] = {}

    def policy(call: CallModel) -> Any:
        if call.request_id == "first" and "first" not in answered:
            answered["first"] = -1.0
            return limited
        answered[call.request_id] = trio.current_time()
        return "ok"

    options = {"requests_per_minute": 10_000} if limited_api else {}
    async with open_driver(ScriptedModel(policy), max_inflight=4, **options) as driver:
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(driver.call_model, CallModel("first", ()))
            await trio.sleep(1.0)
            nursery.start_soon(driver.call_model, CallModel("second", ()))
        stats = driver.statistics()
    assert answered["first"] - start == pytest.approx(30.0)
    # With known limits the quota is shared: the second request waits out the retry-after too.
    # A bare 429 (a self-hosted server) only delays the request it answered.
    assert answered["second"] - start == pytest.approx(30.0 if limited_api else 1.0)
    assert stats.rates is not None and stats.rates.rate_limited == 1


async def test_no_limits_means_no_waiting_and_nothing_learned(autojump_clock: Any) -> None:
    model = ScriptedModel(answer_using(10_000), latency=1.0)
    async with open_driver(model, max_inflight=50) as driver:
        start = trio.current_time()
        async with driver.stream(make_loop(i) for i in range(50)) as results:
            _ = [r async for r in results]
        elapsed = trio.current_time() - start
        stats = driver.statistics()
    assert elapsed == pytest.approx(1.0)
    assert stats.rates is not None
    assert (stats.rates.requests_per_minute, stats.rates.tokens_per_minute) == (None, None)
    assert stats.rates.waits == 0


@pytest.mark.parametrize("option", ["requests_per_minute", "tokens_per_minute"])
@pytest.mark.parametrize("bad", [0, -1, 2.5, "60"])
async def test_budget_options_must_be_positive_integers(option: str, bad: Any) -> None:
    with pytest.raises(ConfigError, match=option):
        async with open_driver(ScriptedModel(["x"]), **{option: bad}):
            pass


OPENAI_HEADERS = (
    ("x-ratelimit-limit-tokens", "50000"),
    ("x-ratelimit-remaining-tokens", "50000"),
    ("x-ratelimit-limit-requests", "500"),
    ("x-ratelimit-remaining-requests", "500"),
)
ANTHROPIC_HEADERS = (
    ("anthropic-ratelimit-tokens-limit", "50000"),
    ("anthropic-ratelimit-tokens-remaining", "50000"),
    ("anthropic-ratelimit-requests-limit", "500"),
    ("anthropic-ratelimit-requests-remaining", "500"),
)


@pytest.mark.parametrize(
    "headers", [OPENAI_HEADERS, ANTHROPIC_HEADERS], ids=["openai", "anthropic"]
)
async def test_limits_learned_from_headers_reserve_with_the_same_estimate_as_configured_ones(
    autojump_clock: Any, headers: tuple[tuple[str, str], ...]
) -> None:
    # The estimate learns from every reply once a limit is known, whichever way it became
    # known: the replies teach both limiters the same weights, so the next request of each
    # shape reserves the same tokens.
    configured = RateLimiter(requests_per_minute=500, tokens_per_minute=50_000)
    learned = RateLimiter()
    observation = read_rate_headers(headers)
    assert observation is not None
    system = SystemMessage("You check records. " * 30)
    for n in range(40):
        first = CallModel(f"a{n}", (system, UserMessage(f"Check record r{n} " * (n % 7 + 1))))
        reply = AssistantMessage(tool_calls=[ToolCall("c", "lookup", f'{{"key": "r{n}"}}')])
        after = CallModel(
            f"b{n}", (*first.messages, reply, ToolMessage("c", "lookup", "x" * (50 * n)))
        )
        for call, prompt in ((first, 150 + 5 * (n % 7)), (after, 180 + 12 * n)):
            answered = ModelResponded(
                call.request_id, AssistantMessage("ok"), Usage(prompt, 20), "stop"
            )
            for limiter in (configured, learned):
                reservation = await limiter.reserve(call)
                limiter.replied(
                    call, reservation, answered, observation if limiter is learned else None
                )
                await trio.sleep(1.0)
    assert learned.budget.limits == configured.budget.limits == (500, 50_000)
    assert learned.estimator == configured.estimator
    for call in (first, after):
        assert await learned.reserve(call) == await configured.reserve(call)
