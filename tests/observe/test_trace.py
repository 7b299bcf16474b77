"""``--trace`` / ``trace=``: the batch's timeline as Chrome trace-event JSON, and its picture."""

from __future__ import annotations

import itertools
import json
import subprocess
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio

import agentcore
from agentcore import RetryPolicy
from agentcore._cli.main import main as cli_main
from agentcore.sim import SimConfig
from agentcore.testing import run_in_virtual_time
from tests.batch.test_cli import _write_inputs, _write_task
from tests.batch.test_cli_never_loses_results import _agentcore

FAST_RETRY = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.05)


@agentcore.tool(coalesce=True)
async def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: what to look up.
    """
    await trio.sleep(0.05)
    if topic.startswith("bad"):
        raise RuntimeError(f"no entry for {topic}")
    return f"{topic}: found"


TASK = agentcore.Task(
    name="look",
    system="You look topics up with the lookup tool, then answer in one sentence.",
    prompt="Topic: {topic}",
    tools=[lookup],
    max_turns=3,
)


def _events(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text())  # the finished file is one valid JSON document
    assert isinstance(data, list)
    return data


async def _batch(trace: Path, inputs: list[dict[str, str]], **options: Any) -> Any:
    async with agentcore.open_driver(
        "sim://",
        model="sim",
        max_inflight=4,
        tools=[lookup],
        stream=True,
        trace=trace,
        retry=FAST_RETRY,
        seed=1,
        **options,
    ) as driver:
        results = await agentcore.run_batch(TASK, inputs, driver=driver)
        return results, driver.statistics()


def test_trace_has_one_track_per_slot_and_every_attempt_tool_execution_and_result(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "trace.json"
    inputs = [{"topic": f"t{i % 3}"} for i in range(24)]
    run = run_in_virtual_time(lambda: _batch(trace, inputs, config=SimConfig(speedup=10, slots=64)))
    results, stats = run.value
    assert all(r.status == "ok" for r in results)
    events = _events(trace)
    attempts = [e for e in events if e["ph"] == "X" and e["pid"] == 1 and e["name"] != "streaming"]
    assert len(attempts) == stats.attempts
    assert {e["tid"] for e in attempts} <= set(range(1, 5))  # never more tracks than slots
    # No two attempts overlap on one slot track.
    for tid in {e["tid"] for e in attempts}:
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in attempts if e["tid"] == tid)
        assert all(a[1] <= b[0] + 0.2 for a, b in itertools.pairwise(spans))
    # Streamed replies carry their TTFT, and a nested "streaming" slice starts there.
    streamed = [e for e in attempts if "ttft_ms" in e["args"]]
    assert streamed
    assert sum(e["name"] == "streaming" for e in events if e["ph"] == "X") == len(streamed)
    # Tool executions are drawn once; coalesced calls show as waiters of one execution.
    executions = [e for e in events if e["ph"] == "X" and e["pid"] == 2]
    assert len(executions) == stats.tool_executions
    assert sum(e["args"]["waiters"] for e in executions) == stats.tool_calls
    assert any(e["args"]["waiters"] > 1 for e in executions)
    # Every agent's end, and the final counts.
    ends = [e for e in events if e["ph"] == "i" and e["pid"] == 4]  # the agents' ends
    assert sorted(e["args"]["agent"] for e in ends) == list(range(24))
    finals = [e for e in events if e["ph"] == "C" and e["name"] == "results"]
    assert finals[-1]["args"] == {"ok": 24, "failed": 0, "cancelled": 0}


def test_trace_of_a_faulty_batch_shows_failed_attempts_back_offs_and_tool_errors(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "trace.json"
    inputs = [{"topic": "bad" if i % 4 == 0 else f"t{i}"} for i in range(24)]
    run = run_in_virtual_time(
        lambda: _batch(trace, inputs, config=SimConfig(speedup=10, fail_rate=0.3))
    )
    _, stats = run.value
    events = _events(trace)
    failed = [
        e for e in events if e["ph"] == "X" and e["pid"] == 1 and "error" in e.get("args", {})
    ]
    backoffs = [e for e in events if e["ph"] == "X" and e["pid"] == 3]
    assert stats.attempts > stats.requests  # the server's faults were retried
    assert failed
    assert all(e["cname"] == "terrible" for e in failed)
    assert len(backoffs) == stats.attempts - stats.requests
    assert all(e["dur"] > 0 for e in backoffs)
    tool_errors = [
        e for e in events if e["ph"] == "X" and e["pid"] == 2 and "error" in e.get("args", {})
    ]
    assert tool_errors
    assert "RuntimeError: no entry for bad" in tool_errors[0]["args"]["error"]


def test_the_trace_reaches_the_file_while_the_batch_runs(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    sizes: list[int] = []

    async def main() -> None:
        inputs = [{"topic": f"t{i}"} for i in range(200)]  # a few times the 64 KiB buffer
        async with agentcore.open_batch(
            TASK,
            inputs,
            backend="sim://",
            model="sim",
            max_inflight=8,
            trace=trace,
            config=SimConfig(speedup=50),
        ) as results:
            async for result in results:
                if result.index % 40 == 0:
                    sizes.append(trace.stat().st_size)

    run_in_virtual_time(main)
    final = trace.stat().st_size
    assert any(0 < s < final for s in sizes), (sizes, final)  # written in pieces, not at the end


def test_agentcore_run_trace_then_agentcore_trace_renders_svg_and_html(tmp_path: Path) -> None:
    task = _write_task(tmp_path, 0.0)
    inputs = _write_inputs(tmp_path, 6)
    trace = tmp_path / "trace.json"
    run = subprocess.run(
        _agentcore(
            "run",
            task,
            inputs,
            "-o",
            tmp_path / "out.jsonl",
            "--trace",
            trace,
            "-q",
            "--max-inflight",
            "3",
        ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    kinds = Counter(e["ph"] for e in _events(trace))
    assert kinds["X"] >= 12  # two turns per agent at least
    svg = tmp_path / "timeline.svg"
    html = tmp_path / "timeline.html"
    for out in (svg, html):  # the run is the command; the rendering runs in this process
        assert cli_main(["trace", str(trace), "-o", str(out)]) == 0
    root = ET.parse(svg).getroot()  # well-formed XML
    assert root.tag.endswith("svg")
    text = svg.read_text()
    for needle in ("slot 1", "slot 3", "slot utilisation", "tool executions", "6 agents (6 ok)"):
        assert needle in text
    assert "slot 4" not in text
    page = html.read_text()
    assert page.startswith("<!doctype html>")
    assert "<svg" in page
    assert "http" not in page.replace("http://www.w3.org/2000/svg", "")  # nothing fetched


def test_agentcore_trace_rejects_a_missing_file_and_an_unknown_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = cli_main(["trace", str(tmp_path / "nope.json"), "-o", str(tmp_path / "t.svg")])
    assert missing == 2
    assert "no such trace file" in capsys.readouterr().err
    trace = tmp_path / "t.json"
    trace.write_text("[\n]\n")
    wrong = cli_main(["trace", str(trace), "-o", str(tmp_path / "t.png")])
    assert wrong == 2
    assert ".svg or .html" in capsys.readouterr().err


def test_a_trace_file_that_cannot_be_written_stops_tracing_not_the_batch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # /dev/full accepts opening and fails every write with "No space left on device".
    inputs = [{"topic": f"t{i}"} for i in range(100)]  # more than the 64 KiB buffer holds
    run = run_in_virtual_time(
        lambda: _batch(Path("/dev/full"), inputs, config=SimConfig(speedup=50))
    )
    results, _ = run.value
    assert [r.status for r in results] == ["ok"] * 100
    warnings = [r for r in caplog.records if r.name == "agentcore.batch"]
    assert any(
        "tracing stopped" in r.getMessage() or "/dev/full" in r.getMessage() for r in warnings
    )


def test_render_timeline_refuses_what_is_not_an_agentcore_trace(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.json"
    bogus.write_text('{"not": "a trace"}')
    with pytest.raises(agentcore.ConfigError, match="not a trace"):
        agentcore.render_timeline(bogus, tmp_path / "t.svg")
    with pytest.raises(agentcore.ConfigError, match="no such trace file"):
        agentcore.render_timeline(tmp_path / "missing.json", tmp_path / "t.svg")


def test_the_trace_writer_keeps_nothing_per_agent(tmp_path: Path) -> None:
    from agentcore.testing import ScriptedModel, run_in_virtual_time

    trace = tmp_path / "trace.json"
    task = agentcore.Task(system="Answer.", prompt="Question {input}")
    agents = 5000

    async def main() -> Any:
        model = ScriptedModel(lambda call: "done", latency=0.05, ttft=0.01)
        async with agentcore.open_driver(model, max_inflight=8, trace=trace) as driver:
            (writer,) = driver._listeners
            await agentcore.run_batch(task, range(agents), driver=driver)
            return writer

    writer = run_in_virtual_time(main).value
    # Only what is in flight is kept: track numbers bounded by the slots, nothing per agent.
    assert writer._slots.used <= 8
    assert len(writer._slots._free) <= 8
    assert writer._tools.used == 0
    assert writer._backoff_ends == []
    assert writer._attempts == {}
    assert writer._index == {}  # the runs going on: none once the batch is done
    events = _events(trace)
    assert sum(e["ph"] == "i" for e in events) == agents
    # The picture is bounded by its width: 5,000 attempts too short to draw apart merge.
    svg = agentcore.render_timeline(trace, tmp_path / "t.svg")
    assert svg.stat().st_size < 200_000
    assert " more)</title>" in svg.read_text()  # merged shapes say how many they hold


def test_a_watched_run_has_its_end_event_in_the_trace(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    agent = agentcore.Agent(instructions="Use the lookup tool, then answer.", tools=[lookup])

    async def main() -> Any:
        async with agentcore.open_driver(
            "sim://", model="sim", tools=agent.tools, trace=trace, config=SimConfig(speedup=20)
        ) as driver:
            async with agent.watch("Topic: t1", driver=driver) as steps:
                [_ async for _ in steps]
            result = await agent.run("Topic: t2", driver=driver)
            return steps.result, result

    watched, ran = trio.run(main)
    assert (watched.status, ran.status) == ("ok", "ok")
    ends = [e for e in _events(trace) if e["ph"] == "i" and e["pid"] == 4]
    assert [e["args"]["status"] for e in ends] == ["ok", "ok"]  # the watched run's end too
    assert ends[0]["args"]["turns"] == watched.turns
    finals = [e for e in _events(trace) if e["ph"] == "C" and e["name"] == "results"]
    assert finals[-1]["args"] == {"ok": 2, "failed": 0, "cancelled": 0}
