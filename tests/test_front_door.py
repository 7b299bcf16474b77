"""The front door tells the truth: README.md and the package docstring show the house as it is.

- The README's layout block and the package docstring's "General layout" are rendered from
  the layer table (``tests/test_layers.py``'s ``LAYERS``, top floor first), the package's
  top-level entries and each entry's own docstring (whose file maps are tested against the
  folders): a folder added, renamed or redescribed changes what they must say. On a mismatch
  the test prints the text to paste.
- The README's backend table names every URL scheme ``wire.backend`` takes; its development
  paragraph names every real-engine test tier of the Makefile; its documentation list links
  every guide in ``docs/``.
"""

from __future__ import annotations

import ast
import pathlib
import re
import textwrap

import agentcore
from agentcore._backends import urls
from tests.test_layers import LAYERS, PACKAGE_DIR

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

PUBLIC = ("__init__.py", "core.py", "wire.py", "sim.py", "testing")
"""The public namespaces, first in the listing (``agentcore`` and the four audiences)."""
FIXED = {
    "__init__.py": "The batch and driver user's surface (names load on first use).",
    "py.typed": "The PEP 561 marker: the package ships its type hints.",
}
"""Entries whose docstring says something else first (or that have none)."""
WIDTH = 96


def _docstring(entry: pathlib.Path) -> str:
    source = entry / "__init__.py" if entry.is_dir() else entry
    return ast.get_docstring(ast.parse(source.read_text(encoding="utf-8"))) or ""


def first_sentence(doc: str) -> str:
    text = " ".join(doc.split())
    found = re.match(r"(.+?\.)(?:\s|$)", text)
    return found.group(1) if found else text


def entries() -> list[tuple[str, str]]:
    """Every top-level entry of the package, listed in order, with what it holds: the public
    namespaces, the other top-level files, then the layer folders from the top floor down."""
    names = {p.name for p in PACKAGE_DIR.iterdir() if p.name != "__pycache__"}
    layers = [name for name in reversed(LAYERS) if name in names]
    others = sorted(names - set(PUBLIC) - set(layers))
    listed = [n for n in PUBLIC if n in names] + others + layers
    found = []
    for name in listed:
        path = PACKAGE_DIR / name
        shown = f"{name}/" if path.is_dir() else name
        found.append((shown, FIXED.get(name) or first_sentence(_docstring(path))))
    return found


def _readme_text(sentence: str) -> str:
    plain = re.sub(r":\w+:`~?([^`]+)`", r"\1", sentence)  # a Sphinx role: its target
    plain = plain.replace("``", "").removesuffix(".")
    if len(plain) > 1 and not plain[1].isupper():
        plain = plain[0].lower() + plain[1:]
    return plain


def render_readme_layout() -> str:
    rows = entries()
    column = 2 + max(len(name) for name, _ in rows) + 2
    lines = ["src/agentcore/"]
    for name, sentence in rows:
        wrapped = textwrap.wrap(_readme_text(sentence), WIDTH - column)
        lines.append(f"  {name:<{column - 2}}{wrapped[0]}")
        lines += [" " * column + more for more in wrapped[1:]]
    return "\n".join(lines) + "\n"


def render_package_layout() -> str:
    lines = [
        "General layout",
        "--------------",
        *textwrap.wrap(
            "Every top-level entry, public namespaces first; the private folders are layers, "
            "top floor first: a module imports only its own folder and folders below it "
            "(``tests/test_layers.py`` holds the table).",
            WIDTH,
        ),
        "",
    ]
    for name, sentence in entries():
        lines += textwrap.wrap(
            f"- ``{name}``: {sentence}", WIDTH, subsequent_indent="  ", break_on_hyphens=False
        )
    return "\n".join(lines) + "\n"


def readme_layout_block() -> str:
    text = README.read_text(encoding="utf-8")
    found = re.search(r"```\n(src/agentcore/\n.*?)```", text, flags=re.S)
    assert found, "README.md has no layout block starting with src/agentcore/"
    return found.group(1)


def package_layout_section() -> str:
    doc = agentcore.__doc__ or ""
    start = doc.index("General layout\n")
    return doc[start:].strip("\n") + "\n"


def test_the_readme_layout_block_is_rendered_from_the_layer_table() -> None:
    expected = render_readme_layout()
    assert readme_layout_block() == expected, "README.md's layout block should read:\n" + expected


def test_the_package_docstring_layout_is_rendered_from_the_layer_table() -> None:
    expected = render_package_layout()
    assert package_layout_section() == expected, "the docstring should end with:\n" + expected


def test_the_listing_names_every_entry_and_every_layer_once() -> None:
    names = [name.rstrip("/") for name, _ in entries()]
    on_disk = {p.name for p in PACKAGE_DIR.iterdir() if p.name != "__pycache__"}
    assert sorted(names) == sorted(on_disk)
    layers = [n for n in names if n in LAYERS]
    assert layers == list(reversed(LAYERS))  # top floor first


def test_the_readme_backend_table_names_every_scheme() -> None:
    text = README.read_text(encoding="utf-8")
    table = text[text.index("| backend URL |") :].split("\n\n", 1)[0]
    shown = set(re.findall(r"`([a-z][a-z-]*)://", table))
    assert shown == {*urls._schemes(), "http", "https"}


def test_the_readme_names_every_real_engine_tier() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    tiers = set(re.findall(r"^(test-[a-z]+):", makefile, flags=re.M))
    development = README.read_text(encoding="utf-8").split("## Development", 1)[1]
    assert tiers and {t for t in tiers if f"make {t}" not in development} == set()


def test_the_readme_links_every_guide() -> None:
    text = README.read_text(encoding="utf-8")
    guides = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert {g for g in guides if f"(docs/{g})" not in text} == set()
