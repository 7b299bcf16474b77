"""Every documented ``make`` target is a promise: CI calls each at least once (a short form
where the long one does not fit), and every flag a target's recipe gives a script of ours,
as CI calls it, is a flag that script has."""

from __future__ import annotations

import functools
import itertools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAKEFILE = ROOT / "Makefile"
CI = ROOT / ".ci" / "run"
SCRIPTS = re.compile(r"(?:^|/)(bench/[\w.]+\.py|tests/distributed/chaos\.py)$")


def documented_targets() -> set[str]:
    """Targets with a ``##`` help comment in the Makefile, and those the README and the docs
    name as ``make TARGET``."""
    lines = MAKEFILE.read_text().splitlines()
    targets = {
        line.split(":", 1)[0]
        for before, line in itertools.pairwise(lines)
        if before.startswith("## ") and re.match(r"^[\w-]+:", line)
    }
    rules = {line.split(":", 1)[0] for line in lines if re.match(r"^[\w-]+:", line)}
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        targets |= set(re.findall(r"`make ([\w-]+)", doc.read_text())) & rules
    return targets


def ci_make_calls() -> list[list[str]]:
    """The ``make`` command lines of the CI script (target and variable assignments)."""
    calls = []
    for raw in CI.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        for part in re.split(r"\|\||&&|;|\bif\b|\bthen\b", line):
            words = shlex.split(part)
            if words[:1] == ["make"]:
                calls.append(words[1:])
    return calls


def test_ci_calls_every_documented_make_target() -> None:
    called = {word for call in ci_make_calls() for word in call if "=" not in word}
    documented = documented_targets()
    assert {"test", "lint", "demo", "chaos", "bench-vllm", "test-distributed"} <= documented
    assert documented - called == set()


@functools.cache
def _help(script: str) -> str:
    proc = subprocess.run(
        [sys.executable, script, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _recipe_lines(call: list[str]) -> list[str]:
    """What ``make`` would run for ``call`` (a dry run: nothing is executed)."""
    proc = subprocess.run(
        ["make", "-n", *call], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


CALLS = [[target] for target in sorted(documented_targets())] + ci_make_calls()


@pytest.mark.parametrize("call", CALLS, ids=" ".join)
def test_the_flags_a_target_gives_a_script_are_flags_of_that_script(call: list[str]) -> None:
    """As the Makefile gives them and as CI calls each target (its short forms)."""
    for line in _recipe_lines(call):
        words = shlex.split(line)
        scripts = [i for i, w in enumerate(words) if SCRIPTS.search(w)]
        if not scripts:
            continue
        script = SCRIPTS.search(words[scripts[0]])[1]  # type: ignore[index]
        flags = [w.split("=", 1)[0] for w in words[scripts[0] + 1 :] if w.startswith("--")]
        usage = _help(script)
        unknown = [f for f in flags if not re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", usage)]
        assert not unknown, f"make {' '.join(call)}: {script} has no {unknown}"
