"""bench_overhead.py's agentcore contender on several source trees in one run, alternating.

One fixed-latency server (``baselines/fixed_latency_server.py``) and one workload (the
*lookup* shape of ``bench_overhead.py``: N agents x 2 turns, a 100 ms tool, a 50 ms model,
32 slots); the agentcore runner (``baselines/agentcore_runner.py``) runs once per ``--src``
tree per repeat, each in its own subprocess with ``PYTHONPATH`` set to that tree, the order
rotated by one per repeat so that a drift of the machine's load hits every tree. Prints, per
tree, the medians of the batch's wall time, the batch's CPU time (measured inside the process,
around the batch), the whole process's CPU time and peak RSS (``wait4``: start-up and imports
included), each with its passes and its ratio to the first tree:

    git archive 82cea4b src bench | tar -x -C /tmp/base82      # the code before
    .venv/bin/python bench/bench_overhead_compare.py --src /tmp/base82/src --src src

Every tree runs this checkout's runner (it uses only the public API).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Measured, fmt, machine, table
from bench_overhead import measure

MEASURES = (
    ("wall", "batch wall s"),
    ("cpu", "batch CPU s"),
    ("process_cpu", "process CPU s"),
    ("rss_mb", "peak RSS MB"),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", action="append", type=Path, required=True)
    parser.add_argument("--n", type=int, default=1000, help="agents (default 1000)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--slots", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.05, help="model seconds per request")
    parser.add_argument("--tool-latency", type=float, default=0.1)
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds per run")
    args = parser.parse_args(argv)
    trees = [str(src.resolve()) for src in args.src]
    print(f"machine: {machine()}")

    def check(tree: str, measured: Measured) -> None:
        report = measured.report
        if measured.returncode != 0 or not report or report.get("ok") != args.n:
            print(measured.stderr.strip()[-2000:], file=sys.stderr)
            raise SystemExit(f"{tree}: the run failed ({report.get('errors')})")
        if Path(report["agentcore"]).parent != Path(tree):
            raise SystemExit(f"{tree}: the runner imported {report['agentcore']}")

    runs = measure(
        trees,
        args,
        contender=lambda tree: "agentcore",
        env=lambda tree: {**os.environ, "PYTHONPATH": tree},
        check=check,
    )
    print(
        f"\noverhead: N={args.n} x 2 turns, {int(args.latency * 1000)} ms model, "
        f"{int(args.tool_latency * 1000)} ms tool, {args.slots} slots; medians of "
        f"{args.repeats}, ratios to {trees[0]}\n"
    )
    first = {key: statistics.median(r[key] for r in runs[trees[0]]) for key, _ in MEASURES}
    rows = []
    for tree in trees:
        row = [tree]
        for key, _ in MEASURES:
            values = [r[key] for r in runs[tree]]
            median = statistics.median(values)
            digits = 0 if key == "rss_mb" else 2
            passes = " / ".join(fmt(v, digits) for v in values)
            row.append(f"{fmt(median, digits)} ({median / first[key]:.2f}x; {passes})")
        rows.append(row)
    print(table(["tree", *(label for _, label in MEASURES)], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
