"""Fuzz target for the incremental SSE decoder (agentcore.wire.SSEDecoder).

Invariant checked on every input: the decoder never raises, and feeding a stream whole, in the
pieces the input chooses, or byte by byte yields the same events and the same ``retry`` value.

Input layout: the first byte ``k`` (mod 16) is the number of split bytes that follow; each of
those is the length of one piece; the rest of the input is the stream.

With atheris installed (``pip install atheris``)::

    python fuzz/fuzz_sse.py -atheris_runs=100000 [corpus_dir]

Without it the same command runs a bounded mutation loop over built-in seed streams
(``--iterations`` and ``--seconds`` bound it; ``--write-seeds DIR`` writes the seeds as a
starting corpus). ``TestOneInput`` and ``check`` are importable: the test suite runs this very
target under Hypothesis (tests/fuzz/test_codecs.py).
"""

from __future__ import annotations

import random
import sys
from collections.abc import Sequence
from pathlib import Path

from agentcore.wire import SSEDecoder, SSEEvent

if (_HERE := str(Path(__file__).resolve().parent)) not in sys.path:  # when loaded by path
    sys.path.insert(0, _HERE)  # for _harness.py
from _harness import Target, check_split_invariance, feed_pieces, mutate_bytes, run_framed

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
    events = feed_pieces(decoder.feed, stream, pieces)
    events.extend(decoder.finish())
    if decoder.pending:
        raise AssertionError("state left pending after finish()")
    return events, decoder.retry


def check(stream: bytes, pieces: Sequence[int]) -> None:
    """Raise ``AssertionError`` if any way of feeding ``stream`` disagrees with feeding it whole.

    Any other exception escaping from here is a decoder bug.
    """
    check_split_invariance(_run, stream, pieces)


def TestOneInput(data: bytes) -> None:
    """Fuzzer entry point (see the module docstring for the input layout)."""
    run_framed(check, data)


TOKENS = [b"\n", b"\r", b"\r\n", b"\n\n", b"data:", b"data: ", b"event: ", b"id: ", b"retry: 5",
          b": ", b"\x00", b"\xef\xbb\xbf", b"\xc3", b"\xe2\x98", b"\xff"]  # fmt: skip


def mutate(rng: random.Random, data: bytes, corpus: Sequence[bytes]) -> bytes:
    """A random edit of ``data``: flip a bit, insert a token, delete, duplicate, splice, cut."""
    return mutate_bytes(rng, data, corpus, TOKENS)


TARGET = Target("sse", __doc__, TestOneInput, seeds, mutate)
fallback = TARGET.fallback

if __name__ == "__main__":  # pragma: no cover
    sys.exit(TARGET.main(sys.argv))
