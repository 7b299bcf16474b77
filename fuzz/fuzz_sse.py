"""Fuzz target for the incremental SSE decoder (agentcore.SSEDecoder).

Invariant checked on every input: the decoder never raises, and feeding a stream whole, in the
pieces the input chooses, or byte by byte yields the same events and the same ``retry`` value.

Input layout: the first byte ``k`` (mod 16) is the number of split bytes that follow; each of
those is the length of one piece; the rest of the input is the stream.

With atheris installed (``pip install atheris``)::

    python fuzz/fuzz_sse.py -atheris_runs=100000 [corpus_dir]

Without it the same command runs a bounded mutation loop over built-in seed streams
(``--iterations`` and ``--seconds`` bound it; ``--write-seeds DIR`` writes the seeds as a
starting corpus). ``TestOneInput`` and ``check`` are importable: the test suite runs this very
target under Hypothesis (tests/fuzz/test_fuzz_codecs.py).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

try:  # pragma: no cover - depends on the environment
    import atheris
except ImportError:  # pragma: no cover
    atheris = None

if atheris is not None:  # pragma: no cover
    with atheris.instrument_imports():
        from agentcore._sse import SSEDecoder, SSEEvent
else:
    from agentcore._sse import SSEDecoder, SSEEvent

BYTEWISE_LIMIT = 4096
"""Streams up to this size are also fed one byte at a time."""

Outcome = tuple[list[SSEEvent], int | None]


def seeds() -> list[bytes]:
    """Streams covering every rule of the standard, to start mutating from."""
    return [
        b"data: hello\n\n",
        b'data: {"a":\ndata: 1}\r\n\r\n',
        b"\xef\xbb\xbf: comment\revent: ping\rdata\r\r",
        b"id: 7\ndata: a\n\nid: x\x00y\ndata: b\n\nretry: 1500\nretry: 9x\n\n",
        b'event: formatted_prompt\n: "<|im_start|>"\n\ndata: [DONE]\n\n',
        b"data: caf\xc3\xa9 \xe2\x98\x83 \xff\n\ndata: cut off",
        b"field\nfield: value\ndata:  two spaces\n\n",
    ]


def _run(stream: bytes, pieces: Sequence[int]) -> Outcome:
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    pos = 0
    for size in pieces:
        events.extend(decoder.feed(stream[pos : pos + size]))
        pos += size
    events.extend(decoder.feed(stream[pos:]))
    events.extend(decoder.finish())
    if decoder.pending:
        raise AssertionError("state left pending after finish()")
    return events, decoder.retry


def check(stream: bytes, pieces: Sequence[int]) -> None:
    """Raise ``AssertionError`` if any way of feeding ``stream`` disagrees with feeding it whole.

    Any other exception escaping from here is a decoder bug.
    """
    whole = _run(stream, ())
    split = _run(stream, pieces)
    if split != whole:
        raise AssertionError(f"split {list(pieces)} gave {split!r}, whole gave {whole!r}")
    if len(stream) <= BYTEWISE_LIMIT:
        bytewise = _run(stream, [1] * len(stream))
        if bytewise != whole:
            raise AssertionError(f"byte-by-byte gave {bytewise!r}, whole gave {whole!r}")


def TestOneInput(data: bytes) -> None:
    """Fuzzer entry point (see the module docstring for the input layout)."""
    if not data:
        return
    count = data[0] % 16
    check(data[1 + count :], list(data[1 : 1 + count]))


# ----------------------------------------------------------------------------- fallback loop

TOKENS = [b"\n", b"\r", b"\r\n", b"\n\n", b"data:", b"data: ", b"event: ", b"id: ", b"retry: 5",
          b": ", b"\x00", b"\xef\xbb\xbf", b"\xc3", b"\xe2\x98", b"\xff"]  # fmt: skip


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
            (args.write_seeds / f"sse_seed_{number}").write_bytes(b"\x00" + body)
        return
    done = fallback(args.iterations, args.seconds, args.seed)
    print(f"atheris not installed: ran {done} mutated inputs, no finding")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv)
