"""Import cost of agentcore's public namespaces, from ``python -X importtime``.

Each probe runs in a fresh interpreter; the figure is the cumulative microseconds of the
probed module, median of ``--runs`` runs. ``import agentcore`` is lazy (names load on first
use), ``agentcore.core`` is the trio-free embedding surface, and touching
``agentcore.open_driver`` loads the driver, the transports, trio and httpx.

    python bench/bench_import.py [--runs 7] [--baseline SRC_DIR]

``--baseline`` names another checkout's ``src`` folder (for example an older commit made with
``git worktree add``): its ``import agentcore`` is measured in the same run, interleaved, and
the ratio printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

PROBES = {
    "import agentcore": ("import agentcore", "agentcore"),
    "import agentcore.core": ("import agentcore.core", "agentcore.core"),
    "agentcore.open_driver": ("import agentcore; agentcore.open_driver", None),
}


def _cumulative_us(code: str, module: str | None, src: str | None = None) -> int:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stderr
    rows = [line.split("|") for line in err.splitlines() if line.startswith("import time:")]
    parsed = [(int(r[1]), r[2][1:]) for r in rows[1:]]  # the name keeps its nesting indent
    if module is None:  # everything the statement imported: the top-level entries
        return sum(us for us, name in parsed if not name.startswith(" "))
    return next(us for us, name in parsed if name == module)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline", help="another checkout's src folder to compare with")
    args = parser.parse_args()
    if args.baseline:
        ours, theirs = [], []
        for _ in range(args.runs):
            ours.append(_cumulative_us("import agentcore", "agentcore"))
            theirs.append(_cumulative_us("import agentcore", "agentcore", args.baseline))
        mine, base = statistics.median(ours), statistics.median(theirs)
        print(
            f"import agentcore: {mine / 1000:.1f} ms vs baseline {base / 1000:.1f} ms "
            f"(ratio {mine / base:.3f}; medians of {args.runs})"
        )
    for label, (code, module) in PROBES.items():
        runs = [_cumulative_us(code, module) for _ in range(args.runs)]
        print(f"{label:26} median {statistics.median(runs) / 1000:7.1f} ms  (runs: {args.runs})")


if __name__ == "__main__":
    main()
