"""Every table of options or fields in the docs lists exactly the typed fields it documents.

A table whose first column is headed ``field`` or ``option`` documents a typed value (an attrs
class, a function's keyword parameters, a dialect record's options). Each such table of the
user docs is found by its section heading and compared with its value: the names of its first
column (``\\`a\\`, \\`b\\``` cells name several) are the value's fields, no more and no fewer,
and where it has a ``default`` column, each default that is written as a Python value is the
field's default. A new table of that kind that this module does not know fails the test, so
no table is left unchecked.
"""

from __future__ import annotations

import inspect
import pathlib
import re
from collections.abc import Callable, Iterable
from typing import Any

import attrs
import pytest

import agentcore
from agentcore._backends.options import BEDROCK_OPTIONS
from agentcore._codecs.dialects import COMMON_OPTIONS, DIALECTS, Dialect
from agentcore._tasks.results_file import ResultRecord
from agentcore.sim import SimConfig

ROOT = pathlib.Path(__file__).resolve().parents[1]
RECORDS = {"decisions.md", "benchmarks.md"}
DOCS = [
    p for p in sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")]) if p.name not in RECORDS
]


class Table:
    """One Markdown table: the heading of its section, its header and its rows of cells."""

    def __init__(self, heading: str, header: list[str], rows: list[list[str]]) -> None:
        self.heading, self.header, self.rows = heading, header, rows

    def names(self) -> list[str]:
        """The names of the first column, in order (several per cell where it lists them)."""
        return [name for row in self.rows for name in _spans(row[0])]

    def defaults(self) -> dict[str, str]:
        """Each name's documented default, where the table has a ``default`` column and the
        cell gives one value per name."""
        if "default" not in self.header:
            return {}
        column = self.header.index("default")
        found = {}
        for row in self.rows:
            names = _spans(row[0])
            values = (
                [v.strip() for v in row[column].split(", ")] if len(names) > 1 else [row[column]]
            )
            if len(values) == len(names):
                found.update(zip(names, values, strict=True))
        return found


def _spans(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def tables_of(text: str) -> list[Table]:
    """The tables of a Markdown text whose first column is headed ``field`` or ``option``."""
    found = []
    heading = ""
    lines = re.sub(r"```.*?```", "", text, flags=re.S).splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        if line.startswith("|") and i + 1 < len(lines) and re.match(r"\|[-| ]+\|$", lines[i + 1]):
            header = [c.strip() for c in line.strip("|").split("|")]
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append([c.strip() for c in lines[i].strip("|").split("|")])
                i += 1
            if header[0] in ("field", "option"):
                found.append(Table(heading, header, rows))
            continue
        i += 1
    return found


# ----------------------------------------------------------------------------- what each documents


def _attrs_fields(cls: type, *, leave_out: Iterable[str] = ()) -> dict[str, Any]:
    """Public attrs fields (by their ``__init__`` name) and their defaults."""
    found = {}
    for field in attrs.fields(cls):
        name = field.alias or field.name
        if name.startswith("_") or name in leave_out:
            continue
        default = field.default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = default.factory() if not default.takes_self else attrs.NOTHING  # type: ignore[attr-defined]
        found[name] = default
    return found


def _keywords(function: Callable[..., Any], *, leave_out: Iterable[str] = ()) -> dict[str, Any]:
    return {
        name: p.default
        for name, p in inspect.signature(function).parameters.items()
        if p.kind is p.KEYWORD_ONLY and name not in leave_out
    }


def _dialect(name: str) -> dict[str, Any]:
    # The dialect's own options; its table may also list common ones with its own default.
    return dict.fromkeys(DIALECTS[name].options, attrs.NOTHING)


def _plain_fields(cls: type) -> dict[str, Any]:
    """The public attrs fields of ``cls`` (defaults not compared)."""
    return dict.fromkeys(
        (f.name for f in attrs.fields(cls) if not f.name.startswith("_")), attrs.NOTHING
    )


DOCUMENTED: dict[tuple[str, str], tuple[Callable[[], dict[str, Any]], frozenset[str]]] = {
    # (document, section) -> (the fields and defaults, names the table may add besides them)
    ("driver.md", "Options"): (lambda: _attrs_fields(agentcore.DriverOptions), frozenset()),
    ("driver.md", "Results"): (lambda: _plain_fields(agentcore.RunTimings), frozenset()),
    ("driver.md", "Metrics"): (lambda: _plain_fields(agentcore.DriverStatistics), frozenset()),
    ("sim.md", "Knobs (`SimConfig`)"): (lambda: _attrs_fields(SimConfig), frozenset()),
    ("tools.md", "Options"): (
        lambda: _keywords(agentcore.tool, leave_out={"name", "description"}),
        frozenset(),
    ),
    ("tools.md", "The run's context"): (lambda: _plain_fields(agentcore.RunContext), frozenset()),
    ("cli.md", "The results record"): (lambda: _plain_fields(ResultRecord), frozenset()),
    ("backends.md", "One record per dialect"): (
        lambda: {k: v for k, v in _plain_fields(Dialect).items() if k != "name"},
        frozenset(),
    ),
    ("backends.md", "Options of every OpenAI-compatible dialect"): (
        lambda: dict.fromkeys(COMMON_OPTIONS, attrs.NOTHING),
        frozenset(),
    ),
    ("backends.md", "vLLM (`vllm://`)"): (lambda: _dialect("vllm"), COMMON_OPTIONS),
    ("backends.md", "SGLang (`sglang://`)"): (lambda: _dialect("sglang"), COMMON_OPTIONS),
    ("backends.md", "NVIDIA Dynamo (`dynamo://`)"): (lambda: _dialect("dynamo"), COMMON_OPTIONS),
    ("backends.md", "AWS Bedrock (`bedrock://REGION`)"): (
        lambda: dict.fromkeys(BEDROCK_OPTIONS, attrs.NOTHING),
        frozenset(),
    ),
}


def every_table() -> list[tuple[str, Table]]:
    return [(doc.name, t) for doc in DOCS for t in tables_of(doc.read_text(encoding="utf-8"))]


def test_every_options_or_fields_table_is_one_this_module_checks() -> None:
    unknown = [
        f"{doc}: {t.heading}" for doc, t in every_table() if (doc, t.heading) not in DOCUMENTED
    ]
    assert unknown == []
    found = {(doc, t.heading) for doc, t in every_table()}
    assert sorted(set(DOCUMENTED) - found) == []  # a section renamed or a table gone


@pytest.mark.parametrize(("doc", "table"), every_table(), ids=lambda x: getattr(x, "heading", x))
def test_the_table_lists_the_fields_of_what_it_documents(doc: str, table: Table) -> None:
    fields_of, may_add = DOCUMENTED[(doc, table.heading)]
    fields = fields_of()
    names = [n for n in table.names() if "." not in n]  # `error.kind`: a part of a field
    assert len(names) == len(set(names)), "a name listed twice"
    assert sorted(set(fields) - set(names)) == [], "fields the table leaves out"
    assert sorted(set(names) - set(fields) - may_add) == [], "names that are no field"


def _value(text: str) -> Any:
    """A documented default as a value, or ``attrs.NOTHING`` when it is prose."""
    plain = text.strip()
    if plain.startswith("`") and plain.endswith("`") and plain.count("`") == 2:
        plain = plain[1:-1]
    elif not re.fullmatch(r"[\d,._]+", plain):
        return attrs.NOTHING
    names = {name: getattr(agentcore, name) for name in agentcore.__all__}
    try:
        return eval(plain.replace(",", "") if plain[0].isdigit() else plain, names)
    except Exception:
        return attrs.NOTHING


@pytest.mark.parametrize(("doc", "table"), every_table(), ids=lambda x: getattr(x, "heading", x))
def test_the_defaults_a_table_gives_are_the_fields_defaults(doc: str, table: Table) -> None:
    fields = DOCUMENTED[(doc, table.heading)][0]()
    wrong = []
    for name, text in table.defaults().items():
        documented, actual = _value(text), fields.get(name, attrs.NOTHING)
        if documented is not attrs.NOTHING and actual is not attrs.NOTHING and documented != actual:
            wrong.append(f"{name}: documented {text}, is {actual!r}")
    assert wrong == []


def test_the_table_reader_reads_names_and_defaults() -> None:
    text = (
        "## Opts\n\n| option | default | effect |\n|---|---|---|\n"
        "| `a`, `b` | `1`, `None` | x |\n| `c` | 10,000 | y |\n"
    )
    (table,) = tables_of(text)
    assert table.heading == "Opts"
    assert table.names() == ["a", "b", "c"]
    assert table.defaults() == {"a": "`1`", "b": "`None`", "c": "10,000"}
    assert (_value("`1`"), _value("10,000"), _value("the chain's default")) == (
        1,
        10000,
        attrs.NOTHING,
    )
