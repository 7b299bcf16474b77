"""A tool that fails on every call: the results, the results file, the CLI summary and its log
lines say so, and a task can ask for its agents to fail when their tools keep failing."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

import agentcore
from agentcore import AbortKind, Task, load_task
from agentcore._cli.main import main

TOOLS_MODULE = '''
import agentcore

@agentcore.tool(cache=True)
def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: the file to read.
    """
    return open(path).read()
'''

TASK_FILE = """
name = "review"
system = "You review Python files for bugs."
prompt = "Review this file:\\n\\n{path}"
tools = ["failingtools:read_file"]
{extra}
[output_fields]
summary = "str"
"""


@agentcore.tool(coalesce=False)
def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: the file to read.
    """
    return open(path).read()


def _task(**options: object) -> Task:
    return Task(
        system="You review Python files for bugs.",
        prompt="Review this file:\n\n{path}",
        tools=[read_file],
        **options,  # type: ignore[arg-type]
    )


INPUTS = [{"path": f"/nonexistent/f{i}.py"} for i in range(12)]


async def test_results_count_the_failed_tool_calls_by_tool_and_error_type() -> None:
    results = await agentcore.run_batch(_task(), INPUTS, backend="sim://", model="sim")
    assert all(r.status == "ok" for r in results)  # the model was told, and answered
    for result in results:
        failures = result.tool_failures
        assert failures.total > 0
        assert set(failures.counts) == {"read_file"}
        assert set(failures.counts["read_file"]) == {"FileNotFoundError"}
        assert failures.first["read_file"].startswith("FileNotFoundError: [Errno 2]")


async def test_a_task_with_max_tool_failures_fails_the_agents_whose_tools_keep_failing() -> None:
    results = await agentcore.run_batch(
        _task(max_tool_failures=0), INPUTS, backend="sim://", model="sim"
    )
    assert {r.status for r in results} == {"failed"}
    for result in results:
        assert result.error is not None
        assert result.error.kind is AbortKind.TOOL_FAILURES
        assert "more than max_tool_failures=0" in result.error.message
        assert result.tool_failures.total == 1


def _write(folder: Path, extra: str = "") -> tuple[Path, Path]:
    (folder / "failingtools.py").write_text(TOOLS_MODULE)
    task = folder / "task.toml"
    task.write_text(TASK_FILE.replace("{extra}", extra))
    inputs = folder / "inputs.jsonl"
    inputs.write_bytes(b"".join(orjson.dumps(i) + b"\n" for i in INPUTS))
    return task, inputs


def test_a_task_file_sets_max_tool_failures(tmp_path: Path) -> None:
    task, _ = _write(tmp_path, "max_tool_failures = 2")
    assert load_task(task).max_tool_failures == 2
    task, _ = _write(tmp_path)
    assert load_task(task).max_tool_failures is None


def test_the_cli_summary_results_file_and_stderr_say_which_tool_calls_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task, inputs = _write(tmp_path)
    out = tmp_path / "out.jsonl"
    assert main(["run", str(task), str(inputs), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    failed = sum(n for r in records for n in r["tool_failures"]["counts"]["read_file"].values())
    assert failed > 0
    first = records[0]["tool_failures"]["first"]["read_file"]
    assert first.startswith("FileNotFoundError: [Errno 2] No such file or directory")
    # the summary: how many tool calls failed, and with what
    assert f"executed, {failed} failed" in err
    assert f"failed tool calls  read_file {failed} (FileNotFoundError: " in err
    # the first failures on stderr, with their run and traceback, and no more than that
    warnings = [line for line in err.splitlines() if line.startswith("agentcore: warning: ")]
    assert warnings[0].startswith("agentcore: warning: run ")
    assert "tool read_file failed: FileNotFoundError" in warnings[0]
    assert err.count("Traceback (most recent call last):") == 3
    assert "in read_file\n    return open(path).read()" in err


def test_the_cli_exits_1_when_a_task_file_limits_tool_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task, inputs = _write(tmp_path, "max_tool_failures = 0")
    out = tmp_path / "out.jsonl"
    assert main(["run", str(task), str(inputs), "-o", str(out), "-q"]) == 1
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert {r["error"]["kind"] for r in records} == {"tool_failures"}
    capsys.readouterr()
