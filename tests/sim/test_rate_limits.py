"""sim:// request and token limits: 429s with retry-after, OpenAI's x-ratelimit-* headers,
and a driver that learns from them or is told its budget."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio
import trio.testing

import agentcore
from agentcore import ConfigError
from agentcore._codecs.ratelimits import read_rate_headers
from agentcore.sim import SimConfig, open_sim_server
from tests.sim.helpers import conversation

QUESTION = {"model": "sim", "messages": conversation("What is 2 + 2?")}


async def test_requests_past_the_limit_get_429_with_retry_after_and_headers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = SimConfig(requests_per_minute=3, tool_rounds=0)
    async with open_sim_server(config=config) as server:
        async with httpx.AsyncClient(base_url=server.url) as client:
            replies = [await client.post("/chat/completions", json=QUESTION) for _ in range(5)]
            statuses = [r.status_code for r in replies]
            remaining = [r.headers["x-ratelimit-remaining-requests"] for r in replies]
            refused = replies[3]
            retry_after = float(refused.headers["retry-after-ms"]) / 1000
            await trio.sleep(retry_after)
            again = await client.post("/chat/completions", json=QUESTION)
        stats = server.statistics()
    assert statuses == [200, 200, 200, 429, 429]
    assert remaining[:3] == ["2", "1", "0"]
    assert all(r.headers["x-ratelimit-limit-requests"] == "3" for r in replies)
    assert refused.json()["error"]["code"] == "rate_limit_exceeded"
    assert int(refused.headers["retry-after"]) >= 1
    assert 0 < retry_after <= 20.0  # one request refills in 60 / 3 seconds
    assert again.status_code == 200
    assert (stats.requests, stats.rate_limited) == (4, 2)


async def test_the_headers_read_back_into_the_limits_and_what_remains(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = SimConfig(requests_per_minute=100, tokens_per_minute=50_000, tool_rounds=0)
    async with (
        open_sim_server(config=config) as server,
        httpx.AsyncClient(base_url=server.url) as client,
    ):
        reply = await client.post("/chat/completions", json=QUESTION)
    observed = read_rate_headers(tuple(reply.headers.items()))
    assert observed is not None
    prompt = reply.json()["usage"]["prompt_tokens"]
    assert (observed.limit_requests, observed.limit_tokens) == (100, 50_000)
    assert observed.remaining_requests == 99
    completion = reply.json()["usage"]["completion_tokens"]
    # Counted once decoded (the refill during the decode adds a little back).
    assert observed.remaining_tokens is not None
    charged = 50_000 - prompt - completion
    assert charged <= observed.remaining_tokens <= charged + 60  # 60: ~70 ms of refill
    assert observed.reset_tokens is not None and observed.reset_tokens > 0


async def test_a_token_limit_refuses_a_burst_and_admits_after_the_refill(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = SimConfig(tokens_per_minute=300, tool_rounds=0, answer_tokens=50)
    async with (
        open_sim_server(config=config) as server,
        httpx.AsyncClient(base_url=server.url) as client,
    ):
        replies = [await client.post("/chat/completions", json=QUESTION) for _ in range(3)]
        await trio.sleep(float(replies[-1].headers["retry-after-ms"]) / 1000)
        later = await client.post("/chat/completions", json=QUESTION)
    assert [r.status_code for r in replies] == [200, 429, 429]
    assert later.status_code == 200


@pytest.mark.parametrize("field", ["requests_per_minute", "tokens_per_minute"])
def test_sim_limits_must_be_positive_integers(field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        SimConfig(**{field: 0})


async def run_agents(
    n: int, config: SimConfig, **options: Any
) -> tuple[list[agentcore.Result], agentcore.DriverStatistics, int]:
    task = agentcore.Task(prompt="Question {i}: what is the answer?", max_turns=2)
    async with agentcore.open_driver(
        "sim://", config=config, max_inflight=16, retry=agentcore.RetryPolicy(max_attempts=20),
        **options,
    ) as driver:  # fmt: skip
        results = await agentcore.run_batch(task, [{"i": i} for i in range(n)], driver=driver)
        stats = driver.statistics()
    return results, stats, stats.attempts - stats.requests


async def test_a_configured_token_budget_keeps_429s_away(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = SimConfig(tokens_per_minute=2_000, tool_rounds=0, answer_tokens=40)
    results, stats, retries = await run_agents(60, config, tokens_per_minute=2_000)
    assert all(r.status == "ok" for r in results)
    assert stats.rates is not None and stats.rates.waits > 0
    # Estimates are corrected by the usage of every reply; a handful of early misses at most.
    assert stats.rates.rate_limited <= 3
    assert retries == stats.rates.rate_limited


@pytest.mark.parametrize("stream", [False, True])
async def test_a_budget_learned_from_headers_alone_cuts_429s(
    autojump_clock: trio.testing.MockClock, stream: bool
) -> None:
    config = SimConfig(tokens_per_minute=2_000, tool_rounds=0, answer_tokens=40)
    results, learned, _ = await run_agents(60, config, stream=stream)
    assert all(r.status == "ok" for r in results)
    assert learned.rates is not None
    assert learned.rates.tokens_per_minute == 2_000
    # Only requests sent before the first reply go out blind (16 here). When the first
    # headers arrive, each of those still in flight is charged an estimate (settled by its own
    # reply), and a request that queued for a slot meanwhile waits for budget first.
    assert learned.rates.rate_limited <= 3
