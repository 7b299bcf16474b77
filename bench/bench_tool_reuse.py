"""Tool results reused across rollouts: N tasks x 8 rollouts, with and without ``replay_safe``.

The rollout-shaped workload of RL and evaluation batches: each of ``--tasks`` tasks is run
``--rollouts`` times by agents on the in-process ``ScriptedModel`` (``--model-latency``
seconds per request). A rollout makes ``--turns`` tool turns of ``--calls`` parallel calls,
then answers with what its tools returned. Its calls are drawn from its task's own seeded
stream: with probability ``--diverge`` a call is the rollout's own (arguments no other
rollout asks for), else the task's next call, so the rollouts of a task mostly repeat each
other, as sampled rollouts of one prompt do. The two tools (``search``, ``read``) sleep a
lognormal latency (median ``--tool-median`` seconds, sigma ``--sigma``) seeded by their
arguments and the task, and return a text that is a function of the same.

Two modes, same workload, same seeds:

- ``none``: plain tools (no reuse, no sharing);
- ``reuse``: the same functions declared ``replay_safe=("input.task",)``: rollouts of one task
  reuse each other's results (kept, or shared while in flight); different tasks never do.

Reported per mode (medians of ``--repeats`` passes): wall time, tool calls, executions, the
share of calls answered without an execution of their own (kept result or shared
execution), and wrong results: every tool result in every transcript is checked against the
function it must equal for its own task (any result reused across tasks would show here).

    .venv/bin/python bench/bench_tool_reuse.py --tasks 16 --rollouts 8 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
import zlib
from typing import Any

import trio

import agentcore
from agentcore import RunContext
from agentcore.core import AssistantMessage, CallModel, ToolCall, ToolMessage, UserMessage
from agentcore.testing import ScriptedModel


def _latency(seed: str, median: float, sigma: float) -> float:
    rng = random.Random(zlib.crc32(seed.encode()))
    return math.exp(math.log(median) + sigma * rng.gauss(0.0, 1.0))


def _truth(tool: str, task: int, arg: str) -> str:
    return f"{tool}[{task}]({arg}) = {zlib.crc32(f'{tool}/{task}/{arg}'.encode()) % 10_000}"


def make_tools(median: float, sigma: float, reuse: bool) -> list[agentcore.Tool[..., Any]]:
    options: dict[str, Any] = {"replay_safe": ("input.task",)} if reuse else {}

    @agentcore.tool(name="search", **options)
    async def search(ctx: RunContext[Any], query: str) -> str:
        """Search the task's corpus. Args: query: terms."""
        task = ctx.input["task"]
        await trio.sleep(_latency(f"search/{task}/{query}", median, sigma))
        return _truth("search", task, query)

    @agentcore.tool(name="read", **options)
    async def read(ctx: RunContext[Any], doc: str) -> str:
        """Read a document of the task. Args: doc: which."""
        task = ctx.input["task"]
        await trio.sleep(_latency(f"read/{task}/{doc}", median, sigma))
        return _truth("read", task, doc)

    return [search, read]


def plan(task: int, rollout: int, turns: int, calls: int, diverge: float) -> list[list[ToolCall]]:
    """The tool turns of one rollout (seeded by task and rollout)."""
    shared = random.Random(task * 1_000_003)
    own = random.Random(task * 1_000_003 + 7919 * (rollout + 1))
    out: list[list[ToolCall]] = []
    for turn in range(turns):
        batch = []
        for k in range(calls):
            tool = "search" if (turn + k) % 2 == 0 else "read"
            common = f"{shared.randrange(50)}"
            arg = f"r{rollout}-{own.randrange(10**6)}" if own.random() < diverge else common
            key = "query" if tool == "search" else "doc"
            batch.append(ToolCall(f"t{turn}c{k}", tool, json.dumps({key: arg})))
        out.append(batch)
    return out


def policy(turns: int, calls: int, diverge: float) -> Any:
    def reply(call: CallModel) -> str | AssistantMessage:
        prompt = next(m.content for m in call.messages if isinstance(m, UserMessage))
        _, task, _, rollout = prompt.split()  # "task T rollout R"
        done = sum(1 for m in call.messages if isinstance(m, AssistantMessage) and m.tool_calls)
        if done < turns:
            return AssistantMessage(
                tool_calls=tuple(plan(int(task), int(rollout), turns, calls, diverge)[done])
            )
        return " | ".join(m.content for m in call.messages if isinstance(m, ToolMessage))

    return reply


async def one_pass(args: argparse.Namespace, reuse: bool) -> dict[str, Any]:
    tools = make_tools(args.tool_median, args.sigma, reuse)
    task = agentcore.Task(prompt="task {task} rollout {rollout}", tools=tools)
    inputs = [{"task": t, "rollout": r} for t in range(args.tasks) for r in range(args.rollouts)]
    model = ScriptedModel(policy(args.turns, args.calls, args.diverge), latency=args.model_latency)
    started = time.perf_counter()
    async with agentcore.open_driver(model, tools=tools, max_inflight=args.max_inflight) as driver:
        results = await agentcore.run_batch(task, inputs, driver=driver, max_active=args.max_active)
        stats = driver.executor.statistics()
    wall = time.perf_counter() - started
    wrong = 0
    for result in results:
        assert result.status == "ok", result.error
        number = inputs[result.index]["task"]
        calls = {
            c.id: (c.name, json.loads(c.arguments))
            for m in result.transcript
            if isinstance(m, AssistantMessage)
            for c in m.tool_calls
        }
        for m in result.transcript:
            if isinstance(m, ToolMessage):
                name, arguments = calls[m.call_id]
                wrong += m.content != _truth(name, number, next(iter(arguments.values())))
    reused = sum(s.cache_hits + s.coalesced for s in stats.tools.values())
    calls_total = sum(s.requests for s in stats.tools.values())
    return {
        "wall": wall,
        "calls": calls_total,
        "executions": stats.executions,
        "kept": sum(s.cache_hits for s in stats.tools.values()),
        "shared": sum(s.coalesced for s in stats.tools.values()),
        "hit_rate": reused / calls_total if calls_total else 0.0,
        "wrong": wrong,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--diverge", type=float, default=0.25)
    parser.add_argument("--tool-median", type=float, default=0.05)
    parser.add_argument("--sigma", type=float, default=1.0)
    parser.add_argument("--model-latency", type=float, default=0.02)
    parser.add_argument("--max-inflight", type=int, default=32)
    parser.add_argument("--max-active", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    passes: dict[str, list[dict[str, Any]]] = {"none": [], "reuse": []}
    for _ in range(args.repeats):
        for mode, runs in passes.items():  # alternating: a drift of the load hits both
            runs.append(trio.run(one_pass, args, mode == "reuse"))
    print(
        f"{args.tasks} tasks x {args.rollouts} rollouts, {args.turns} turns x {args.calls} "
        f"calls, diverge {args.diverge}, tools lognormal (median {args.tool_median * 1e3:.0f} "
        f"ms, sigma {args.sigma}), model {args.model_latency * 1e3:.0f} ms, "
        f"max_inflight {args.max_inflight}, max_active {args.max_active}; "
        f"medians of {args.repeats}"
    )
    print(
        f"{'mode':<6} {'wall s':>7} {'calls':>6} {'execs':>6} {'kept':>5} {'shared':>6} "
        f"{'hits':>6} {'wrong':>5}"
    )
    med: dict[str, dict[str, float]] = {}
    for mode, runs in passes.items():
        m = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        med[mode] = m
        print(
            f"{mode:<6} {m['wall']:>7.2f} {m['calls']:>6.0f} {m['executions']:>6.0f} "
            f"{m['kept']:>5.0f} {m['shared']:>6.0f} {100 * m['hit_rate']:>5.1f}% "
            f"{max(r['wrong'] for r in runs):>5}"
        )
    print(f"wall time: {med['none']['wall'] / med['reuse']['wall']:.2f}x lower with reuse")


if __name__ == "__main__":
    main()
