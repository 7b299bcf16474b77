"""The per-turn cache-hit ratio: cached / prompt tokens of each turn index, from the engine's
usage, in ``statistics()``, the CLI summary and the trace."""

from __future__ import annotations

import json
from pathlib import Path

import trio
import trio.testing

from agentcore import Usage, open_driver, tool
from agentcore._cli.main import summary_table
from agentcore._driver.stats import TURN_BUCKETS, RequestTotals, TurnCache
from agentcore.core import AssistantMessage, CallModel, ModelResponded, ToolCall
from agentcore.testing import ScriptedModel
from tests.driver.helpers import make_loop, tool_results


@tool
async def look(n: int) -> str:
    """Look.

    Args:
        n: what.
    """
    return str(n)


def cached_policy(call: CallModel) -> ModelResponded:
    """Three turns; the first request has 10 of 100 prompt tokens cached, later ones 95 of
    100 (turn 1) and 99 of 100 (turn 2)."""
    turn = call.hints.turn
    cached = (10, 95, 99)[turn]
    if len(tool_results(call)) < 2:
        message = AssistantMessage(tool_calls=(ToolCall(f"c{turn}", "look", '{"n": 1}'),))
    else:
        message = AssistantMessage("done")
    return ModelResponded(call.request_id, message, Usage(100, 5, cached), "stop")


def run_agents(agents: int, trace: Path | None = None) -> tuple[object, list[object]]:
    async def scenario() -> tuple[object, list[object]]:
        options = {} if trace is None else {"trace": str(trace)}
        model = ScriptedModel(cached_policy, latency=0.5)
        async with open_driver(model, tools=[look], max_inflight=2, **options) as driver:
            loops = (make_loop(i, [look]) for i in range(agents))
            async with driver.stream(loops) as results:
                done = [r async for r in results]
            return driver.statistics(), done

    return trio.run(scenario, clock=trio.testing.MockClock(autojump_threshold=0))


def test_statistics_report_the_cache_hit_ratio_of_each_turn() -> None:
    stats, _ = run_agents(4)
    assert stats.cache_by_turn == (  # type: ignore[attr-defined]
        TurnCache(0, 4, 400, 40),
        TurnCache(1, 4, 400, 380),
        TurnCache(2, 4, 400, 396),
    )
    assert [t.ratio for t in stats.cache_by_turn] == [0.1, 0.95, 0.99]  # type: ignore[attr-defined]


def test_the_cli_summary_shows_the_cache_hit_ratio_by_turn() -> None:
    stats, results = run_agents(2)
    table = summary_table(stats, results)  # type: ignore[arg-type]
    row = next(line for line in table.splitlines() if "cached by turn" in line)
    assert row.split("cached by turn", 1)[1].split() == [
        "1:", "10.0%", "·", "2:", "95.0%", "·", "3:", "99.0%",
    ]  # fmt: skip


def test_the_trace_gives_each_request_its_cache_hit_ratio(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    run_agents(1, path)
    events = json.loads(path.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    hits = [e["args"]["cache_hit"] for e in events if "cache_hit" in e.get("args", {})]
    assert hits == [0.1, 0.95, 0.99]


def test_unknown_cached_counts_are_left_out_and_late_turns_share_the_last_bucket() -> None:
    totals = RequestTotals()
    totals.add_turn(0, 100, None)
    assert totals.cache_by_turn() == ()
    for turn in (TURN_BUCKETS - 1, TURN_BUCKETS, 10 * TURN_BUCKETS):
        totals.add_turn(turn, 10, 9)
    assert totals.cache_by_turn() == (TurnCache(TURN_BUCKETS - 1, 3, 30, 27),)
