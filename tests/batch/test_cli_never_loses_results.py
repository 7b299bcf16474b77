"""``agentcore run`` never loses results: interrupts, typos, bad inputs and odd servers, each
tried with the real command in a subprocess."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.batch.test_cli import _records, _write_inputs, _write_task

PREVIOUS = b'{"index": 0, "status": "ok", "output": "kept"}\n'


def _agentcore(*args: str | Path) -> list[str]:
    """The installed ``agentcore`` console script (the module when it is not installed)."""
    script = shutil.which("agentcore", path=str(Path(sys.executable).parent))
    head = [script] if script else [sys.executable, "-m", "agentcore._cli.main"]
    return [*head, *map(str, args)]


def _run(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _agentcore(*args), capture_output=True, text=True, timeout=timeout, check=False
    )


def _wait_for_lines(path: Path, count: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        if proc.poll() is not None:
            pytest.fail(f"the run ended early with exit code {proc.returncode}")
        time.sleep(0.05)
    pytest.fail(f"the run wrote fewer than {count} results within 60 s")


def test_ctrl_c_exits_130_with_a_clean_message_and_keeps_every_finished_result(
    tmp_path: Path,
) -> None:
    task = _write_task(tmp_path, 0.3)
    inputs = _write_inputs(tmp_path, 40)
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen(
        _agentcore("run", task, inputs, "-o", out, "--max-inflight", "2", "-q"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for_lines(out, 3, proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    text = err.decode()
    assert proc.returncode == 130, text
    assert "Traceback" not in text
    assert "interrupted" in text
    records = _records(out)  # every line whole
    assert 3 <= len(records) < 40
    assert len({r["index"] for r in records}) == len(records)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--backend", "nosuch://host"], "nosuch"),
        (["--max-inflight", "0"], "--max-inflight"),
        (["--api-key-env", "AGENTCORE_TEST_UNSET_KEY"], "AGENTCORE_TEST_UNSET_KEY"),
    ],
)
def test_force_with_a_mistake_in_the_command_keeps_the_previous_results(
    tmp_path: Path, flags: list[str], message: str
) -> None:
    task = _write_task(tmp_path, 0.0)
    inputs = _write_inputs(tmp_path, 2)
    out = tmp_path / "out.jsonl"
    out.write_bytes(PREVIOUS)
    proc = _run("run", task, inputs, "-o", out, "--force", *flags)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert out.read_bytes() == PREVIOUS


def test_force_with_an_unreachable_backend_keeps_the_previous_results(tmp_path: Path) -> None:
    task = _write_task(tmp_path, 0.0)
    inputs = _write_inputs(tmp_path, 1)
    out = tmp_path / "out.jsonl"
    out.write_bytes(PREVIOUS)
    # Port 9 (discard) on loopback refuses connections: the warm-up fails for good (after its
    # one retry), so the batch stops before any agent runs, and the previous results are left
    # as they were.
    proc = _run(
        "run", task, inputs, "-o", out, "--force", "--backend", "http://127.0.0.1:9",
        "--model", "m", "--max-attempts", "2",
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "cannot serve this batch" in proc.stderr
    assert out.read_bytes() == PREVIOUS


def test_force_replaces_the_previous_results_once_the_run_has_its_own(tmp_path: Path) -> None:
    task = _write_task(tmp_path, 0.0)
    inputs = _write_inputs(tmp_path, 3)
    out = tmp_path / "out.jsonl"
    out.write_bytes(PREVIOUS)
    proc = _run("run", task, inputs, "-o", out, "--force", "-q")
    assert proc.returncode == 0, proc.stderr
    records = _records(out)
    assert sorted(r["index"] for r in records) == [0, 1, 2]  # type: ignore[type-var]
    assert all(r["output"] != "kept" for r in records)


def test_inputs_that_cannot_fill_the_template_exit_2_naming_every_bad_line(
    tmp_path: Path,
) -> None:
    task = _write_task(tmp_path, 0.0)
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text('{"term": "a"}\n[1, 2]\n\n{"other": 1}\n"just text"\n{"term": "b"}\n')
    out = tmp_path / "out.jsonl"
    proc = _run("run", task, inputs, "-o", out)
    assert proc.returncode == 2, proc.stderr
    for number in (2, 4, 5):  # each named, with the placeholder it lacks
        assert f"inputs.jsonl:{number}: the prompt template's placeholder {{term}}" in proc.stderr
    assert "its keys: other" in proc.stderr  # and the keys the input has
    assert "inputs.jsonl:1:" not in proc.stderr
    assert "inputs.jsonl:6:" not in proc.stderr
    assert not out.exists()


def test_output_in_a_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    task = _write_task(tmp_path, 0.0)
    inputs = _write_inputs(tmp_path, 1)
    proc = _run("run", task, inputs, "-o", tmp_path / "nosuchdir" / "out.jsonl")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "does not exist" in proc.stderr
    assert "nosuchdir" in proc.stderr


def test_resume_does_not_count_indices_that_are_not_inputs(tmp_path: Path) -> None:
    task = _write_task(tmp_path, 0.0)
    inputs = _write_inputs(tmp_path, 3)
    out = tmp_path / "out.jsonl"
    out.write_bytes(PREVIOUS + b'{"index": 7, "status": "ok", "output": "stray"}\n')
    proc = _run("run", task, inputs, "-o", out, "--resume")
    assert proc.returncode == 0, proc.stderr
    assert "resuming: 1 of 3 inputs already done" in proc.stderr
    assert "not in" in proc.stderr
    assert "(7)" in proc.stderr
    indices = sorted(r["index"] for r in _records(out))  # type: ignore[type-var]
    assert indices == [0, 1, 2, 7]


@pytest.fixture
def json_only_server() -> Iterator[str]:
    """``agentcore sim --ignore-stream`` on a free loopback port: answers every request with
    one ``application/json`` reply even when asked to stream."""
    proc = subprocess.Popen(
        _agentcore("sim", "--port", "0", "--ignore-stream", "--speedup", "20"),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"serving (\S+)", line)
        assert found, f"unexpected first line from agentcore sim: {line!r}"
        yield found.group(1)
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_server_that_ignores_stream_true_is_answered_in_one_attempt(
    tmp_path: Path, json_only_server: str
) -> None:
    task = _write_task(tmp_path, 0.0)
    inputs = _write_inputs(tmp_path, 4)
    out = tmp_path / "out.jsonl"
    proc = _run(
        "run", task, inputs, "-o", out, "--backend", json_only_server, "--model", "m", "--stream"
    )
    assert proc.returncode == 0, proc.stderr
    assert all(r["status"] == "ok" for r in _records(out))
    row = re.search(r"model requests\s+(\d+) \((\d+) attempts\)", proc.stderr)
    assert row, proc.stderr
    assert row.group(1) == row.group(2)  # no retries of a "cut stream"
    assert orjson.loads(out.read_bytes().splitlines()[0])["turns"] >= 1
