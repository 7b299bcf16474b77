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


# ----------------------------------------------------------------------------- public names

NAMESPACES = (
    "agentcore",
    "agentcore.core",
    "agentcore.wire",
    "agentcore.sim",
    "agentcore.testing",
    "agentcore.testing.strategies",
)
RECORDS = frozenset({"decisions.md", "benchmarks.md"})
"""Design records and measurements: they name internals by design, and teach no API."""
USER_DOCS = [doc for doc in DOCS if doc.name not in RECORDS]

_SPAN = re.compile(r"`([A-Za-z_]\w*)(?:[.(\[][^`]*)?`")
_PRIVATE_HOME = re.compile(r"agentcore[./]_[a-z]|(?<![\w/])_[a-z]\w*/\w+\.py")
_COINCIDENCES = {"BATCH": "distributed.md: the queue URL's placeholder, not the logger constant"}


@functools.cache
def _public_names() -> frozenset[str]:
    return frozenset(name for ns in NAMESPACES for name in importlib.import_module(ns).__all__)


@functools.cache
def _private_names() -> dict[str, str]:
    """The classes, type aliases and constants defined at the top of private modules, with
    the module that defines each (functions and lower-case names are left out: the docs'
    lower-case code spans are fields, keywords and values as often as names)."""
    found: dict[str, str] = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        relative = path.relative_to(PACKAGE_DIR)
        if not any(part.startswith("_") and part != "__init__.py" for part in relative.parts):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            else:
                continue
            for name in names:
                if len(name) > 1 and name[0].isupper():
                    found.setdefault(name, str(relative))
    return found


def taught_private_names(text: str) -> list[str]:
    """The private classes and constants a doc names as if they were to be used: in a code
    span, in a paragraph that does not say which private module they live in."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    private, public = _private_names(), _public_names()
    found = []
    for paragraph in re.split(r"\n\s*\n", prose):
        if _PRIVATE_HOME.search(paragraph):
            continue  # it points at the internals, and says where they are
        for match in _SPAN.finditer(paragraph):
            name = match.group(1)
            if name in private and name not in public and name not in _COINCIDENCES:
                found.append(f"{name} ({private[name]})")
    return sorted(set(found))


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: p.name)
def test_every_class_or_constant_the_docs_teach_is_public(doc: pathlib.Path) -> None:
    assert taught_private_names(doc.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: p.name)
def test_the_python_examples_import_only_public_namespaces(doc: pathlib.Path) -> None:
    private = []
    for block in _python_blocks(doc.read_text(encoding="utf-8")):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            else:
                continue
            private += [m for m in modules if m.startswith("agentcore") and "._" in m]
    assert private == []


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("`driver.statistics().cost` is a `CostLedger`.", ["CostLedger (_core/cost.py)"]),
        ("The pure `CostLedger` (`agentcore._core.cost`) counts.", []),
        ("The pure `CostLedger` (in `_core/cost.py`) counts.", []),
        ("A `CostReport`, a `Driver`, a `trio.Nursery`.", []),
        ("```python\nx = CostLedger()\n```", []),
    ],
)
def test_the_check_tells_taught_private_names_from_pointers_to_internals(
    text: str, found: list[str]
) -> None:
    assert taught_private_names(text) == found
