"""What the fuzz targets in this folder share: the command line, the bounded fallback loop,
byte-level mutations, and the checks of the stream targets.

A target module defines ``TestOneInput(data)``, ``seeds()`` and ``mutate(rng, data, corpus)``
and wraps them in a :class:`Target`; ``Target.main`` is its command line:

- with atheris installed, ``python fuzz/<target>.py [corpus_dir] [-atheris_runs=N ...]``
  fuzzes under atheris (libFuzzer options pass straight through);
- without it, the same command says so on stderr and runs a bounded mutation loop over the
  seeds instead (``--iterations``, ``--seconds`` and ``--seed`` control it);
- ``--write-seeds DIR`` writes the seeds, as fuzzer inputs, to start a corpus.

Stream targets take *framed* inputs: the first byte ``k`` (mod 16) is the number of split
bytes that follow, each of those is the length of one piece, and the rest is the body.

Nothing here needs atheris, so the targets import without it and the test suite drives the
same ``TestOneInput`` under Hypothesis (tests/fuzz).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from agentcore._codecs.codec import Delta
from agentcore.core import ModelFailed, ModelResponded
from agentcore.wire import StreamDecoder

T = TypeVar("T")

Mutator = Callable[[random.Random, bytes, Sequence[bytes]], bytes]

BYTEWISE_LIMIT = 4096
"""Bodies up to this size are also fed one byte at a time (the cost is quadratic beyond)."""


# ----------------------------------------------------------------------------- mutations


def mutate_bytes(
    rng: random.Random, data: bytes, corpus: Sequence[bytes], tokens: Sequence[bytes]
) -> bytes:
    """One to four random edits of ``data``: flip a bit, insert one of ``tokens``, delete,
    duplicate, splice in the tail of another corpus entry, or cut."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        pos = rng.randint(0, len(buf))
        op = rng.randrange(6)
        if op == 0 and buf:
            buf[min(pos, len(buf) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:
            buf[pos:pos] = rng.choice(tokens)
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


# ----------------------------------------------------------------------------- framed inputs


def frame(pieces: Sequence[int], body: bytes) -> bytes:
    """The framed input that splits ``body`` into ``pieces`` (at most 15 sizes below 256)."""
    return bytes([len(pieces), *pieces]) + body


def run_framed(check: Callable[[bytes, list[int]], None], data: bytes) -> None:
    """Unframe ``data`` and pass the body and piece sizes to ``check``; empty input is skipped."""
    if not data:
        return
    count = data[0] % 16
    check(data[1 + count :], list(data[1 : 1 + count]))


def feed_pieces(feed: Callable[[bytes], list[T]], body: bytes, pieces: Sequence[int]) -> list[T]:
    """Feed ``body`` in pieces of the given sizes, then the rest; return everything fed out."""
    out: list[T] = []
    pos = 0
    for size in pieces:
        out.extend(feed(body[pos : pos + size]))
        pos += size
    out.extend(feed(body[pos:]))
    return out


def decoder_outcome(
    decoder: StreamDecoder, body: bytes, pieces: Sequence[int]
) -> tuple[list[Delta], ModelResponded | ModelFailed]:
    """The deltas and final event of a codec stream decoder fed ``body`` in ``pieces``.

    Raises:
        AssertionError: ``finish()`` is not repeatable or returns something else than an event.
    """
    deltas = feed_pieces(decoder.feed, body, pieces)
    result = decoder.finish()
    if decoder.finish() != result:
        raise AssertionError("finish() is not repeatable")
    if not isinstance(result, ModelResponded | ModelFailed):
        raise AssertionError(f"finish() returned {result!r}")
    return deltas, result


def check_split_invariance(
    run: Callable[[bytes, Sequence[int]], object], body: bytes, pieces: Sequence[int]
) -> None:
    """Raise ``AssertionError`` if feeding ``body`` in ``pieces`` (or byte by byte, for bodies
    up to :data:`BYTEWISE_LIMIT`) gives another outcome than feeding it whole.

    Any other exception escaping from here is a bug of the decoder under test.
    """
    whole = run(body, ())
    split = run(body, pieces)
    if split != whole:
        raise AssertionError(f"split {list(pieces)} gave {split!r}, whole gave {whole!r}")
    if len(body) <= BYTEWISE_LIMIT:
        bytewise = run(body, [1] * len(body))
        if bytewise != whole:
            raise AssertionError(f"byte-by-byte gave {bytewise!r}, whole gave {whole!r}")


# ----------------------------------------------------------------------------- command line


@dataclass(frozen=True)
class Target:
    """One fuzz target and its command line."""

    name: str
    """Prefix of the seed files ``--write-seeds`` writes."""
    doc: str | None
    """The target module's docstring; its first paragraph describes the command."""
    test_one_input: Callable[[bytes], None]
    seeds: Callable[[], list[bytes]]
    mutate: Mutator
    framed: bool = True
    """Inputs carry split sizes ahead of the body (see the module docstring)."""
    seed_suffix: str = ""

    def random_input(self, rng: random.Random, corpus: Sequence[bytes]) -> bytes:
        """A mutated corpus entry (framed with random split sizes for a framed target)."""
        body = self.mutate(rng, rng.choice(corpus), corpus)
        if not self.framed:
            return body
        return frame([rng.randint(0, 255) for _ in range(rng.randint(0, 15))], body)

    def fallback(self, iterations: int, seconds: float, seed: int) -> int:
        """Mutate the seeds for at most ``iterations`` inputs or ``seconds``; return inputs run."""
        rng = random.Random(seed)
        corpus = self.seeds()
        deadline = time.monotonic() + seconds
        done = 0
        while done < iterations and time.monotonic() < deadline:
            self.test_one_input(self.random_input(rng, corpus))
            done += 1
        return done

    def write_seeds(self, directory: Path) -> int:
        """Write every seed as a fuzzer input file into ``directory``; return how many."""
        directory.mkdir(parents=True, exist_ok=True)
        seeds = self.seeds()
        for number, body in enumerate(seeds):
            data = frame((), body) if self.framed else body
            (directory / f"{self.name}_seed_{number}{self.seed_suffix}").write_bytes(data)
        return len(seeds)

    def main(self, argv: list[str]) -> int:
        """Run under atheris when it is installed; otherwise explain and run the fallback loop."""
        if "--write-seeds" not in argv:
            try:
                import atheris  # type: ignore[import-not-found]
            except ImportError:
                print(
                    "atheris is not installed (pip install atheris; its wheels may lag new "
                    "CPython releases). Running the bounded built-in mutation loop instead; "
                    "the test suite (tests/fuzz) runs this target under Hypothesis.",
                    file=sys.stderr,
                )
            else:
                atheris.instrument_all()
                atheris.Setup(argv, self.test_one_input)
                atheris.Fuzz()
                return 0
        parser = argparse.ArgumentParser(description=(self.doc or "").split("\n\n")[0])
        parser.add_argument("--iterations", type=int, default=50_000)
        parser.add_argument("--seconds", type=float, default=60.0)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--write-seeds", metavar="DIR", type=Path)
        args = parser.parse_args(argv[1:])
        if args.write_seeds is not None:
            count = self.write_seeds(args.write_seeds)
            print(f"wrote {count} seeds to {args.write_seeds}")
            return 0
        done = self.fallback(args.iterations, args.seconds, args.seed)
        print(f"ran {done} mutated inputs, no finding")
        return 0
