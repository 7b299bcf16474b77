"""Soak: one driver kept open while a million model requests pass through it, as in a service.

The driver is opened once, as a web service would at start-up, and runs one-off agents in
rounds: each agent makes two model requests (a tool call, then the answer) and one call of a
``cache=True`` tool with a key of its own, so the tool cache fills up as well. The model is the
in-process ``ScriptedModel`` with zero latency (a subclass that forgets the calls it answered:
the recording is a testing aid, not driver state). ``tracemalloc`` runs throughout; after each
round a full ``gc.collect()`` is made and the traced memory still allocated is reported, with
``driver.statistics()`` taken once per round like a metrics endpoint would.

Goal: flat memory, i.e. growth under 1 MB from the end of round 1 to the end of the last
round. ``--requests`` (default 1,000,000) and ``--rounds`` (default 10) set the size. To
measure another checkout of the library (for example the code before bounded statistics),
put its ``src`` first on ``PYTHONPATH``.

Run: ``.venv/bin/python bench/bench_soak.py`` (``--requests``, ``--rounds``; ``--help``).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import trio

import agentcore
from agentcore.core import AssistantMessage, CallModel, ToolCall
from agentcore.testing import ScriptedModel
from agentcore.wire import Exchange

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import fmt, machine, table


class ForgetfulModel(ScriptedModel):
    """A ScriptedModel that does not keep the calls it answered."""

    def __init__(self) -> None:
        super().__init__(policy)

    async def exchange(self, call: CallModel) -> Exchange:
        try:
            return await super().exchange(call)
        finally:
            self.calls.clear()


def policy(call: CallModel) -> AssistantMessage | str:
    if any(isinstance(m, AssistantMessage) for m in call.messages):
        return "The record is active."
    record = call.request_id.split("/")[0].rsplit("-", 1)[-1]
    return AssistantMessage(tool_calls=(ToolCall("c0", "lookup", f'{{"key": "r{record}"}}'),))


def make_task() -> agentcore.Task:
    @agentcore.tool(cache=True)
    async def lookup(key: str) -> str:
        """Look a record up.

        Args:
            key: the record key.
        """
        return f"{key}: active"

    return agentcore.Task(
        prompt="What does the registry say about record {record}?",
        system="You answer questions about records. Look the record up before you answer.",
        tools=[lookup],
        max_turns=2,
    )


def request_count(stats: Any) -> int:
    # Older checkouts kept every request in ``stats.requests`` (a tuple).
    requests = stats.requests
    return requests if isinstance(requests, int) else len(requests)


async def soak(total: int, rounds: int, inflight: int, active: int) -> list[dict[str, float]]:
    task = make_task()
    runs_per_round = total // rounds // 2
    rows: list[dict[str, float]] = []
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    first = 0
    async with agentcore.open_driver(
        ForgetfulModel(), max_inflight=inflight, tools=task.tools
    ) as driver:
        for number in range(rounds):
            start = number * runs_per_round
            inputs = ({"record": i} for i in range(start, start + runs_per_round))
            t0, cpu0 = time.perf_counter(), time.process_time()
            async with agentcore.open_batch(
                task, inputs, driver=driver, warm=False, max_active=active
            ) as stream:
                ok = 0
                async for result in stream:
                    ok += result.status == "ok"
            stats = driver.statistics()
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            if ok != runs_per_round:
                raise RuntimeError(f"round {number + 1}: {ok} of {runs_per_round} runs ok")
            del stats, stream, result
            gc.collect()
            traced = tracemalloc.get_traced_memory()[0] - base
            if number == 0:
                first = traced
            requests = request_count(driver.statistics())
            rows.append(
                {
                    "round": number + 1,
                    "requests": requests,
                    "traced_mb": traced / 1e6,
                    "growth_mb": (traced - first) / 1e6,
                    "us_per_request": 1e6 * cpu / (2 * runs_per_round),
                    "wall": wall,
                }
            )
            print(
                f"round {number + 1}/{rounds}: {requests:,} requests, traced "
                f"{traced / 1e6:.3f} MB (growth since round 1 {(traced - first) / 1e6:+.3f} MB), "
                f"{wall:.1f} s",
                flush=True,
            )
    tracemalloc.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=1_000_000, help="model requests in all")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--inflight", type=int, default=32, help="max_inflight")
    parser.add_argument("--active", type=int, default=256, help="runs in progress at once")
    args = parser.parse_args()
    if args.requests < 2 * args.rounds:
        parser.error("need at least two requests per round")
    print(machine())
    print(f"agentcore from {Path(agentcore.__file__).parent}")
    rows = trio.run(soak, args.requests, args.rounds, args.inflight, args.active)
    print()
    print(
        table(
            ["round", "requests", "traced MB", "growth since round 1 (MB)", "CPU us/request"],
            [
                [
                    str(int(r["round"])),
                    f"{int(r['requests']):,}",
                    fmt(r["traced_mb"], 3),
                    fmt(r["growth_mb"], 3),
                    fmt(r["us_per_request"], 0),
                ]
                for r in rows
            ],
        )
    )
    growth = rows[-1]["growth_mb"]
    verdict = "flat" if growth < 1.0 else "GROWS"
    print(f"\ngrowth from round 1 to round {len(rows)}: {growth:+.3f} MB ({verdict})")


if __name__ == "__main__":
    main()
