"""Bounded run of the Bedrock stream fuzz target (fuzz/fuzz_stream_bedrock.py) under
Hypothesis: the event-stream decoder never raises and any way of splitting a body gives the
same result."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip(
    "botocore", reason="needs the bedrock extra: pip install 'trio-agentcore[bedrock]'"
)

from tests.fuzz.targets import load_target

target = load_target("fuzz_stream_bedrock")
pieces = st.lists(st.integers(0, 64), max_size=16)


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    """Frames of plausible and junk events, then a few byte-level edits."""
    names = [
        "messageStart",
        "contentBlockStart",
        "contentBlockDelta",
        "contentBlockStop",
        "messageStop",
        "metadata",
        "unknownEvent",
    ]
    parts = []
    for _ in range(draw(st.integers(0, 8))):
        name = draw(st.sampled_from(names))
        index = draw(st.integers(0, 2) | st.just(-1) | st.just("x"))
        payload = draw(
            st.sampled_from(
                [
                    {"contentBlockIndex": index, "delta": {"text": "hé"}},
                    {"contentBlockIndex": index, "delta": {"toolUse": {"input": '{"a": '}}},
                    {
                        "contentBlockIndex": index,
                        "start": {"toolUse": {"toolUseId": "t", "name": "n"}},
                    },
                    {"stopReason": "end_turn"},
                    {"usage": {"inputTokens": 3, "outputTokens": "x"}},
                    [],
                ]
            )
        )
        if draw(st.integers(0, 10)) == 0:
            parts.append(target.exception("throttlingException", "slow"))
        else:
            parts.append(target.event(name, payload))
    body = b"".join(parts)
    rng = random.Random(draw(st.integers(0, 2**32)))
    for _ in range(draw(st.integers(0, 2))):
        body = target.mutate(rng, body, target.seeds())
    return body


@settings(max_examples=150, deadline=None)
@given(streams(), pieces)
def test_generated_streams_decode_the_same_however_they_are_split(
    body: bytes, cuts: list[int]
) -> None:
    target.check(body, cuts)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=300))
def test_any_input_to_the_target_is_handled(data: bytes) -> None:
    target.TestOneInput(data)


def test_the_seeds_pass() -> None:
    for seed in target.seeds():
        target.check(seed, [3, 11])
