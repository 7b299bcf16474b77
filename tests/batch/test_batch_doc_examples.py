"""docs/batch.md's service-tier and Batch API examples run as written, on the simulator.

Each example is taken from the document as it stands and run with only its backend URL aimed
at an in-process simulator serving the same API (``openai://`` becomes the simulator's
OpenAI-compatible URL, ``anthropic-batch://`` its Message Batches API).
"""

from __future__ import annotations

import pathlib
import textwrap
from typing import Any

import pytest
import trio

import agentcore
from agentcore.sim import SimConfig, open_sim_server

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "batch.md"


@agentcore.tool
def lookup(term: str) -> str:
    """Look a term up.

    Args:
        term: what to look up.
    """
    return f"{term}: found"


TASK = agentcore.Task(system="You look terms up.", prompt="Look up {term}.", tools=[lookup])
INPUTS = [{"term": f"t{n}"} for n in range(3)]


def example(after: str) -> str:
    """The first Python block of docs/batch.md after the line holding ``after``."""
    text = DOC.read_text(encoding="utf-8")
    rest = text[text.index(after) :]
    start = rest.index("```python\n") + len("```python\n")
    return rest[start : rest.index("```\n", start)]


async def run_example(code: str, url: str, replacement: str) -> Any:
    """Run ``code`` (a block of ``async with`` lines) with ``url`` replaced; its namespace."""
    assert url in code
    body = textwrap.indent(code.replace(url, replacement), "    ")
    namespace: dict[str, Any] = {"agentcore": agentcore, "task": TASK, "inputs": INPUTS}
    exec(compile(f"async def main():\n{body}    return locals()\n", str(DOC), "exec"), namespace)
    return await namespace["main"]()


async def test_the_service_tier_example_runs_as_written(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = example("## Service tiers and the cost ledger")
    async with open_sim_server(config=SimConfig(tool_rounds=1, speedup=200.0)) as server:
        found = await run_example(code, '"openai://"', repr(server.url))
    assert [r.status for r in found["results"]] == ["ok"] * len(INPUTS)
    assert "CostReport(" in capsys.readouterr().out


async def test_the_anthropic_batch_example_runs_as_written(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    monkeypatch.chdir(tmp_path)  # the example's journal is a relative path
    async with open_sim_server(config=SimConfig(tool_rounds=1, batch_delay=0.05)) as server:
        host = server.url.removesuffix("/v1").removeprefix("http://")
        found = await run_example(
            example("agentcore run task.toml inputs.jsonl -o out.jsonl --backend openai-batch"),
            '"anthropic-batch://"',
            repr(f"anthropic-batch://{host}"),
        )
        created = server.statistics().batches_created
    assert [r.status for r in found["results"]] == ["ok"] * len(INPUTS)
    assert created >= 2  # a hop per turn: the tool call, then the answer
    assert (tmp_path / "out.batch-journal.jsonl").exists()
