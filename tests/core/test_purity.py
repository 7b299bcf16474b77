"""The core imports only the standard library, attrs and cattrs; the codecs add only orjson.

The rule is rooted at the folders: every module under ``_core/`` may import only the standard
library (less its I/O, clock and randomness modules), attrs, cattrs and other ``_core`` modules;
``_codecs/`` may add orjson and ``_core``. The test reads source files with ``ast`` (nothing is
imported), so imports anywhere in a file count (function bodies, ``TYPE_CHECKING`` blocks).
"""

from __future__ import annotations

import ast
import pathlib
import sys

import pytest

import agentcore

PACKAGE_DIR = pathlib.Path(agentcore.__file__).resolve().parent
ALLOWED_THIRD_PARTY = frozenset({"attrs", "attr", "cattrs", "cattr", "typing_extensions"})
"""``typing_extensions`` only under ``TYPE_CHECKING`` (type parameter defaults, PEP 696)."""
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


def modules_under(folder: str) -> dict[str, set[str]]:
    """Every module in a folder of the package (at any depth), with what it imports."""
    found: dict[str, set[str]] = {}
    for path in sorted((PACKAGE_DIR / folder).rglob("*.py")):
        parts = path.relative_to(PACKAGE_DIR).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(("agentcore", *(parts[:-1] if is_package else parts)))
        found[name] = imports_of(path.read_text(encoding="utf-8"), name, is_package)
    return found


def outside(imported: set[str], allowed_packages: tuple[str, ...]) -> list[str]:
    """agentcore modules imported from outside the allowed folders."""
    return sorted(
        name
        for name in imported
        if name.startswith("agentcore") and not name.startswith(allowed_packages)
    )


def test_the_core_folder_holds_the_loop_and_its_values() -> None:
    core = modules_under("_core")
    for name in ("loop", "config", "schema", "messages", "events", "errors", "slots", "retry"):
        assert f"agentcore._core.{name}" in core


def test_the_core_imports_only_stdlib_attrs_and_cattrs() -> None:
    problems = {
        name: bad
        for name, imported in modules_under("_core").items()
        if (bad := violations(imported) + outside(imported, ("agentcore._core",)))
    }
    assert problems == {}


def test_the_codecs_add_only_orjson_and_pure_url_quoting() -> None:
    problems = {
        name: bad
        for name, imported in modules_under("_codecs").items()
        if (
            bad := violations(imported - {"orjson", "urllib.parse"})
            + outside(imported, ("agentcore._core", "agentcore._codecs"))
        )
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
