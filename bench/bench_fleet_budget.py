"""One rate budget for a fleet: distributed workers against a loopback API that enforces
requests and tokens per minute.

A simulated OpenAI-compatible API runs in this process (``open_sim_server``, real minutes:
``speedup=1``) with ``--rpm`` and ``--tpm`` limits: a bucket of one minute's allowance per
limit, refilled continuously, 429 with ``retry-after`` beyond it, OpenAI's ``x-ratelimit-*``
headers on every answer. A real redis-server holds the batch. ``--workers`` worker processes
(this file with ``--worker``) run ``agentcore.run_worker`` on it, ``--max-inflight`` requests
each; this process submits ``--agents`` agents (one tool call, then the answer: two model
requests each) and samples the API's counters every second.

Modes, each on a fresh server and API:

- ``before``: ``fleet_budget=False``, how workers shared a hosted API until now: each learns
  the limits from the headers and keeps its own budget; a 429 pauses every worker;
- ``fleet``: the fleet's budget in the batch's server (the default);
- ``fleet-chaos``: the same, with one worker SIGKILLed (and replaced) at 40 % of the results
  and the redis-server SIGKILLed and restarted from its AOF at 60 %.

Limits are learned from the headers (``--configured`` gives them to the workers instead).
Reported per run: the API's 429 answers; throughput, as the requests (and tokens) the API
admitted beyond its first minute's allowance per minute between its first and its last
admission, over the limit (an ideal client sends the full bucket at once, then exactly the
refill: 100 %); the most requests and tokens the API admitted in any 60 seconds (sampled each
second) and in any 60 seconds after the first minute; agents lost; and the workers' round
trips to the budget per reservation.

Run: ``.venv/bin/python bench/bench_fleet_budget.py`` (``--modes``, ``--agents``; ``--help``).
The machine's cores are shared by the API, the redis-server, the workers and the submitter.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs
import orjson
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.distributed.redis_server import RedisServer, start_server  # noqa: E402

import agentcore  # noqa: E402
from agentcore.sim import SimConfig, open_sim_server  # noqa: E402

SYSTEM = (
    "You are a careful assistant answering short questions about a product catalogue. "
    "Look the item up before you answer, answer in two sentences and cite the section. " * 3
)


@agentcore.tool
def lookup(item: str) -> str:
    """Look an item up in the catalogue.

    Args:
        item: the item's name.
    """
    return f"{item}: section 4, in stock"


def make_task() -> agentcore.Task:
    return agentcore.Task(
        system=SYSTEM,
        prompt="Question {i}: which catalogue section covers item {i}, and is it in stock?",
        tools=[lookup],
        max_turns=3,
        params=agentcore.ModelParams(max_tokens=256),
    )


# ----------------------------------------------------------------------------- a worker


def worker_main(args: argparse.Namespace) -> None:
    limits: dict[str, Any] = {}
    if args.configured:
        limits = {"requests_per_minute": args.rpm, "tokens_per_minute": args.tpm}
    stats = trio.run(
        lambda: agentcore.run_worker(
            args.queue, make_task(), backend=args.api, model="sim",
            max_inflight=args.max_inflight, exit_when_done=True, lease=5.0, block_ms=200,
            fleet_budget=not args.no_fleet, **limits,
        )
    )  # fmt: skip
    print(json.dumps(attrs.asdict(stats)), flush=True)


# ----------------------------------------------------------------------------- one run


def _windows(samples: list[tuple[float, int, int]], after: float) -> tuple[int, int]:
    """The most requests and tokens admitted within any 60 s (samples a second apart) whose
    window starts at or after ``after`` seconds."""
    most_r = most_t = 0
    for i, (t0, r0, k0) in enumerate(samples):
        if t0 < after:
            continue
        for t1, r1, k1 in samples[i:]:
            if t1 - t0 > 60.0:
                break
            most_r, most_t = max(most_r, r1 - r0), max(most_t, k1 - k0)
    return most_r, most_t


async def run(mode: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    config = SimConfig(
        requests_per_minute=args.rpm, tokens_per_minute=args.tpm, tool_rounds=1,
        answer_tokens=40, seed=1,
    )  # fmt: skip
    server: RedisServer = start_server(folder / f"redis-{mode}")
    url = server.url(f"fleet-{mode}")
    extra = ["--rpm", str(args.rpm), "--tpm", str(args.tpm),
             "--max-inflight", str(args.max_inflight)]  # fmt: skip
    if mode == "before":
        extra.append("--no-fleet")
    if args.configured:
        extra.append("--configured")
    samples: list[tuple[float, int, int]] = []
    refusals: list[tuple[float, int]] = []
    procs: list[subprocess.Popen[bytes]] = []
    written = [0]
    faults: list[str] = []
    try:
        async with open_sim_server(config=config) as api:

            def spawn() -> subprocess.Popen[bytes]:
                with (folder / f"worker-{mode}-{len(procs)}.err").open("wb") as err:
                    return subprocess.Popen(
                        [sys.executable, __file__, "--worker", url, api.url, *extra],
                        stdout=subprocess.PIPE, stderr=err,
                    )  # fmt: skip

            procs.extend(spawn() for _ in range(args.workers))
            started = time.monotonic()

            async def sample() -> None:
                while True:
                    s = api.statistics()
                    now = time.monotonic() - started
                    samples.append((now, s.requests, s.prompt_tokens + s.completion_tokens))
                    if s.rate_limited and (not refusals or refusals[-1][1] != s.rate_limited):
                        refusals.append((round(now), s.rate_limited))
                    await trio.sleep(1.0)

            async def chaos() -> None:
                while written[0] < 0.4 * args.agents:
                    await trio.sleep(0.05)
                procs[0].kill()
                procs[0].wait()
                procs.append(spawn())
                faults.append(f"worker SIGKILL at {time.monotonic() - started:.0f} s")
                while written[0] < 0.6 * args.agents:
                    await trio.sleep(0.05)
                server.kill()
                await trio.sleep(1.0)
                server.start()
                faults.append(f"redis SIGKILL + restart at {time.monotonic() - started:.0f} s")

            def on_result(_: dict[str, Any]) -> None:
                written[0] += 1

            async with trio.open_nursery() as nursery:
                nursery.start_soon(sample)
                if mode == "fleet-chaos":
                    nursery.start_soon(chaos)
                with trio.fail_after(args.timeout):
                    report = await agentcore.submit_batch(
                        url, make_task(), [{"i": i} for i in range(args.agents)],
                        folder / f"out-{mode}.jsonl", window=args.agents, on_result=on_result,
                    )  # fmt: skip
                wall = time.monotonic() - started
                s = api.statistics()
                samples.append((wall, s.requests, s.prompt_tokens + s.completion_tokens))
                nursery.cancel_scope.cancel()
            stats = api.statistics()
        workers = []
        for proc in procs:
            out, _ = proc.communicate(timeout=60)
            lines = out.decode().strip().splitlines()
            if lines and proc.returncode == 0:
                workers.append(json.loads(lines[-1]))
            elif proc.returncode not in (0, -signal.SIGKILL):
                for err in sorted(folder.glob(f"worker-{mode}-*.err")):
                    print(err.name, err.read_text()[-3000:], file=sys.stderr)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        server.stop()
    lines = [orjson.loads(x) for x in (folder / f"out-{mode}.jsonl").read_bytes().splitlines()]
    first = next(t for t, r, _ in samples if r > 0)
    last = next(t for t, r, _ in samples if r == stats.requests)
    tokens = stats.prompt_tokens + stats.completion_tokens
    span = max(last - first, 1e-9) / 60.0
    reservations = sum(w.get("budget_reservations", 0) for w in workers)
    calls = sum(w.get("budget_calls", 0) for w in workers)
    most = _windows(samples, 0.0)
    later = _windows(samples, first + 60.0)
    return {
        "mode": mode,
        "agents": args.agents,
        "ok": sum(r["status"] == "ok" for r in lines),
        "failed": sorted(
            {(r["error"] or {}).get("kind", "?") for r in lines if r["status"] != "ok"}
        ),
        "lost": args.agents - len({r["index"] for r in lines}),
        "written": report.written,
        "faults": faults,
        "wall_s": round(wall, 1),
        "requests": stats.requests,
        "tokens": tokens,
        "answers_429": stats.rate_limited,
        "answers_429_by_time": refusals[:20],
        "requests_throughput": round((stats.requests - args.rpm) / span / args.rpm, 3),
        "tokens_throughput": round((tokens - args.tpm) / span / args.tpm, 3),
        "max_requests_any_60s": most[0],
        "max_tokens_any_60s": most[1],
        "max_requests_any_60s_after_first_minute": later[0],
        "max_tokens_any_60s_after_first_minute": later[1],
        "budget_reservations": reservations,
        "budget_round_trips": calls,
        "round_trips_per_reservation": round(calls / reservations, 3) if reservations else None,
        "budget_local": sum(w.get("budget_local", 0) for w in workers),
        "workers_reported": len(workers),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", nargs=2, metavar=("QUEUE", "API"))
    parser.add_argument("--modes", default="before,fleet,fleet-chaos")
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--max-inflight", type=int, default=64)
    parser.add_argument("--rpm", type=int, default=800)
    parser.add_argument("--tpm", type=int, default=420_000)
    parser.add_argument("--configured", action="store_true", help="limits given, not learned")
    parser.add_argument("--no-fleet", action="store_true", help="(worker) fleet_budget=False")
    parser.add_argument("--timeout", type=float, default=1200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.worker:
        args.queue, args.api = args.worker
        worker_main(args)
        return
    reports = []
    with tempfile.TemporaryDirectory(prefix="agentcore-fleet-") as tmp:
        for mode in args.modes.split(","):
            report = trio.run(run, mode, args, Path(tmp))
            print(json.dumps(report), flush=True)
            reports.append(report)
    if args.json:
        args.json.write_text(json.dumps(reports, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    signal.signal(signal.SIGINT, signal.default_int_handler)
    main()
