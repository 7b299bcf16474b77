"""Scale: 100,000 agents in one process, on the in-process ScriptedModel.

Each agent makes two model requests (a tool call, then the answer) and runs one tool (an async
``lookup`` that returns at once); the model answers with zero latency, so the time measured is
agentcore's own: the agent loop, the driver (slots, tool executor, statistics) and trio.

Two passes, each in its own fresh process state:

- **CPU**: ``run_batch`` over N agents; CPU time (``time.process_time``) of the batch divided
  by the number of model requests (= turns), median of ``--repeats`` runs;
- **memory** (``--memory-n`` agents, 10,000 by default: tracemalloc makes the pass slow and
  the bytes per agent do not depend on N): the same batch with ``tracemalloc`` on, measured
  while every agent is alive and in the same state: either all queued for their first
  inference slot (one slot, held by a gated model call), or all inside their tool call (one
  turn done; the tool waits at a barrier). The traced memory over the baseline is divided by
  the number of agents; the agents' transcripts (messages measured object by object, shared
  objects once) are subtracted, so the number is what agentcore keeps per agent *beyond* the
  conversation itself. The top allocation sites are listed; RSS growth per agent is shown too
  (allocator overhead included).

``ScriptedModel`` records every call it sees (a testing aid); the benchmark's subclass drops
each call once answered so that the recording does not count as agent memory.

Run: ``.venv/bin/python bench/bench_scale.py`` (``--n``, ``--repeats``; ``--help``).
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import sys
import time
import tracemalloc
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs
import trio

import agentcore
from agentcore._tasks.task import compile_job
from agentcore.core import AssistantMessage, ToolCall
from agentcore.testing import ScriptedModel
from agentcore.wire import Exchange

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import fmt, machine, table


class ForgetfulModel(ScriptedModel):
    """A ScriptedModel that does not keep the calls it answered; optionally gated: every
    exchange waits for ``gate`` (the memory pass holds agents in the slot queue with it)."""

    def __init__(self, gate: trio.Event | None = None) -> None:
        super().__init__(policy)
        self.gate = gate

    async def exchange(self, call: agentcore.core.CallModel) -> Exchange:
        if self.gate is not None:
            await self.gate.wait()
        try:
            return await super().exchange(call)
        finally:
            self.calls.clear()


def policy(call: agentcore.core.CallModel) -> AssistantMessage | str:
    if any(isinstance(m, AssistantMessage) for m in call.messages):
        return "The record is active."
    record = call.request_id.split("/")[0].rsplit("-", 1)[-1]
    return AssistantMessage(tool_calls=(ToolCall("c0", "lookup", f'{{"key": "r{record}"}}'),))


def make_task(barrier: _Barrier | None) -> tuple[agentcore.Task, agentcore.Tool[..., Any]]:
    @agentcore.tool
    async def lookup(key: str) -> str:
        """Look a record up.

        Args:
            key: the record key.
        """
        if barrier is not None:
            await barrier.arrive()
        return f"{key}: active"

    task = agentcore.Task(
        prompt="What does the registry say about record {record}?",
        system="You answer questions about records. Look the record up before you answer.",
        tools=[lookup],
        max_turns=2,
    )
    return task, lookup


@attrs.define
class _Barrier:
    """Blocks every arriving task until ``expected`` have arrived and ``release`` is set."""

    expected: int
    arrived: int = 0
    everyone: trio.Event = attrs.field(factory=trio.Event)
    release: trio.Event = attrs.field(factory=trio.Event)

    async def arrive(self) -> None:
        self.arrived += 1
        if self.arrived == self.expected:
            self.everyone.set()
        await self.release.wait()


def inputs(n: int) -> Iterable[dict[str, int]]:
    return ({"record": i} for i in range(n))


# ---------------------------------------------------------------------------- CPU pass


async def cpu_pass(n: int, inflight: int, slot_policy: str = "fifo") -> dict[str, float]:
    task, tool = make_task(None)
    model = ForgetfulModel()
    gc.collect()
    cpu0, t0 = time.process_time(), time.perf_counter()
    options: dict[str, Any] = {} if slot_policy == "fifo" else {"slot_policy": slot_policy}
    async with agentcore.open_driver(
        model, max_inflight=inflight, tools=[tool], **options
    ) as driver:
        async with agentcore.open_batch(task, inputs(n), driver=driver, warm=False) as stream:
            ok = 0
            async for result in stream:
                ok += result.status == "ok"
        requests = driver.statistics().requests
        if not isinstance(requests, int):  # a checkout from before bounded statistics
            requests = len(requests)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    if ok != n or requests != 2 * n:
        raise RuntimeError(f"expected {n} ok runs and {2 * n} requests, got {ok} and {requests}")
    return {"cpu": cpu, "wall": wall, "turns": requests, "us_per_turn": 1e6 * cpu / requests}


# ---------------------------------------------------------------------------- memory pass


def deep_size(objects: Iterable[Any], seen: set[int]) -> int:
    """Bytes of ``objects`` and everything they reach through attrs fields, tuples, lists,
    dicts and strings; each object counted once across calls sharing ``seen``."""
    total = 0
    stack = list(objects)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or obj is None or isinstance(obj, bool | int | float):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, str | bytes):
            continue
        if isinstance(obj, tuple | list):
            stack.extend(obj)
        elif isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif attrs.has(type(obj)):
            stack.extend(getattr(obj, f.name) for f in attrs.fields(type(obj)))
    return total


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 2**20


async def memory_pass(n: int, inflight: int, top: int, state: str) -> dict[str, Any]:
    """Memory per agent while every agent is alive, all in the same ``state``: ``tool``
    (inside its tool call, one turn done) or ``slot`` (queued for its first inference slot:
    one slot, the model holds it until every other agent queues)."""
    barrier = _Barrier(n)
    gate = trio.Event() if state == "slot" else None
    task, tool = make_task(barrier if state == "tool" else None)
    model = ForgetfulModel(gate)
    if state == "slot":
        inflight = 1
    gc.collect()
    rss0 = rss_mb()
    base = tracemalloc.take_snapshot()
    traced0 = tracemalloc.get_traced_memory()[0]
    loops = [compile_job(task, value, run_id=f"m-{i}") for i, value in enumerate(inputs(n))]
    driver_cm = agentcore.open_driver(model, max_inflight=inflight, tools=[tool])
    async with driver_cm as driver, driver.stream(loops) as results:
        if gate is None:
            await barrier.everyone.wait()
        else:
            while driver.limiter.statistics().waiting < n - 1:
                await trio.sleep(0.01)
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] - traced0
        rss = rss_mb() - rss0
        snapshot = tracemalloc.take_snapshot()
        seen: set[int] = set()
        transcripts = deep_size((m for loop in loops for m in loop.transcript), seen)
        barrier.release.set()
        if gate is not None:
            gate.set()
        ok = 0
        async for result in results:
            ok += result.status == "ok"
    if ok != n:
        raise RuntimeError(f"expected {n} ok runs, got {ok}")
    sites = []
    for stat in snapshot.compare_to(base, "filename")[:top]:
        frame = stat.traceback[0]
        sites.append((frame.filename.split("site-packages/")[-1].split("src/")[-1], stat.size_diff))
    return {
        "traced_per_agent": traced / n,
        "transcript_per_agent": transcripts / n,
        "beyond_transcript_per_agent": (traced - transcripts) / n,
        "rss_per_agent": rss * 2**20 / n,
        "sites": sites,
    }


# ---------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="agents (default 100,000)")
    parser.add_argument("--repeats", type=int, default=3, help="CPU passes (median reported)")
    parser.add_argument("--inflight", type=int, default=256, help="inference slots")
    parser.add_argument(
        "--memory-n",
        type=int,
        default=10_000,
        help="agents in the memory passes (default 10,000: tracemalloc is slow, and the bytes "
        "per agent do not depend on N; pass 100000 to check)",
    )
    parser.add_argument("--top", type=int, default=8, help="allocation sites to list")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument(
        "--slot-policy",
        choices=("fifo", "priority"),
        default="fifo",
        help="the driver's slot line in the CPU passes: fifo (the driver's default, as first "
        "measured) or priority (the default of batches that open their own driver)",
    )
    parser.add_argument(
        "--no-gc",
        action="store_true",
        help="disable Python's cyclic garbage collector during the CPU passes (to see its share)",
    )
    args = parser.parse_args(argv)

    print(f"machine: {machine()}")
    passes = []
    for repeat in range(args.repeats):
        if args.no_gc:
            gc.disable()
        result = trio.run(cpu_pass, args.n, args.inflight, args.slot_policy)
        gc.enable()
        passes.append(result)
        print(
            f"  CPU pass {repeat + 1}: {fmt(result['cpu'])} s CPU, {fmt(result['wall'])} s wall, "
            f"{fmt(result['us_per_turn'], 1)} us/turn",
            flush=True,
        )
    per_turn = statistics.median(p["us_per_turn"] for p in passes)
    rows = [
        ["CPU per turn (median)", fmt(per_turn, 1) + " us"],
        ["CPU per agent (2 turns, 1 tool)", fmt(2 * per_turn, 1) + " us"],
        ["batch wall (median)", fmt(statistics.median(p["wall"] for p in passes)) + " s"],
    ]
    for state, label in (
        () if args.skip_memory else (("slot", "queued for a slot"), ("tool", "inside a tool call"))
    ):
        tracemalloc.start()
        memory = trio.run(memory_pass, args.memory_n, args.inflight, args.top, state)
        tracemalloc.stop()
        rows += [
            [f"memory per agent {label} (tracemalloc)", fmt(memory["traced_per_agent"], 0) + " B"],
            ["  of which its transcript", fmt(memory["transcript_per_agent"], 0) + " B"],
            ["  beyond the transcript", fmt(memory["beyond_transcript_per_agent"], 0) + " B"],
            ["  RSS growth per agent", fmt(memory["rss_per_agent"], 0) + " B"],
        ]
        print(f"\ntop allocation sites, every agent {label} (bytes per agent):")
        for filename, size in memory["sites"]:
            print(f"  {size / args.memory_n:8.0f}  {filename}")
    print()
    print(
        f"scale: N={args.n:,} agents (memory passes: {args.memory_n:,}) x 2 turns + 1 tool "
        f"call, ScriptedModel (zero latency), {args.inflight} slots\n"
    )
    print(table(["measure", "value"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
