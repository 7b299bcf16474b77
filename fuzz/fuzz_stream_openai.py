"""Fuzz target for the OpenAI-compatible stream decoder (vLLM, SGLang, Dynamo, OpenAI, sim).

Invariant checked on every input: the decoder never raises, ``finish()`` is repeatable, and
feeding a body whole, in the pieces the input chooses, or byte by byte yields the same deltas
and the same final event. The non-streamed ``decode`` of the same bytes must not raise either.

Input layout: the first byte ``k`` (mod 16) is the number of split bytes that follow; each of
those is the length of one piece; the rest of the input is the response body.

With atheris installed (``pip install atheris``)::

    python fuzz/fuzz_stream_openai.py -atheris_runs=100000 [corpus_dir]

Without it the same command runs a bounded mutation loop over built-in seed streams (real
Dynamo 1.6.1 captures plus hand-written edge cases); ``--iterations`` and ``--seconds`` bound
it, ``--write-seeds DIR`` writes the seeds as a starting corpus. ``TestOneInput`` and ``check``
are importable: the test suite runs this target under Hypothesis
(tests/fuzz/test_codecs.py).
"""

from __future__ import annotations

import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from agentcore._codecs.codec import Delta
from agentcore._codecs.openai import OpenAICodec
from agentcore.core import ModelFailed, ModelResponded

if (_HERE := str(Path(__file__).resolve().parent)) not in sys.path:  # when loaded by path
    sys.path.insert(0, _HERE)  # for _harness.py
from _harness import Target, check_split_invariance, decoder_outcome, mutate_bytes, run_framed

CODEC = OpenAICodec(base_url="http://127.0.0.1:9/v1", model="fuzz-model", dialect="dynamo")
CAPTURES = Path(__file__).resolve().parents[1] / "tests" / "codecs" / "fixtures" / "dynamo-1.6.1"


def _chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> bytes:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return b"data: " + orjson.dumps({"id": "c", "choices": choices, **extra}) + b"\n\n"


def seeds() -> list[bytes]:
    """Small, valid and invalid, streams to start mutating from."""
    done = b"data: [DONE]\n\n"
    tool = _chunk(
        {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": '{"k"'}}]}
    )
    more = _chunk({"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]})
    second = _chunk({"tool_calls": [{"index": 1, "id": "b", "function": {"name": "g"}}]})
    text = _chunk({"role": "assistant", "content": "h\u00e9llo"})
    stop = _chunk({}, "tool_calls", nvext={"timing": {"ttft_ms": 1.0}, "worker_id": {}})
    usage = _chunk(None, usage={"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": 4}})
    error = b'data: {"error": {"message": "busy", "type": "overloaded_error"}}\n\n'
    built = [
        text + tool + more + second + stop + usage + done,
        (text + stop + done).replace(b"\n", b"\r\n"),
        text + error + done,
        b'event: error\ndata: {"error": {"code": 500}}\n\n',
        b"event: token_ids\n: [1,2]\n\n" + text + tool,
        text + stop,
        b": keep-alive\n\n" + text[: len(text) // 2],
    ]
    captured = sorted(CAPTURES.glob("*.sse")) if CAPTURES.is_dir() else []
    return built + [path.read_bytes() for path in captured]


def _run(body: bytes, pieces: Sequence[int]) -> tuple[list[Delta], ModelResponded | ModelFailed]:
    return decoder_outcome(CODEC.stream_decoder("fuzz"), body, pieces)


def check(body: bytes, pieces: Sequence[int]) -> None:
    """Raise ``AssertionError`` if any way of feeding ``body`` disagrees with feeding it whole.

    Any other exception escaping from here is a decoder bug.
    """
    check_split_invariance(_run, body, pieces)
    for status in (200, 429):
        if not isinstance(CODEC.decode("fuzz", status, (), body), ModelResponded | ModelFailed):
            raise AssertionError("decode() returned something else than an event")


def TestOneInput(data: bytes) -> None:
    """Fuzzer entry point (see the module docstring for the input layout)."""
    run_framed(check, data)


TOKENS = [b"\n", b"\r\n", b"\n\n", b"data: ", b"event: error\n", b"data: [DONE]\n\n", b"{", b"}",
          b'"', b"null", b"\xc3", b"\xff", b'"index":1', b'"finish_reason":"stop"',
          b'"error":{}', b'"tool_calls":[{}]', b'"arguments":""', b'"usage":{}']  # fmt: skip


def mutate(rng: random.Random, data: bytes, corpus: Sequence[bytes]) -> bytes:
    """A random edit of ``data``: flip a bit, insert a token, delete, duplicate, splice, cut."""
    return mutate_bytes(rng, data, corpus, TOKENS)


TARGET = Target("openai", __doc__, TestOneInput, seeds, mutate)
fallback = TARGET.fallback

if __name__ == "__main__":  # pragma: no cover
    sys.exit(TARGET.main(sys.argv))
