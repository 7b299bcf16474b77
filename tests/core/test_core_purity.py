"""The core imports only the standard library, attrs and cattrs, and no I/O or clock modules.

The test reads source files with ``ast`` (nothing is imported), starting from the module that
defines ``AgentLoop`` and following every ``agentcore`` module it imports, at any depth and
anywhere in the file (function bodies and ``TYPE_CHECKING`` blocks included).
"""

from __future__ import annotations

import ast
import pathlib
import sys

import pytest

import agentcore

PACKAGE_DIR = pathlib.Path(agentcore.__file__).resolve().parent
ROOTS = ("agentcore._loop",)
ALLOWED_THIRD_PARTY = frozenset({"attrs", "attr", "cattrs", "cattr"})
FORBIDDEN_STDLIB = frozenset(
    {
        "time",
        "random",
        "uuid",
        "os",
        "socket",
        "threading",
        "asyncio",
        "subprocess",
        "secrets",
        "datetime",
        "logging",
        "multiprocessing",
        "selectors",
        "ssl",
        "signal",
        "concurrent",
        "urllib",
        "http",
        "shutil",
        "tempfile",
    }
)


def module_path(name: str) -> pathlib.Path:
    parts = name.split(".")[1:]
    base = PACKAGE_DIR.joinpath(*parts)
    if base.with_suffix(".py").exists():
        return base.with_suffix(".py")
    return base / "__init__.py"


def imports_of(source: str, module: str, is_package: bool) -> set[str]:
    """Absolute names of every module ``source`` imports."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts)
                if node.module:
                    found.add(f"{base}.{node.module}")
                else:
                    found.update(f"{base}.{alias.name}" for alias in node.names)
            elif node.module:
                found.add(node.module)
    return found


def violations(imported: set[str]) -> list[str]:
    bad = []
    for name in sorted(imported):
        top = name.split(".")[0]
        if top in {"agentcore", "__future__"}:
            continue
        if top in FORBIDDEN_STDLIB:
            bad.append(f"{name} (forbidden in the core)")
        elif top not in sys.stdlib_module_names and top not in ALLOWED_THIRD_PARTY:
            bad.append(f"{name} (not stdlib, attrs or cattrs)")
    return bad


def core_closure() -> dict[str, set[str]]:
    """Every agentcore module reachable from ROOTS, with what it imports."""
    seen: dict[str, set[str]] = {}
    todo = list(ROOTS)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = module_path(name)
        imported = imports_of(path.read_text(encoding="utf-8"), name, path.name == "__init__.py")
        seen[name] = imported
        todo.extend(i for i in imported if i.startswith("agentcore.") and module_path(i).exists())
    return seen


def test_the_closure_contains_the_core_modules() -> None:
    closure = core_closure()
    for name in ("agentcore._loop", "agentcore._schema", "agentcore._messages"):
        assert name in closure
    assert "agentcore._events" in closure and "agentcore._errors" in closure


def test_the_core_imports_only_stdlib_attrs_and_cattrs() -> None:
    problems = {
        name: bad for name, imported in core_closure().items() if (bad := violations(imported))
    }
    assert problems == {}


@pytest.mark.parametrize(
    "source",
    [
        "import time",
        "from os import path",
        "import trio",
        "from httpx import Client",
        "def f():\n    import random",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import asyncio",
        "import logging.config",
    ],
)
def test_the_check_catches_forbidden_imports(source: str) -> None:
    assert violations(imports_of(source, "agentcore._x", False))


def test_relative_imports_resolve_inside_the_package() -> None:
    source = "from ._errors import ConfigError\nfrom . import _messages\nimport json"
    assert imports_of(source, "agentcore._x", False) == {
        "agentcore._errors",
        "agentcore._messages",
        "json",
    }
