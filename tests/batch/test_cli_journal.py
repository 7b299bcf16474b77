"""``agentcore run`` journals every agent's steps beside its results file, and ``--resume``
restores each unfinished agent at its last journaled step; one process per results file.
Each test runs the real command."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from agentcore._observe.trace import read_trace
from tests.batch.test_cli import _cli, _records

TOOLS = '''
import os
import time
import zlib

import agentcore


@agentcore.tool
def lookup(ctx: agentcore.RunContext, term: str) -> str:
    """Look a term up.

    Args:
        term: what to look up.
    """
    fd = os.open(os.environ["TOOL_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, (ctx.idempotency_key + "\\n").encode())
    os.close(fd)
    gate = os.environ.get("TOOL_GATE")
    deadline = time.monotonic() + 120
    while gate and not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.05)  # held until the test opens the gate
    # Agents of one batch take one, two or three times as long (by their run id), so some
    # finish while others are still mid-way.
    spread = 1 + zlib.crc32(ctx.idempotency_key.split("/")[0].encode()) % 3
    hold = os.environ.get("TOOL_HOLD")
    held = term[1:].isdigit() and int(term[1:]) % 8 == 7
    while hold and held and not os.path.exists(hold) and time.monotonic() < deadline:
        time.sleep(0.05)  # one agent in eight stays mid-way until the process is killed
    time.sleep(float(os.environ.get("TOOL_SLEEP", "0.2")) * spread)
    return "found " + term
'''

TASK = """
name = "lookup"
system = "You look terms up and report."
prompt = "Look up the term below and report.\\n\\nTerm: {term}"
max_turns = 3
tools = ["journaltools:lookup"]

[output_fields]
term = "str"
found = "bool"
notes = "list[str]"
"""


def _folder(tmp_path: Path, count: int) -> tuple[Path, Path]:
    (tmp_path / "journaltools.py").write_text(TOOLS)
    task = tmp_path / "task.toml"
    task.write_text(TASK)
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_bytes(b"".join(orjson.dumps({"term": f"t{i}"}) + b"\n" for i in range(count)))
    return task, inputs


def _env(tmp_path: Path, log: str, sleep: float = 0.2) -> dict[str, str]:
    path = f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    return {**os.environ, "PYTHONPATH": path, "TOOL_LOG": str(tmp_path / log),
            "TOOL_SLEEP": str(sleep)}  # fmt: skip


def run_cli(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``agentcore ARGS`` to its end, its output captured."""
    return subprocess.run(
        _cli(*args), env=env, capture_output=True, text=True, timeout=180, check=False
    )


def every_input_ok_once(out: Path, count: int) -> list[dict[str, object]]:
    """The records of ``out``, checked: each of ``count`` inputs once, every one ``ok``."""
    records = _records(out)
    assert sorted(r["index"] for r in records) == list(range(count))  # type: ignore[type-var]
    assert all(r["status"] == "ok" for r in records)
    return records


def _query(path: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def _requests(trace: Path) -> list[str]:
    return [e["args"]["request"] for e in read_trace(trace) if "request" in e.get("args", {})]


def test_a_killed_run_resumes_each_agent_at_its_last_journaled_step(tmp_path: Path) -> None:
    task, inputs = _folder(tmp_path, 40)
    out = tmp_path / "out.jsonl"
    journal = tmp_path / "out.jsonl.journal"
    base = ["run", task, inputs, "-o", out, "--max-inflight", "4", "-q"]
    # One agent in eight (t7, t15, ...) is held in its tool, so the run cannot end before the
    # kill however fast or slow the machine; the others fit the tool threads.
    held = {**_env(tmp_path, "first.log"), "TOOL_HOLD": str(tmp_path / "never")}
    proc = subprocess.Popen(
        _cli(*base, "--trace", tmp_path / "first.json"), env=held, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
        try:
            steps = _query(journal, "SELECT count(*) FROM steps")[0][0]
        except sqlite3.Error:
            continue
        if isinstance(steps, int) and steps >= 30 and out.exists() and out.stat().st_size:
            proc.send_signal(signal.SIGKILL)
            break
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    # What the journal held when the process died.
    rows = _query(journal, "SELECT run, key, data FROM steps")
    tools_done = {str(key) for _, key, _ in rows if key}
    replies_done = {orjson.loads(data)["request_id"] for _, key, data in rows if not key}
    ended = {str(run) for (run,) in _query(journal, "SELECT run FROM ends")}
    written = {r["index"] for r in _records(out) if out.read_bytes().endswith(b"\n")}
    assert tools_done and replies_done

    resumed = run_cli(
        *base, "--resume", "--trace", tmp_path / "second.json", env=_env(tmp_path, "second.log")
    )
    assert resumed.returncode == 0, resumed.stderr
    records = every_input_ok_once(out, 40)
    # Nothing the journal held was computed again: no journaled tool result, no journaled
    # reply, no agent whose end was journaled.
    again = _lines(tmp_path / "second.log")
    assert not tools_done & set(again)
    requested = _requests(tmp_path / "second.json")
    assert not replies_done & set(requested)
    assert not {r.rpartition("/")[0] for r in requested} & ended
    # A call the first run made runs again only if its outcome was not journaled (it was in
    # flight at the kill), and then once, with the same idempotency key.
    first = _lines(tmp_path / "first.log")
    in_flight = {k for k in first if k not in tools_done and k.split("/")[0] not in ended}
    assert len(again) == len(set(again))
    assert set(again) & set(first) <= in_flight
    assert written <= {r["index"] for r in records}

    # The same task run uninterrupted gives the same outputs.
    fresh = tmp_path / "fresh.jsonl"
    whole = run_cli(
        "run", task, inputs, "-o", fresh, "--max-inflight", "4", "-q",
        env=_env(tmp_path, "fresh.log"),
    )  # fmt: skip
    assert whole.returncode == 0, whole.stderr
    expected = {r["index"]: r["output"] for r in _records(fresh)}
    assert {r["index"]: r["output"] for r in records} == expected
    assert {r["index"]: r["turns"] for r in records} == {
        r["index"]: r["turns"] for r in _records(fresh)
    }


@pytest.mark.parametrize("journal", ["journal", "no-journal"])
def test_a_second_run_on_the_same_results_file_is_refused_while_the_first_runs(
    tmp_path: Path, journal: str
) -> None:
    task, inputs = _folder(tmp_path, 12)
    out = tmp_path / "out.jsonl"
    flags = ["--no-journal"] if journal == "no-journal" else []
    base = ["run", task, inputs, "-o", out, "--max-inflight", "2", "-q", *flags]
    gate = tmp_path / "gate"
    held = {**_env(tmp_path, "first.log"), "TOOL_GATE": str(gate)}
    first = subprocess.Popen(_cli(*base), env=held, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _lines(tmp_path / "first.log") and time.monotonic() < deadline:
            time.sleep(0.05)
        second = run_cli(*base, "--resume", env=_env(tmp_path, "second.log"))
        assert second.returncode == 2, second.stderr
        assert "in use by another agentcore process" in second.stderr
        assert str(out) in second.stderr
        gate.touch()  # the first run goes on
        _, stderr = first.communicate(timeout=180)
    finally:
        first.kill()
    assert first.returncode == 0, stderr
    # One writer: every line whole, every input once.
    assert out.read_bytes().endswith(b"\n")
    indices = [r["index"] for r in _records(out)]
    assert sorted(indices) == list(range(12))  # type: ignore[type-var]
    assert not _lines(tmp_path / "second.log")


def test_resuming_with_another_task_is_refused_naming_what_changed_unless_forced(
    tmp_path: Path,
) -> None:
    task, inputs = _folder(tmp_path, 3)
    out = tmp_path / "out.jsonl"
    env = _env(tmp_path, "tools.log", sleep=0.0)
    base = ["run", task, inputs, "-o", out, "-q"]
    done = run_cli(*base, env=env)
    assert done.returncode == 0, done.stderr
    task.write_text(TASK.replace("Look up the term below", "Find the term below"))
    refused = run_cli(*base, "--resume", env=env)
    assert refused.returncode == 2
    assert "written for another task: prompt changed" in refused.stderr
    assert "--force" in refused.stderr
    forced = run_cli(*base, "--resume", "--force", env=env)
    assert forced.returncode == 0, forced.stderr
    assert len(_records(out)) == 3  # every input was done: nothing ran again
