"""The cap on the bytes of one reply body, shared by both transports and the backend options.

A reply is read into memory (whole, or piece by piece into the stream decoder's buffers), so a
misbehaving server or a runaway generation could make one exchange hold any amount of memory.
Both transports count the body bytes of every exchange and fail it with
``TransportError("too_large")`` once the count passes the cap (or at once, when the announced
``content-length`` already does); the connection is closed, so the rest is never read. The
model client turns that failure into a final ``ErrorKind.REPLY_TOO_LARGE``.

The default, 16 MiB, is hundreds of times a long chat completion (100,000 tokens of text are
about 0.5 MB, and a streamed reply's framing adds a few times that) and small enough that
hundreds of slots cannot exhaust a machine's memory. ``None`` disables the cap.
"""

from __future__ import annotations

from .._core.errors import ConfigError, TransportError

__all__ = ["DEFAULT_MAX_REPLY_BYTES", "check_max_reply_bytes", "reply_too_large"]

DEFAULT_MAX_REPLY_BYTES = 16 * 1024 * 1024


def check_max_reply_bytes(value: object) -> int | None:
    """``value`` as a reply cap.

    Raises:
        ConfigError: not ``None`` and not a positive integer.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"max_reply_bytes must be a positive integer or None, got {value!r}")
    return value


def reply_too_large(limit: int, seen: int, *, announced: bool = False) -> TransportError:
    """The failure of an exchange whose body passed ``limit`` bytes."""
    how = "announces" if announced else "passed"
    return TransportError(
        "too_large",
        f"the reply body {how} {seen} bytes, more than max_reply_bytes={limit}",
        response_started=True,
    )
