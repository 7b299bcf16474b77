"""Run a benchmark workload with agentcore: the contender the baselines are compared with.

The batch goes through the public API: an ``agentcore.Task`` (system prompt, user template,
the workload's one tool, ``max_turns``, ``max_tokens``), ``agentcore.open_driver`` on the
backend URL (``dynamo://`` on the Dynamo stack, ``vllm://`` on the fixed-latency server) and
``agentcore.run_batch`` with prefix warming. Everything else is agentcore's defaults: the lean
h11 transport, FIFO slots released during tool waits, identical tool calls coalesced; the tool
is declared ``cache=True`` (its results are deterministic), as BatchAgent caches tools by
default. On Dynamo each request also carries the session headers and agent hints of the
dynamo dialect, and the replay annotation from the per-call ``annotations`` hook.

Prints one JSON report line: wall time and CPU of the batch, outcomes, tool calls and
executions, and the driver's own token counts.

Run: ``python agentcore_runner.py WORKLOAD.json --url dynamo://127.0.0.1:PORT --slots 8``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import trio

import agentcore
from agentcore import ModelParams
from agentcore.core import AssistantMessage, UserMessage

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import Workload, emit, reply_key, self_cpu, tool_result


def make_tool(workload: Workload, counter: dict[str, int]) -> agentcore.Tool[..., Any]:
    shape = workload.tool

    async def execute(argument: str) -> str:
        counter["executions"] += 1
        await trio.sleep(shape.latency)
        return tool_result(shape.name, argument)

    # The tool's schema comes from the signature: give the function the parameter's name.
    if shape.parameter == "query":

        async def web_search(query: str) -> str:
            return await execute(query)

        function: Any = web_search
    else:

        async def lookup(key: str) -> str:
            return await execute(key)

        function = lookup
    function.__doc__ = f"{shape.description}\n\nArgs:\n    {shape.parameter}: what to look up.\n"
    return agentcore.tool(cache=True)(function)


def replay_annotations(call: agentcore.core.CallModel) -> list[str]:
    """The Dynamo replay annotation of a call (see ``_common.reply_key``)."""
    users = [m.content for m in call.messages if isinstance(m, UserMessage)]
    turns = sum(1 for m in call.messages if isinstance(m, AssistantMessage))
    key = reply_key(users, turns)
    return [] if key is None else [f"output_replay_id:{key}"]


class CountingSink:
    """A step-event sink that counts events and deltas (``--steps``)."""

    def __init__(self, deltas: bool) -> None:
        self.deltas = deltas
        self.events = 0
        self.delta_events = 0

    def push(self, event: Any) -> None:
        self.events += 1
        if event.name == "model_delta":
            self.delta_events += 1

    async def settle(self) -> None:
        pass


async def main(args: argparse.Namespace) -> None:
    workload = Workload.load(args.workload)
    counter = {"executions": 0}
    tool = make_tool(workload, counter)
    task = agentcore.Task(
        prompt=workload.template,
        system=workload.system,
        tools=[tool],
        max_turns=workload.max_turns,
        params=ModelParams(max_tokens=workload.max_tokens),
        name=workload.kind,
    )
    options: dict[str, Any] = {}
    if workload.annotate:
        options["annotations"] = replay_annotations
    sink = None if args.steps == "off" else CountingSink(args.steps == "deltas")
    # Only given when asked for, so the runner also runs an agentcore without step events.
    batch_options: dict[str, Any] = {} if sink is None else {"steps": sink}
    cpu0, t0 = self_cpu(), time.perf_counter()
    async with agentcore.open_driver(
        args.url,
        model=workload.model,
        max_inflight=args.slots,
        slot_policy=args.slot_policy,
        tools=[tool],
        stream=args.stream,
        **options,
    ) as driver:
        finished: list[float] = []  # seconds from the start, per result

        def stamp(_: agentcore.Result[Any]) -> None:
            finished.append(time.perf_counter() - t0)

        results = await agentcore.run_batch(
            task, workload.inputs, driver=driver, warm=True, on_result=stamp, **batch_options
        )
        stats = driver.statistics()
    wall = time.perf_counter() - t0
    # A checkout from before bounded statistics lists every request as ``requests``.
    listed = not isinstance(stats.requests, int)
    recent = stats.requests if listed else stats.recent_requests
    warm = [r for r in recent if r.index is None]
    emit(
        {
            "wall": wall,
            "first_result": finished[0] if finished else None,
            "half_results": finished[(len(finished) - 1) // 2] if finished else None,
            "cpu": self_cpu() - cpu0,
            "ok": sum(r.status == "ok" for r in results),
            "failed": sum(r.status != "ok" for r in results),
            "errors": sorted({str(r.error.message)[:120] for r in results if r.error})[:5],
            "requests": len(stats.requests) if listed else stats.requests,
            "tool_calls": stats.tool_calls,
            "tool_executions": counter["executions"],
            "client_prompt_tokens": stats.prompt_tokens,
            "client_cached_tokens": stats.cached_tokens,
            "client_ttft_p50": stats.ttft.p50,
            "client_ttft_p95": stats.ttft.p95,
            "warm": [r.error.value if r.error else "ok" for r in warm],
            "step_events": None if sink is None else sink.events,
            "delta_events": None if sink is None else sink.delta_events,
            "agentcore": str(Path(agentcore.__file__).parent),
        }
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", type=Path)
    parser.add_argument("--url", required=True, help="backend URL, e.g. dynamo://127.0.0.1:PORT")
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--stream", action="store_true", help="stream every request")
    parser.add_argument(
        "--slot-policy", default="fifo", choices=["fifo", "priority"], help="the driver's"
    )
    parser.add_argument(
        "--steps",
        choices=("off", "events", "deltas"),
        default="off",
        help="push step events (and deltas) of every agent to a counting sink",
    )
    trio.run(main, parser.parse_args())
