"""Fuzz target for the Anthropic stream decoder.

Invariant checked on every input: the decoder never raises, and feeding a body whole, in the
pieces the input chooses, or byte by byte yields the same deltas and the same final event.

Input layout: the first byte ``k`` (mod 16) is the number of split bytes that follow; each of
those is the length of one piece; the rest of the input is the response body.

With atheris installed (``pip install atheris``; wheels may lag new CPython releases)::

    python fuzz/fuzz_stream_anthropic.py -atheris_runs=100000 [corpus_dir]

Without it the same command runs a bounded mutation loop over built-in seed streams
(``--iterations`` and ``--seconds`` bound it). ``--write-seeds DIR`` writes the seeds as a
starting corpus. ``TestOneInput`` and ``check`` are importable, so the test suite exercises
this very target under Hypothesis (tests/fuzz/test_anthropic.py).
"""

from __future__ import annotations

import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from agentcore._codecs.anthropic import AnthropicCodec
from agentcore._codecs.codec import Delta
from agentcore.core import ModelFailed, ModelResponded

if (_HERE := str(Path(__file__).resolve().parent)) not in sys.path:  # when loaded by path
    sys.path.insert(0, _HERE)  # for _harness.py
from _harness import Target, check_split_invariance, decoder_outcome, mutate_bytes, run_framed

CODEC = AnthropicCodec("http://127.0.0.1:9", "fuzz-model", None)


def _sse(event: str, payload: Any) -> bytes:
    return f"event: {event}\ndata: ".encode() + orjson.dumps(payload) + b"\n\n"


def _block(index: int, block: dict[str, Any], deltas: Sequence[dict[str, Any]]) -> bytes:
    start = {"type": "content_block_start", "index": index, "content_block": block}
    parts = [_sse("content_block_start", start)]
    for delta in deltas:
        body = {"type": "content_block_delta", "index": index, "delta": delta}
        parts.append(_sse("content_block_delta", body))
    parts.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    return b"".join(parts)


def seeds() -> list[bytes]:
    """Small, valid and invalid, streams to start mutating from."""
    usage = {"input_tokens": 5, "cache_read_input_tokens": 3, "output_tokens": 1}
    start = _sse("message_start", {"type": "message_start", "message": {"usage": usage}})
    stop = _sse("message_stop", {"type": "message_stop"})
    end = _sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 9},
        },
    )
    text = _block(
        0,
        {"type": "text", "text": ""},
        [{"type": "text_delta", "text": "hé"}, {"type": "text_delta", "text": "llo"}],
    )
    tool = _block(
        1,
        {"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {}},
        [
            {"type": "input_json_delta", "partial_json": '{"pat": "TO'},
            {"type": "input_json_delta", "partial_json": 'DO"}'},
        ],
    )
    thinking = _block(
        2, {"type": "thinking", "thinking": ""}, [{"type": "thinking_delta", "thinking": "x"}]
    )
    error = _sse("error", {"type": "error", "error": {"type": "overloaded_error", "message": "o"}})
    ping = b'event: ping\ndata: {"type": "ping"}\n\n: comment\n\n'
    return [
        start + text + end + stop,
        start + text + tool + ping + thinking + end + stop,
        (start + tool + end + stop).replace(b"\n", b"\r\n"),
        start + text + error,
        start + text + end,
        start + tool[: len(tool) // 2],
    ]


def _run(body: bytes, pieces: Sequence[int]) -> tuple[list[Delta], ModelResponded | ModelFailed]:
    return decoder_outcome(CODEC.stream_decoder("fuzz"), body, pieces)


def check(body: bytes, pieces: Sequence[int]) -> None:
    """Raise ``AssertionError`` if any way of feeding ``body`` disagrees with feeding it whole.

    Any other exception escaping from here is a decoder bug.
    """
    check_split_invariance(_run, body, pieces)


def TestOneInput(data: bytes) -> None:
    """Fuzzer entry point (see the module docstring for the input layout)."""
    run_framed(check, data)


_TOKENS = [
    b"\n",
    b"\r",
    b"\r\n",
    b"\n\n",
    b"event: ",
    b"data: ",
    b": ",
    b"{",
    b"}",
    b'"',
    b"\xc3",
    b"\xff",
    b'"index":0',
    b'"index":1',
    b"content_block_delta",
    b"content_block_start",
    b"message_stop",
    b"error",
    b"text_delta",
    b"input_json_delta",
]


def mutate(rng: random.Random, data: bytes, corpus: Sequence[bytes]) -> bytes:
    """A random edit of ``data``: flip, insert a token, delete, duplicate, splice or cut."""
    return mutate_bytes(rng, data, corpus, _TOKENS)


TARGET = Target("anthropic", __doc__, TestOneInput, seeds, mutate)
fallback = TARGET.fallback

if __name__ == "__main__":  # pragma: no cover
    sys.exit(TARGET.main(sys.argv))
