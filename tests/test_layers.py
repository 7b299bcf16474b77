"""The folders of ``src/agentcore`` are layers: each may import only the folders below it.

The table is the house's floor plan, bottom to top. A module may import modules of its own
folder and of the folders its row names; an import that runs up a floor or across to a
sibling fails this test, wherever it stands in the file (function bodies and
``TYPE_CHECKING`` blocks count: a type-only import still ties the two floors together). The
public namespaces at the top (``agentcore``, ``.core``, ``.wire``, ``.sim``, ``.testing``)
sit above every folder. Imports are read with ``ast``; nothing is imported.
"""

from __future__ import annotations

import ast
import io
import pathlib
import tokenize

import pytest

import agentcore

PACKAGE_DIR = pathlib.Path(agentcore.__file__).resolve().parent

# folder -> the folders it may import (besides itself and the helper ``_public``).
_UNDER_DRIVER = frozenset(
    {"_core", "_codecs", "_observe", "_transports", "_sim", "_tools", "_backends"}
)
LAYERS: dict[str, frozenset[str]] = {
    "_core": frozenset(),
    "_codecs": frozenset({"_core"}),
    "_observe": frozenset({"_core", "_codecs"}),
    "_transports": frozenset({"_core", "_codecs", "_observe"}),
    "_sim": frozenset({"_core"}),
    "_tools": frozenset({"_core", "_codecs", "_observe"}),
    "_backends": frozenset({"_core", "_codecs", "_observe", "_transports", "_sim"}),
    "_driver": _UNDER_DRIVER,
    "_tasks": _UNDER_DRIVER | {"_driver"},
    "_distributed": _UNDER_DRIVER | {"_driver", "_tasks"},
    "_cli": _UNDER_DRIVER | {"_driver", "_tasks", "_distributed"},
}
FOLDERS = frozenset(LAYERS)
TOP = frozenset({"__init__", "core", "wire", "sim", "testing", "_public", "py"})
"""The public namespaces and their helper, above every folder."""


def _module_name(path: pathlib.Path) -> tuple[str, bool]:
    parts = path.relative_to(PACKAGE_DIR).with_suffix("").parts
    is_package = parts[-1] == "__init__"
    return ".".join(("agentcore", *(parts[:-1] if is_package else parts))), is_package


def imports_of(source: str, module: str, is_package: bool) -> set[str]:
    """Absolute names of the agentcore modules that ``source`` imports."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("agentcore"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - (node.level - 1)])
                if node.module:
                    found.add(f"{base}.{node.module}")
                else:
                    found.update(f"{base}.{a.name}" for a in node.names)
            elif node.module and node.module.startswith("agentcore"):
                found.add(node.module)
    return found


def floor_of(module: str) -> str:
    """The folder (or top-level module) a module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def crossings(module: str, imported: set[str]) -> list[str]:
    """The imports of ``module`` that run up a floor or across to a sibling folder."""
    own = floor_of(module)
    if own not in FOLDERS:
        return []
    allowed = LAYERS[own] | {own, "_public"}
    return sorted(name for name in imported if floor_of(name) not in allowed)


def every_module() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        name, is_package = _module_name(path)
        found[name] = imports_of(path.read_text(encoding="utf-8"), name, is_package)
    return found


def test_every_module_lives_in_a_layer_folder_or_is_a_public_namespace() -> None:
    strays = sorted(
        name
        for name in every_module()
        if floor_of(name) not in FOLDERS and floor_of(name) not in TOP
    )
    assert strays == []


def test_no_import_runs_up_a_floor_or_across_to_a_sibling() -> None:
    problems = {
        name: bad for name, imported in every_module().items() if (bad := crossings(name, imported))
    }
    assert problems == {}


def test_the_table_is_a_strict_order_with_no_circle() -> None:
    # Each folder may import only folders that may not import it back, transitively.
    for folder, below in LAYERS.items():
        assert folder not in below
        for other in below:
            assert folder not in LAYERS[other], (folder, other)
            assert LAYERS[other] <= below, (folder, other)


def test_the_top_level_listing_shows_the_layers_in_under_twenty_entries() -> None:
    entries = [p.name for p in PACKAGE_DIR.iterdir() if p.name != "__pycache__"]
    assert len(entries) < 20, sorted(entries)
    assert set(FOLDERS) <= set(entries)


def test_each_folder_maps_its_files_truthfully() -> None:
    # A folder's __init__ docstring has one list item per file ("- ``name``: ..." or
    # "- ``name`` / ``other``: ..."): every file of the folder is named by an item, and every
    # name an item starts with is a file of the folder.
    for folder in sorted(FOLDERS):
        init = PACKAGE_DIR / folder / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        files = {p.stem for p in (PACKAGE_DIR / folder).glob("*.py") if p.stem != "__init__"}
        mapped: set[str] = set()
        for line in doc.splitlines():
            if line.startswith("- ``"):
                head = line[2:].split(":", 1)[0]
                mapped.update(
                    part.strip().strip("`").removesuffix(".py") for part in head.split("/")
                )
        assert sorted(files - mapped) == [], (folder, "files missing from the map")
        assert sorted(mapped - files) == [], (folder, "map entries with no file")


@pytest.mark.parametrize(
    ("module", "source", "bad"),
    [
        ("agentcore._core.loop", "from .._driver import driver", ["agentcore._driver"]),
        ("agentcore._tools.executor", "from .._driver.runs import Run", ["agentcore._driver.runs"]),
        ("agentcore._codecs.openai", "from .._tools import spec", ["agentcore._tools"]),
        ("agentcore._sim.server", "from .._codecs.http import Headers", ["agentcore._codecs.http"]),
        (
            "agentcore._driver.driver",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .._tasks.task import T",
            ["agentcore._tasks.task"],
        ),
        ("agentcore._driver.driver", "from .._tools.spec import Tool", []),
    ],
)
def test_the_check_catches_imports_that_run_up_or_across(
    module: str, source: str, bad: list[str]
) -> None:
    assert crossings(module, imports_of(source, module, False)) == bad


def _lines_of_code(source: str) -> int:
    """Lines holding code: not blank, not comments, not docstrings (docs/decisions.md)."""
    tree = ast.parse(source)
    docs: set[int] = set()
    for node in ast.walk(tree):
        value = node.value if isinstance(node, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            docs.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    code: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in _NOT_CODE:
            code.update(range(token.start[0], token.end[0] + 1))
    return len(code - docs)


_NOT_CODE = frozenset(
    {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENDMARKER,
    }
)


def test_the_driver_layer_runs_runs_in_under_3000_lines_of_code() -> None:
    # The backends layer assembles backends; _driver/ keeps running runs (docs/decisions.md,
    # "Backends as typed values").
    total = sum(
        _lines_of_code(path.read_text(encoding="utf-8"))
        for path in (PACKAGE_DIR / "_driver").glob("*.py")
    )
    assert total < 3000, total
    assert _lines_of_code('"""Doc."""\n\n# a comment\nx = 1  # code\n') == 1
