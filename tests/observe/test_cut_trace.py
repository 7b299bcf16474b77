"""A trace cut short is a trace: written as the batch goes, readable after a kill at any
point, and its picture says that it was cut, where, and what was going on then."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import trio

import agentcore
from agentcore._observe.trace import BATCH_PID, SLOTS_PID, read_trace
from agentcore.testing import ScriptedModel, run_in_virtual_time
from tests.batch.test_cli_never_loses_results import _agentcore
from tests.driver.helpers import tool_then_answer

NOTICE = re.compile(
    r"CUT SHORT at ([\d.]+) s: .*? At the cut (\d+) agents were running, (\d+) model requests "
    r"held a slot .*? and (\d+) waited for one\."
)


@agentcore.tool
async def nap(key: str) -> str:
    """Sleep a little.

    Args:
        key: echoed back.
    """
    await trio.sleep(0.2)
    return key


def _complete_trace(path: Path) -> None:
    model = ScriptedModel(tool_then_answer("nap", lambda call: {"key": "k"}), latency=0.1)
    task = agentcore.Task(prompt="go {input}", tools=[nap])

    async def main() -> None:
        await agentcore.run_batch(task, range(40), backend=model, max_inflight=6, trace=path)

    run_in_virtual_time(main)


def _last_counters(path: Path) -> tuple[int, int, int, int]:
    """From the events of a (cut) trace: finished agents, agents running, slots in use,
    requests waiting, as its last counters say."""
    done = running = in_use = waiting = 0
    for event in read_trace(path):
        if event.get("ph") != "C" or event.get("pid") != BATCH_PID:
            continue
        args = event["args"]
        if event["name"] == "results":
            done = sum(args.values())
        elif event["name"] == "agents running":
            running = args["running"]
        elif event["name"] == "slots":
            in_use, waiting = args["in_use"], args["waiting"]
    return done, running, in_use, waiting


def test_a_trace_cut_at_any_byte_renders_and_says_where_and_what_was_going_on(
    tmp_path: Path,
) -> None:
    whole = tmp_path / "whole.json"
    _complete_trace(whole)
    data = whole.read_bytes()
    picture = tmp_path / "whole.svg"
    agentcore.render_timeline(whole, picture)
    assert "CUT SHORT" not in picture.read_text()
    # Every prefix a kill could leave: nothing at all, inside the first line, inside an event,
    # right after one, and before the closing record.
    cuts = sorted({0, 1, 2, 3, *range(5, len(data), max(1, len(data) // 120)), len(data) - 40})
    cut = tmp_path / "cut.json"
    for size in cuts:
        cut.write_bytes(data[:size])
        agentcore.render_timeline(cut, picture)  # never refused
        text = picture.read_text()
        notice = NOTICE.search(text)
        assert notice, (size, text[:600])
        done, running, in_use, waiting = _last_counters(cut)
        assert [int(g) for g in notice.groups()[1:]] == [running, in_use, waiting], size
        assert f">{done} agents (" in text, size
        end = max((e["ts"] + e.get("dur", 0) for e in read_trace(cut) if "ts" in e), default=0.0)
        assert notice[1] == f"{max(end, 1.0) / 1e6:.2f}", size


TOOLS = '''
import trio
import agentcore

@agentcore.tool
async def gate(ctx: agentcore.RunContext, term: str) -> str:
    """Look a term up.

    Args:
        term: what to look up.
    """
    if ctx.index >= 3:  # the other agents wait here until the process is killed
        await trio.sleep(3600)
    return "found " + term
'''

TASK = """
name = "gated"
system = "You look terms up and report."
prompt = "Look up the term below and report.\\n\\nTerm: {term}"
max_turns = 2
tools = ["gatetools:gate"]
"""


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.endswith(b"}")]


def test_a_run_killed_mid_batch_leaves_a_trace_that_renders_with_what_it_had_done(
    tmp_path: Path,
) -> None:
    (tmp_path / "gatetools.py").write_text(TOOLS)
    task = tmp_path / "task.toml"
    task.write_text(TASK)
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_bytes(b"".join(orjson.dumps({"term": f"t{i}"}) + b"\n" for i in range(12)))
    out, trace = tmp_path / "out.jsonl", tmp_path / "trace.json"
    command = _agentcore(
        "run", task, inputs, "-o", out, "--trace", trace, "--max-inflight", "4", "-q"
    )
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    try:
        while len(_lines(out)) < 3:
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "three agents never finished"
            time.sleep(0.05)
        time.sleep(1.0)  # the other nine wait in the tool: the process is idle
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert len(_lines(out)) == 3

    picture = tmp_path / "timeline.svg"
    rendered = subprocess.run(
        _agentcore("trace", trace, "-o", picture),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert rendered.returncode == 0, rendered.stderr
    text = picture.read_text()
    notice = NOTICE.search(text)
    assert notice, text[:600]
    assert notice[2] == "9"  # agents running at the cut: the nine in the tool
    assert ">3 agents (3 ok)" in text  # every result the results file has
    attempts = [
        e
        for e in read_trace(trace)
        if e.get("ph") == "X" and e.get("pid") == SLOTS_PID and e["args"]["run"] is not None
    ]  # not the warm-up request
    assert len(attempts) == 3 * 2 + 9  # two turns of the three, the first of the nine
