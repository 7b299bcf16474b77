"""The chaos run in a short form (CI), and its negative control without the compare.

The long runs and their figures are in docs/benchmarks.md (``make chaos``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

CHAOS = Path(__file__).parent / "chaos.py"


def _chaos(*args: str) -> tuple[int, dict[str, object], str]:
    proc = subprocess.run(
        [sys.executable, str(CHAOS), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = proc.stdout
    report = orjson.loads(out[out.index("{") : out.rindex("}") + 1])
    return proc.returncode, report, out + proc.stderr


def test_kills_zombies_and_a_server_crash_lose_and_duplicate_nothing():
    code, report, output = _chaos(
        "--agents", "600", "--workers", "3", "--kills", "4", "--zombies", "2",
        "--server-kills", "1", "--lease", "1", "--seed", "11", "--timeout", "240",
    )  # fmt: skip
    assert code == 0, output
    assert report["faults_applied"] == {"kill": 4, "zombie": 2, "server": 1}, output
    assert report["lost"] == report["wrong"] == report["duplicate_commits"] == 0


def test_negative_control_without_the_compare_commits_steps_twice():
    code, report, output = _chaos(
        "--agents", "300", "--workers", "3", "--kills", "0", "--zombies", "2",
        "--server-kills", "0", "--lease", "1", "--latency", "0.3", "--seed", "5",
        "--no-compare", "--timeout", "120",
    )  # fmt: skip
    assert code == 1, output
    assert report["duplicate_commits"] > 0, output


def test_cut_and_slowed_connections_lose_and_duplicate_nothing():
    """Workers talk to the server through a proxy that cuts every connection and delays
    traffic: replies lost in flight (a commit applied whose answer never came, an entry
    delivered to a read that was cut) must neither lose nor repeat a step."""
    code, report, output = _chaos(
        "--agents", "600", "--workers", "3", "--kills", "0", "--zombies", "0",
        "--server-kills", "0", "--cuts", "4", "--delays", "2", "--lease", "1",
        "--seed", "13", "--timeout", "240",
    )  # fmt: skip
    assert code == 0, output
    assert report["faults_applied"].get("cut", 0) >= 2, output
    assert report["lost"] == report["wrong"] == report["duplicate_commits"] == 0
