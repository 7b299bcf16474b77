"""Refusals: agentcore against a naive retry loop on servers that answer 429 in two ways.

The server is ``baselines/refusing_server.py``, started afresh for every client run, in a
process of its own: ``--kind per-request`` refuses about 4 % of requests with a 429 that
claims ``x-ratelimit-remaining-requests: 0`` and a ``retry-after-ms`` of 150 to 450 ms (plus
1 % each of 503, 529 and connections cut mid-stream) while the next request would pass, and
publishes no limits on its successful replies (a balancer or gateway in front of several
deployments); ``--kind shared`` publishes its limits on every reply and enforces one request
bucket for every sender (a hosted API's quota). Each answer takes ``--latency`` seconds.

Every agent reads its record page by page with a ``lookup`` tool (1 to 5 tool turns, 3 on
average, ``--tool-latency`` each) and then says how many pages it read; an agent is correct
when that answer is the server's for its record. Requests are streamed. The contenders,
each in a process of its own:

- **agentcore**: ``run_batch`` with the task, ``max_inflight=--slots``, ``stream=True``,
  everything else the defaults (retries, slots released during tool waits and back-off);
- **naive loop** (``baselines/retry_loop.py``): trio + httpx, a semaphore of ``--slots``
  held for each attempt, the refused request alone retried after its ``retry-after``.

Reported: each run's wall time, the median over ``--repeats`` runs (the order of the
contenders rotates), the client process's CPU time, correct agents, and what the server
counted (requests, 429s). ``--baseline-rev REV`` adds agentcore at that git revision.

Run: ``.venv/bin/python bench/bench_refusals.py`` (``--agents 1000 --slots 32 --repeats 3
--kind per-request``; ``--help``).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import trio
from _common import (
    ListeningProcess,
    baseline_source,
    child_report,
    fmt,
    machine,
    rotations,
    table,
)

import agentcore

sys.path.insert(0, str(Path(__file__).resolve().parent / "baselines"))
from refusing_server import answer_text, tool_turns
from retry_loop import SYSTEM

HERE = Path(__file__).resolve().parent
SERVER = HERE / "baselines" / "refusing_server.py"
NAIVE = HERE / "baselines" / "retry_loop.py"

TOOL_LATENCY = [0.05]


@agentcore.tool
async def lookup(key: str, page: int) -> str:
    """Read one page of a record.

    Args:
        key: the record's key.
        page: the page to read.
    """
    await trio.sleep(TOOL_LATENCY[0])
    return f"page {page} of {key}: nothing unusual"


async def agentcore_batch(url: str, agents: int, slots: int) -> dict[str, Any]:
    task = agentcore.Task(
        system=SYSTEM, prompt="Record: r{record}. How many pages does it have?",
        tools=[lookup], max_turns=8,
    )  # fmt: skip
    inputs = [{"record": n} for n in range(agents)]
    started = time.perf_counter()
    async with agentcore.open_driver(
        f"{url}/v1", model="bench", max_inflight=slots, stream=True, tools=[lookup]
    ) as driver:
        results = await agentcore.run_batch(task, inputs, driver=driver)
        stats = driver.statistics()
    wall = time.perf_counter() - started
    correct = sum(
        r.status == "ok" and r.output == answer_text(n, tool_turns(n))
        for n, r in enumerate(results)
    )
    assert stats.rates is not None
    return {"wall": wall, "agents": agents, "correct": correct,
            "failed": sum(r.status != "ok" for r in results), "attempts": stats.attempts,
            "retries": stats.attempts - stats.requests,
            "rate_limited": stats.rates.rate_limited}  # fmt: skip


def server_stats(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as answer:
        found: dict[str, Any] = json.loads(answer.read())
        return found


def one_run(
    contender: str, args: argparse.Namespace, seed: int, src: str | None = None
) -> dict[str, Any]:
    """Start a server, run ``contender`` against it in a child process (agentcore from the
    source tree ``src`` when given), stop the server."""
    server = ListeningProcess(
        [sys.executable, str(SERVER), "--kind", args.kind, "--latency", str(args.latency),
         "--seed", str(seed), "--rpm", str(args.rpm)],
        "refusing server",
    )  # fmt: skip
    url = f"http://127.0.0.1:{server.port}"
    common = ["--url", url, "--agents", str(args.agents), "--slots", str(args.slots),
              "--tool-latency", str(args.tool_latency)]  # fmt: skip
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        if contender.startswith("agentcore"):
            report = child_report([sys.executable, __file__, "--child", *common], src=src)
        else:
            report = child_report([sys.executable, str(NAIVE), *common])
        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the server is not reaped yet
        report["cpu"] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        report["server"] = server_stats(server.port)
    finally:
        server.stop()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kind", choices=["per-request", "shared"], default="per-request")
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--slots", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per answer")
    parser.add_argument("--tool-latency", type=float, default=0.05)
    parser.add_argument("--rpm", type=int, default=600, help="the shared kind's limit")
    parser.add_argument("--baseline-rev", help="also run agentcore at this git revision")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        TOOL_LATENCY[0] = args.tool_latency
        print(json.dumps(trio.run(agentcore_batch, args.url, args.agents, args.slots)))
        return
    print(machine())
    print(f"{args.kind} server, {args.agents} agents, {args.slots} slots, streamed, "
          f"latency {args.latency} s, tool {args.tool_latency} s")  # fmt: skip
    contenders = ["agentcore", "naive loop"]
    sources: dict[str, str | None] = {}
    with tempfile.TemporaryDirectory() as folder:
        old = args.baseline_rev and baseline_source(args.baseline_rev, Path(folder))
        if old:
            contenders.append(f"agentcore {args.baseline_rev}")
            sources[contenders[-1]] = old
        walls: dict[str, list[float]] = {name: [] for name in contenders}
        rows_seen: dict[str, list[dict[str, Any]]] = {name: [] for name in contenders}
        for repeat, contender in rotations(contenders, args.repeats):
            report = one_run(contender, args, repeat, sources.get(contender))
            walls[contender].append(report["wall"])
            rows_seen[contender].append(report)
            print(f"  {contender}: {json.dumps(report)}", flush=True)
    rows = []
    for contender, found in walls.items():
        reports = rows_seen[contender]
        rows.append([
            contender,
            fmt(statistics.median(found)),
            ", ".join(fmt(w) for w in found),
            fmt(statistics.median(r["cpu"] for r in reports)),
            f"{min(r['correct'] for r in reports)}/{args.agents}",
            fmt(statistics.median(r["server"]["requests"] for r in reports), 0),
            fmt(statistics.median(r["server"]["refused_429"] for r in reports), 0),
        ])  # fmt: skip
    print()
    print(table(["client", "wall (median, s)", "walls (s)", "client CPU (median, s)",
                 "correct (worst)", "requests served", "429s"], rows))  # fmt: skip
    ratio = statistics.median(walls["agentcore"]) / statistics.median(walls["naive loop"])
    print(f"\nagentcore / naive loop, medians: {ratio:.2f}")


if __name__ == "__main__":
    main()
