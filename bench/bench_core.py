"""CPU cost of the sans-IO agent loop.

Cases (each the median over several samples; CPU time of this thread, in microseconds):

- ``tool turn``: one full tool turn of a running agent: a model reply with two parallel tool
  calls (arguments parsed and validated), both results (arriving out of order), and the next
  ``CallModel``. Measured over 20-turn runs, with the default validator and with a cattrs
  validator like the one ``@agentcore.tool`` builds. Baseline: the same work done by hand
  without the loop (parse two argument strings, build the two ``CallTool``, the two
  ``ToolMessage``, the hints and the next ``CallModel``), i.e. the object work that no loop
  can avoid.
- ``model-only turn``: a run of one request answered with text (``AgentLoop`` construction,
  ``start()``, reply, ``Finish``); and the same with a structured answer (JSON parsed and
  structured into an attrs class).
- ``snapshot``: a run after 20 tool turns (62 messages): ``snapshot()`` alone, its size
  through ``agentcore.core.dumps``, the time of ``dumps`` and of ``loads`` + ``AgentLoop.restore``.

Events are built before timing starts: the loop's cost is measured, not the cost of the
codec that would have produced them.

Run: ``.venv/bin/python bench/bench_core.py`` (``--help`` for the knobs). Runs in well under
a minute with the defaults.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import attrs

import agentcore
from agentcore import Usage
from agentcore._core.schema import json_schema, structure
from agentcore.core import (
    AgentHints,
    AgentLoop,
    AssistantMessage,
    CallModel,
    CallTool,
    Event,
    LoopConfig,
    LoopSnapshot,
    ModelResponded,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolReturned,
    ToolSpec,
    UserMessage,
)

TURNS = 20


@attrs.frozen
class SearchArgs:
    query: str
    k: int = 5


@attrs.frozen
class Report:
    title: str
    score: float
    tags: list[str]


PLAIN_TOOLS = (ToolSpec("search", "Search."), ToolSpec("fetch", "Fetch a URL."))
VALIDATED_TOOLS = (
    ToolSpec("search", "Search.", json_schema(SearchArgs), lambda a: structure(a, SearchArgs)),
    ToolSpec("fetch", "Fetch a URL.", json_schema(SearchArgs), lambda a: structure(a, SearchArgs)),
)
MESSAGES = (
    SystemMessage("You are a research agent. Use the tools, then answer."),
    UserMessage("Find out what the shared prefix of 1,000 agents costs to prefill."),
)
CALLS = (
    ToolCall("call_a", "search", '{"query": "prefix caching vllm", "k": 3}'),
    ToolCall("call_b", "fetch", '{"query": "https://example.org/kv", "k": 1}'),
)


def tool_run_events(run_id: str, turns: int) -> list[list[Event]]:
    """Per turn: the reply with two tool calls, then both results (second one first)."""
    reply = AssistantMessage(None, CALLS)
    return [
        [
            ModelResponded(f"{run_id}/{turn}", reply, Usage(1200 + 40 * turn, 30, 1024)),
            ToolReturned("call_b", "page text " * 20),
            ToolReturned("call_a", "result one; result two; result three"),
        ]
        for turn in range(turns)
    ]


def cpu_us(fn: Callable[[], int], samples: int) -> float:
    """Median CPU microseconds per unit; ``fn`` runs a batch and returns its unit count."""
    results = []
    for _ in range(samples):
        gc.collect()
        gc.disable()
        try:
            start = time.thread_time_ns()
            units = fn()
            elapsed = time.thread_time_ns() - start
        finally:
            gc.enable()
        results.append(elapsed / 1000 / units)
    return statistics.median(results)


def bench_tool_turns(tools: tuple[ToolSpec, ...], runs: int) -> Callable[[], int]:
    config = LoopConfig(run_id="bench", tools=tools, max_turns=TURNS + 1)
    events = tool_run_events("bench", TURNS)

    def batch() -> int:
        for _ in range(runs):
            loop = AgentLoop(config, MESSAGES)
            loop.start()
            for turn_events in events:
                for event in turn_events:
                    loop.handle(event)
        return runs * TURNS

    return batch


def bench_by_hand(runs: int) -> Callable[[], int]:
    """The unavoidable object work of a tool turn, without any loop logic."""
    events = tool_run_events("bench", TURNS)
    tools = PLAIN_TOOLS

    def batch() -> int:
        for _ in range(runs):
            transcript: list[Any] = list(MESSAGES)
            for turn, (reply, second, first) in enumerate(events):
                assert isinstance(reply, ModelResponded)
                assert isinstance(first, ToolReturned) and isinstance(second, ToolReturned)
                message = reply.message
                transcript.append(message)
                for index, call in enumerate(message.tool_calls):
                    CallTool(call.id, call.name, json.loads(call.arguments), f"b/{turn}/{index}")
                transcript.append(ToolMessage(first.call_id, "search", first.content))
                transcript.append(ToolMessage(second.call_id, "fetch", second.content))
                CallModel(
                    f"b/{turn + 1}",
                    tuple(transcript),
                    tools,
                    hints=AgentHints("b", None, turn + 1, turn + 1),
                )
        return runs * TURNS

    return batch


def bench_model_only(structured: bool, runs: int) -> Callable[[], int]:
    config = LoopConfig(run_id="bench", tools=PLAIN_TOOLS, output=Report if structured else None)
    content = (
        '```json\n{"title": "KV cost", "score": 0.93, "tags": ["vllm", "prefix"]}\n```'
        if structured
        else "The shared prefix is prefilled once and then served from the cache."
    )
    reply = ModelResponded("bench/0", AssistantMessage(content), Usage(900, 40, 0))

    def batch() -> int:
        for _ in range(runs):
            loop = AgentLoop(config, MESSAGES)
            loop.start()
            loop.handle(reply)
        return runs

    return batch


def long_run() -> tuple[LoopConfig, AgentLoop]:
    config = LoopConfig(run_id="bench", tools=PLAIN_TOOLS, max_turns=TURNS + 1)
    loop = AgentLoop(config, MESSAGES)
    loop.start()
    for turn_events in tool_run_events("bench", TURNS):
        for event in turn_events:
            loop.handle(event)
    return config, loop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=7, help="samples per case (median)")
    parser.add_argument("--runs", type=int, default=100, help="20-turn runs per sample")
    args = parser.parse_args()
    samples, runs = args.samples, args.runs

    by_hand = cpu_us(bench_by_hand(runs), samples)
    plain = cpu_us(bench_tool_turns(PLAIN_TOOLS, runs), samples)
    validated = cpu_us(bench_tool_turns(VALIDATED_TOOLS, runs), samples)
    text_only = cpu_us(bench_model_only(False, runs * 10), samples)
    structured = cpu_us(bench_model_only(True, runs * 10), samples)

    config, loop = long_run()
    snapshot = loop.snapshot()
    data = agentcore.core.dumps(snapshot)
    reps = max(1, runs // 2)

    def take_snapshot() -> int:
        for _ in range(reps):
            loop.snapshot()
        return reps

    def dump() -> int:
        for _ in range(reps):
            agentcore.core.dumps(loop.snapshot())
        return reps

    def load() -> int:
        for _ in range(reps):
            AgentLoop.restore(config, agentcore.core.loads(data, LoopSnapshot))
        return reps

    snap_us = cpu_us(take_snapshot, samples)
    dump_us = cpu_us(dump, samples)
    load_us = cpu_us(load, samples)

    rows = [
        ("tool turn, by hand (baseline)", by_hand, "1.00x"),
        ("tool turn, AgentLoop", plain, f"{plain / by_hand:.2f}x"),
        ("tool turn, AgentLoop + cattrs validators", validated, f"{validated / by_hand:.2f}x"),
        ("model-only run, text answer", text_only, ""),
        ("model-only run, structured answer", structured, ""),
        (f"snapshot() after {TURNS} turns", snap_us, ""),
        ("snapshot() + dumps", dump_us, ""),
        ("loads + restore", load_us, ""),
    ]
    print(f"agentcore core loop: median of {samples} samples, CPU time of this thread")
    print(f"{'case':<44} {'us':>10} {'vs baseline':>12}")
    print("-" * 68)
    for name, value, ratio in rows:
        print(f"{name:<44} {value:>10.2f} {ratio:>12}")
    print("-" * 68)
    print(
        f"snapshot after {TURNS} turns: {len(snapshot.transcript)} messages, "
        f"{len(data):,} bytes as JSON"
    )


if __name__ == "__main__":
    main()
