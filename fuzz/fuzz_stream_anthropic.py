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
this very target under Hypothesis (tests/fuzz/test_fuzz_anthropic.py).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

try:  # pragma: no cover - depends on the environment
    import atheris
except ImportError:  # pragma: no cover
    atheris = None

if atheris is not None:  # pragma: no cover
    with atheris.instrument_imports():
        from agentcore._codec import Delta
        from agentcore._codec_anthropic import AnthropicCodec
        from agentcore._events import ModelFailed, ModelResponded
else:
    from agentcore._codec import Delta
    from agentcore._codec_anthropic import AnthropicCodec
    from agentcore._events import ModelFailed, ModelResponded

CODEC = AnthropicCodec("http://127.0.0.1:9", "fuzz-model", None)
BYTEWISE_LIMIT = 4096
"""Bodies up to this size are also fed one byte at a time (quadratic cost beyond)."""

Outcome = tuple[list[Delta], ModelResponded | ModelFailed]


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


def _run(body: bytes, pieces: Sequence[int]) -> Outcome:
    decoder = CODEC.stream_decoder("fuzz")
    deltas: list[Delta] = []
    pos = 0
    for size in pieces:
        deltas.extend(decoder.feed(body[pos : pos + size]))
        pos += size
    deltas.extend(decoder.feed(body[pos:]))
    result = decoder.finish()
    if decoder.finish() != result:
        raise AssertionError("finish() is not repeatable")
    if not isinstance(result, ModelResponded | ModelFailed):
        raise AssertionError(f"finish() returned {result!r}")
    return deltas, result


def check(body: bytes, pieces: Sequence[int]) -> None:
    """Raise ``AssertionError`` if any way of feeding ``body`` disagrees with feeding it whole.

    Any other exception escaping from here is a decoder bug.
    """
    whole = _run(body, ())
    split = _run(body, pieces)
    if split != whole:
        raise AssertionError(f"split {list(pieces)} gave {split!r}, whole gave {whole!r}")
    if len(body) <= BYTEWISE_LIMIT:
        bytewise = _run(body, [1] * len(body))
        if bytewise != whole:
            raise AssertionError(f"byte-by-byte gave {bytewise!r}, whole gave {whole!r}")


def TestOneInput(data: bytes) -> None:
    """Fuzzer entry point (see the module docstring for the input layout)."""
    if not data:
        return
    count = data[0] % 16
    pieces = list(data[1 : 1 + count])
    check(data[1 + count :], pieces)


# ----------------------------------------------------------------------------- fallback loop

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
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        pos = rng.randint(0, len(buf))
        op = rng.randrange(6)
        if op == 0 and buf:
            buf[min(pos, len(buf) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:
            buf[pos:pos] = rng.choice(_TOKENS)
        elif op == 2:
            del buf[pos : pos + rng.randint(1, 16)]
        elif op == 3:
            buf[pos:pos] = buf[pos : pos + rng.randint(1, 64)]
        elif op == 4:
            other = rng.choice(corpus)
            cut = rng.randint(0, len(other))
            buf = buf[:pos] + other[cut:]
        else:
            buf = buf[:pos]
    return bytes(buf)


def _framed(rng: random.Random, body: bytes) -> bytes:
    pieces = [rng.randint(0, 255) for _ in range(rng.randint(0, 15))]
    return bytes([len(pieces), *pieces]) + body


def fallback(iterations: int, seconds: float, seed: int) -> int:
    """Mutate the seeds for at most ``iterations`` inputs or ``seconds``; return inputs run."""
    rng = random.Random(seed)
    corpus = seeds()
    deadline = time.monotonic() + seconds
    done = 0
    while done < iterations and time.monotonic() < deadline:
        body = mutate(rng, rng.choice(corpus), corpus)
        TestOneInput(_framed(rng, body))
        done += 1
    return done


def main(argv: list[str]) -> None:  # pragma: no cover - command line
    if atheris is not None and "--write-seeds" not in argv:
        atheris.Setup(argv, TestOneInput)
        atheris.Fuzz()
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=50_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write-seeds", metavar="DIR", type=Path)
    args = parser.parse_args(argv[1:])
    if args.write_seeds is not None:
        args.write_seeds.mkdir(parents=True, exist_ok=True)
        for number, body in enumerate(seeds()):
            (args.write_seeds / f"anthropic_seed_{number}").write_bytes(b"\x00" + body)
        return
    done = fallback(args.iterations, args.seconds, args.seed)
    print(f"atheris not installed: ran {done} mutated inputs, no finding")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv)
