"""Progress from long tools: ``ctx.progress`` reaches the step events, the trace and the CLI's
progress line; nothing is built when nobody listens; a slow watcher skips samples."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
import trio
import trio.testing

import agentcore
from agentcore import (
    RunContext,
    StepEvent,
    ToolEnded,
    ToolProgress,
    ToolStarted,
    open_batch,
    open_driver,
)
from agentcore._cli.main import _Progress
from agentcore._observe.steps import open_step_channel
from agentcore._observe.trace import TOOLS_PID, read_trace
from agentcore.core import AssistantMessage, CallModel, ToolCall, ToolMessage
from agentcore.testing import ScriptedModel
from tests.driver.helpers import make_loop

seen_contexts: list[RunContext[Any]] = []


@agentcore.tool
async def crawl(ctx: RunContext[Any], pages: int) -> str:
    """Crawl pages. Args: pages: how many."""
    seen_contexts.append(ctx)
    for page in range(pages):
        ctx.progress(page / pages, f"page {page}")
        ctx.progress(page / pages, "too soon: dropped")  # within 0.1 s of the previous one
        await trio.sleep(1.0)
    ctx.progress(1.0, "done")
    return f"{pages} pages"


@agentcore.tool
def crunch(ctx: RunContext[Any], n: int) -> str:
    """Crunch in a worker thread. Args: n: steps."""
    for i in range(n):
        ctx.progress(i / n, f"step {i}")
    ctx.progress(1.0, "crunched")
    return "ok"


def call_once(name: str, arguments: dict[str, Any]) -> Any:
    def policy(call: CallModel) -> str | AssistantMessage:
        if any(isinstance(m, ToolMessage) for m in call.messages):
            return "finished"
        return AssistantMessage(tool_calls=(ToolCall("c0", name, json.dumps(arguments)),))

    return policy


async def test_progress_reaches_the_step_events_between_start_and_end(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel(call_once("crawl", {"pages": 3}), latency=0.5)
    async with open_driver(model, tools=[crawl]) as driver:
        events: list[StepEvent] = []
        async with driver.watch(make_loop(0, [crawl])) as steps:
            async for step in steps:
                events.append(step)
    tool_events = [e for e in events if isinstance(e, ToolStarted | ToolProgress | ToolEnded)]
    assert [type(e).__name__ for e in tool_events] == [
        "ToolStarted", "ToolProgress", "ToolProgress", "ToolProgress", "ToolProgress", "ToolEnded"
    ]  # fmt: skip
    progress = [e for e in tool_events if isinstance(e, ToolProgress)]
    assert [(round(e.fraction, 3), e.message) for e in progress] == [
        (0.0, "page 0"), (0.333, "page 1"), (0.667, "page 2"), (1.0, "done")
    ]  # fmt: skip
    assert {(e.run, e.call_id, e.tool) for e in progress} == {(0, "c0", "crawl")}
    assert [e.at - progress[0].at for e in progress] == [0.0, 1.0, 2.0, 3.0]


async def test_a_tool_in_a_worker_thread_reports_its_progress(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel(call_once("crunch", {"n": 1000}))
    async with (
        open_driver(model, tools=[crunch]) as driver,
        driver.watch(make_loop(0, [crunch])) as steps,
    ):
        progress = [e async for e in steps if isinstance(e, ToolProgress)]
    assert progress, "no progress arrived from the thread"
    assert progress[-1].fraction == 1.0 and progress[-1].message == "crunched"
    assert len(progress) <= 2  # reports from a thread are folded, not queued one by one


async def test_an_unobserved_run_builds_nothing_for_progress(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen_contexts.clear()
    model = ScriptedModel(call_once("crawl", {"pages": 2}))
    async with open_driver(model, tools=[crawl]) as driver:
        result = await driver.run(make_loop(0, [crawl]))
    assert result.status == "ok"
    (context,) = seen_contexts
    assert context._reporter is None  # the run's one context, no reporter built


def test_progress_checks_its_arguments() -> None:
    context = RunContext(index=0, run_id="r", session_id="r", input=None, deps=None)
    context.progress(0.5, "half")  # nobody listens: returns at once
    for bad in (1.5, -0.1, float("nan"), True, "0.5"):
        with pytest.raises(ValueError, match="fraction"):
            context.progress(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="message"):
        context.progress(0.5, 3)  # type: ignore[arg-type]


async def test_progress_is_in_the_trace(
    autojump_clock: trio.testing.MockClock, tmp_path: Any
) -> None:
    trace = tmp_path / "trace.json"
    model = ScriptedModel(call_once("crawl", {"pages": 2}))
    async with open_driver(model, tools=[crawl], trace=trace) as driver:
        assert (await driver.run(make_loop(0, [crawl]))).status == "ok"
    marks = [e for e in read_trace(trace) if e.get("ph") == "i" and e.get("pid") == TOOLS_PID]
    marks = [e for e in marks if "fraction" in e.get("args", {})]
    assert [e["name"] for e in marks] == ["crawl 0%", "crawl 50%", "crawl 100%"]
    assert [e["args"]["message"] for e in marks] == ["page 0", "page 1", "done"]


async def test_a_watcher_that_falls_behind_skips_progress_but_no_fact() -> None:
    sink, stream = open_step_channel(1, deltas=False)
    started = ToolStarted(0, "c", "t", {}, 0.0)
    sink.push(started)  # fills the channel
    sink.push(ToolProgress(0, "c", "t", 0.5, "", 0.0))  # would start a backlog: kept
    sink.push(ToolProgress(0, "c", "t", 0.6, "", 0.0))  # a backlog exists: skipped
    ended = ToolEnded(0, "c", "t", "x", None, "executed", 1.0, 1.0)
    sink.push(ended)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sink.aclose)
        got = [e async for e in stream]
    assert [type(e).__name__ for e in got] == ["ToolStarted", "ToolProgress", "ToolEnded"]
    assert isinstance(got[1], ToolProgress) and got[1].fraction == 0.5


async def test_the_cli_progress_line_shows_the_latest_tool_progress(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate = trio.Event()

    @agentcore.tool
    async def download(ctx: RunContext[Any], url: str) -> str:
        """Download. Args: url: what."""
        ctx.progress(0.4, "40 of 100 MB")
        await gate.wait()
        return "ok"

    progress = _Progress(2, io.StringIO(), enabled=True)
    assert progress.tools is not None
    task = agentcore.Task(prompt="go {n}", tools=[download])
    model = ScriptedModel(call_once("download", {"url": "u"}))
    lines: list[str] = []
    async with open_driver(model, tools=[download]) as driver:
        async with open_batch(
            task, [{"n": 1}, {"n": 2}], driver=driver, steps=progress.tools
        ) as results:
            await trio.sleep(5)
            lines.append(progress.line(driver.statistics()))
            gate.set()
            assert [r.status async for r in results] == ["ok", "ok"]
        lines.append(progress.line(driver.statistics()))
    assert lines[0].endswith(" · download 40% 40 of 100 MB (+1)")
    assert "download" not in lines[1]  # ended calls leave the line
