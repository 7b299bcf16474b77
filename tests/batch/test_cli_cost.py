"""``agentcore run --service-tier/--prices``: the cost in the summary and in every record."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

TASK_FILE = """
system = "You answer briefly."
prompt = "Say something about {term}."
"""
PRICES = {
    "sim": {
        "standard": {"input": 2.0, "output": 8.0, "cached_input": 0.5},
        "flex": {"input": 1.0, "output": 4.0, "cached_input": 0.25},
    }
}


def _run(folder: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    task = folder / "task.toml"
    task.write_text(TASK_FILE)
    inputs = folder / "inputs.jsonl"
    inputs.write_bytes(b"".join(orjson.dumps({"term": f"t{i}"}) + b"\n" for i in range(6)))
    out = folder / "out.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "agentcore._cli.main", "run", str(task), str(inputs), "-o",
         str(out), "--force", *extra],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()] if out.exists() else []
    return proc, records


def test_flex_run_reports_its_cost_and_saving_in_summary_and_records(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_bytes(orjson.dumps(PRICES))
    proc, records = _run(tmp_path, "--service-tier", "flex", "--prices", str(prices))
    assert proc.returncode == 0, proc.stderr
    assert "saving vs standard" in proc.stderr
    assert "(50.0%)" in proc.stderr or "(50%)" in proc.stderr
    assert len(records) == 6
    for record in records:
        cost = record["cost"]
        assert cost["requests"] == {"flex": 1}
        assert cost["usd"] * 2 == cost["standard_usd"] > 0


def test_without_tier_or_prices_records_have_no_cost(tmp_path: Path) -> None:
    proc, records = _run(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "saving vs standard" not in proc.stderr
    assert all("cost" not in record for record in records)


def test_a_bad_price_file_exits_2_naming_it(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text("{not json")
    proc, _ = _run(tmp_path, "--prices", str(prices))
    assert proc.returncode == 2
    assert "prices" in proc.stderr
