"""What a batch costs on each service tier: the cost ledger against the simulator.

Runs the same batch (``--agents`` agents, ``--turns`` tool turns each) on the embedded
simulator on the standard tier, on flex, and on flex falling back to standard while the
simulator refuses a share of flex calls for capacity, and prints the ledger of each run: the
requests per tier, the fallback rate, the token cost and the saving against standard. Prices
are the default table's, for the model named with ``--model`` (the simulator answers to any
model name); they are data, not a bill (``agentcore._core.cost.DEFAULT_PRICES``). The last
two rows run the batch through the simulator's Batch APIs (``openai-batch://`` and
``anthropic-batch://`` on a loopback simulator, hops ending 0.5 simulated seconds after their
creation): every answer is priced at the ledger's ``batch`` tier.

    python bench/bench_cost.py --agents 100 --turns 3 --refuse 0.3 --model o4-mini
"""

from __future__ import annotations

import argparse

import trio

import agentcore
from agentcore.sim import SimConfig, open_sim_server


@agentcore.tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: the key.
    """
    return f"the value of {key} is {len(key)}"


TASK = agentcore.Task(
    system="You look keys up with the lookup tool, then answer in one sentence.",
    prompt="What is the value of {key}?",
    tools=[lookup],
)


async def _run(tier: str, refuse: float, args: argparse.Namespace) -> list[str]:
    config = SimConfig(speedup=100.0, tool_rounds=args.turns, flex_refuse_rate=refuse)
    inputs = [{"key": f"k{n}"} for n in range(args.agents)]
    async with agentcore.open_driver(
        "sim://", model=args.model, tools=[lookup], config=config, service_tier=tier,
        max_inflight=32, retry=agentcore.RetryPolicy(max_attempts=20, base_delay=0.01),
    ) as driver:  # fmt: skip
        results = await agentcore.run_batch(TASK, inputs, driver=driver)
        stats = driver.statistics()
    cost = stats.cost
    assert cost is not None
    failed = sum(r.status != "ok" for r in results)
    tiers = ", ".join(f"{name} {t.requests}" for name, t in sorted(cost.tiers.items()))
    rate = "-" if cost.fallback_rate is None else f"{cost.fallback_rate:.1%}"
    saving = "-" if cost.savings_ratio is None else f"{cost.savings_ratio:.1%}"
    usd = "-" if cost.cost is None else f"${cost.cost:.4f}"
    return [f"{tier}", f"{refuse:.0%}", str(failed), f"{stats.attempts}", tiers, rate, usd, saving]


async def _run_batch(scheme: str, args: argparse.Namespace) -> list[str]:
    config = SimConfig(speedup=100.0, tool_rounds=args.turns, batch_delay=50.0)
    inputs = [{"key": f"k{n}"} for n in range(args.agents)]
    async with open_sim_server(config=config) as server:
        host = server.url.removesuffix("/v1").removeprefix("http://")
        async with agentcore.open_driver(
            f"{scheme}://{host}", model=args.model, tools=[lookup], gather=0.05, poll=0.05,
        ) as driver:  # fmt: skip
            results = await agentcore.run_batch(TASK, inputs, driver=driver)
            stats = driver.statistics()
        hops = server.statistics().batches_created
    cost = stats.cost
    assert cost is not None
    failed = sum(r.status != "ok" for r in results)
    tiers = ", ".join(f"{name} {t.requests}" for name, t in sorted(cost.tiers.items()))
    saving = "-" if cost.savings_ratio is None else f"{cost.savings_ratio:.1%}"
    usd = "-" if cost.cost is None else f"${cost.cost:.4f}"
    name = f"batch ({scheme}://, {hops} hops)"
    return [name, "-", str(failed), f"{stats.attempts}", tiers, "-", usd, saving]


async def main(args: argparse.Namespace) -> None:
    runs = [
        ("standard", 0.0),
        ("flex", 0.0),
        ("flex-then-standard", args.refuse),
        ("flex", args.refuse),
    ]
    header = ["tier", "flex refused", "failed agents", "attempts", "requests per tier",
              "fallback rate", "cost", "saving vs standard"]  # fmt: skip
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for tier, refuse in runs:
        print("| " + " | ".join(await _run(tier, refuse, args)) + " |")
    for scheme in ("openai-batch", "anthropic-batch"):
        print("| " + " | ".join(await _run_batch(scheme, args)) + " |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--turns", type=int, default=3, help="tool turns per agent")
    parser.add_argument("--refuse", type=float, default=0.3, help="share of flex calls refused")
    parser.add_argument("--model", default="o4-mini", help="the model whose prices apply")
    trio.run(main, parser.parse_args())
