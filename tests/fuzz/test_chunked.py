"""Bounded run of the chunked-body fuzz target (fuzz/fuzz_chunked.py) under Hypothesis: the
lean transport's chunked decoder accepts and refuses exactly what h11 does, however the body
is split."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.targets import load_target

target = load_target("fuzz_chunked")
SEEDS: list[bytes] = target.seeds()
pieces = st.lists(st.integers(0, 255), max_size=15)

_size_lines = st.tuples(
    st.sampled_from(["", "0", "00", " ", "x", "1" * 21]),
    st.sampled_from([";", ";a=b", "", "\r", "\n", " \t", ";\r"]),
)


@st.composite
def chunked_bodies(draw: st.DrawFn) -> bytes:
    """Mostly well-formed chunked bodies, with the framing broken now and then."""
    out = b""
    for data in draw(st.lists(st.binary(min_size=1, max_size=40), max_size=8)):
        size = len(data) + draw(st.sampled_from([0, 0, 0, 0, -1, 1]))
        digits = format(max(size, 0), draw(st.sampled_from(["x", "X", "04x"])))
        prefix, ext = draw(_size_lines) if draw(st.integers(0, 5)) == 0 else ("", "")
        footer = draw(st.sampled_from([b"\r\n"] * 6 + [b"\n", b"\r", b"", b"\r\r\n"]))
        out += (prefix + digits + ext).encode("latin-1") + b"\r\n" + data + footer
    if draw(st.booleans()):
        trailer = draw(st.sampled_from([b"", b"x-sum: 1\r\n", b"bad line\r\n", b" fold\r\n"]))
        out += b"0\r\n" + trailer + draw(st.sampled_from([b"\r\n", b"\n", b""]))
    return out + draw(st.binary(max_size=6))


@settings(max_examples=300, deadline=None)
@given(body=chunked_bodies(), cuts=pieces)
def test_chunked_target_on_structured_bodies(body: bytes, cuts: list[int]) -> None:
    target.check(body, cuts)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=400))
def test_chunked_target_on_raw_inputs(data: bytes) -> None:
    target.TestOneInput(data)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(SEEDS), st.randoms(use_true_random=False), pieces)
def test_chunked_target_on_mutated_seeds(seed: bytes, rng: random.Random, cuts: list[int]) -> None:
    data = seed
    for _ in range(rng.randint(1, 3)):
        data = target.mutate(rng, data, SEEDS)
    target.check(data, cuts)


def test_chunked_target_seeds() -> None:
    for seed in SEEDS:
        target.check(seed, [3, 1, 7])


def test_chunked_target_fallback_loop_runs() -> None:
    assert target.fallback(iterations=200, seconds=30.0, seed=1) == 200
