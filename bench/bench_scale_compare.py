"""bench_scale.py on two source trees in one run, alternating, medians of the passes.

Runs ``bench/bench_scale.py`` in a subprocess per pass with ``PYTHONPATH`` set to each
``--src`` tree in turn (CPU passes alternate between the trees, so a drift of the machine's
load hits both), then each tree's memory passes once, and prints one table with the median
CPU per turn of each tree, its passes, and the memory figures:

    git archive fc4b4f6 src bench | tar -x -C /tmp/base      # the code before
    .venv/bin/python bench/bench_scale_compare.py --src /tmp/base/src --src src

Each tree runs the ``bench_scale.py`` next to its ``src`` when there is one (the benchmark as
it was at that commit), else this checkout's; with ``--slot-policy`` every tree runs this
checkout's (``--slot-policy priority`` measures the slot line batches use by default).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _bench(src: Path, own: bool) -> Path:
    mine = src.resolve().parent / "bench" / "bench_scale.py"
    return mine if own and mine.exists() else HERE / "bench_scale.py"


def _run(src: Path, args: list[str], own: bool = True) -> str:
    return subprocess.run(
        [sys.executable, str(_bench(src, own)), *args],
        env=dict(os.environ, PYTHONPATH=str(src.resolve())),
        check=True,
        capture_output=True,
        text=True,
        timeout=3600,
    ).stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", action="append", type=Path, required=True)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--memory-n", type=int, default=10_000)
    parser.add_argument(
        "--slot-policy",
        choices=("fifo", "priority"),
        default=None,
        help="the CPU passes' slot line (bench_scale.py --slot-policy); given, every tree "
        "runs this checkout's bench_scale.py (older ones lack the option)",
    )
    args = parser.parse_args(argv)
    policy = [] if args.slot_policy is None else ["--slot-policy", args.slot_policy]
    cpu: dict[Path, list[float]] = {src: [] for src in args.src}
    for _ in range(args.repeats):
        for src in args.src:
            cmd = ["--n", str(args.n), "--repeats", "1", "--skip-memory", *policy]
            out = _run(src, cmd, own=not policy)
            cpu[src].append(float(re.findall(r"([\d.]+) us/turn", out)[0]))
            print(f"  {src}: CPU pass {cpu[src][-1]:.1f} us/turn", flush=True)
    first = statistics.median(cpu[args.src[0]])
    for src in args.src:
        out = _run(src, ["--n", "1000", "--repeats", "1", "--memory-n", str(args.memory_n)])
        median = statistics.median(cpu[src])
        passes = " / ".join(f"{p:.1f}" for p in cpu[src])
        print(f"\n{src}: CPU per turn {median:.1f} us (passes {passes}; {median / first:.2f}x)")
        print("\n".join(line for line in out.splitlines() if "memory" in line or "  " in line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
