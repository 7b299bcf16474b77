"""Bounded runs of the SSE and OpenAI-stream fuzz targets (fuzz/fuzz_sse.py,
fuzz/fuzz_stream_openai.py) under Hypothesis: the decoders never raise and any way of
splitting a body gives the same result."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.targets import load_target

sse_target = load_target("fuzz_sse")
openai_target = load_target("fuzz_stream_openai")

pieces = st.lists(st.integers(0, 255), max_size=15)

# ----------------------------------------------------------------------------- SSE

_sse_lines = st.lists(
    st.tuples(
        st.sampled_from(["data", "event", "id", "retry", "", "other", "data "]),
        st.sampled_from([":", ": ", ""]),
        st.text(alphabet=st.characters(codec="utf-8"), max_size=12),
        st.sampled_from(["\n", "\r", "\r\n", "\n\n", "\r\n\r\n"]),
    ),
    max_size=20,
)


@settings(max_examples=150)
@given(lines=_sse_lines, bom=st.booleans(), cuts=pieces)
def test_sse_target_on_structured_streams(
    lines: list[tuple[str, str, str, str]], bom: bool, cuts: list[int]
) -> None:
    text = "".join(name + colon + value + eol for name, colon, value, eol in lines)
    stream = (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8", "surrogatepass")
    sse_target.check(stream, cuts)


@settings(max_examples=150)
@given(data=st.binary(max_size=400))
def test_sse_target_on_raw_inputs(data: bytes) -> None:
    sse_target.TestOneInput(data)


def test_sse_target_seeds_and_mutations() -> None:
    for seed in sse_target.seeds():
        sse_target.TestOneInput(b"\x00" + seed)
    assert sse_target.fallback(iterations=300, seconds=30.0, seed=1) > 0


# ----------------------------------------------------------------------------- OpenAI stream

junk = st.none() | st.booleans() | st.integers(-2, 2) | st.text(max_size=5)


def _maybe(draw: st.DrawFn, valid: st.SearchStrategy[Any]) -> Any:
    """Mostly a value of the right shape, one time in ten something else."""
    return draw(junk) if draw(st.integers(0, 9)) == 0 else draw(valid)


@st.composite
def openai_chunks(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["text", "tool", "finish", "usage", "error", "nvext", "junk"]))
    delta: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    finish = None
    if kind == "text":
        delta["content"] = _maybe(draw, st.text(max_size=8))
    elif kind == "tool":
        function = {"arguments": _maybe(draw, st.sampled_from(['{"a": ', "1}", "", "[", "]"]))}
        if draw(st.booleans()):
            function["name"] = _maybe(draw, st.sampled_from(["f", "g"]))
        call = {
            "index": _maybe(draw, st.integers(0, 2)),
            "function": _maybe(draw, st.just(function)),
        }
        if draw(st.booleans()):
            call["id"] = _maybe(draw, st.sampled_from(["a", "b", "c"]))
        delta["tool_calls"] = _maybe(draw, st.just([call]))
    elif kind == "finish":
        finish = _maybe(draw, st.sampled_from(["stop", "tool_calls", "length"]))
    elif kind == "usage":
        details = {"cached_tokens": _maybe(draw, st.integers(0, 99))}
        extra["usage"] = {
            "prompt_tokens": _maybe(draw, st.integers(0, 99)),
            "prompt_tokens_details": details,
        }
    elif kind == "error":
        extra["error"] = _maybe(draw, st.just({"message": "x", "type": "overloaded_error"}))
    elif kind == "nvext":
        extra["nvext"] = {
            "timing": {"ttft_ms": _maybe(draw, st.floats(0, 9))},
            "worker_id": {"decode_worker_id": 3},
        }
    else:
        return b"data: " + draw(st.binary(max_size=12)) + b"\n\n"
    choice = {"index": _maybe(draw, st.just(0)), "delta": delta, "finish_reason": finish}
    payload = {"id": "c", "choices": _maybe(draw, st.just([choice])), **extra}
    frame = draw(
        st.sampled_from([b"data: %s\n\n", b"data:%s\r\n\r\n", b"event: error\ndata: %s\n\n"])
    )
    return frame % orjson.dumps(payload)


@settings(max_examples=150)
@given(chunks=st.lists(openai_chunks(), max_size=12), done=st.booleans(), cuts=pieces)
def test_openai_target_on_structured_streams(
    chunks: list[bytes], done: bool, cuts: list[int]
) -> None:
    body = b"".join(chunks) + (b"data: [DONE]\n\n" if done else b"")
    openai_target.check(body, cuts)


@settings(max_examples=100)
@given(data=st.binary(max_size=400))
def test_openai_target_on_raw_inputs(data: bytes) -> None:
    openai_target.TestOneInput(data)


def test_openai_target_seeds_and_mutations() -> None:
    seeds = openai_target.seeds()
    assert len(seeds) > 7  # the built-in seeds plus the Dynamo captures
    for seed in seeds:
        openai_target.TestOneInput(b"\x00" + seed)
    assert openai_target.fallback(iterations=150, seconds=30.0, seed=1) > 0
