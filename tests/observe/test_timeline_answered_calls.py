"""Every tool call is in the timeline: calls answered from the cache or by a shared execution
are instants in the trace and bars in the picture, and the summary counts all of them."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import trio

import agentcore
from agentcore.sim import SimConfig


@agentcore.tool(cache=True)
async def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: what to look up.
    """
    await trio.sleep(0.02)
    return f"{topic}: found"


TASK = agentcore.Task(prompt="Topic: {topic}", tools=[lookup], max_turns=3)


async def test_cached_and_shared_calls_are_in_the_trace_and_the_picture(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    async with agentcore.open_driver(
        "sim://",
        model="sim",
        tools=[lookup],
        trace=trace,
        config=SimConfig(repeat_share=1.0, speedup=100),
    ) as driver:
        inputs = [{"topic": f"t{i % 3}"} for i in range(60)]
        await agentcore.run_batch(TASK, inputs, driver=driver)
        stats = driver.executor.statistics().tools["lookup"]
    assert stats.cache_hits > 0 and stats.coalesced > 0  # both kinds occur
    events = json.loads(trace.read_text())
    instants = [e for e in events if e.get("ph") == "i" and e.get("pid") == 2]
    sources = [e["args"]["source"] for e in instants]
    assert sources.count("cached") == stats.cache_hits
    assert sources.count("coalesced") == stats.coalesced

    svg = agentcore.render_timeline(trace, tmp_path / "timeline.svg").read_text()
    calls = stats.executions + stats.coalesced + stats.cache_hits
    assert calls == stats.requests
    assert (
        f"{calls} tool calls: {stats.executions} executions, {stats.coalesced} shared one, "
        f"{stats.cache_hits} from the cache" in svg
    )
    drawn = {"from the cache": 0, "shared an execution": 0}
    for title in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}title"):
        match = re.fullmatch(
            r"(\d+) calls (from the cache|shared an execution) \(.*\)", title.text or ""
        )
        if match:
            drawn[match[2]] += int(match[1])
    assert drawn == {"from the cache": stats.cache_hits, "shared an execution": stats.coalesced}
