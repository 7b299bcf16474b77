"""Failed inputs can be run again (``--retry-failed``), failed lines say why (error kind and
HTTP status), and the CLI has the API's batch flags; each runs the real command."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from agentcore._cli.main import main
from tests.batch.test_cli import _cli, _records, _write_task

_TOO_BIG = 33 * 1024 * 1024  # the simulated server answers a body over 32 MiB with a 413


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_cli(*args), capture_output=True, text=True, timeout=180, check=False)


def test_retry_failed_reruns_only_failed_inputs_and_replaces_their_lines(tmp_path: Path) -> None:
    task = _write_task(tmp_path, 0.0)
    inputs = tmp_path / "inputs.jsonl"
    terms = ["a", "x" * _TOO_BIG, "c", "d"]
    inputs.write_bytes(b"".join(orjson.dumps({"term": t}) + b"\n" for t in terms))
    out = tmp_path / "out.jsonl"

    first = _run("run", task, inputs, "-o", out, "-q")
    assert first.returncode == 1, first.stderr
    records = {r["index"]: r for r in _records(out)}
    assert sorted(records) == [0, 1, 2, 3]  # type: ignore[type-var]
    failed = records[1]
    assert failed["status"] == "failed"
    assert failed["error"] == {
        "kind": "model_failed",
        "message": failed["error"]["message"],  # type: ignore[index]
        "model_error": "too_large",
        "http_status": 413,
    }
    for index in (0, 2, 3):
        assert records[index]["status"] == "ok"
        assert records[index]["error"] is None
    ok_lines = [line for line in out.read_bytes().splitlines() if b'"status":"ok"' in line]

    # The user fixes the input, then runs the failed one again.
    terms[1] = "b"
    inputs.write_bytes(b"".join(orjson.dumps({"term": t}) + b"\n" for t in terms))
    again = _run("run", task, inputs, "-o", out, "-q", "--retry-failed")
    assert again.returncode == 0, again.stderr
    assert "retrying 1 failed or cancelled inputs" in again.stderr
    lines = out.read_bytes().splitlines()
    records = {r["index"]: r for r in _records(out)}
    assert len(lines) == 4
    assert sorted(records) == [0, 1, 2, 3]  # type: ignore[type-var]
    assert all(r["status"] == "ok" for r in records.values())
    assert lines[:3] == ok_lines  # the finished lines were kept as they were, not run again

    # Nothing left to retry: nothing runs, and the exit code says every input is ok.
    last = _run("run", task, inputs, "-o", out, "-q", "--retry-failed")
    assert last.returncode == 0, last.stderr
    assert "retrying 0 failed" in last.stderr
    assert out.read_bytes().splitlines() == lines


def test_resume_alone_still_counts_failed_lines_as_done(tmp_path: Path) -> None:
    task = _write_task(tmp_path, 0.0)
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_bytes(b'{"term": "a"}\n')
    out = tmp_path / "out.jsonl"
    out.write_bytes(b'{"index": 0, "status": "failed", "error": {"kind": "model_failed"}}\n')
    proc = _run("run", task, inputs, "-o", out, "-q", "--resume")
    assert proc.returncode == 0, proc.stderr
    assert len(out.read_bytes().splitlines()) == 1
    proc = _run("run", task, inputs, "-o", out, "-q", "--retry-failed", "--force")
    assert proc.returncode == 2
    assert "cannot be combined with --force" in proc.stderr


def test_timeout_flag_ends_slow_agents_as_failed(tmp_path: Path) -> None:
    task = _write_task(tmp_path, 1.0)  # every tool call sleeps 1 s
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_bytes(b'{"term": "a"}\n{"term": "b"}\n')
    out = tmp_path / "out.jsonl"
    proc = _run("run", task, inputs, "-o", out, "-q", "--timeout", "0.3")
    assert proc.returncode == 1, proc.stderr
    records = _records(out)
    assert [r["status"] for r in records] == ["failed", "failed"]
    assert all("deadline" in str(r["error"]) for r in records), records


@pytest.mark.parametrize("policy", ["priority", "attained"])
def test_slot_policy_adaptive_and_max_active_flags_run_the_batch(
    tmp_path: Path, policy: str
) -> None:
    task = _write_task(tmp_path, 0.0)
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_bytes(b"".join(orjson.dumps({"term": f"t{i}"}) + b"\n" for i in range(6)))
    out = tmp_path / "out.jsonl"
    flags = ("--slot-policy", policy, "--adaptive", "--max-active", "2", "--max-inflight", "2")
    proc = _run("run", task, inputs, "-o", out, *flags)
    assert proc.returncode == 0, proc.stderr
    assert sorted(r["index"] for r in _records(out)) == list(range(6))  # type: ignore[type-var]


def test_bad_flag_values_exit_2_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = _write_task(tmp_path, 0.0)
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_bytes(b'{"term": "a"}\n')
    out = tmp_path / "out.jsonl"
    for flags, message in [
        (("--max-active", "0"), "must be at least 1"),
        (("--timeout", "-1"), "positive number of seconds"),
        (("--timeout", "soon"), "not a number"),
        (("--slot-policy", "lifo"), "invalid choice"),
    ]:
        # The command's entry point in this process (argparse's own errors exit through
        # SystemExit, as they do from the console script).
        try:
            code = main(["run", str(task), str(inputs), "-o", str(out), *flags])
        except SystemExit as exc:
            code = exc.code  # type: ignore[assignment]
        stderr = capsys.readouterr().err
        assert code == 2, (flags, stderr)
        assert message in stderr, (flags, stderr)
        assert not out.exists()


def test_retry_failed_reruns_cancelled_inputs_and_inputs_not_in_the_output(tmp_path: Path) -> None:
    task = _write_task(tmp_path, 0.0)
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_bytes(b'{"term": "a"}\n{"term": "b"}\n{"term": "c"}\n')
    out = tmp_path / "out.jsonl"
    done = b'{"index": 0, "status": "ok", "output": {"term": "a"}}\n'
    # A run interrupted by Ctrl-C: input 1 cancelled, input 2 never reported, a torn line.
    out.write_bytes(done + b'{"index": 1, "status": "cancelled", "error": {}}\n{"index": 2, "st')
    proc = _run("run", task, inputs, "-o", out, "-q", "--retry-failed")
    assert proc.returncode == 0, proc.stderr
    lines = out.read_bytes().splitlines(keepends=True)
    assert lines[0] == done
    records = _records(out)
    assert sorted(r["index"] for r in records) == [0, 1, 2]  # type: ignore[type-var]
    assert all(r["status"] == "ok" for r in records)


@pytest.mark.parametrize("command", ["run", "worker"])
def test_max_attempts_sets_the_retry_policy_of_the_driver(command: str) -> None:
    from agentcore import RetryPolicy
    from agentcore._cli.main import _driver_options, _parser

    head = ["run", "t.toml", "in.jsonl", "-o", "out.jsonl"] if command == "run" else [
        "worker", "t.toml", "--queue", "redis://127.0.0.1:6379/b"
    ]  # fmt: skip
    parsed = _parser().parse_args([*head, "--max-attempts", "3"])
    assert _driver_options(parsed)["retry"] == RetryPolicy(max_attempts=3)
    assert "retry" not in _driver_options(_parser().parse_args(head))  # the default policy


def test_max_attempts_below_one_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "t.toml", "in.jsonl", "-o", "out.jsonl", "--max-attempts", "0"])
    assert exited.value.code == 2
    assert "--max-attempts: must be at least 1" in capsys.readouterr().err
