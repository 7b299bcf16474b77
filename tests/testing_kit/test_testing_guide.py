"""Executes every Python block of docs/testing.md, so the documented examples keep working."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)


def _namespace() -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "docs_testing"}
    for block in BLOCKS:
        exec(compile(block, str(DOC), "exec"), namespace)
    return namespace


def test_the_doc_has_examples() -> None:
    assert len(BLOCKS) >= 3


def test_documented_examples_run_and_their_tests_pass() -> None:
    namespace = _namespace()
    tests = [v for k, v in namespace.items() if k.startswith("test_") and callable(v)]
    assert len(tests) >= 3
    for test in tests:
        if isinstance(test, type):  # a hypothesis stateful TestCase
            test("runTest").runTest()
        else:
            test()
