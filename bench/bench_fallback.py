"""Fallback from a dead primary: how long a few agents take when the primary is not there.

The primary is a loopback port where nothing listens (a free port picked and closed again:
every connection is refused at once), the fallback is ``sim://``, the retry policy is the
default one. Each agent runs a small task (one tool call, then an answer: two model requests).
Each repeat runs the batch in a fresh process, so nothing carries over between repeats; the
table gives each repeat's wall time and their median.

Run: ``.venv/bin/python bench/bench_fallback.py`` (``--agents 3 --repeats 3``;
``--no-breaker`` turns the circuit breaker off, the behaviour before it; ``--sim-only`` runs
the same batch on ``sim://`` alone, without the dead primary: the floor).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import time

import trio
from _common import child_report

import agentcore


@agentcore.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def free_port() -> int:
    """A loopback port where nothing listens (bound, then closed again)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def one_batch(agents: int, mode: str) -> dict[str, object]:
    task = agentcore.Task(prompt="What is {input}? Use the tool.", tools=[add], max_turns=4)
    options: dict[str, object] = {
        "backend": f"http://127.0.0.1:{free_port()}/v1",
        "fallback": ["sim://"],
    }
    if mode == "no-breaker":
        options["circuit_breaker"] = None
    elif mode == "sim-only":
        options = {"backend": "sim://"}
    started = time.perf_counter()
    inputs = [f"{i} + {i}" for i in range(agents)]
    results = await agentcore.run_batch(task, inputs, model="sim", **options)
    wall = time.perf_counter() - started
    return {
        "wall": wall,
        "statuses": [r.status for r in results],
        "served_by": sorted({name for r in results for name in r.served_by or ()}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-breaker", action="store_true", help="circuit_breaker=None")
    parser.add_argument("--sim-only", action="store_true", help="sim:// alone, no primary")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(trio.run(one_batch, args.agents, args.child)))
        return
    mode = "no-breaker" if args.no_breaker else "sim-only" if args.sim_only else "breaker"
    walls = []
    for repeat in range(args.repeats):
        argv = [sys.executable, __file__, "--child", mode, "--agents", str(args.agents)]
        found = child_report(argv)
        walls.append(found["wall"])
        print(f"repeat {repeat + 1}: {found['wall']:.2f} s, {found['statuses']}, "
              f"served by {found['served_by']}")  # fmt: skip
    median = statistics.median(walls)
    print(f"{mode}: median of {args.repeats}: {median:.2f} s ({args.agents} agents)")


if __name__ == "__main__":
    main()
