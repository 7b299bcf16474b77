"""A batch that goes wrong in every usual way, traced: the server fails some requests (429 and
500, retried after back-offs), one tool fails for some inputs and times out for others, and
two agents run out of time. Writes the trace, then renders it.

python examples/faulty_batch_trace.py faulty.json faulty.svg
"""

from __future__ import annotations

import argparse

import trio

import agentcore
from agentcore.sim import SimConfig


@agentcore.tool(coalesce=True, timeout=0.4)
async def fetch(source: str) -> str:
    """Fetch a source document.

    Args:
        source: the source's name.
    """
    if source.startswith("slow"):
        await trio.sleep(5)  # hangs: the tool's timeout ends it
    await trio.sleep(0.15)
    if source.startswith("broken"):
        raise ConnectionError(f"{source}: connection reset by peer")
    return f"{source}: three paragraphs of text"


TASK = agentcore.Task(
    name="summarise",
    system="You fetch the source with the fetch tool, then summarise it in one sentence.",
    prompt="Source: {source}",
    tools=[fetch],
    max_turns=3,
)


def inputs(count: int) -> list[dict[str, str]]:
    kinds = ("doc", "doc", "doc", "broken", "doc", "slow")
    return [{"source": f"{kinds[i % len(kinds)]}-{i % 9}"} for i in range(count)]


async def main(trace: str, agents: int) -> None:
    results = await agentcore.run_batch(
        TASK,
        inputs(agents),
        backend="sim://",
        model="sim",
        max_inflight=8,
        stream=True,
        trace=trace,
        timeout=2.5,
        retry=agentcore.RetryPolicy(max_attempts=4, base_delay=0.05, max_delay=0.4),
        config=SimConfig(fail_rate=0.15, seed=3),
    )
    counts = {s: sum(r.status == s for r in results) for s in ("ok", "failed", "cancelled")}
    print(f"{agents} agents: {counts}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", default="faulty.json")
    parser.add_argument("picture", nargs="?", default="faulty.svg")
    parser.add_argument("--agents", type=int, default=60)
    args = parser.parse_args()
    trio.run(main, args.trace, args.agents)
    print(f"wrote {agentcore.render_timeline(args.trace, args.picture)}")
