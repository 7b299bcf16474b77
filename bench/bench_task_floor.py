"""The floor under bench_scale's memory figures: what one bare trio task per agent costs.

``bench_scale.py`` measures agentcore's memory per agent beyond its transcript in two states
(queued for a slot, inside a tool call). This measures, the same way (``tracemalloc``, every
agent alive in the same state, divided by N), hand-written trio code with nothing of
agentcore in it:

- **parked**: one task per agent, parked on ``trio.lowlevel.wait_task_rescheduled`` (what a
  task waiting in any queue costs at least);
- **in the tool**: one task per agent awaiting bench_scale's own ``lookup`` tool body (it
  waits at the same barrier), called directly.

A design with one task per agent cannot go below these figures in those states; the tool's
own frames are part of the second one.

Run: ``.venv/bin/python bench/bench_task_floor.py`` (``--n``; ``--help``).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tracemalloc
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import _Barrier


async def parked(n: int) -> float:
    tasks: list[trio.lowlevel.Task] = []

    async def agent() -> None:
        tasks.append(trio.lowlevel.current_task())
        await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.SUCCEEDED)

    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    async with trio.open_nursery() as nursery:
        for _ in range(n):
            nursery.start_soon(agent)
        while len(tasks) < n:
            await trio.sleep(0.01)
        gc.collect()
        per_agent = (tracemalloc.get_traced_memory()[0] - before) / n
        for task in tasks:
            trio.lowlevel.reschedule(task)
    return per_agent


async def in_tool(n: int) -> float:
    barrier = _Barrier(n)

    async def lookup(key: str) -> str:  # the body of bench_scale's tool
        await barrier.arrive()
        return f"{key}: active"

    async def agent(i: int) -> None:
        await lookup(f"r{i}")

    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    async with trio.open_nursery() as nursery:
        for i in range(n):
            nursery.start_soon(agent, i)
        await barrier.everyone.wait()
        gc.collect()
        per_agent = (tracemalloc.get_traced_memory()[0] - before) / n
        barrier.release.set()
    return per_agent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="agents (default 10,000)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    tracemalloc.start()
    for name, measure in (("parked", parked), ("in the tool", in_tool)):
        runs = [trio.run(measure, args.n) for _ in range(args.repeats)]
        passes = " / ".join(f"{r:,.0f}" for r in runs)
        print(
            f"bare trio task per agent, {name}: {statistics.median(runs):,.0f} B "
            f"(N={args.n:,}, passes {passes})"
        )
    tracemalloc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
