"""docs/observability.md's own sink, executed as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "observability.md"


def test_the_sink_example_sees_what_the_trace_sees(capsys: pytest.CaptureFixture[str]) -> None:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("## One event stream, and your own sink")
    section = text[start : text.index("\n## ", start + 1)]
    (block,) = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    exec(compile(block, str(DOC), "exec"), {"__name__": "docs_example"})
    assert capsys.readouterr().out.splitlines() == ["figures: [0, 1, 2, 3] {} True True"]
