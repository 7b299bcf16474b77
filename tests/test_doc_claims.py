"""Statements of fact in the docs that the code must keep: where something is made, what is
gone. Each reads the doc and the code (with ``ast``) and compares them."""

from __future__ import annotations

import ast
import importlib
import pathlib
import re

import agentcore

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE_DIR = pathlib.Path(agentcore.__file__).resolve().parent
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
NAMESPACES = ("agentcore", "agentcore.core", "agentcore.wire", "agentcore.sim", "agentcore.testing")


def _is_model_error_call(node: ast.Call) -> bool:
    """``ModelError(...)``, ``ev.ModelError(...)``, or an ``attrs.evolve(x, kind=...)`` that
    gives an error another kind."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name == "ModelError":
        return True
    return name == "evolve" and any(k.arg == "kind" for k in node.keywords)


def modules_that_make_model_errors() -> set[str]:
    found = set()
    for path in PACKAGE_DIR.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.Call) and _is_model_error_call(n) for n in ast.walk(tree)):
            found.add(path.relative_to(PACKAGE_DIR).as_posix())
    return found


def test_model_errors_are_made_only_where_the_decisions_say() -> None:
    text = (ROOT / "docs" / "decisions.md").read_text(encoding="utf-8")
    start = text.index("- **One table** (`_codecs/classify.py`) makes every `ModelError`")
    bullet = text[start : text.index("\n- ", start + 1)]
    named = set(re.findall(r"`((?:_\w+|testing)/\w+\.py)`", bullet))
    assert named == modules_that_make_model_errors()


def test_the_scan_finds_a_model_error_made_outside_the_table() -> None:
    assert "_codecs/classify.py" in modules_that_make_model_errors()
    assert "_core/service_tier.py" in modules_that_make_model_errors()  # by attrs.evolve


def public_names() -> set[str]:
    return {name for ns in NAMESPACES for name in importlib.import_module(ns).__all__}


def names_called_gone(text: str) -> list[str]:
    """The names a doc says are gone or removed, written ``\\`Name\\` is gone``."""
    return re.findall(r"`(\w+)` (?:is|was) (?:gone|removed)", text)


def test_no_public_name_is_said_to_be_gone() -> None:
    said = {f"{doc.name}: {name}" for doc in DOCS for name in names_called_gone(doc.read_text())}
    public = public_names()
    assert sorted(entry for entry in said if entry.split(": ")[1] in public) == []


def test_the_gone_check_reads_the_claim() -> None:
    assert names_called_gone("- **`RunAborted` is gone**: it was raised nowhere.") == ["RunAborted"]
    assert names_called_gone("The `RunAborted` exception is gone") == []


def test_run_aborted_is_a_step_event_not_an_exception() -> None:
    assert "RunAborted" in public_names()
    assert not issubclass(agentcore.RunAborted, BaseException)
