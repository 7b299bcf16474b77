"""Slot policy for batches: FIFO against priority (near-done agents first), on the demo task.

Workload: ``agentcore demo``'s research task (one coalesced lookup round, then a typed note;
two model turns per agent) over N agents against the embedded simulated backend (``sim://``,
default knobs but ``--decode-ms``: 64 engine slots, so the queue is the client's), with
``--slots`` inference slots on the client. Measured per run, from the start of the batch:
the time to the first result, to 50 % of the results, and the wall time. Policies alternate
run by run; the table shows medians of ``--repeats`` runs and priority's ratio to FIFO
measured in the same run.

Run: ``.venv/bin/python bench/bench_slot_policy.py`` (``--agents 300 --slots 8 --repeats 3``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

import trio

import agentcore
from agentcore._cli.demo import demo_inputs, demo_task
from agentcore.sim import SimConfig


async def _one(policy: str, agents: int, slots: int, decode_ms: float) -> dict[str, float]:
    task = demo_task()
    inputs = demo_inputs(agents)
    stamps: list[float] = []
    ok = 0
    start = trio.current_time()
    async with agentcore.open_batch(
        task,
        inputs,
        backend="sim://",
        model="sim",
        max_inflight=slots,
        slot_policy=policy,
        stream=True,
        config=SimConfig(decode_ms_per_token=decode_ms),
    ) as results:
        async for result in results:
            stamps.append(trio.current_time() - start)
            ok += result.status == "ok"
    if ok != agents:
        raise SystemExit(f"{policy}: only {ok} of {agents} agents finished ok")
    return {"first": stamps[0], "half": stamps[(len(stamps) - 1) // 2], "wall": stamps[-1]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=300)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--decode-ms", type=float, default=1.0, help="simulated decode time per token (ms)"
    )
    args = parser.parse_args(argv)
    runs: dict[str, list[dict[str, float]]] = {"fifo": [], "priority": []}
    for _ in range(args.repeats):
        for policy in ("fifo", "priority"):
            runs[policy].append(trio.run(_one, policy, args.agents, args.slots, args.decode_ms))
    medians: dict[str, dict[str, Any]] = {
        p: {k: statistics.median(r[k] for r in rs) for k in ("first", "half", "wall")}
        for p, rs in runs.items()
    }
    print(
        f"{args.agents} agents, {args.slots} slots, decode {args.decode_ms} ms/token, "
        f"medians of {args.repeats}"
    )
    print("| policy | first result | 50 % of results | wall |")
    print("|---|---|---|---|")
    for policy, m in medians.items():
        print(f"| {policy} | {m['first']:.2f} s | {m['half']:.2f} s | {m['wall']:.2f} s |")
    ratio = {k: medians["priority"][k] / medians["fifo"][k] for k in ("first", "half", "wall")}
    print(f"| priority / fifo | {ratio['first']:.2f} | {ratio['half']:.2f} | {ratio['wall']:.2f} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
