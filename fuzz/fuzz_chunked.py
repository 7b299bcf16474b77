"""Fuzz target for the lean transport's chunked-body decoder (agentcore._transports.chunked),
differentially against h11.

Invariant checked on every input: a chunked response body fed to the lean transport's path
(``ChunkedBody`` up to the last chunk, then h11 for the last-chunk line and the trailer) and
the same bytes fed to h11 alone give the same outcome: the same body bytes, the same end of
message with the same trailer, or both a refusal (``TransportError`` or ``h11.ProtocolError``;
nothing else may escape). Both are fed the same pieces, whole, and (for short bodies) byte by
byte.

Input layout: the first byte ``k`` (mod 16) is the number of split bytes that follow; each of
those is the length of one piece; the rest of the input is the body after the response head.

With atheris installed (``pip install atheris``)::

    python fuzz/fuzz_chunked.py -atheris_runs=100000 [corpus_dir]

Without it the same command runs a bounded mutation loop over built-in seed bodies
(``--iterations`` and ``--seconds`` bound it; ``--write-seeds DIR`` writes the seeds as a
starting corpus). ``TestOneInput`` and ``check`` are importable: the test suite runs this very
target under Hypothesis (tests/fuzz/test_chunked.py).
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import h11

from agentcore._transports.chunked import ChunkedBody
from agentcore.wire import TransportError

if (_HERE := str(Path(__file__).resolve().parent)) not in sys.path:  # when loaded by path
    sys.path.insert(0, _HERE)  # for _harness.py
from _harness import BYTEWISE_LIMIT, Target, mutate_bytes, run_framed

# ("body", bytes, ended, trailer) or ("refused",)
Outcome = tuple[object, ...]

_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def _after_head() -> h11.Connection:
    """An h11 client that sent a request and read a chunked response head, as the transport's
    connection is when the body starts."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="POST", target="/", headers=[("host", "x")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(_HEAD)
    if type(conn.next_event()) is not h11.Response:
        raise AssertionError("the stand-in head did not parse")
    return conn


def _split(body: bytes, pieces: Sequence[int]) -> Iterator[bytes]:
    """``body`` in the given pieces, then the rest; empty pieces are left out (to h11, and to
    the transport, no bytes means the end of the connection)."""
    pos = 0
    for size in (*pieces, len(body)):
        if piece := body[pos : pos + size]:
            yield piece
        pos += size


def _drain(conn: h11.Connection, out: bytearray) -> list[tuple[bytes, bytes]] | None:
    """Collect h11's events; the trailer once the message ended, else ``None``."""
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            return None
        if type(event) is h11.Data:
            out += event.data
        elif type(event) is h11.EndOfMessage:
            return [(bytes(n), bytes(v)) for n, v in event.headers]
        else:
            raise AssertionError(f"unexpected {event!r}")


def _h11_alone(body: bytes, pieces: Sequence[int]) -> Outcome:
    conn = _after_head()
    out = bytearray()
    try:
        for piece in _split(body, pieces):
            conn.receive_data(piece)
            trailer = _drain(conn, out)
            if trailer is not None:
                return ("body", bytes(out), True, trailer)
    except h11.ProtocolError:
        return ("refused",)
    return ("body", bytes(out), False, [])


def _lean(body: bytes, pieces: Sequence[int]) -> Outcome:
    conn = _after_head()
    decoder = ChunkedBody()
    out = bytearray()
    try:
        for piece in _split(body, pieces):
            after = piece
            if not decoder.ended:
                out += decoder.feed(piece)
                if not decoder.ended:
                    continue
                after = decoder.rest
            conn.receive_data(after)
            trailer = _drain(conn, out)
            if trailer is not None:
                return ("body", bytes(out), True, trailer)
    except (TransportError, h11.ProtocolError):
        return ("refused",)
    return ("body", bytes(out), False, [])


def check(body: bytes, pieces: Sequence[int]) -> None:
    """Raise ``AssertionError`` if the lean path and h11 disagree on ``body`` fed whole, in
    ``pieces``, or byte by byte. Any other exception escaping from here is a bug."""
    splits: list[Sequence[int]] = [(), pieces]
    if len(body) <= BYTEWISE_LIMIT:
        splits.append([1] * len(body))
    for split in splits:
        lean, alone = _lean(body, split), _h11_alone(body, split)
        if lean != alone:
            raise AssertionError(f"split {list(split)}: lean gave {lean!r}, h11 gave {alone!r}")


def TestOneInput(data: bytes) -> None:
    """Fuzzer entry point (see the module docstring for the input layout)."""
    run_framed(check, data)


def seeds() -> list[bytes]:
    """Bodies covering every rule of the chunked coding, to start mutating from."""
    return [
        b"5\r\nhello\r\n0\r\n\r\n",
        b"b\r\ndata: one\n\n\r\nB\r\ndata: two\n\n\r\n0\r\n\r\n",
        b"3;name=value\r\nabc\r\n00 \t\r\nx-sum: 12\r\nx-other:  a b \r\n\r\nNEXT",
        b"1\r\na\r\n1\r\nb\r\n1\r\nc\r\n" * 4 + b"0\r\n\r\n",
        b"4\r\nwxyz\r\n0\r\nx-sum: 1\n\n",
        b"3\r\nabcXY0\r\n\r\n",
        b"zz\r\nabc\r\n0\r\n\r\n",
        b"000000000000000000004\r\nabcd\r\n0;;\r\r\n\r\n",
        b"2\r\nab\r\n0\r\n bad: fold\r\n\r\n",
    ]


TOKENS = [b"\r\n", b"\r", b"\n", b"0\r\n\r\n", b";ext", b" ", b"\t", b"1", b"f", b"FF",
          b"x-t: v\r\n", b":", b"\x00"]  # fmt: skip


def mutate(rng: random.Random, data: bytes, corpus: Sequence[bytes]) -> bytes:
    """A random edit of ``data``: flip a bit, insert a token, delete, duplicate, splice, cut."""
    return mutate_bytes(rng, data, corpus, TOKENS)


TARGET = Target("chunked", __doc__, TestOneInput, seeds, mutate)
fallback = TARGET.fallback

if __name__ == "__main__":  # pragma: no cover
    sys.exit(TARGET.main(sys.argv))
