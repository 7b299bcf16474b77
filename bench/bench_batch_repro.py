"""The Batch API paths that real hops take after submission, each on the simulator in virtual
time (a trio ``MockClock`` that jumps whenever every task waits), counted per scheme:

- ``fail``: 20 agents, one tool turn, hops of one hour, 30 % of lines failing: agents ``ok``;
- ``cap``: 20 agents, one tool turn, results files larger than a 4 KiB reply cap: agents that
  ended, batches created;
- ``gone``: Anthropic results past their retention (an hour; hops last two): the virtual
  seconds until every agent ended, and the error they end with;
- ``refused``: 2 agents against a server answering every request with a 501: submissions made,
  and the status the agents' errors keep;
- ``timeout``: 4 agents whose runs time out (600 s) inside hour-long hops: batches still
  running at the provider a minute later;
- ``cache``: 20 agents of ``claude-sonnet-4-5`` with a long shared system prompt: the ledger
  against the bill computed here from the simulator's own usage and the published prices, and
  what pricing cache writes as plain input (the earlier ledger) would have said.

    python bench/bench_batch_repro.py
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import h11
import httpx
import orjson
import trio
import trio.testing
from _common import emit

import agentcore
from agentcore import Task, open_driver, run_batch
from agentcore.sim import SimConfig, open_sim_server

HOUR = 3600.0
SLOW: dict[str, Any] = {"gather": 1.0, "poll": 60.0, "poll_max": 600.0}
"""Polling as a real run would: a minute at first, then up to ten."""
SONNET_BATCH = {"input": 1.50, "output": 7.50, "read": 0.30, "write_5m": 3.75}
"""Claude Sonnet 4.5 in a message batch, USD per million tokens (Anthropic's pricing page):
input and output at half the list price, cache writes (5 min) and hits at list price."""
LONG_SYSTEM = "You look terms up for a library catalogue. " + " ".join(
    f"Rule {n}: cite the shelf mark of every source you name." for n in range(160)
)


@agentcore.tool
async def lookup(term: str) -> str:
    """Look a term up.

    Args:
        term: what to look up.
    """
    return "found " + term


def _task(system: str = "You look terms up.") -> Task[Any]:
    return Task(name="lookup", system=system, prompt="Look up {term} and report.",
                tools=[lookup], max_turns=6)  # fmt: skip


def _inputs(count: int) -> list[dict[str, str]]:
    return [{"term": f"t{i}"} for i in range(count)]


def _host(url: str) -> str:
    return url.removesuffix("/v1").removeprefix("http://")


async def _listing(url: str, kind: str) -> list[dict[str, Any]]:
    path = "/batches" if kind == "openai" else "/messages/batches"
    async with httpx.AsyncClient() as client:
        answer = await client.get(url + path, headers={"authorization": "Bearer sk-sim"})
    return list(answer.json()["data"])


def _errors(results: list[Any]) -> list[str]:
    """The kinds and statuses of the results' model errors."""
    named = (r.error.error for r in results if r.error is not None and r.error.error)
    return sorted({f"{e.kind.value} {e.status}" for e in named})


async def fail(kind: str) -> dict[str, Any]:
    config = SimConfig(tool_rounds=1, batch_delay=HOUR, batch_fail_rate=0.3, seed=4)
    async with open_sim_server(config=config) as server:
        url = f"{kind}-batch://{_host(server.url)}"
        began = trio.current_time()
        results = await run_batch(_task(), _inputs(20), backend=url, model="m", **SLOW)
        hours = (trio.current_time() - began) / HOUR
        lines = server.statistics().batch_lines
    ok = sum(r.status == "ok" for r in results)
    return {"ok": f"{ok}/20", "lines_sent": lines, "virtual_hours": round(hours, 1)}


async def cap(kind: str) -> dict[str, Any]:
    config = SimConfig(tool_rounds=1, batch_delay=HOUR)
    async with open_sim_server(config=config) as server:
        url = f"{kind}-batch://{_host(server.url)}"
        with trio.move_on_after(48 * HOUR):
            results = await run_batch(
                _task(), _inputs(20), backend=url, model="m", max_reply_bytes=4096, **SLOW
            )
        created = server.statistics().batches_created
    ended = sum(r.status == "ok" for r in results)
    return {"ended_ok": f"{ended}/20", "batches_created": created}


async def gone(kind: str) -> dict[str, Any]:
    if kind != "anthropic":  # retention is Anthropic's (29 days); OpenAI keeps files
        return {}
    config = SimConfig(tool_rounds=1, batch_delay=2 * HOUR, batch_retention=HOUR)
    async with open_sim_server(config=config) as server:
        url = f"{kind}-batch://{_host(server.url)}"
        began = trio.current_time()
        with trio.move_on_after(48 * HOUR):
            results = await run_batch(_task(), _inputs(4), backend=url, model="m", **SLOW)
        seconds = trio.current_time() - began
    return {"ended": f"{len(results)}/4", "virtual_s": round(seconds), "errors": _errors(results)}


@asynccontextmanager
async def _answering(status: int, body: bytes) -> AsyncIterator[tuple[str, list[str]]]:
    """A loopback server answering every request with ``status`` and ``body``."""
    seen: list[str] = []

    async def serve(stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                if not data:
                    return
                conn.receive_data(data)
            elif isinstance(event, h11.Request):
                seen.append(f"{event.method.decode()} {event.target.decode()}")
            elif isinstance(event, h11.EndOfMessage):
                headers = [("content-type", "application/json"),
                           ("content-length", str(len(body)))]  # fmt: skip
                out = conn.send(h11.Response(status_code=status, headers=headers)) or b""
                out += conn.send(h11.Data(data=body)) or b""
                await stream.send_all(out + (conn.send(h11.EndOfMessage()) or b""))
                conn.start_next_cycle()
            elif isinstance(event, h11.ConnectionClosed):
                return

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(functools.partial(trio.serve_tcp, host="127.0.0.1"),
                                        serve, 0)  # fmt: skip
        yield f"127.0.0.1:{listeners[0].socket.getsockname()[1]}", seen
        nursery.cancel_scope.cancel()


async def refused(kind: str) -> dict[str, Any]:
    body = orjson.dumps({"error": {"message": "Not Implemented here", "type": "server_error"}})
    async with _answering(501, body) as (host, seen):
        results = await run_batch(_task(), _inputs(2), backend=f"{kind}-batch://{host}",
                                  model="m", **SLOW)  # fmt: skip
    return {"submissions": len(seen), "errors": _errors(results)}


async def timeout(kind: str) -> dict[str, Any]:
    config = SimConfig(tool_rounds=1, batch_delay=HOUR)
    async with open_sim_server(config=config) as server:
        url = f"{kind}-batch://{_host(server.url)}"
        results = await run_batch(_task(), _inputs(4), backend=url, model="m", timeout=600,
                                  **SLOW)  # fmt: skip
        await trio.sleep(120)
        batches = await _listing(server.url, kind)
    live = ("validating", "in_progress", "finalizing", "cancelling", "canceling")
    running = [b for b in batches if b.get("status", b.get("processing_status")) in live]
    statuses = sorted({r.status for r in results})
    return {"statuses": statuses, "batches": len(batches), "running_after": len(running)}


async def cache(kind: str) -> dict[str, Any]:
    if kind != "anthropic":
        return {}
    config = SimConfig(tool_rounds=1, batch_delay=HOUR)
    async with open_sim_server(config=config) as server:
        url = f"anthropic-batch://{_host(server.url)}"
        async with open_driver(url, model="claude-sonnet-4-5", tools=[lookup], **SLOW) as driver:
            await run_batch(_task(LONG_SYSTEM), _inputs(20), driver=driver)
            report = driver.statistics().cost
        bill = plain = 0.0
        async with httpx.AsyncClient() as http:
            for batch in await _listing(server.url, "anthropic"):
                answer = await http.get(server.url + f"/messages/batches/{batch['id']}/results")
                for raw in answer.content.splitlines():
                    result = orjson.loads(raw)["result"]
                    if result["type"] != "succeeded":
                        continue
                    usage = result["message"]["usage"]
                    written = usage["cache_creation_input_tokens"]
                    common = (
                        usage["input_tokens"] * SONNET_BATCH["input"]
                        + usage["output_tokens"] * SONNET_BATCH["output"]
                        + usage["cache_read_input_tokens"] * SONNET_BATCH["read"]
                    )
                    bill += (common + written * SONNET_BATCH["write_5m"]) * 1e-6
                    plain += (common + written * SONNET_BATCH["input"]) * 1e-6
    assert report is not None and report.cost is not None
    return {
        "ledger_usd": round(report.cost, 6),
        "bill_usd": round(bill, 6),
        "to_the_cent": round(report.cost, 2) == round(bill, 2),
        "writes_as_plain_input_usd": round(plain, 6),
        "plain_input_low_by": f"{100 * (1 - plain / bill):.1f} %",
    }


CASES = {"fail": fail, "cap": cap, "gone": gone, "refused": refused, "timeout": timeout,
         "cache": cache}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    report: dict[str, Any] = {}
    for name in args.cases.split(","):
        for kind in ("openai", "anthropic"):
            clock = trio.testing.MockClock(autojump_threshold=0)
            row = trio.run(CASES[name], kind, clock=clock)
            if row:
                report[f"{name} {kind}-batch"] = row
                print(name, kind, orjson.dumps(row).decode(), file=sys.stderr, flush=True)
    emit(report)


if __name__ == "__main__":
    main()
