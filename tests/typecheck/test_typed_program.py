"""A type checker follows each task's output type to its results (``Task[T]`` -> ``Result[T]``).

``typed_program.py`` states, next to each ``reveal_type``, the type ``mypy --strict`` must
reveal there, and marks the lines mypy must reject. The program is also run on the simulated
backend, so the stated types are the ones a user gets.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = Path(__file__).with_name("typed_program.py")
ROOT = Path(__file__).resolve().parents[2]
_LINE = re.compile(r"^[^:]+:(\d+): (note|error): (.*)$")


def _expectations() -> tuple[dict[int, str], dict[int, str]]:
    revealed: dict[int, str] = {}
    errors: dict[int, str] = {}
    for number, line in enumerate(PROGRAM.read_text().splitlines(), start=1):
        if "# revealed: " in line:
            revealed[number] = line.split("# revealed: ", 1)[1].split("  # ")[0].strip()
        elif "# error: " in line:
            errors[number] = line.split("# error: ", 1)[1].strip()
    return revealed, errors


def _attrs_decorator(number: int) -> bool:
    return PROGRAM.read_text().splitlines()[number - 1].startswith("@attrs.")


def test_mypy_strict_reveals_the_output_types_and_finds_no_any_in_a_typed_program() -> None:
    pytest.importorskip("mypy")
    # --disallow-any-expr: no value of the program is Any, but what attrs' own decorators are.
    flags = ["--strict", "--disallow-any-expr", "--no-error-summary"]
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", *flags, str(PROGRAM)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    revealed: dict[int, str] = {}
    errors: dict[int, list[str]] = {}
    for line in proc.stdout.splitlines():
        match = _LINE.match(line)
        assert match, f"unexpected mypy output: {line}\n{proc.stdout}{proc.stderr}"
        number, kind, text = int(match[1]), match[2], match[3]
        if kind == "note" and text.startswith("Revealed type is "):
            revealed[number] = (
                text.removeprefix("Revealed type is ")
                .strip('"')
                .replace("tests.typecheck.typed_program.", "")
            )
        elif kind == "error" and not _attrs_decorator(number):
            errors.setdefault(number, []).append(text)
    want_revealed, want_errors = _expectations()
    assert want_revealed and want_errors
    assert revealed == want_revealed
    assert sorted(errors) == sorted(want_errors), proc.stdout
    for number, text in want_errors.items():
        assert any(e.startswith(text) for e in errors[number]), errors[number]


def test_the_typed_program_runs_on_the_simulated_backend() -> None:
    proc = subprocess.run(
        [sys.executable, str(PROGRAM)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Runtime type is" in proc.stderr
