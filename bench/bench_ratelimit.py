"""Rate limits: 1,000 agents against a sim:// server whose token limit allows about a third of
the unthrottled throughput.

The simulated server runs in this process (``open_sim_server`` on 127.0.0.1); each client runs
as a child process (``baselines/ratelimit_client.py``), so server and client have a core each.
Every agent asks one question (a ~150-token system prompt, a 250-token answer), with up to
64 requests in flight; the server decodes 4 sequences at once at 1 ms per token, so the
unthrottled run is bound by the server (about a minute for 1,000 agents) and the throttled
ones last a few minutes: long enough for a per-minute limit to matter beyond its first
bucket. Simulated time is real time (``--speedup 1``): the clients' budgets count real
minutes, as they would against a hosted API. Steps, in one run:

1. *Unthrottled*: agentcore against the server without limits; its throughput in tokens per
   simulated minute sets the limit: ``--share`` (1/3) of it.
2. With that ``tokens_per_minute`` enforced by the server (429 + ``retry-after`` past it, and
   OpenAI's ``x-ratelimit-*`` headers on every answer), four clients, each against a fresh
   server:

   - **agentcore, budget**: ``open_driver(..., tokens_per_minute=LIMIT)``;
   - **agentcore, headers**: no configured budget, limits learned from the headers only;
   - **agentcore, adaptive only**: the library as it was before budgets (``--baseline-rev``,
     checked out with ``git archive`` into a temporary folder) with ``adaptive=True``, whose
     only defence is halving concurrency after a 429 and honouring ``retry-after``;
   - **minimal loop**: trio + httpx, retrying each 429 after ``retry-after``.

Reported per client: 429s per 1,000 answered requests (the server's count), and the tokens the
server served as a share of the most the limit admits over the run: one minute's allowance
(the bucket is full at the start) plus the refill over the run's duration.

Run: ``.venv/bin/python bench/bench_ratelimit.py`` (``--n``, ``--repeats``; ``--help``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

from agentcore.sim import SimConfig, open_sim_server

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import baseline_source, fmt, last_json, machine, table

HERE = Path(__file__).resolve().parent
CLIENT = HERE / "baselines" / "ratelimit_client.py"


async def measure(
    config: SimConfig, client_args: list[str], pythonpath: str | None
) -> dict[str, Any]:
    """Serve ``config`` while one client child process runs; the client's report plus the
    server's counters."""
    async with open_sim_server(config=config) as server:
        env = dict(os.environ)
        if pythonpath is not None:
            env["PYTHONPATH"] = pythonpath
        argv = [sys.executable, str(CLIENT), "--url", server.url, *client_args]
        done = await trio.run_process(
            argv, capture_stdout=True, capture_stderr=True, env=env, check=False
        )
        stats = server.statistics()
    report = last_json(done.stdout.decode(errors="replace"))
    if done.returncode != 0 or not report:
        raise RuntimeError(f"client failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    served_tokens = stats.prompt_tokens + stats.completion_tokens
    return {
        **report,
        "served": stats.requests,
        "rate_limited": stats.rate_limited,
        "served_tokens": served_tokens,
    }


async def run(args: argparse.Namespace) -> None:
    n = ["--n", str(args.n), "--slots", str(args.slots)]
    shape: dict[str, Any] = {
        "tool_rounds": 0,
        "slots": args.server_slots,
        "answer_tokens": args.answer_tokens,
        "speedup": args.speedup,
    }
    if args.limit:
        limit = args.limit
        print(f"limit {limit:,} tokens/min (given)")
    else:
        unthrottled = await measure(SimConfig(**shape), ["--mode", "agentcore", *n], None)
        minutes = unthrottled["wall"] * args.speedup / 60
        throughput = unthrottled["served_tokens"] / minutes
        limit = max(1, round(throughput * args.share))
        print(
            f"unthrottled: {unthrottled['served_tokens']:,} tokens in {unthrottled['wall']:.1f} s "
            f"({minutes:.2f} min) = {throughput:,.0f} tokens/min; limit {limit:,} tokens/min"
        )
    limited = SimConfig(**shape, tokens_per_minute=limit)
    with tempfile.TemporaryDirectory() as folder:
        old = baseline_source(args.baseline_rev, Path(folder))
        variants: list[tuple[str, list[str], str | None]] = [
            ("agentcore, budget", ["--mode", "agentcore", "--tpm", str(limit)], None),
            ("agentcore, headers", ["--mode", "agentcore"], None),
            ("minimal loop", ["--mode", "minimal"], None),
        ]
        if old is not None:
            variants.insert(
                2, ("agentcore, adaptive only", ["--mode", "agentcore", "--adaptive"], old)
            )
        if args.clients:
            variants = [v for v in variants if v[0] in args.clients]
        rows = []
        for name, extra, path in variants:
            runs = []
            for _ in range(args.repeats):
                report = await measure(limited, [*extra, *n], path)
                minutes = report["wall"] * args.speedup / 60
                runs.append(
                    {
                        "per_1000": 1000 * report["rate_limited"] / max(1, report["served"]),
                        "share": report["served_tokens"] / (limit * (minutes + 1)),
                        "minutes": minutes,
                        "failed": report["failed"],
                    }
                )
                print(f"  {name}: {report}", flush=True)
            rows.append(
                [
                    name,
                    fmt(statistics.median(r["per_1000"] for r in runs), 1),
                    f"{100 * statistics.median(r['share'] for r in runs):.0f} %",
                    fmt(statistics.median(r["minutes"] for r in runs), 2),
                    str(max(r["failed"] for r in runs)),
                ]
            )
    print()
    print(
        table(
            [
                "client",
                "429s per 1,000 requests",
                "tokens served / limit",
                "minutes",
                "agents failed",
            ],
            rows,
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="agents")
    parser.add_argument("--slots", type=int, default=64, help="max_inflight / semaphore")
    parser.add_argument("--share", type=float, default=1 / 3, help="limit / unthrottled")
    parser.add_argument("--speedup", type=float, default=1.0, help="sim speedup (keep at 1)")
    parser.add_argument("--server-slots", type=int, default=4, help="sim engine slots")
    parser.add_argument("--answer-tokens", type=int, default=250, help="tokens per answer")
    parser.add_argument("--repeats", type=int, default=3, help="runs per client (median)")
    parser.add_argument(
        "--baseline-rev", default="fc4b4f6", help="git revision of the library before budgets"
    )
    parser.add_argument("--limit", type=int, default=0, help="tokens/min (skip step 1)")
    parser.add_argument("--clients", nargs="*", help="only these clients (by name)")
    args = parser.parse_args()
    print(machine())
    print(f"{args.n} agents, {args.slots} in flight, limit {args.share:.2f} of unthrottled")
    trio.run(run, args)


if __name__ == "__main__":
    main()
