"""The protocols every transport implements: what the model client needs from one."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol

from .._codecs.http import Headers, HttpRequest, HttpResponse, Timeouts

__all__ = ["ResponseStream", "Transport"]


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
