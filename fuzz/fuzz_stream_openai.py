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
(tests/fuzz/test_fuzz_codecs.py).
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
        from agentcore._codec_openai import OpenAICodec
        from agentcore._events import ModelFailed, ModelResponded
else:
    from agentcore._codec import Delta
    from agentcore._codec_openai import OpenAICodec
    from agentcore._events import ModelFailed, ModelResponded

CODEC = OpenAICodec(base_url="http://127.0.0.1:9/v1", model="fuzz-model", dialect="dynamo")
BYTEWISE_LIMIT = 4096
"""Bodies up to this size are also fed one byte at a time."""
CAPTURES = Path(__file__).resolve().parents[1] / "tests" / "codecs" / "fixtures" / "dynamo-1.6.1"

Outcome = tuple[list[Delta], ModelResponded | ModelFailed]


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
    for status in (200, 429):
        if not isinstance(CODEC.decode("fuzz", status, (), body), ModelResponded | ModelFailed):
            raise AssertionError("decode() returned something else than an event")


def TestOneInput(data: bytes) -> None:
    """Fuzzer entry point (see the module docstring for the input layout)."""
    if not data:
        return
    count = data[0] % 16
    check(data[1 + count :], list(data[1 : 1 + count]))


# ----------------------------------------------------------------------------- fallback loop

TOKENS = [b"\n", b"\r\n", b"\n\n", b"data: ", b"event: error\n", b"data: [DONE]\n\n", b"{", b"}",
          b'"', b"null", b"\xc3", b"\xff", b'"index":1', b'"finish_reason":"stop"',
          b'"error":{}', b'"tool_calls":[{}]', b'"arguments":""', b'"usage":{}']  # fmt: skip


def mutate(rng: random.Random, data: bytes, corpus: Sequence[bytes]) -> bytes:
    """A random edit of ``data``: flip a bit, insert a token, delete, duplicate, splice, cut."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        pos = rng.randint(0, len(buf))
        op = rng.randrange(6)
        if op == 0 and buf:
            buf[min(pos, len(buf) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:
            buf[pos:pos] = rng.choice(TOKENS)
        elif op == 2:
            del buf[pos : pos + rng.randint(1, 16)]
        elif op == 3:
            buf[pos:pos] = buf[pos : pos + rng.randint(1, 64)]
        elif op == 4:
            other = rng.choice(corpus)
            buf = buf[:pos] + other[rng.randint(0, len(other)) :]
        else:
            buf = buf[:pos]
    return bytes(buf)


def fallback(iterations: int, seconds: float, seed: int) -> int:
    """Mutate the seeds for at most ``iterations`` inputs or ``seconds``; return inputs run."""
    rng = random.Random(seed)
    corpus = seeds()
    deadline = time.monotonic() + seconds
    done = 0
    while done < iterations and time.monotonic() < deadline:
        body = mutate(rng, rng.choice(corpus), corpus)
        pieces = [rng.randint(0, 255) for _ in range(rng.randint(0, 15))]
        TestOneInput(bytes([len(pieces), *pieces]) + body)
        done += 1
    return done


def main(argv: list[str]) -> None:  # pragma: no cover - command line
    if atheris is not None and "--write-seeds" not in argv:
        atheris.Setup(argv, TestOneInput)
        atheris.Fuzz()
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=50_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write-seeds", metavar="DIR", type=Path)
    args = parser.parse_args(argv[1:])
    if args.write_seeds is not None:
        args.write_seeds.mkdir(parents=True, exist_ok=True)
        for number, body in enumerate(seeds()):
            (args.write_seeds / f"openai_seed_{number}").write_bytes(b"\x00" + body)
        return
    done = fallback(args.iterations, args.seconds, args.seed)
    print(f"atheris not installed: ran {done} mutated inputs, no finding")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv)
