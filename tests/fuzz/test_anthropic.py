"""Bounded run of the Anthropic stream fuzz target (fuzz/fuzz_stream_anthropic.py) under
Hypothesis: the decoder never raises and any way of splitting a body gives the same result."""

from __future__ import annotations

import random
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.targets import load_target

target = load_target("fuzz_stream_anthropic")

EVENT_TYPES = [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "error",
    "ping",
    "other",
]
BLOCK_TYPES = ["text", "tool_use", "tool_use", "thinking", "server_tool_use"]
DELTA_TYPES = ["text_delta", "input_json_delta", "input_json_delta", "thinking_delta"]
junk = st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=6)


def sometimes_junk(draw: st.DrawFn, valid: st.SearchStrategy[Any]) -> Any:
    """Mostly a value of the right shape, one time in sixteen something else."""
    return draw(junk) if draw(st.integers(0, 15)) == 0 else draw(valid)


def event(draw: st.DrawFn, kind: str, block_index: int | None = None) -> tuple[str, Any]:
    """One event of type ``kind``: mostly well formed, with wrong values or junk mixed in."""
    index = sometimes_junk(draw, st.integers(0, 2) if block_index is None else st.just(block_index))
    payload: dict[str, Any] = {"type": kind}
    if kind == "message_start":
        usage = draw(st.dictionaries(st.sampled_from(["input_tokens", "output_tokens"]), junk))
        payload["message"] = sometimes_junk(draw, st.just({"usage": usage}))
    elif kind == "content_block_start":
        block = {
            "type": sometimes_junk(draw, st.sampled_from(BLOCK_TYPES)),
            "id": sometimes_junk(draw, st.text(max_size=4)),
            "name": sometimes_junk(draw, st.text(max_size=4)),
            "text": sometimes_junk(draw, st.text(max_size=4)),
            "input": sometimes_junk(draw, st.just({}) | st.dictionaries(st.text(max_size=3), junk)),
        }
        payload.update(index=index, content_block=sometimes_junk(draw, st.just(block)))
    elif kind == "content_block_delta":
        delta = {
            "type": sometimes_junk(draw, st.sampled_from(DELTA_TYPES)),
            "text": sometimes_junk(draw, st.text(max_size=6)),
            "partial_json": sometimes_junk(draw, st.sampled_from(['{"a": ', "1}", "", "[", '"x"'])),
        }
        payload.update(index=index, delta=sometimes_junk(draw, st.just(delta)))
    elif kind == "content_block_stop":
        payload["index"] = index
    elif kind == "message_delta":
        reason = sometimes_junk(draw, st.sampled_from(["end_turn", "tool_use"]))
        payload["delta"] = {"stop_reason": reason}
        payload["usage"] = draw(st.dictionaries(st.sampled_from(["output_tokens"]), junk))
    elif kind == "error":
        payload["error"] = draw(
            st.just({"type": "overloaded_error", "message": "o"}) | st.just({}) | junk
        )
    name = kind if draw(st.integers(0, 15)) else draw(st.sampled_from(EVENT_TYPES))
    return name, payload


@st.composite
def random_events(draw: st.DrawFn) -> list[tuple[str, Any]]:
    kinds = draw(st.lists(st.sampled_from(EVENT_TYPES), max_size=12))
    return [event(draw, kind) for kind in kinds]


@st.composite
def scripted_events(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """A plausible reply (blocks opened, filled and closed in order), then a few edits."""
    events = [event(draw, "message_start")]
    for index in range(draw(st.integers(0, 3))):
        events.append(event(draw, "content_block_start", index))
        for _ in range(draw(st.integers(0, 3))):
            events.append(event(draw, "content_block_delta", index))
        events.append(event(draw, "content_block_stop", index))
    events.append(event(draw, "message_delta"))
    events.append(("message_stop", {"type": "message_stop"}))
    for _ in range(draw(st.integers(0, 2))):
        pos = draw(st.integers(0, len(events) - 1))
        edit = draw(st.sampled_from(["drop", "repeat", "swap", "insert"]))
        if edit == "drop":
            del events[pos]
        elif edit == "repeat":
            events.insert(pos, events[pos])
        elif edit == "swap" and pos + 1 < len(events):
            events[pos], events[pos + 1] = events[pos + 1], events[pos]
        elif edit == "insert":
            events.insert(pos, event(draw, draw(st.sampled_from(EVENT_TYPES))))
    return events


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    events = draw(scripted_events() | random_events())
    newline = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    parts = []
    for name, payload in events:
        data = orjson.dumps(payload)
        if draw(st.integers(0, 15)) == 0:
            data = data[: draw(st.integers(0, len(data)))]
        parts.append(b"event: " + name.encode() + newline + b"data: " + data + newline + newline)
    return b"".join(parts)


pieces = st.lists(st.integers(0, 64), max_size=16)


@settings(max_examples=80, deadline=None)
@given(body=streams(), split=pieces)
def test_structured_event_streams_never_break_the_decoder(body: bytes, split: list[int]) -> None:
    target.check(body, split)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), split=pieces)
def test_mutated_seed_streams_never_break_the_decoder(seed: int, split: list[int]) -> None:
    rng = random.Random(seed)
    corpus = target.seeds()
    body = rng.choice(corpus)
    for _ in range(rng.randint(1, 3)):
        body = target.mutate(rng, body, corpus)
    target.check(body, split)


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=600))
def test_raw_fuzzer_inputs_never_break_the_decoder(data: bytes) -> None:
    target.TestOneInput(data)


def test_seed_streams_cover_success_and_failure() -> None:
    outcomes = [target._run(body, ())[1] for body in target.seeds()]
    kinds = {type(event).__name__ for event in outcomes}
    assert kinds == {"ModelResponded", "ModelFailed"}


def test_fallback_loop_runs_a_bounded_number_of_inputs() -> None:
    assert target.fallback(iterations=100, seconds=30.0, seed=1) == 100
