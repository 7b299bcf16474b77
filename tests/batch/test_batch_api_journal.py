"""A Batch-API run (``--backend openai-batch://``) killed while a hop is in flight resumes from
its step journal, whose tool results are not computed again: with a tool that returns the
time, every resumed request has the bytes it had, so the hop in flight is claimed instead of
being submitted again, and no answer is paid twice. (Without the step journal, the resumed
agents ran the tool again, got another time, and their requests missed the pending hop.)"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.batch.test_batch_api_backend import _folder, _journal, _kill_during_hop, sim_url
from tests.batch.test_cli import _cli
from tests.batch.test_cli_journal import every_input_ok_once, run_cli

__all__ = ["sim_url"]  # the fixture, used by name

TOOLS = '''
import time

import agentcore


@agentcore.tool
def clock(term: str) -> str:
    """Say when a term was looked at.

    Args:
        term: the term.
    """
    return f"{term} at {time.time():.6f}"
'''

TASK = """
name = "clock"
system = "You note when terms were looked at."
prompt = "Note the time for the term below.\\n\\nTerm: {term}"
max_turns = 6
tools = ["clocktools:clock"]

[output_fields]
term = "str"
found = "bool"
notes = "list[str]"
"""

AGENTS = 60
TOOL_TURNS = 3  # the simulator's --tool-rounds (the sim_url fixture)


@pytest.mark.parametrize("kind", ["openai"])
def test_a_killed_batch_api_run_with_a_clock_tool_pays_no_answer_twice(
    tmp_path: Path, sim_url: str, kind: str
) -> None:
    task, inputs, env = _folder(tmp_path, "clocktools", TOOLS, TASK, AGENTS)
    out = tmp_path / "out.jsonl"
    host = sim_url.removesuffix("/v1").removeprefix("http://")
    base: list[str | Path] = [
        "run", task, inputs, "-o", out, "--backend", f"{kind}-batch://{host}", "--model", "m",
        "--batch-poll", "0.1", "--batch-gather", "0.3",
    ]  # fmt: skip

    _kill_during_hop(_cli(*base), env, out, hop=2)
    resumed = run_cli(*base, "--resume", "-q", env=env)
    assert resumed.returncode == 0, resumed.stderr
    every_input_ok_once(out, AGENTS)

    journal = _journal(out)
    hops = [r for r in journal if r["t"] == "batch"]
    created = httpx.get(sim_url + "/batches", timeout=30).json()["data"]
    # No hop submitted twice: the provider holds exactly the journal's batches ...
    assert sorted(str(r["id"]) for r in hops) == sorted(str(b["id"]) for b in created)
    # ... and no answer paid twice: every model request of every agent went into exactly one
    # batch line (the hop in flight at the kill was claimed, not submitted again).
    lines = sum(int(b["request_counts"]["total"]) for b in created)
    assert lines == AGENTS * (TOOL_TURNS + 1)
    ids = [i for r in journal if r["t"] == "intent" for i in r["ids"]]  # type: ignore[attr-defined]
    assert len(ids) == len(set(ids)) == AGENTS * (TOOL_TURNS + 1)
