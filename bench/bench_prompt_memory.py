"""Memory per agent loop with a large system prompt and an output type.

Compiles ``--n`` agent loops of one task (a ``--system-bytes`` system prompt, an output type
whose schema instruction is joined to it, one tool) and measures with ``tracemalloc`` the
bytes they hold while all are alive, divided by ``--n``. The same measurement runs in a
subprocess for each source tree given (``--src``; the working tree's ``src`` by default), so a
baseline checkout can be compared in one run:

    git worktree add /tmp/base fc4b4f6   # or: git archive fc4b4f6 src | tar -x -C /tmp/base
    .venv/bin/python bench/bench_prompt_memory.py --src /tmp/base/src --src src

Every figure is the median of ``--repeats`` subprocesses.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from _common import child_report

ROOT = Path(__file__).resolve().parents[1]

_MEASURE = r"""
import gc, json, sys, tracemalloc
import attrs
import agentcore
from agentcore._tasks.task import compile_job

@attrs.frozen
class Verdict:
    summary: str
    severity: int
    tags: list[str]

@agentcore.tool
def lookup(key: str) -> str:
    '''Look a record up.

    Args:
        key: the record key.
    '''
    return key

n, system_bytes = int(sys.argv[1]), int(sys.argv[2])
system = ("You review records carefully and answer in JSON. " * 200)[:system_bytes]
task = agentcore.Task(
    system=system, prompt="Review record {record}.", tools=[lookup], output=Verdict
)
compile_job(task, {"record": -1}, run_id="warm")  # caches of the first job are not per agent
gc.collect()
tracemalloc.start()
before = tracemalloc.get_traced_memory()[0]
loops = [compile_job(task, {"record": i}, run_id=f"b-{i}") for i in range(n)]
gc.collect()
after = tracemalloc.get_traced_memory()[0]
tracemalloc.stop()
print(json.dumps({"per_agent": (after - before) / n, "agentcore": agentcore.__file__}))
"""


def measure(src: Path, n: int, system_bytes: int) -> tuple[float, str]:
    data = child_report([sys.executable, "-c", _MEASURE, str(n), str(system_bytes)], src=src)
    return float(data["per_agent"]), str(data["agentcore"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5_000, help="agent loops (default 5,000)")
    parser.add_argument("--system-bytes", type=int, default=4096, help="system prompt size")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--src", action="append", type=Path, help="a source tree to measure (repeatable)"
    )
    args = parser.parse_args(argv)
    sources = args.src or [ROOT / "src"]
    print(
        f"{args.n:,} agent loops, {args.system_bytes:,}-byte system prompt + output schema, "
        f"median of {args.repeats}"
    )
    for src in sources:
        runs = [measure(src, args.n, args.system_bytes) for _ in range(args.repeats)]
        per_agent = statistics.median(r[0] for r in runs)
        passes = " / ".join(f"{r[0]:,.0f}" for r in runs)
        print(f"  {runs[0][1]}: {per_agent:,.0f} B per agent loop (passes {passes})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
