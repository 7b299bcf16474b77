"""The slot and retry policies are pure: no trio, clock, randomness or I/O imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import agentcore

ALLOWED = {"__future__", "attrs", "collections", "collections.abc", "heapq", "itertools", "typing"}
ALLOWED_INTERNAL = {"_events", "_messages", "_errors"}


@pytest.mark.parametrize("module", ["_slots", "_retry"])
def test_policy_module_imports_only_the_standard_library_attrs_and_core_values(
    module: str,
) -> None:
    path = Path(agentcore.__file__).parent / f"{module}.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                assert node.module in ALLOWED_INTERNAL, f"{module} imports .{node.module}"
                continue
            names = [node.module or ""]
        else:
            continue
        for name in names:
            assert name in ALLOWED, f"{module} imports {name}"
