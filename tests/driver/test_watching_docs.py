"""The README's one-agent section and docs/watching.md, executed block by block on sim://."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def readme_section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("## One agent, watched")
    end = readme.index("\n## ", start + 1)
    return readme[start:end]


def run_blocks(blocks: list[str]) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "docs_example"}
    for block in blocks:
        exec(compile(block, "<docs>", "exec"), namespace)
    return namespace


def test_readme_one_agent_section_runs(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = python_blocks(readme_section())
    assert len(blocks) == 2
    run_blocks(blocks)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("ok ")  # the hello world: status, then the answer
    assert "[add -> " in out  # the watched run called its tool
    assert "answer: " in out


def test_watching_guide_runs_every_example(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = python_blocks((ROOT / "docs" / "watching.md").read_text(encoding="utf-8"))
    assert len(blocks) == 7
    namespace = run_blocks(blocks)
    lines = dict(line.split(": ", 1) for line in capsys.readouterr().out.splitlines())
    assert lines["generate"] == "stop True"
    assert lines["stream"] == "True True"  # several deltas, and they add up to the reply
    assert lines["requests"] == "2"  # both calls went through the driver's request path
    assert lines["agent"] == "ok 2"
    assert lines["steps"] == "run_started ... run_finished"
    assert lines["tools"] == "1 deltas: True"
    assert lines["batch"] == "['ok', 'ok', 'ok'] True"
    assert lines["many"] == "12 4 12"
    # the waiting tool held no slot while six other agents ran and finished
    assert lines["approval"] == "ok {'slots in use while waiting': 0}"
    assert lines["planning"] == "ok 1"
    assert namespace["pending"][0].is_set()
