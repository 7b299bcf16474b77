"""Batch API backends in process: hops within the API's limits, failed lines sent again in a
later hop, answers at the batch price, the journal, and the options' errors. Each test runs a
simulator on loopback with short batch delays."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
import trio

import agentcore
from agentcore import ConfigError, Task, open_driver, run_batch
from agentcore._backends.urls import backend as make_backend
from agentcore._sim import SimConfig, open_sim_server
from agentcore._transports.batch_api import ANTHROPIC_BATCHES, OPENAI_BATCHES
from agentcore._transports.batch_journal import BatchJournal
from agentcore._transports.batching import BatchModelClient
from agentcore._transports.factory import make_transport
from agentcore.wire import TransportError

FAST: dict[str, Any] = {"gather": 0.05, "poll": 0.01, "poll_max": 0.05}


@agentcore.tool
def lookup(term: str) -> str:
    """Look a term up.

    Args:
        term: what to look up.
    """
    return "found " + term


def _task() -> Task[Any]:
    return Task(
        name="lookup",
        system="You look terms up.",
        prompt="Look up {term} and report.",
        tools=[lookup],
        max_turns=6,
    )


def _inputs(count: int) -> list[dict[str, str]]:
    return [{"term": f"t{i}"} for i in range(count)]


def _host(url: str) -> str:
    return url.removesuffix("/v1").removeprefix("http://")


def _outputs(results: list[Any]) -> list[Any]:
    return [(r.status, r.output, r.turns) for r in results]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_failed_lines_go_into_a_later_hop_and_every_agent_ends_as_on_the_standard_endpoint(
    kind: str, autojump_clock: trio.testing.MockClock
) -> None:
    config = SimConfig(tool_rounds=2, batch_delay=0.05, batch_fail_rate=0.3, seed=3)
    async with open_sim_server(config=config) as server:
        host = _host(server.url)
        batched = await run_batch(
            _task(), _inputs(30), backend=f"{kind}-batch://{host}", model="m", **FAST
        )
        stats = server.statistics()
        standard = await run_batch(
            _task(), _inputs(30), backend=f"http://{host}", model="m", dialect=kind
        )
    assert all(r.status == "ok" for r in batched)
    assert stats.batch_lines > 30 * 3  # failed lines were sent again...
    assert stats.batches_created > 3  # ...in later hops
    assert _outputs(batched) == _outputs(standard)


async def test_a_hop_holds_at_most_the_apis_requests_per_batch() -> None:
    async with open_sim_server(config=SimConfig(tool_rounds=0, batch_delay=0.05)) as server:
        configured = make_backend(f"openai-batch://{_host(server.url)}", model="m")
        client = BatchModelClient(
            configured.codec,
            make_transport(configured.base_url, kind="lean", max_connections=4),
            attrs.evolve(OPENAI_BATCHES, max_requests=7),  # type: ignore[misc]
            BatchJournal(),
            "m",
            **FAST,
        )
        try:
            results = await run_batch(_task(), _inputs(20), backend=client)
        finally:
            await client.aclose()
        assert all(r.status == "ok" for r in results)
        assert server.statistics().batches_created == 3  # 7 + 7 + 6
        assert client.submitted == 3


async def test_batch_answers_are_counted_at_the_batch_price_tier() -> None:
    async with open_sim_server(config=SimConfig(tool_rounds=1, batch_delay=0.05)) as server:
        url = f"openai-batch://{_host(server.url)}"
        async with open_driver(url, model="gpt-4o-mini", **FAST) as driver:
            results = await run_batch(_task(), _inputs(5), backend=driver.client)
            cost = driver.statistics().cost
    assert all(r.status == "ok" for r in results)
    assert cost is not None
    assert set(cost.tiers) == {"batch"}
    assert cost.tiers["batch"].requests == 10
    assert cost.cost is not None and cost.standard_cost is not None
    batch = cost.tiers["batch"]
    # gpt-4o-mini's Batch API rates: half the input and output prices, cached input billed as
    # input (docs/decisions.md: the batch tier's cached input).
    expected = (batch.prompt_tokens * 0.075 + batch.completion_tokens * 0.30) * 1e-6
    assert cost.cost == pytest.approx(expected)
    assert cost.cost < cost.standard_cost


async def test_a_batch_hop_is_not_bounded_by_max_inflight() -> None:
    async with open_sim_server(config=SimConfig(tool_rounds=0, batch_delay=0.05)) as server:
        url = f"openai-batch://{_host(server.url)}"
        results = await run_batch(_task(), _inputs(40), backend=url, model="m", max_inflight=4,
                                  **FAST)  # fmt: skip
        assert all(r.status == "ok" for r in results)
        assert server.statistics().batches_created == 1  # all 40 calls in one hop


class _Gone:
    """A transport through which no cancel reaches the provider: as when the process dies
    before it can cancel its batches."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def send(self, request: Any, timeouts: Any) -> Any:
        return await self.inner.send(request, timeouts)

    def open_stream(self, request: Any, timeouts: Any) -> Any:
        if request.url.endswith("/cancel"):
            raise TransportError("connect", "the process is gone")
        return self.inner.open_stream(request, timeouts)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _client(url: str, journal: Path | None = None, *, gone: bool = False,
            **options: Any) -> BatchModelClient:  # fmt: skip
    configured = make_backend(url, model="m")
    transport: Any = make_transport(configured.base_url, kind="lean", max_connections=4)
    if gone:
        transport = _Gone(transport)
    api = OPENAI_BATCHES if url.startswith("openai") else ANTHROPIC_BATCHES
    return BatchModelClient(
        configured.codec, transport, api, BatchJournal(journal), "m", **{**FAST, **options}
    )


async def test_a_resumed_journal_answers_ended_hops_and_polls_the_one_in_flight(
    tmp_path: Path,
) -> None:
    journal = tmp_path / "journal.jsonl"

    def steps() -> list[str]:
        if not journal.exists():
            return []
        records = [orjson.loads(line)["t"] for line in journal.read_bytes().splitlines()]
        return [r for r in records if r != "answer"]

    async def stop_once_hop_2_is_in_flight(scope: trio.CancelScope) -> None:
        while steps().count("batch") < 2:
            await trio.sleep(0.005)
        scope.cancel()

    config = SimConfig(tool_rounds=1, batch_delay=0.5)  # hop 2 stays in flight for 0.5 s
    async with open_sim_server(config=config) as server:
        url = f"openai-batch://{_host(server.url)}"
        first = _client(url, journal, gone=True)  # dies with hop 2 in flight
        try:
            with trio.fail_after(60), trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(stop_once_hop_2_is_in_flight, scope)
                    await run_batch(_task(), _inputs(10), backend=first)
        finally:
            await first.aclose()
        assert steps() == ["intent", "batch", "ended", "intent", "batch"]
        second = _client(url, journal)
        try:
            results = await run_batch(_task(), _inputs(10), backend=second)
        finally:
            await second.aclose()
        created = server.statistics().batches_created
    # The second hop was polled, not resent: no line went into two batches. (Under load the
    # 50 ms gather window may close before every second turn has arrived, and the late ones
    # go into a third hop of their own.)
    records = [orjson.loads(line) for line in journal.read_bytes().splitlines()]
    ids = [i for r in records if r["t"] == "intent" for i in r["ids"]]
    assert len(ids) == len(set(ids)) == 20
    assert created == steps().count("batch") == steps().count("intent")
    assert all(r.status == "ok" for r in results)


def test_a_torn_journal_line_is_a_step_that_never_happened(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(
        b'{"t":"intent","hop":"a-1","ids":["k-0"]}\n{"t":"batch","hop":"a-1","id":"b1"}\n'
        b'{"t":"intent","hop":"a-2","ids":["j-0"]}\n{"t":"batch","hop":"a-2","i'
    )
    journal = BatchJournal(path)
    assert [(h.tag, h.batch_id, h.ids) for h in journal.pending] == [("a-1", "b1", ["k-0"])]
    assert journal.new_tag()[1] == 3
    journal.close()


@pytest.mark.parametrize(
    ("url", "options", "message"),
    [
        ("vllm://127.0.0.1:8000", {"journal": "j.jsonl"}, "apply to openai-batch"),
        ("openai-batch://127.0.0.1:1", {"poll": -1}, "poll must be"),
        ("openai-batch://127.0.0.1:1", {"stream": True}, "stream=True does not apply"),
    ],
)
async def test_batch_options_are_checked(url: str, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(open_driver(url, model="m", **options))


def test_batch_apis_state_their_limits() -> None:
    # "200 MB" and "256 MB" read as 10**6 bytes: the smaller of the two readings (decisions.md)
    assert (OPENAI_BATCHES.max_requests, OPENAI_BATCHES.max_bytes) == (50_000, 200_000_000)
    assert (ANTHROPIC_BATCHES.max_requests, ANTHROPIC_BATCHES.max_bytes) == (100_000, 256_000_000)


async def test_hop_lines_are_looked_at_as_often_as_the_hops_are_polled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    import io

    from agentcore._cli.batch_progress import show_hops

    # Each hop lives 0.5 s (virtual time), between two of show_hops' 1 s looks: only looking
    # at the poll interval (0.1 s) sees it in flight.
    config = SimConfig(tool_rounds=1, batch_delay=0.5)
    out = io.StringIO()
    async with open_sim_server(config=config) as server:
        url = f"openai-batch://{_host(server.url)}"
        options: dict[str, Any] = {"gather": 0.05, "poll": 0.1, "poll_max": 0.1}
        async with (
            open_driver(url, model="m", tools=[lookup], **options) as driver,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(show_hops, driver, out)
            results = await run_batch(_task(), _inputs(3), driver=driver)
            nursery.cancel_scope.cancel()
    assert all(r.status == "ok" for r in results)
    lines = out.getvalue().splitlines()
    assert any(line.startswith("hop 1: batch ") for line in lines), lines
    assert any(line.startswith("hop 2: batch ") for line in lines), lines
