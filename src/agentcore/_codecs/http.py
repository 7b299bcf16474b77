"""HTTP values shared by the codecs (which build and parse them) and the transports (which move
them). Nothing here performs I/O; the protocols the transports implement are in
:mod:`agentcore._transports.protocol`.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from .._core.validators import optional_number_at_least

__all__ = [
    "SECRET_HEADERS",
    "Headers",
    "HttpRequest",
    "HttpResponse",
    "Timeouts",
    "header",
]

Headers = tuple[tuple[str, str], ...]
"""Header pairs, names lower-case, in order."""

SECRET_HEADERS = frozenset(
    {"authorization", "x-api-key", "api-key", "proxy-authorization", "x-amz-security-token"}
)
"""Header names whose values are never shown in a repr."""


def _lower_headers(pairs: Iterable[tuple[str, str]]) -> Headers:
    return tuple((name.lower(), value) for name, value in pairs)


def _redacted(headers: Headers) -> str:
    shown = [(n, "<redacted>" if n in SECRET_HEADERS else v) for n, v in headers]
    return repr(shown)


def header(headers: Headers, name: str) -> str | None:
    """The first value of header ``name`` (lower-case), or ``None``."""
    for n, v in headers:
        if n == name:
            return v
    return None


@attrs.frozen(repr=False)
class HttpRequest:
    """One HTTP request, fully formed by a codec. Secrets never show in its repr."""

    method: str
    url: str
    """Absolute URL: scheme, host, optional port, path and query."""
    headers: Headers = attrs.field(default=(), converter=_lower_headers)
    body: bytes = b""
    stream: bool = False
    """``True`` when the response is a server-sent event stream to read incrementally."""

    def __repr__(self) -> str:
        return (
            f"HttpRequest(method={self.method!r}, url={self.url!r}, "
            f"headers={_redacted(self.headers)}, body=<{len(self.body)} bytes>, "
            f"stream={self.stream!r})"
        )


@attrs.frozen
class HttpResponse:
    """A complete HTTP response."""

    status: int
    headers: Headers = attrs.field(default=(), converter=_lower_headers)
    body: bytes = b""


_seconds = optional_number_at_least(0.0, strictly=True)


@attrs.frozen
class Timeouts:
    """Transport time limits in seconds (``None`` = no limit).

    ``connect`` bounds opening a connection (TCP and TLS), ``read`` bounds the wait for each
    piece of the response (headers or the next body chunk), ``total`` bounds the whole exchange.

    Raises:
        ConfigError: a limit that is neither ``None`` nor a positive number.
    """

    connect: float | None = attrs.field(default=10.0, validator=_seconds)
    read: float | None = attrs.field(default=300.0, validator=_seconds)
    total: float | None = attrs.field(default=None, validator=_seconds)
