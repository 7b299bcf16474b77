"""Distributed batches: commit throughput per worker count and fsync policy, the overhead
against the same batch in one process, and server memory at a fixed admission window.

Every measurement is a fault-free run of ``tests/distributed/chaos.py`` (W worker processes
of the deterministic agent, a real redis-server on 127.0.0.1 with AOF, results checked
exactly as in the chaos runs) without the per-step audit hash, which grows with the batch.

- **throughput**: committed steps per second for 1, 2 and 4 workers with ``appendfsync
  always``, and 4 workers with ``everysec``; median of ``--repeats`` runs. Each run also
  times the same batch in this machine's one process with ``run_batch`` (max_inflight = all
  workers' slots together), so the overhead of distributed mode is a ratio measured in the
  same run.
- **memory** (``--memory``): peak ``used_memory`` of the server for two batch sizes at the
  same window.

Run: ``.venv/bin/python bench/bench_distributed.py`` (``--agents``, ``--repeats``,
``--memory``, ``--memory-sizes``; ``--help``). Everything shares the machine's cores: the
server, W workers, the submitter.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHAOS = ROOT / "tests" / "distributed" / "chaos.py"


def run(agents: int, workers: int, fsync: str, *extra: str) -> dict[str, Any]:
    args = [
        sys.executable, str(CHAOS), "--agents", str(agents), "--workers", str(workers),
        "--fsync", fsync, "--kills", "0", "--zombies", "0", "--server-kills", "0",
        "--no-audit", "--seed", "1", *extra,
    ]  # fmt: skip
    proc = subprocess.run(args, capture_output=True, text=True, timeout=3600, check=False)
    out = proc.stdout
    report: dict[str, Any] = json.loads(out[out.index("{") : out.rindex("}") + 1])
    if proc.returncode != 0:
        raise SystemExit(f"run failed its checks:\n{out}\n{proc.stderr[-2000:]}")
    return report


def throughput(agents: int, repeats: int) -> None:
    print(f"throughput: {agents} agents x 5 steps, model latency 50 ms, 64 slots per worker")
    print("| workers | fsync | commits/s (median) | per worker | runs | run_batch ratio |")
    print("|---|---|---|---|---|---|")
    for workers, fsync in ((1, "always"), (2, "always"), (4, "always"), (4, "everysec")):
        reports = [run(agents, workers, fsync, "--baseline") for _ in range(repeats)]
        rates = sorted(r["commits_per_s"] for r in reports)
        ratios = sorted(r["distributed_over_baseline"] for r in reports)
        median = statistics.median(rates)
        print(
            f"| {workers} | {fsync} | {median:.0f} | {median / workers:.0f} | "
            f"{' / '.join(f'{x:.0f}' for x in rates)} | "
            f"{statistics.median(ratios):.2f} ({' / '.join(f'{x:.2f}' for x in ratios)}) |",
            flush=True,
        )


def memory(sizes: list[int], window: int) -> None:
    print(f"server memory at window {window}, 4 workers, appendfsync everysec")
    print("| agents | peak used_memory | wall |")
    print("|---|---|---|")
    for agents in sizes:
        report = run(agents, 4, "everysec", "--window", str(window))
        print(f"| {agents} | {report['peak_server_memory_mb']} MB | {report['wall_s']} s |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--memory", action="store_true", help="only the memory comparison")
    parser.add_argument("--memory-sizes", default="10000,100000")
    parser.add_argument("--window", type=int, default=2000)
    args = parser.parse_args()
    if args.memory:
        memory([int(n) for n in args.memory_sizes.split(",")], args.window)
    else:
        throughput(args.agents, args.repeats)


if __name__ == "__main__":
    main()
