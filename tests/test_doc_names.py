"""Every name the documentation gives must exist: renaming a symbol or a module breaks this
test, not a reader.

Checked in README.md, docs/*.md and the docstrings of src/agentcore:

- dotted references ``agentcore.X.Y`` (in prose, code spans and Sphinx roles such as
  ``:class:`~agentcore._core.loop.AgentLoop```) resolve to a module or an attribute;
- in the Python blocks of the docs, every ``from agentcore... import name`` names something
  that exists, and every ``agentcore.name`` attribute used exists;
- repository paths written in the docs (``src/agentcore/...``, ``tools/...``, ``bench/...``,
  ``tests/...``, ``examples/...``, ``docs/...``) exist.

Nothing is executed (some examples need a server); the examples that can run on ``sim://``
are executed by the tests of their own guide.
"""

from __future__ import annotations

import ast
import functools
import importlib
import pathlib
import re

import pytest

import agentcore

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE_DIR = pathlib.Path(agentcore.__file__).resolve().parent
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

_DOTTED = re.compile(r"(?<![\w./-])agentcore(?:\.[A-Za-z_]\w*)+")
_PATH = re.compile(
    r"(?<![\w./-])((?:src/agentcore|tools|bench|tests|examples|docs|fuzz)/[\w./-]*\w)"
)


@functools.cache
def _names_the_code_defines() -> frozenset[str]:
    """String constants of the source that start with ``agentcore.``: logger names and
    telemetry attribute keys, which the docs name too."""
    found = set()
    for path in PACKAGE_DIR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and re.fullmatch(r"agentcore(\.\w+)+", node.value)
            ):
                found.add(node.value)
    return frozenset(found)


def resolves(dotted: str) -> bool:
    """Whether ``agentcore.a.b.c`` names a module, an attribute reachable from one, or a
    logger or telemetry key that the code defines."""
    if dotted in _names_the_code_defines():
        return True
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj: object = importlib.import_module(module_name)
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def _docstrings() -> list[tuple[str, str]]:
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    found.append((f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 1)}", doc))
    return found


def _names_in(text: str) -> set[str]:
    return {m.group(0).rstrip(".") for m in _DOTTED.finditer(text)}


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_dotted_agentcore_name_in_the_docs_exists(doc: pathlib.Path) -> None:
    missing = sorted(n for n in _names_in(doc.read_text(encoding="utf-8")) if not resolves(n))
    assert missing == []


def test_every_dotted_agentcore_name_in_the_docstrings_exists() -> None:
    missing = sorted(
        f"{where}: {name}"
        for where, doc in _docstrings()
        for name in _names_in(doc)
        if not resolves(name)
    )
    assert missing == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_names_imported_and_used_by_the_python_examples_exist(doc: pathlib.Path) -> None:
    missing = []
    for block in _python_blocks(doc.read_text(encoding="utf-8")):
        try:
            tree = ast.parse(block)
        except SyntaxError:  # a fragment (an elided body): checked by its names only
            missing.extend(n for n in _names_in(block) if not resolves(n))
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("agentcore"):
                module = importlib.import_module(node.module or "")
                missing.extend(
                    f"{node.module}.{a.name}"
                    for a in node.names
                    if a.name != "*"
                    and not hasattr(module, a.name)
                    and not resolves(f"{node.module}.{a.name}")
                )
            elif isinstance(node, ast.Import):
                missing.extend(
                    a.name
                    for a in node.names
                    if a.name.startswith("agentcore") and not resolves(a.name)
                )
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "agentcore"
                and not hasattr(agentcore, node.attr)
            ):
                missing.append(f"agentcore.{node.attr}")
    assert sorted(set(missing)) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_repository_path_in_the_docs_exists(doc: pathlib.Path) -> None:
    text = doc.read_text(encoding="utf-8")
    missing = sorted(
        {
            path
            for path in _PATH.findall(text)
            if not any(ch in path for ch in "*{}<>")
            and not (ROOT / path).exists()
            and not (ROOT / path).with_suffix(".py").exists()
        }
    )
    assert missing == []


@pytest.mark.parametrize(
    ("name", "exists"),
    [
        ("agentcore.run_batch", True),
        ("agentcore.core.AgentLoop", True),
        ("agentcore._core.loop.AgentLoop", True),
        ("agentcore._rejection", False),
        ("agentcore._codecs.http.Transport", False),
        ("agentcore.core.NoSuchThing", False),
    ],
)
def test_the_check_tells_existing_names_from_stale_ones(name: str, exists: bool) -> None:
    assert resolves(name) is exists
