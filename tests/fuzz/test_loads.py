"""Bounded run of the ``agentcore.core.loads`` fuzz target (fuzz/fuzz_loads.py) under Hypothesis:
any input is accepted or raises ``DecodeError``, and accepted input re-encodes stably."""

from __future__ import annotations

import importlib.util
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentcore
from agentcore.testing import strategies as acst
from tests.fuzz.targets import FUZZ_DIR, load_target

TARGET_PATH = FUZZ_DIR / "fuzz_loads.py"
target = load_target("fuzz_loads")
SEEDS: list[bytes] = target.seeds()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=256))
def test_arbitrary_bytes_are_accepted_or_rejected_with_DecodeError(data: bytes) -> None:
    target.TestOneInput(data)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SEEDS), st.randoms(use_true_random=False))
def test_mutated_valid_encodings_are_accepted_or_rejected_with_DecodeError(
    seed: bytes, rng: random.Random
) -> None:
    data = seed
    for _ in range(rng.randint(1, 3)):
        data = target.mutate(rng, data, SEEDS)
    target.TestOneInput(data)


@settings(max_examples=100, deadline=None)
@given(acst.json_values())
def test_arbitrary_json_documents_are_accepted_or_rejected_with_DecodeError(value: Any) -> None:
    target.TestOneInput(agentcore.core.dumps(value))


@settings(max_examples=60, deadline=None)
@given(st.one_of(acst.messages(), acst.events(), acst.effects()))
def test_valid_encodings_are_accepted(value: Any) -> None:
    data = agentcore.core.dumps(value)
    accepted = [name for name, tp in target.TARGETS if target._decode(data, tp)[0]]
    assert len(accepted) == 1
    target.TestOneInput(data)


def test_every_seed_decodes_as_one_of_the_targets() -> None:
    for data in SEEDS:
        assert any(target._decode(data, tp)[0] for _, tp in target.TARGETS), data
        target.TestOneInput(data)


def test_seeds_cover_every_message_event_and_effect_class() -> None:
    classes = {type(value) for value in target.seed_values()}
    for union in (agentcore.core.Message, agentcore.core.Event, agentcore.core.Effect):
        assert set(union.__args__) <= classes


def test_check_reports_a_broken_invariant(monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness is not vacuous: an exception other than DecodeError escapes it."""

    def broken_loads(data: Any, tp: Any, **kwargs: Any) -> Any:
        raise KeyError("type")

    monkeypatch.setattr(agentcore.core, "loads", broken_loads)
    with pytest.raises(KeyError):
        target.TestOneInput(SEEDS[0])


def test_target_imports_and_runs_where_atheris_cannot_be_imported() -> None:
    code = (
        "import importlib.util, sys\n"
        "sys.modules['atheris'] = None  # any 'import atheris' now fails\n"
        f"spec = importlib.util.spec_from_file_location('fuzz_loads', {str(TARGET_PATH)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "module.TestOneInput(b'{}')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_command_line_without_atheris_explains_and_runs_a_bounded_loop(tmp_path: Path) -> None:
    if importlib.util.find_spec("atheris") is not None:
        pytest.skip("atheris is installed: the command would start the real fuzzer")
    result = subprocess.run(
        [sys.executable, str(TARGET_PATH), "--iterations", "200", "--seconds", "20"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "atheris is not installed" in result.stderr
    assert "ran 200 mutated inputs, no finding" in result.stdout

    subprocess.run(
        [sys.executable, str(TARGET_PATH), "--write-seeds", str(tmp_path)],
        capture_output=True,
        check=True,
    )
    written = sorted(tmp_path.iterdir())
    assert len(written) == len(SEEDS)
    assert {path.read_bytes() for path in written} == set(SEEDS)
