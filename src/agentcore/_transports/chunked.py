"""The chunked transfer coding of a response body, decoded without an event per chunk.

Theory of operation
-------------------
Streaming servers often send one HTTP chunk per few characters of text. h11 turns every chunk
into a ``Data`` event, and at one event per chunk its per-event cost is more than the rest of
the client spends on the reply. :class:`ChunkedBody` is a small sans-IO state machine that
decodes the chunk framing of the bytes it is fed in one pass (``bytes.find`` and slices) and
returns the body bytes they carry, one ``bytes`` value per call.

States: reading a chunk-size line; inside a chunk (``_left`` data bytes to go); after a
chunk's data (``_crlf`` bytes of its ``CRLF`` still to check). A partial size line waits in
``_pending`` for the next call.

It decodes the chunks and nothing else. When the *last-chunk* line (size zero) arrives it
stops: :attr:`ended` becomes true and :attr:`rest` holds that line and every byte after it.
The transport hands ``rest`` to h11, whose chunked reader is still at the start of a chunk
(it has seen none of the body), so h11 checks the last-chunk line again, parses the trailer
section and ends the message exactly as it would have; what follows the message stays in h11's
buffer as before.

The rules are h11's (0.16), so a response is accepted or refused the same way whichever
decodes it (``fuzz/fuzz_chunked.py`` checks this against h11 on arbitrary input): a size line
ends at the first ``CRLF`` and is 1 to 20 hex digits, optionally ``;`` and an extension without
``LF``, then optional spaces or tabs; every chunk's data is followed by exactly ``CRLF``; a
partial size line longer than 16 KiB (h11's ``max_incomplete_event_size``) is refused.
"""

from __future__ import annotations

import re
from typing import Final

from .._core.errors import TransportError

__all__ = ["ChunkedBody"]

_SIZE_LINE: Final = re.compile(rb"([0-9A-Fa-f]{1,20})(?:;[^\n]*)?[ \t]*")
_MAX_PENDING: Final = 16 * 1024
_CRLF: Final = b"\r\n"


def _malformed(message: str) -> TransportError:
    return TransportError("protocol", f"malformed response: {message}", response_started=True)


class ChunkedBody:
    """Decodes a chunked body up to its last chunk (see the module docstring)."""

    __slots__ = ("_crlf", "_left", "_pending", "ended", "rest")

    def __init__(self) -> None:
        self._left = 0
        self._crlf = 0
        self._pending = b""
        self.ended = False
        """Whether the last-chunk line has arrived (then nothing more may be fed)."""
        self.rest = b""
        """Once :attr:`ended`: the last-chunk line and everything fed after it."""

    def feed(self, data: bytes) -> bytes:
        """Decode ``data``, the next bytes of the body; return the body bytes it completes.

        Raises:
            TransportError: (``"protocol"``) the framing is malformed.
        """
        if self._pending:
            data = self._pending + data
            self._pending = b""
        size = len(data)
        pos = 0
        out: list[bytes] = []
        while pos < size:
            left = self._left
            if left:
                end = pos + left
                if end >= size:
                    out.append(data[pos:] if pos else data)
                    self._left = end - size
                    if end == size:
                        self._crlf = 2
                    break
                out.append(data[pos:end])
                self._left = 0
                self._crlf = 2
                pos = end
                continue
            crlf = self._crlf
            if crlf:
                got = data[pos : pos + crlf]
                expected = _CRLF[2 - crlf : 2 - crlf + len(got)]
                if got != expected:
                    raise _malformed(f"chunk data not followed by CRLF ({got!r})")
                self._crlf = crlf - len(got)
                pos += len(got)
                continue
            end = data.find(_CRLF, pos)
            if end < 0:
                pending = data[pos:]
                if len(pending) > _MAX_PENDING:
                    raise _malformed("chunk size line too long")
                self._pending = pending
                break
            match = _SIZE_LINE.fullmatch(data, pos, end)
            if match is None:
                raise _malformed(f"illegal chunk size line {data[pos : end + 2]!r}")
            chunk = int(match.group(1), 16)
            if chunk == 0:
                self.ended = True
                self.rest = data[pos:]
                break
            self._left = chunk
            pos = end + 2
        return b"".join(out) if len(out) != 1 else out[0]
