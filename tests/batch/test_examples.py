"""The examples in examples/ run to completion on the embedded simulated backend."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    "argv",
    [
        ["file_review.py", "src/agentcore", "--limit", "4"],
        ["research_map_reduce.py", "How do caches work?"],
        ["faulty_batch_trace.py", "{tmp}/f.json", "{tmp}/f.svg", "--agents", "12"],
    ],
)
def test_example_runs_on_sim(argv: list[str], tmp_path: Path) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / argv[0]), *argv[1:]],
        cwd=EXAMPLES.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip()
