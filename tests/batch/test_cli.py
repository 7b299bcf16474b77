"""The ``agentcore`` command line, end to end in subprocesses against ``sim://``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from agentcore import Task, UsageLimits, load_task
from agentcore._cli.main import main
from agentcore._tasks.results_file import finished_indices

TOOLS_MODULE = '''
import time
import agentcore

@agentcore.tool
def slow_lookup(term: str) -> str:
    """Look a term up slowly.

    Args:
        term: what to look up.
    """
    time.sleep({delay})
    return "found " + term
'''

TASK_FILE = """
name = "lookup"
system = "You look terms up and report."
prompt = "Look up the term below and report.\\n\\nTerm: {term}"
max_turns = 2
tools = ["clitools:slow_lookup"]

[output_fields]
term = "str"
found = "bool"
notes = "list[str]"
"""


def _write_task(folder: Path, delay: float) -> Path:
    (folder / "clitools.py").write_text(TOOLS_MODULE.replace("{delay}", str(delay)))
    task = folder / "task.toml"
    task.write_text(TASK_FILE)
    return task


def _write_inputs(folder: Path, count: int) -> Path:
    inputs = folder / "inputs.jsonl"
    inputs.write_bytes(b"".join(orjson.dumps({"term": f"t{i}"}) + b"\n" for i in range(count)))
    return inputs


def _cli(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "agentcore._cli.main", *map(str, args)]


def _records(path: Path) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_run_writes_one_line_per_input_against_sim(tmp_path: Path) -> None:
    task = _write_task(tmp_path, 0.0)
    inputs = _write_inputs(tmp_path, 12)
    out = tmp_path / "out.jsonl"
    proc = subprocess.run(
        _cli("run", task, inputs, "-o", out, "--max-inflight", "4"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    records = _records(out)
    assert sorted(r["index"] for r in records) == list(range(12))  # type: ignore[type-var]
    for record in records:
        assert record["status"] == "ok"
        output = record["output"]
        assert isinstance(output, dict)
        assert set(output) == {"term", "found", "notes"}
        assert isinstance(output["found"], bool)
    assert "tool calls" in proc.stderr  # the summary table


def test_killed_run_resumes_with_every_input_exactly_once(tmp_path: Path) -> None:
    task = _write_task(tmp_path, 0.2)
    inputs = _write_inputs(tmp_path, 40)
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen(
        _cli("run", task, inputs, "-o", out, "--max-inflight", "2", "-q"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if out.exists() and out.read_bytes().count(b"\n") >= 5:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the run wrote no results within 60 s")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    done_before = len(finished_indices(out))
    assert 5 <= done_before < 40
    resumed = subprocess.run(
        _cli("run", task, inputs, "-o", out, "--max-inflight", "8", "--resume", "-q"),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    indices = [r["index"] for r in _records(out)]
    assert sorted(indices) == list(range(40))  # type: ignore[type-var]


def test_resume_cuts_a_torn_last_line(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(b'{"index": 0, "status": "ok"}\n{"index": 1, "sta')
    assert finished_indices(out) == {0}
    assert out.read_bytes() == b'{"index": 0, "status": "ok"}\n'


def test_an_existing_output_is_not_overwritten_without_a_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = _write_task(tmp_path, 0.0)
    inputs = _write_inputs(tmp_path, 1)
    out = tmp_path / "out.jsonl"
    out.write_text('{"index": 0}\n')
    assert main(["run", str(task), str(inputs), "-o", str(out)]) == 2
    assert "--resume" in capsys.readouterr().err
    assert out.read_text() == '{"index": 0}\n'


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("prompt = 'x'\nbogus = 1\n", "unknown key(s) bogus"),
        ("system = 'x'\n", "'prompt' (a string) is required"),
        ("prompt = 'x'\n[output_fields]\nn = 'complex'\n", "output_fields.n: unknown type"),
        ("prompt = 'x'\ntools = ['nosuchmodule:t']\n", "tools[0]: cannot import"),
        ("prompt = \n", "not valid TOML"),
        ("prompt = 'x'\nmax_turns = 0\n", "max_turns"),
        ("prompt = 'x'\n[limits]\nrequest = 3\n", "unknown limits key(s) request"),
        ("prompt = 'x'\n[limits]\nrequests = -1\n", "limits: "),
        ("prompt = 'x'\nlimits = 3\n", "[limits] must be a table"),
    ],
)
def test_bad_task_files_exit_2_naming_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    task = tmp_path / "task.toml"
    task.write_text(content)
    inputs = _write_inputs(tmp_path, 1)
    code = main(["run", str(task), str(inputs), "-o", str(tmp_path / "o.jsonl")])
    assert code == 2
    assert message in capsys.readouterr().err


def test_a_task_file_sets_usage_limits(tmp_path: Path) -> None:
    task = tmp_path / "task.toml"
    task.write_text("prompt = 'x {input}'\n[limits]\nrequests = 4\ntool_calls = 2\n")
    assert load_task(task).limits == UsageLimits(requests=4, tool_calls=2)


@pytest.mark.parametrize(
    ("line", "expected"),
    [("", Task(prompt="x").final_instruction), ("final_instruction = 'Answer now.'",
     "Answer now."), ("final_instruction = ''", None)],
)  # fmt: skip
def test_a_task_file_sets_or_drops_the_final_instruction(
    tmp_path: Path, line: str, expected: str | None
) -> None:
    task = tmp_path / "task.toml"
    task.write_text(f"prompt = 'x {{input}}'\n{line}\n")
    assert load_task(task).final_instruction == expected


def test_bad_input_lines_exit_2_with_their_line_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = _write_task(tmp_path, 0.0)
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text('{"term": "a"}\n\n{"term": \nnot json\n')
    out = tmp_path / "o.jsonl"
    assert main(["run", str(task), str(inputs), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "inputs.jsonl:3: not valid JSON" in err
    assert "inputs.jsonl:4: not valid JSON" in err
    assert not out.exists()


def test_demo_runs_and_prints_the_summary() -> None:
    proc = subprocess.run(
        _cli("demo", "--agents", "20", "--max-inflight", "8"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    for row in ("agents", "TTFT p50 / p95", "cached", "tool calls", "slot utilisation"):
        assert row in proc.stdout
    assert "20 (20 ok" in proc.stdout


def test_sim_rejects_an_invalid_knob_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "--port", "0", "--slots", "0"]) == 2
    assert "slots" in capsys.readouterr().err
