"""Run a benchmark workload with BatchAgent (``batch-agent`` from PyPI), in its own venv.

BatchAgent is driven through its public entry point, ``BatchAgent.run(...)``, with a
``BatchSpec`` built from the same workload file the other contenders read: ``task`` (the
user-message template), ``inputs``, ``system_prompt``, one tool defined with
``Tool.define`` (BatchAgent derives its schema from the function signature and caches
results of cacheable tools), ``max_inflight`` slots and ``max_turns``. ``--no-kvflow`` sets
``kvflow=False``; everything else keeps BatchAgent's defaults (streamed requests with
streaming tool dispatch, prefix warming, priority semaphore, adaptive concurrency).

Against Dynamo it uses ``dynamo://`` through the replay proxy (it cannot add the replay
annotation itself); against the fixed-latency server it uses ``vllm://``. Prints one JSON
report line.

Run (with BatchAgent's interpreter):
``python batchagent_runner.py WORKLOAD.json --backend dynamo://127.0.0.1:PORT --slots 8``
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import Workload, emit, self_cpu, tool_result
from batch_agent import BatchAgent
from batch_agent.tools import Tool


def make_tool(workload: Workload, counter: dict[str, int]) -> object:
    shape = workload.tool

    async def run(argument: str) -> str:
        counter["executions"] += 1
        await asyncio.sleep(shape.latency)
        return tool_result(shape.name, argument)

    # BatchAgent builds the schema from the signature: give the function the parameter name.
    if shape.parameter == "query":

        async def web_search(query: str) -> str:
            return await run(query)

        function = web_search
    else:

        async def lookup(key: str) -> str:
            return await run(key)

        function = lookup
    function.__doc__ = shape.description
    return Tool.define(function, name=shape.name, cacheable=True)


async def main(args: argparse.Namespace) -> None:
    workload = Workload.load(args.workload)
    counter = {"executions": 0}
    tool = make_tool(workload, counter)
    cpu0, t0 = self_cpu(), time.perf_counter()
    results = await BatchAgent.run(
        task=workload.template,
        inputs=workload.inputs,
        system_prompt=workload.system,
        tools=[tool],
        model=workload.model,
        backend=args.backend,
        max_inflight=args.slots,
        max_concurrent=args.slots,
        max_turns=workload.max_turns,
        kvflow=not args.no_kvflow,
    )
    wall = time.perf_counter() - t0
    failed = [r for r in results if not r.ok]
    emit(
        {
            "wall": wall,
            "cpu": self_cpu() - cpu0,
            "ok": len(results) - len(failed),
            "failed": len(failed),
            "tool_executions": counter["executions"],
            "errors": sorted(
                {f"{r.error.type}: {r.error.message[:120]}" for r in failed if r.error}
            )[:5],
            "answered": sum(1 for r in results if r.ok and r.output),
        }
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", type=Path)
    parser.add_argument("--backend", required=True)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--no-kvflow", action="store_true")
    asyncio.run(main(parser.parse_args()))
