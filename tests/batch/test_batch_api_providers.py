"""Batch API backends against the providers' documented behaviour, on the simulator in virtual
time: hops of hours, results files larger than the reply cap, batches refused, failed,
expired or cancelled, submissions refused, limits, and what each costs."""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import h11
import httpx
import orjson
import pytest
import trio
import trio.testing

import agentcore
from agentcore import ConfigError, Task, UsageLimits, open_batch, open_driver, run_batch
from agentcore._backends.urls import backend as make_backend
from agentcore._core.cost import CostLedger, merge_prices
from agentcore._core.events import ErrorKind
from agentcore._sim import SimConfig, open_sim_server
from agentcore._tasks.fingerprint import task_description
from agentcore._tasks.journal import open_step_journal
from agentcore._tasks.task import job_run_id
from agentcore._transports.batch_api import ANTHROPIC_BATCHES, OPENAI_BATCHES
from agentcore._transports.batch_journal import BatchJournal
from agentcore._transports.batching import BatchModelClient
from agentcore._transports.factory import make_transport
from agentcore.wire import TransportError
from tests.batch.test_batch_hops import _Gone, _host, _inputs, _outputs

HOUR = 3600.0
SLOW: dict[str, Any] = {"gather": 1.0, "poll": 60.0, "poll_max": 600.0}
"""Polling as a real run would: a minute at first, then up to ten."""


@agentcore.tool
async def lookup(term: str) -> str:  # async: no thread, so virtual time stays deterministic
    """Look a term up.

    Args:
        term: what to look up.
    """
    return "found " + term


def _task(system: str = "You look terms up.") -> Task[Any]:
    return Task(
        name="lookup",
        system=system,
        prompt="Look up {term} and report.",
        tools=[lookup],
        max_turns=6,
    )


KINDS = pytest.mark.parametrize("kind", ["openai", "anthropic"])


async def _listing(url: str, kind: str) -> list[dict[str, Any]]:
    path = "/batches" if kind == "openai" else "/messages/batches"
    async with httpx.AsyncClient() as client:
        answer = await client.get(url + path, headers={"authorization": "Bearer sk-sim"})
    return list(answer.json()["data"])


def _error_of(result: Any) -> Any:
    assert result.error is not None, result
    return result.error.error


# -- hops of hours, and the retry budget -----------------------------------------------------


@KINDS
async def test_lines_that_fail_in_hour_long_hops_are_sent_again_until_every_agent_ends_ok(
    kind: str, autojump_clock: trio.testing.MockClock
) -> None:
    # The retry budget (300 s) counts the attempts and the time between them, not the hours a
    # line waits inside a hop: every failed line goes into a later hop.
    config = SimConfig(tool_rounds=1, batch_delay=HOUR, batch_fail_rate=0.3, seed=4)
    async with open_sim_server(config=config) as server:
        url = f"{kind}-batch://{_host(server.url)}"
        batched = await run_batch(_task(), _inputs(20), backend=url, model="m", **SLOW)
        standard = await run_batch(
            _task(), _inputs(20), backend=f"http://{_host(server.url)}", model="m", dialect=kind
        )
        failed = server.statistics()
    assert [r.status for r in batched] == ["ok"] * 20
    assert _outputs(batched) == _outputs(standard)
    assert failed.batch_lines > 20 * 2  # lines did fail, and were sent again


# -- results files larger than the reply cap --------------------------------------------------


@KINDS
async def test_a_results_file_larger_than_the_reply_cap_is_read_line_by_line(
    kind: str, autojump_clock: trio.testing.MockClock
) -> None:
    config = SimConfig(tool_rounds=1, batch_delay=HOUR)
    async with open_sim_server(config=config) as server:
        url = f"{kind}-batch://{_host(server.url)}"
        with trio.fail_after(20 * HOUR):
            results = await run_batch(
                _task(), _inputs(20), backend=url, model="m", max_reply_bytes=4096, **SLOW
            )
        created = server.statistics().batches_created
    assert [r.status for r in results] == ["ok"] * 20
    assert created == 2  # one hop per turn: each results file (> 4 KiB) was read, once


@KINDS
async def test_a_result_line_longer_than_the_reply_cap_fails_its_call_for_good(
    kind: str, autojump_clock: trio.testing.MockClock
) -> None:
    config = SimConfig(tool_rounds=0, batch_delay=HOUR, answer_tokens=3000)
    async with open_sim_server(config=config) as server:
        url = f"{kind}-batch://{_host(server.url)}"
        with trio.fail_after(20 * HOUR):
            results = await run_batch(
                _task(), _inputs(3), backend=url, model="m", max_reply_bytes=4096, **SLOW
            )
        created = server.statistics().batches_created
    errors = [_error_of(r) for r in results]
    assert {e.kind for e in errors} == {ErrorKind.REPLY_TOO_LARGE}
    assert all("max_reply_bytes=4096" in e.message for e in errors)
    assert created == 1  # final: not sent again


# -- batches refused for good while polling or reading --------------------------------------


@pytest.mark.parametrize("kind", ["anthropic"])
async def test_results_past_their_retention_end_the_hops_calls_with_a_named_error(
    kind: str, autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.jsonl"
    config = SimConfig(tool_rounds=1, batch_delay=2 * HOUR, batch_retention=HOUR)
    async with open_sim_server(config=config) as server:
        url = f"{kind}-batch://{_host(server.url)}"
        with trio.fail_after(20 * HOUR):
            results = await run_batch(
                _task(), _inputs(4), backend=url, model="m", journal=str(journal), **SLOW
            )
    errors = [_error_of(r) for r in results]
    assert {(e.kind, e.status) for e in errors} == {(ErrorKind.NOT_FOUND, 404)}
    assert all("no longer available" in e.message for e in errors)
    records = [orjson.loads(line) for line in journal.read_bytes().splitlines()]
    assert [r["t"] for r in records if r["t"] != "answer"] == ["intent", "batch", "dead"]


# -- a resumed journal whose batches are gone ------------------------------------------------


def _client(
    url: str, journal: Path | None = None, *, gone: bool = False, api_key: str | None = None,
    model: str = "m", **options: Any,
) -> BatchModelClient:  # fmt: skip
    configured = make_backend(url, model=model, api_key=api_key)
    transport: Any = make_transport(configured.base_url, kind="lean", max_connections=4,
                                    max_reply_bytes=None)  # fmt: skip
    if gone:
        transport = _Gone(transport)
    api = OPENAI_BATCHES if url.startswith("openai") else ANTHROPIC_BATCHES
    return BatchModelClient(
        configured.codec, transport, api, BatchJournal(journal), model, **{**SLOW, **options}
    )


def _records(journal: Path) -> list[dict[str, Any]]:
    if not journal.exists():
        return []
    return [orjson.loads(line) for line in journal.read_bytes().splitlines()]


async def _cancel_at_hop(journal: Path, hop: int, scope: trio.CancelScope) -> None:
    """Cancel ``scope`` once hop ``hop`` is submitted (recorded in ``journal``)."""
    while sum(r["t"] == "batch" for r in _records(journal)) < hop:
        await trio.sleep(1)
    scope.cancel()


MINI_BATCH = {"input": 0.075, "output": 0.30}
"""gpt-4o-mini in a batch, USD per million tokens (cached input billed as input)."""


def _bill(batches: list[dict[str, Any]]) -> float:
    """What the provider bills for ``batches`` of gpt-4o-mini (:data:`MINI_BATCH`)."""
    usage = [b["usage"] for b in batches]
    return sum(u["input_tokens"] * MINI_BATCH["input"] + u["output_tokens"] * MINI_BATCH["output"]
               for u in usage) * 1e-6  # fmt: skip


async def _die_in_hop(url: str, journal: Path, hop: int, count: int, **options: Any) -> None:
    """Run ``count`` agents until hop ``hop`` is submitted, then stop as a killed process
    stops: nothing cancelled at the provider."""
    client = _client(url, journal, gone=True, **options)
    try:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_cancel_at_hop, journal, hop, scope)
                await run_batch(_task(), _inputs(count), backend=client)
    finally:
        await client.aclose()


@KINDS
async def test_a_resumed_journal_naming_a_batch_the_provider_does_not_know_fails_its_calls_once(
    kind: str, autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.jsonl"
    config = SimConfig(tool_rounds=1, batch_delay=HOUR)
    async with open_sim_server(config=config) as first:
        await _die_in_hop(f"{kind}-batch://{_host(first.url)}", journal, 1, 4)
    async with open_sim_server(config=config) as other:  # knows no batch of the first
        url = f"{kind}-batch://{_host(other.url)}"
        with trio.fail_after(HOUR):  # not polled forever
            results = await run_batch(
                _task(), _inputs(4), backend=url, model="m", journal=str(journal), **SLOW
            )
        errors = [_error_of(r) for r in results]
        assert {(e.kind, e.status) for e in errors} == {(ErrorKind.NOT_FOUND, 404)}
        assert [r["t"] for r in _records(journal) if r["t"] != "answer"][-1] == "dead"
        # Resumed once more, the dead batch is not polled again: the calls go into new hops.
        again = await run_batch(
            _task(), _inputs(4), backend=url, model="m", journal=str(journal), **SLOW
        )
    assert [r.status for r in again] == ["ok"] * 4


@KINDS
async def test_a_key_refused_while_polling_fails_the_hops_calls_with_the_providers_answer(
    kind: str, autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.jsonl"
    config = SimConfig(tool_rounds=1, batch_delay=HOUR, api_keys=["sk-old"])
    async with open_sim_server(config=config) as server:
        url = f"{kind}-batch://{_host(server.url)}"
        await _die_in_hop(url, journal, 1, 3, api_key="sk-old")
        with trio.fail_after(HOUR):
            results = await run_batch(_task(), _inputs(3), backend=url, model="m",
                                      api_key="sk-new", journal=str(journal), **SLOW)  # fmt: skip
    errors = [_error_of(r) for r in results]
    assert {(e.kind, e.status) for e in errors} == {(ErrorKind.AUTH, 401)}
    assert all("sk-new"[:6] in e.message for e in errors)


# -- submissions refused ---------------------------------------------------------------------


@KINDS
async def test_a_submission_refused_for_its_key_fails_each_call_once_with_status_and_message(
    kind: str, autojump_clock: trio.testing.MockClock
) -> None:
    config = SimConfig(tool_rounds=1, batch_delay=HOUR, api_keys=["sk-good"])
    async with open_sim_server(config=config) as server:
        url = f"{kind}-batch://{_host(server.url)}"
        results = await run_batch(_task(), _inputs(5), backend=url, model="m", api_key="sk-bad",
                                  **SLOW)  # fmt: skip
        stats = server.statistics()
    errors = [_error_of(r) for r in results]
    assert {(e.kind, e.status, e.retryable) for e in errors} == {(ErrorKind.AUTH, 401, False)}
    wording = "Incorrect API key" if kind == "openai" else "invalid x-api-key"
    assert all(wording in e.message for e in errors)
    assert [r.turns for r in results] == [1] * 5
    assert stats.rejected == 1  # one hop, one refused call: nothing submitted again
    assert stats.batches_created == 0


@asynccontextmanager
async def _answering(
    status: int, body: bytes, headers: list[tuple[str, str]] | None = None
) -> AsyncIterator[tuple[str, list[str], list[float]]]:
    """A server on loopback answering every request with ``status``, ``headers`` and
    ``body``; yields its base URL, the requests it saw and when."""
    seen: list[str] = []
    times: list[float] = []

    async def serve(stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                if not data:
                    return
                conn.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                seen.append(f"{event.method.decode()} {event.target.decode()}")
                times.append(trio.current_time())
            elif isinstance(event, h11.EndOfMessage):
                answer = [("content-type", "application/json"),
                          ("content-length", str(len(body))), *(headers or [])]  # fmt: skip
                out = conn.send(h11.Response(status_code=status, headers=answer))
                out = (out or b"") + (conn.send(h11.Data(data=body)) or b"")
                await stream.send_all(out + (conn.send(h11.EndOfMessage()) or b""))
                conn.start_next_cycle()
            elif isinstance(event, h11.ConnectionClosed):
                return

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(functools.partial(trio.serve_tcp, host="127.0.0.1"),
                                        serve, 0)  # fmt: skip
        port = listeners[0].socket.getsockname()[1]
        yield f"127.0.0.1:{port}", seen, times
        nursery.cancel_scope.cancel()


@KINDS
async def test_a_server_error_on_submission_keeps_its_status_and_is_not_submitted_again_and_again(
    kind: str, autojump_clock: trio.testing.MockClock
) -> None:
    body = orjson.dumps({"error": {"message": "Not Implemented here", "type": "server_error"}})
    async with _answering(501, body) as (host, seen, _):
        results = await run_batch(_task(), _inputs(2), backend=f"{kind}-batch://{host}",
                                  model="m", **SLOW)  # fmt: skip
    errors = [_error_of(r) for r in results]
    assert {(e.kind, e.status) for e in errors} == {(ErrorKind.SERVER, 501)}
    assert all("Not Implemented here" in e.message for e in errors)
    # The same answer twice in a row is a deterministic refusal (RetryPolicy.stop_on_repeat):
    # two hops, each one refused call.
    assert len(seen) == 2, seen


async def test_an_anthropic_batch_refused_for_its_size_is_split_and_every_agent_ends_ok(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Each line is ~1.5 kB: 20 of them pass the 8 kB this simulator takes per batch, so the
    # provider answers 413 (request_too_large) and the hop is submitted again in halves.
    config = SimConfig(tool_rounds=1, batch_delay=HOUR, batch_max_bytes=8_000)
    async with open_sim_server(config=config) as server:
        url = f"anthropic-batch://{_host(server.url)}"
        results = await run_batch(_task(), _inputs(20), backend=url, model="m", **SLOW)
        stats = server.statistics()
    assert [r.status for r in results] == ["ok"] * 20
    assert stats.rejected > 0  # the 413s
    assert stats.batches_created > 2  # smaller hops than one per turn


@pytest.mark.parametrize(
    "limit",
    [{"batch_enqueued_tokens": 2_500}, {"batch_max_requests": 6}],
    ids=["tokens", "requests"],
)
async def test_an_openai_batch_failed_for_its_size_is_split_and_every_agent_ends_ok(
    limit: dict[str, int], autojump_clock: trio.testing.MockClock
) -> None:
    config = SimConfig(tool_rounds=1, batch_delay=HOUR, **limit)
    async with open_sim_server(config=config) as server:
        url = f"openai-batch://{_host(server.url)}"
        results = await run_batch(_task(), _inputs(20), backend=url, model="m", **SLOW)
        batches = await _listing(server.url, "openai")
    assert [r.status for r in results] == ["ok"] * 20
    failed = [b for b in batches if b["status"] == "failed"]
    assert failed  # the first hop did fail, as the provider fails it...
    codes = {e["code"] for b in failed for e in b["errors"]["data"]}
    assert codes <= {"token_limit_exceeded", "too_many_tasks"}
    # ...and its lines were answered in smaller batches, none of them sent twice.
    assert sum(b["request_counts"]["completed"] for b in batches) == 40


async def test_hops_packed_under_the_enqueued_token_limit_never_fail_for_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = SimConfig(tool_rounds=1, batch_delay=HOUR, batch_enqueued_tokens=2_500)
    async with open_sim_server(config=config) as server:
        url = f"openai-batch://{_host(server.url)}"
        results = await run_batch(_task(), _inputs(20), backend=url, model="m",
                                  max_enqueued_tokens=2_500, **SLOW)  # fmt: skip
        batches = await _listing(server.url, "openai")
    assert [r.status for r in results] == ["ok"] * 20
    assert [b for b in batches if b["status"] == "failed"] == []
    assert len(batches) > 2


@pytest.mark.parametrize(
    ("kind", "outcome"),
    [("billing_error", (ErrorKind.QUOTA, 402, False)), ("timeout_error", None)],
)
async def test_anthropic_line_errors_keep_their_type(
    kind: str, outcome: tuple[ErrorKind, int, bool] | None, autojump_clock: trio.testing.MockClock
) -> None:
    rate = 1.0 if outcome is not None else 0.3
    config = SimConfig(tool_rounds=1, batch_delay=HOUR, batch_fail_rate=rate, batch_fail_type=kind)
    async with open_sim_server(config=config) as server:
        url = f"anthropic-batch://{_host(server.url)}"
        results = await run_batch(_task(), _inputs(6), backend=url, model="m", **SLOW)
    if outcome is None:  # a timeout is retried, in a later hop
        assert [r.status for r in results] == ["ok"] * 6
        return
    errors = [_error_of(r) for r in results]
    assert {(e.kind, e.status, e.retryable) for e in errors} == {outcome}
    assert [r.turns for r in results] == [1] * 6  # a spent balance is not retried


class _LostAnswer:
    """A transport that loses the answer to the first batch creation (the batch is made)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.lost = False

    async def send(self, request: Any, timeouts: Any) -> Any:
        return await self.inner.send(request, timeouts)

    @asynccontextmanager
    async def open_stream(self, request: Any, timeouts: Any) -> AsyncIterator[Any]:
        async with self.inner.open_stream(request, timeouts) as response:
            if request.method == "POST" and request.url.endswith("/batches") and not self.lost:
                self.lost = True
                while await response.receive():
                    pass
                raise TransportError("read", "connection reset by peer")
            yield response

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_batch_whose_creation_answer_was_lost_is_found_by_its_tag_not_sent_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = SimConfig(tool_rounds=1, batch_delay=HOUR)
    async with open_sim_server(config=config) as server:
        client = _client(f"openai-batch://{_host(server.url)}")
        lossy = client.transport = _LostAnswer(client.transport)
        try:
            results = await run_batch(_task(), _inputs(5), backend=client)
        finally:
            await client.aclose()
        created = server.statistics().batches_created
    assert lossy.lost
    assert [r.status for r in results] == ["ok"] * 5
    assert created == client.submitted == 2


# -- cancelling and cleaning up --------------------------------------------------------------


def _running(batches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ended = ("completed", "failed", "expired", "cancelled", "ended")
    return [b for b in batches if b.get("status", b.get("processing_status")) not in ended]


def _cancelled(batches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for b in batches if b.get("status") == "cancelled" or b.get("cancel_initiated_at")]


@KINDS
async def test_a_hop_whose_agents_all_time_out_is_cancelled_at_the_provider(
    kind: str, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    config = SimConfig(tool_rounds=1, batch_delay=HOUR)
    async with open_sim_server(config=config) as server:
        url = f"{kind}-batch://{_host(server.url)}"
        results = await run_batch(_task(), _inputs(4), backend=url, model="m", timeout=600,
                                  **SLOW)  # fmt: skip
        await trio.sleep(120)  # the provider's cancelling ends within a minute
        batches = await _listing(server.url, kind)
    assert {r.status for r in results} == {"failed"}
    assert len(batches) == 1
    assert _cancelled(batches) == batches
    assert _running(batches) == []
    assert "cancelled at the provider" in caplog.text


@agentcore.tool
async def slow_lookup(ctx: agentcore.RunContext, term: str) -> str:
    """Look a term up, slowly (agent 3 takes 300 s).

    Args:
        term: what to look up.
    """
    await trio.sleep(100 * ctx.index)
    return "found " + term


@KINDS
async def test_a_budget_that_stops_the_batch_cancels_the_hops_in_flight(
    kind: str, autojump_clock: trio.testing.MockClock
) -> None:
    # The agents' second calls come 100 s apart, each in a hop of its own; the sixth passes
    # the budget of 15 requests, which cancels every agent, and so every hop in flight.
    task = Task(name="slow", system="You look terms up.", prompt="Look up {term} and report.",
                tools=[slow_lookup], max_turns=6)  # fmt: skip
    config = SimConfig(tool_rounds=2, batch_delay=HOUR)
    async with open_sim_server(config=config) as server:
        url = f"{kind}-batch://{_host(server.url)}"
        budget = UsageLimits(requests=15)
        async with (
            open_driver(url, model="m", tools=[slow_lookup], **SLOW) as driver,
            open_batch(
                task, _inputs(10), driver=driver, budget=budget, on_budget="cancel"
            ) as stream,
        ):
            results = [r async for r in stream]
        await trio.sleep(120)
        batches = await _listing(server.url, kind)
    assert len(results) == 10
    assert all(r.status != "ok" for r in results)
    assert len(batches) == 6  # the first turns, then the five second turns that fitted
    assert _running(batches) == []
    assert len(_cancelled(batches)) == 5


@KINDS
async def test_ended_hops_are_deleted_at_the_provider_when_asked(
    kind: str, autojump_clock: trio.testing.MockClock
) -> None:
    config = SimConfig(tool_rounds=1, batch_delay=HOUR)
    async with open_sim_server(config=config) as server:
        url = f"{kind}-batch://{_host(server.url)}"
        results = await run_batch(_task(), _inputs(3), backend=url, model="m", clean_up=True,
                                  **SLOW)  # fmt: skip
        batches = await _listing(server.url, kind)
        files = [b[f] for b in batches for f in ("input_file_id", "output_file_id") if b.get(f)]
        async with httpx.AsyncClient() as http:
            found = [(await http.get(f"{server.url}/files/{f}")).status_code for f in files]
    assert [r.status for r in results] == ["ok"] * 3
    if kind == "openai":  # every input and output file is gone; the batches stay
        assert len(batches) == 2
        assert len(files) == 4
        assert found == [404] * 4
    else:  # the message batches themselves are deleted
        assert batches == []


@KINDS
async def test_a_replaced_journal_cancels_the_batches_it_left_running(
    kind: str, autojump_clock: trio.testing.MockClock, tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    journal = tmp_path / "journal.jsonl"
    config = SimConfig(tool_rounds=1, batch_delay=HOUR)
    async with open_sim_server(config=config) as server:
        url = f"{kind}-batch://{_host(server.url)}"
        await _die_in_hop(url, journal, 1, 3)
        (orphan,) = await _listing(server.url, kind)
        results = await run_batch(_task(), _inputs(3), backend=url, model="m",
                                  journal=str(journal), replace_journal=True, **SLOW)  # fmt: skip
        await trio.sleep(120)
        batches = await _listing(server.url, kind)
    assert [r.status for r in results] == ["ok"] * 3
    assert [b["id"] for b in _cancelled(batches)] == [orphan["id"]]
    assert _running(batches) == []
    assert f"batch {orphan['id']}" in caplog.text and "replaced journal" in caplog.text


# -- the bill ---------------------------------------------------------------------------------

LONG_SYSTEM = "You look terms up for a library catalogue. " + " ".join(
    f"Rule {n}: cite the shelf mark of every source you name." for n in range(160)
)  # past the 1,024 tokens Anthropic caches from
SONNET_BATCH = {"input": 1.50, "output": 7.50, "read": 0.30, "write_5m": 3.75, "write_1h": 6.00}
"""Claude Sonnet 4.5 in a message batch, USD per million tokens: input and output at half the
list price; cache writes and hits at list price (their batch discount is not confirmed)."""


async def _anthropic_bill(url: str) -> tuple[float, int]:
    """What the provider's own results say the batches cost, and how many lines succeeded."""
    total, lines = 0.0, 0
    async with httpx.AsyncClient() as http:
        for batch in await _listing(url, "anthropic"):
            results = await http.get(url + f"/messages/batches/{batch['id']}/results")
            for raw in results.content.splitlines():
                result = orjson.loads(raw)["result"]
                if result["type"] != "succeeded":
                    continue
                usage = result["message"]["usage"]
                split = usage["cache_creation"]
                lines += 1
                total += (
                    usage["input_tokens"] * SONNET_BATCH["input"]
                    + usage["output_tokens"] * SONNET_BATCH["output"]
                    + usage["cache_read_input_tokens"] * SONNET_BATCH["read"]
                    + split["ephemeral_5m_input_tokens"] * SONNET_BATCH["write_5m"]
                    + split["ephemeral_1h_input_tokens"] * SONNET_BATCH["write_1h"]
                ) * 1e-6
    return total, lines


@pytest.mark.parametrize("ttl", [None, "1h"])
async def test_the_ledger_bills_anthropic_cache_writes_as_the_provider_does(
    ttl: str | None, autojump_clock: trio.testing.MockClock
) -> None:
    config = SimConfig(tool_rounds=1, batch_delay=HOUR)
    async with open_sim_server(config=config) as server:
        url = f"anthropic-batch://{_host(server.url)}"
        options: dict[str, Any] = {} if ttl is None else {"cache_ttl": ttl}
        async with open_driver(url, model="claude-sonnet-4-5", tools=[lookup], **options,
                               **SLOW) as driver:  # fmt: skip
            # 20 lines an hour: one every 3 min, within a 5-minute entry's life
            results = await run_batch(_task(LONG_SYSTEM), _inputs(20), driver=driver)
            cost = driver.statistics().cost
        bill, lines = await _anthropic_bill(server.url)
    assert [r.status for r in results] == ["ok"] * 20
    assert cost is not None and cost.cost is not None
    batch = cost.tiers["batch"]
    assert batch.requests == lines == 40
    assert batch.cache_write_tokens > 0  # the first line of the first hop wrote the prefix
    assert batch.cache_write_1h_tokens == (batch.cache_write_tokens if ttl == "1h" else 0)
    assert batch.cached_tokens > 0  # and the others read it
    assert cost.cost == pytest.approx(bill, rel=1e-12)
    assert round(cost.cost, 2) == round(bill, 2)


async def test_answers_replayed_after_a_resume_are_billed_once(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.jsonl"
    config = SimConfig(tool_rounds=1, batch_delay=HOUR)
    async with open_sim_server(config=config) as server:
        url = f"openai-batch://{_host(server.url)}"
        ledger = CostLedger(merge_prices(None))
        first = _client(url, journal, gone=True, model="gpt-4o-mini", ledger=ledger)
        try:
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_cancel_at_hop, journal, 2, scope)
                    await run_batch(_task(), _inputs(5), backend=first)
        finally:
            await first.aclose()
        assert first.ledger is not None
        before = first.ledger.report()
        async with open_driver(url, model="gpt-4o-mini", tools=[lookup], journal=str(journal),
                               **SLOW) as driver:  # fmt: skip
            results = await run_batch(_task(), _inputs(5), driver=driver)
            after = driver.statistics().cost
        batches = await _listing(server.url, "openai")
    assert [r.status for r in results] == ["ok"] * 5
    assert after is not None and before.cost is not None and after.cost is not None
    assert before.tiers["batch"].requests == 5  # the first hop's answers, in the first run
    assert after.replayed_requests == 5  # replayed to the same agents, billed before
    assert after.tiers["batch"].requests == 5  # the second hop's, in the second run
    assert before.cost + after.cost == pytest.approx(_bill(batches), rel=1e-12)


async def test_replies_a_step_journal_restores_count_in_their_agents_costs(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    # The first process receives and journals two hops' answers, then dies with a third hop
    # in flight; the resumed one restores each agent at its last journaled step, so it never
    # asks for those answers again. Each agent's cost still holds every line it was billed
    # for, so the agents' costs add up to the provider's bill.
    journal, steps = tmp_path / "journal.jsonl", tmp_path / "steps.sqlite"
    config = SimConfig(tool_rounds=2, batch_delay=HOUR)
    task = _task()
    async with open_sim_server(config=config) as server:
        url = f"openai-batch://{_host(server.url)}"
        first = _client(url, journal, gone=True, model="gpt-4o-mini",
                        ledger=CostLedger(merge_prices(None)))  # fmt: skip
        try:
            with trio.CancelScope() as scope:
                async with (
                    open_step_journal(steps, task_description(task), new_batch_id="b1",
                                      threads=False) as sj,
                    trio.open_nursery() as nursery,
                ):  # fmt: skip
                    nursery.start_soon(_cancel_at_hop, journal, 3, scope)
                    await run_batch(task, _inputs(5), backend=first, step_journal=sj)
        finally:
            await first.aclose()
        async with (
            open_step_journal(steps, task_description(task), threads=False) as sj,
            open_driver(url, model="gpt-4o-mini", tools=[lookup], journal=str(journal),
                        **SLOW) as driver,
        ):  # fmt: skip
            restored = sj.runs
            results = await run_batch(task, _inputs(5), driver=driver, step_journal=sj)
            ledger = driver.cost
            assert ledger is not None
            costs = [ledger.take_run(job_run_id("b1", i)) for i in range(5)]
            report = ledger.report()
        batches = await _listing(server.url, "openai")
    assert [r.status for r in results] == ["ok"] * 5
    assert len(restored) == 5  # every agent had journaled steps
    assert report.replayed_requests == 10  # two replies each, restored, not asked again
    assert report.tiers["batch"].requests == 5  # the third hop's, answered to this run
    assert sum(b["request_counts"]["completed"] for b in batches) == 15
    bill = _bill(batches)
    assert all(c is not None and c.requests == {"batch": 3} for c in costs)
    total = sum(c.usd for c in costs if c is not None and c.usd is not None)
    assert total == pytest.approx(bill, rel=1e-12)
    assert report.cost is not None and report.replayed_cost is not None
    assert report.cost + report.replayed_cost == pytest.approx(bill, rel=1e-12)


async def test_a_batch_model_without_a_price_is_said_and_its_cost_unknown(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    config = SimConfig(tool_rounds=0, batch_delay=HOUR)
    async with open_sim_server(config=config) as server:
        url = f"openai-batch://{_host(server.url)}"
        async with open_driver(url, model="my-finetune", tools=[lookup], **SLOW) as driver:
            results = await run_batch(_task(), _inputs(2), driver=driver)
            cost = driver.statistics().cost
        with pytest.raises(ConfigError, match=r"no price for 'my-finetune' on 'batch'"):
            async with open_driver(url, model="my-finetune", exact_cost=True, **SLOW):
                pass
    assert [r.status for r in results] == ["ok"] * 2
    assert "no price for my-finetune (batch), my-finetune (standard)" in caplog.text
    assert cost is not None and cost.cost is None
    assert cost.unpriced == ("my-finetune (batch)",)


# -- what the hops look like ------------------------------------------------------------------


async def test_batch_utilisation_is_the_same_in_the_summary_and_the_picture(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    trace = tmp_path / "trace.json"
    config = SimConfig(tool_rounds=1, batch_delay=HOUR)
    async with open_sim_server(config=config) as server:
        url = f"openai-batch://{_host(server.url)}"
        async with open_driver(url, model="m", tools=[lookup], trace=str(trace),
                               **SLOW) as driver:  # fmt: skip
            results = await run_batch(_task(), _inputs(8), driver=driver)
            stats = driver.statistics()
    assert [r.status for r in results] == ["ok"] * 8
    svg = tmp_path / "timeline.svg"
    agentcore.render_timeline(trace, svg)
    drawn = re.search(r"slot utilisation (\d+)%", svg.read_text())
    assert drawn is not None
    assert stats.slot_utilisation is not None
    assert stats.slots.peak_in_use == 8  # a hop's calls: the picture's lanes
    assert stats.slot_utilisation > 0.5  # not the 0 % of 8 calls over 50,000 slots
    assert int(drawn.group(1)) == pytest.approx(100 * stats.slot_utilisation, abs=1)
    picture = svg.read_text()
    assert "2 Batch API hops" in picture  # named in the summary line...
    assert re.search(r"hop 1 · batch_\w+ \(8 requests\)", picture)  # ...drawn...
    assert "poll: in_progress (" in picture and "poll: completed (8/8)" in picture  # ...polled


@KINDS
async def test_a_poll_that_fails_for_a_while_is_polled_again(
    kind: str, autojump_clock: trio.testing.MockClock
) -> None:
    config = SimConfig(tool_rounds=0, batch_delay=HOUR)
    async with open_sim_server(config=config) as server:
        client = _client(f"{kind}-batch://{_host(server.url)}")
        client.transport = _Flaky(client.transport, polls=3)
        try:
            results = await run_batch(_task(), _inputs(3), backend=client)
        finally:
            await client.aclose()
    assert [r.status for r in results] == ["ok"] * 3
    assert client.submitted == 1


class _Flaky:
    """A transport whose first ``polls`` polls of a batch answer 503."""

    def __init__(self, inner: Any, polls: int) -> None:
        self.inner = inner
        self.polls = polls

    async def send(self, request: Any, timeouts: Any) -> Any:
        return await self.inner.send(request, timeouts)

    def open_stream(self, request: Any, timeouts: Any) -> Any:
        if request.method == "GET" and "batches/" in request.url and self.polls:
            self.polls -= 1
            return _refusing(503)
        return self.inner.open_stream(request, timeouts)

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def _refusing(status: int) -> AsyncIterator[Any]:
    class Response:
        headers: tuple[tuple[str, str], ...] = ()

        def __init__(self) -> None:
            self.status = status
            self.sent = False

        async def receive(self) -> bytes:
            if self.sent:
                return b""
            self.sent = True
            return b'{"error": {"message": "try again later", "type": "server_error"}}'

    yield Response()


@KINDS
async def test_a_submission_rate_limited_is_sent_again_after_its_retry_after(
    kind: str, autojump_clock: trio.testing.MockClock
) -> None:
    body = orjson.dumps({"error": {"message": "slow down", "type": "rate_limit_error"}})
    async with _answering(429, body, [("retry-after", "20")]) as (host, seen, times):
        results = await run_batch(_task(), _inputs(2), backend=f"{kind}-batch://{host}",
                                  model="m", retry=agentcore.RetryPolicy(max_attempts=3),
                                  **SLOW)  # fmt: skip
    errors = [_error_of(r) for r in results]
    assert {(e.kind, e.status, e.retry_after) for e in errors} == {
        (ErrorKind.RATE_LIMITED, 429, 20.0)
    }
    assert len(seen) == 3  # one hop per attempt...
    assert all(b - a >= 20 for a, b in itertools.pairwise(times))  # ...as asked


async def test_a_resumed_hop_failed_for_its_size_is_split_from_its_calls_requests(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.jsonl"
    config = SimConfig(tool_rounds=1, batch_delay=HOUR, batch_enqueued_tokens=2_500)
    async with open_sim_server(config=config) as server:
        url = f"openai-batch://{_host(server.url)}"
        await _die_in_hop(url, journal, 1, 20)  # its one hop fails validation, unseen
        results = await run_batch(_task(), _inputs(20), backend=url, model="m",
                                  journal=str(journal), **SLOW)  # fmt: skip
        batches = await _listing(server.url, "openai")
    assert [r.status for r in results] == ["ok"] * 20
    assert batches[-1]["status"] == "failed"  # the first, resumed, then split
    assert sum(b["request_counts"]["completed"] for b in batches) == 40


async def test_a_replaced_journal_cancels_its_orphans_even_when_nothing_is_asked(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.jsonl"
    config = SimConfig(tool_rounds=1, batch_delay=HOUR)
    async with open_sim_server(config=config) as server:
        url = f"anthropic-batch://{_host(server.url)}"
        await _die_in_hop(url, journal, 1, 2)
        async with open_driver(url, model="m", journal=str(journal), replace_journal=True):
            pass  # every input was already done: no call is made
        await trio.sleep(120)
        batches = await _listing(server.url, "anthropic")
    assert len(batches) == 1
    assert _cancelled(batches) == batches
    assert journal.read_bytes() == b""  # the new journal is empty
