"""The protocols every transport implements: what the model client needs from one."""

from __future__ import annotations

import re
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from .._codecs.http import Headers, HttpRequest, HttpResponse, Timeouts

__all__ = ["BAD_HEADER_VALUE", "HEADER_NAME", "ResponseStream", "Transport", "refusal"]

HEADER_NAME = re.compile(r"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
"""An HTTP token: what header names and methods are made of (RFC 9110)."""
BAD_HEADER_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
"""Characters no header value may carry (controls but the tab): a request holding one is
refused before any byte is written, whatever the transport."""


def refusal(request: HttpRequest) -> str | None:
    """Why ``request`` cannot be written as it is, or ``None`` if it can.

    Transports refuse such a request with ``TransportError(TransportErrorKind.REFUSED)``
    rather than letting an HTTP library write a malformed message, or send it truncated.
    """
    if HEADER_NAME.fullmatch(request.method) is None:
        return f"invalid HTTP method {request.method!r}"
    for name, value in request.headers:
        if HEADER_NAME.fullmatch(name) is None:
            return f"invalid header name {name!r}"
        if BAD_HEADER_VALUE.search(value) is not None:
            return f"invalid character in header {name!r}"
        try:
            value.encode("latin-1")
        except UnicodeEncodeError:
            return f"header {name!r} is not latin-1"
    return None


class ResponseStream(Protocol):
    """A response whose body is read piece by piece."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Headers: ...

    async def receive(self) -> bytes:
        """The next body chunk; ``b""`` once the body is complete.

        Raises:
            TransportError: the connection failed or the body was truncated.
        """
        ...


class Transport(Protocol):
    """Moves :class:`HttpRequest` values to one origin and brings responses back.

    Implementations raise only :class:`~agentcore.wire.TransportError`. They must be safe to use
    from many trio tasks at once; the driver bounds how many exchanges run concurrently.
    """

    async def send(self, request: HttpRequest, timeouts: Timeouts) -> HttpResponse:
        """Perform the exchange and read the whole body."""
        ...

    def open_stream(
        self, request: HttpRequest, timeouts: Timeouts
    ) -> AbstractAsyncContextManager[ResponseStream]:
        """Perform the exchange and hand the response over as it arrives.

        Leaving the context early (or being cancelled) discards the connection's remaining
        body, closing the connection if it cannot be reused.
        """
        ...

    async def aclose(self) -> None:
        """Close every connection. The transport is unusable afterwards."""
        ...
