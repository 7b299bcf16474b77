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
