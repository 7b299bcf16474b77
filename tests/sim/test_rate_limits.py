"""sim:// request and token limits: 429s with retry-after, OpenAI's x-ratelimit-* headers,
and a driver that learns from them or is told its budget."""

from __future__ import annotations

from typing import Any

import attrs
import httpx
import orjson
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


@agentcore.tool
def lookup(key: str, fields: list[str] | None = None, history: bool = False) -> str:
    """Look a record up in the registry and return it as JSON.

    Args:
        key: the record key, such as r17.
        fields: only these fields of the record (all when not given).
        history: include the record's change history.
    """
    tickets = [{"id": n, "title": f"ticket {n} of {key}", "open": n % 2 == 0} for n in range(6)]
    return orjson.dumps({"key": key, "owner": f"team-{key}", "tickets": tickets}).decode()


@agentcore.tool
def search(query: str, k: int = 5) -> str:
    """Search the knowledge base.

    Args:
        query: search terms.
        k: number of hits.
    """
    return orjson.dumps(
        [{"title": f"hit {n} for {query}", "score": 1 / (n + 1)} for n in range(k)]
    ).decode()


@attrs.frozen
class RecordState:
    state: str
    owner: str


ANALYST = "You are a careful registry analyst who checks every record twice. " * 20


async def run_limited_batch(
    n: int, *, tools: bool, configured: bool, tool_rounds: int = 2, output: type | None = None
) -> tuple[list[agentcore.Result], agentcore.RateLimiterStatistics]:
    """``n`` agents against sim:// enforcing 30,000 tokens and 1,000 requests a minute; the
    driver is told the same limits (``configured``) or learns them from the headers."""
    config = SimConfig(
        tokens_per_minute=30_000, requests_per_minute=1_000, tool_rounds=tool_rounds,
        answer_tokens=40,
    )  # fmt: skip
    offered = [lookup, search] if tools else []
    task = agentcore.Task(
        system=ANALYST, prompt="Question {i}: what is the state of record r{i}?",
        tools=offered, max_turns=5 if output is None else 2, output=output,
    )  # fmt: skip
    limits = {"tokens_per_minute": 30_000, "requests_per_minute": 1_000} if configured else {}
    async with agentcore.open_driver(
        "sim://", config=config, max_inflight=32, tools=offered,
        retry=agentcore.RetryPolicy(max_attempts=20), **limits,
    ) as driver:  # fmt: skip
        results = await agentcore.run_batch(task, [{"i": i} for i in range(n)], driver=driver)
        rates = driver.statistics().rates
    assert rates is not None
    return results, rates


@pytest.mark.parametrize("configured", [True, False], ids=["configured", "learned"])
@pytest.mark.parametrize("tools", [True, False], ids=["tools", "no-tools"])
async def test_limits_set_to_what_the_server_enforces_are_not_refused(
    autojump_clock: trio.testing.MockClock, tools: bool, configured: bool
) -> None:
    # Tool turns carry framing (calls, results, their wrapping) that a count of characters
    # leaves out: reserved at one ratio of tokens per character learned on first turns, 200
    # agents with tools got 339 answers 429 here and 35 of them failed.
    results, rates = await run_limited_batch(200, tools=tools, configured=configured)
    assert [r.status for r in results] == ["ok"] * 200
    assert rates.tokens_per_minute == 30_000
    assert rates.rate_limited <= 5


async def test_the_prompt_estimate_is_close_for_every_shape_of_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # First turns, turns after tool results and forced final turns, estimated when reserved
    # and compared with the prompt tokens sim:// counted.
    results, rates = await run_limited_batch(
        120, tools=True, configured=True, tool_rounds=3, output=RecordState
    )
    assert [r.status for r in results] == ["ok"] * 120
    errors = {e.shape.value: e for e in rates.estimates}
    assert set(errors) == {"first", "tool_results", "final"}
    for error in errors.values():
        assert error.requests >= 100
        assert abs(error.mean) <= 0.02, error
        assert error.mean_abs <= 0.02, error
    # Only the first requests, estimated before or just after the first reply, are far off.
    assert errors["tool_results"].worst_short >= -0.1
    assert errors["final"].worst_short >= -0.06
