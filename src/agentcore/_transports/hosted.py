"""The :class:`~agentcore._transports.protocol.Transport` on ``httpx.AsyncClient``, for hosted APIs.

httpx brings what the lean transport leaves out (proxies from the environment, HTTP/2 when
installed, a connection pool serving several origins). It runs under trio through anyio. Its
per-request CPU cost grows with the pool size, so self-hosted backends use the lean transport
by default.

Every httpx, anyio, trio or ssl exception is mapped to :class:`~agentcore.wire.TransportError` by
:func:`_mapped_errors`; ``response_started`` is ``True`` once the response head arrived.
"""

from __future__ import annotations

import functools
import math
import ssl
from collections.abc import AsyncGenerator, Iterator
from contextlib import contextmanager, suppress
from typing import cast

import attrs
import httpx
import trio

from .._codecs.http import Headers, HttpRequest, HttpResponse, Timeouts
from .._codecs.reply_limit import DEFAULT_MAX_REPLY_BYTES, check_max_reply_bytes, reply_too_large
from .._core.errors import TransportError, TransportErrorKind
from .protocol import ResponseStream, refusal

__all__ = ["HttpxTransport", "HttpxTransportStatistics"]

# Closing an httpx response is quick (no draining), but it must happen even when the caller
# is being cancelled; this bounds the shielded close in case the peer misbehaves.
_CLOSE_GRACE = 5.0
_CLOSE_ERRORS = (httpx.HTTPError, OSError, trio.BrokenResourceError, trio.ClosedResourceError)


@attrs.frozen
class HttpxTransportStatistics:
    """Counters of an :class:`HttpxTransport` (the connection pool itself belongs to httpx)."""

    requests: int
    """Exchanges started."""
    streams_open: int
    """Streamed responses currently held by callers."""


@functools.cache
def _ssl_context(verify: bool) -> ssl.SSLContext:
    # Loading the CA bundle takes a noticeable fraction of a second; do it once per process.
    return httpx.create_ssl_context(verify=verify)


def _kind_of(exc: BaseException, response_started: bool) -> TransportErrorKind:
    # A request httpx will not write (h11 refuses a header value, the URL is unusable) can
    # never succeed: say so, so that it is not retried.
    if isinstance(exc, httpx.LocalProtocolError | httpx.InvalidURL | httpx.UnsupportedProtocol):
        return TransportErrorKind.REFUSED
    if isinstance(exc, httpx.TimeoutException | trio.TooSlowError):
        return TransportErrorKind.TIMEOUT
    if isinstance(exc, httpx.ConnectError | httpx.ProxyError):
        return TransportErrorKind.CONNECT
    if isinstance(exc, httpx.WriteError):
        return TransportErrorKind.WRITE
    if isinstance(exc, httpx.RemoteProtocolError):
        # httpcore reports a peer that hung up (before the head or inside the body) as a
        # protocol error; its message is the only place that says so.
        text = str(exc).lower()
        if "disconnected" in text or "closed" in text:
            return TransportErrorKind.CLOSED
        return TransportErrorKind.PROTOCOL
    if isinstance(exc, httpx.ProtocolError | httpx.DecodingError | httpx.TooManyRedirects):
        return TransportErrorKind.PROTOCOL
    if isinstance(exc, httpx.StreamError):
        return TransportErrorKind.CLOSED
    return TransportErrorKind.READ if response_started else TransportErrorKind.CONNECT


@contextmanager
def _mapped_errors(stage: _Stage) -> Iterator[None]:
    """Turn every failure of the exchange into :class:`TransportError`.

    ``trio.Cancelled`` and other ``BaseException`` that are not errors pass through.
    """
    try:
        yield
    except TransportError:
        raise
    except UnicodeEncodeError as exc:  # a header value httpx cannot encode
        raise TransportError(TransportErrorKind.REFUSED, str(exc)) from exc
    except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, OSError) as exc:
        started = stage.response_started
        kind = _kind_of(exc, started)
        # A malformed response is made of response bytes, even when its head is incomplete.
        started = started or (
            kind is TransportErrorKind.PROTOCOL and isinstance(exc, httpx.RemoteProtocolError)
        )
        raise TransportError(
            kind, str(exc) or type(exc).__name__, response_started=started
        ) from exc
    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        started = stage.response_started
        kind = TransportErrorKind.CLOSED if started else TransportErrorKind.CONNECT
        raise TransportError(
            kind, str(exc) or type(exc).__name__, response_started=started
        ) from exc


@attrs.define(slots=True)
class _Stage:
    response_started: bool = False


def _deadline(timeouts: Timeouts) -> float:
    return math.inf if timeouts.total is None else trio.current_time() + timeouts.total


def _total_timeout(stage: _Stage) -> TransportError:
    return TransportError(
        "timeout", "total time limit exceeded", response_started=stage.response_started
    )


class _BodyStream(httpx.AsyncByteStream):
    """A request body sent as one chunk.

    httpx's own byte stream iterates with an async generator; when an exchange is cancelled
    while the body is being written, that generator is left unfinished and trio reports it when
    it is garbage collected. A plain iterator object has nothing to finish.
    """

    def __init__(self, body: bytes) -> None:
        self._body = body

    def __aiter__(self) -> _BodyChunks:
        return _BodyChunks(self._body)


class _BodyChunks:
    __slots__ = ("_body",)

    def __init__(self, body: bytes) -> None:
        self._body: bytes | None = body or None

    def __aiter__(self) -> _BodyChunks:
        return self

    async def __anext__(self) -> bytes:
        body = self._body
        if body is None:
            raise StopAsyncIteration
        self._body = None
        return body


class _HttpxResponseStream:
    """A streamed httpx response; :meth:`receive` returns body chunks, then ``b""``."""

    __slots__ = ("_cap", "_chunks", "_deadline", "_done", "_left", "_response", "_stage")

    def __init__(
        self, response: httpx.Response, deadline: float, stage: _Stage, cap: int | None
    ) -> None:
        self._response = response
        self._cap = cap
        self._left = math.inf if cap is None else cap
        # aiter_bytes is an async generator; it is closed explicitly when the caller leaves.
        self._chunks = cast(AsyncGenerator[bytes, None], response.aiter_bytes())
        self._deadline = deadline
        self._stage = stage
        self._done = False

    @property
    def status(self) -> int:
        return self._response.status_code

    @property
    def headers(self) -> Headers:
        return tuple(
            (k.decode("latin-1"), v.decode("latin-1")) for k, v in self._response.headers.raw
        )

    async def receive(self) -> bytes:
        if self._done:
            await trio.lowlevel.checkpoint()
            return b""
        with trio.CancelScope(deadline=self._deadline) as scope, _mapped_errors(self._stage):
            while True:
                try:
                    chunk = await self._chunks.__anext__()
                except StopAsyncIteration:
                    self._done = True
                    return b""
                if chunk:
                    self._left -= len(chunk)
                    if self._left < 0:
                        assert self._cap is not None
                        raise reply_too_large(self._cap, self._cap - int(self._left))
                    return chunk
        if scope.cancelled_caught:
            raise _total_timeout(self._stage)
        raise TransportError("read", "body read interrupted", response_started=True)


class _HttpxStreamContext:
    __slots__ = ("_request", "_response", "_stream", "_timeouts", "_transport")

    def __init__(self, transport: HttpxTransport, request: HttpRequest, timeouts: Timeouts):
        self._transport = transport
        self._request = request
        self._timeouts = timeouts
        self._response: httpx.Response | None = None
        self._stream: _HttpxResponseStream | None = None

    async def __aenter__(self) -> ResponseStream:
        stage = _Stage()
        deadline = _deadline(self._timeouts)
        transport = self._transport
        response = await transport._open(self._request, self._timeouts, deadline, stage)
        self._response = response
        transport._streams_open += 1
        self._stream = _HttpxResponseStream(response, deadline, stage, transport._max_reply)
        try:
            transport._check_announced(response)
        except TransportError:
            await self.__aexit__(None, None, None)
            raise
        return self._stream

    async def __aexit__(self, *exc_info: object) -> None:
        response = self._response
        if response is None:
            return
        self._response = None
        self._transport._streams_open -= 1
        chunks = self._stream._chunks if self._stream is not None else None
        self._stream = None
        await _close_response(response, chunks)


async def _close_response(
    response: httpx.Response, chunks: AsyncGenerator[bytes, None] | None = None
) -> None:
    # Shielded so that a cancelled caller still hands the connection back (or closes it);
    # close failures mean the connection is gone already, which is all we wanted.
    with (
        trio.CancelScope(shield=True, deadline=trio.current_time() + _CLOSE_GRACE),
        suppress(*_CLOSE_ERRORS),
    ):
        await response.aclose()
        if chunks is not None:
            await _finish_body_iterator(chunks)


async def _finish_body_iterator(chunks: AsyncGenerator[bytes, None]) -> None:
    """End httpx's body iterator after its response was closed.

    The iterator is a chain of nested async generators; closing the outer one leaves the inner
    ones suspended until garbage collection, where trio reports them as never finished. With the
    connection closed, the next step fails at the bottom of the chain and the failure unwinds
    every level, so each generator ends properly.
    """
    with suppress(*_CLOSE_ERRORS, httpx.StreamError, StopAsyncIteration):
        while True:
            await chunks.__anext__()
    await chunks.aclose()


async def _read_capped(chunks: AsyncGenerator[bytes, None], cap: int) -> bytes:
    """The whole body, failing once it passes ``cap`` bytes (the caller closes ``chunks``)."""
    pieces: list[bytes] = []
    left = cap
    async for chunk in chunks:
        left -= len(chunk)
        if left < 0:
            raise reply_too_large(cap, cap - left)
        pieces.append(chunk)
    return b"".join(pieces)


class HttpxTransport:
    """A :class:`~agentcore._transports.protocol.Transport` backed by one shared
    ``httpx.AsyncClient``.

    Args:
        max_connections: pool size (and keep-alive pool size); match the driver's
            concurrency bound so no request waits for a connection.
        verify: verify TLS certificates: ``True`` with the CA bundle httpx uses, ``False``
            not at all, or an ``ssl.SSLContext`` to use as it is (a private CA, client
            certificates).
        client: use this client instead of building one (tests, custom proxies or auth). The
            transport closes it in :meth:`aclose`.
        max_reply_bytes: the cap on one response body (see :mod:`agentcore._codecs.reply_limit`);
            ``None`` for no cap.
    """

    def __init__(
        self,
        *,
        max_connections: int,
        verify: bool | ssl.SSLContext = True,
        client: httpx.AsyncClient | None = None,
        max_reply_bytes: int | None = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        self._max_reply = check_max_reply_bytes(max_reply_bytes)
        if client is None:
            limits = httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            )
            client = httpx.AsyncClient(
                limits=limits,
                verify=verify if isinstance(verify, ssl.SSLContext) else _ssl_context(verify),
                follow_redirects=False,
            )
        self._client = client
        self._timeouts: dict[Timeouts, httpx.Timeout] = {}
        self._requests = 0
        self._streams_open = 0
        self._closed = False

    def _httpx_timeout(self, timeouts: Timeouts) -> httpx.Timeout:
        found = self._timeouts.get(timeouts)
        if found is None:
            # Writes are bounded like reads (each piece of the exchange); waiting for a pooled
            # connection is bounded like opening one.
            found = httpx.Timeout(
                connect=timeouts.connect,
                read=timeouts.read,
                write=timeouts.read,
                pool=timeouts.connect,
            )
            if len(self._timeouts) < 64:
                self._timeouts[timeouts] = found
        return found

    async def _open(
        self, request: HttpRequest, timeouts: Timeouts, deadline: float, stage: _Stage
    ) -> httpx.Response:
        """Send ``request`` and return the response with its head read and body unread."""
        if self._closed:
            raise TransportError("closed", "the transport is closed")
        refused = refusal(request)
        if refused is not None:
            raise TransportError(TransportErrorKind.REFUSED, refused)
        self._requests += 1
        with trio.CancelScope(deadline=deadline) as scope, _mapped_errors(stage):
            built = self._client.build_request(
                request.method,
                request.url,
                headers=request.headers,
                content=request.body,
                timeout=self._httpx_timeout(timeouts),
            )
            built.stream = _BodyStream(request.body)
            response = await self._client.send(built, stream=True)
            stage.response_started = True
            return response
        if scope.cancelled_caught:
            raise _total_timeout(stage)
        raise TransportError("read", "request interrupted")

    async def send(self, request: HttpRequest, timeouts: Timeouts) -> HttpResponse:
        """Perform the exchange and read the whole body.

        Raises:
            TransportError: the exchange failed or timed out.
        """
        stage = _Stage()
        deadline = _deadline(timeouts)
        response = await self._open(request, timeouts, deadline, stage)
        chunks: AsyncGenerator[bytes, None] | None = None
        try:
            self._check_announced(response)
            with trio.CancelScope(deadline=deadline) as scope, _mapped_errors(stage):
                if self._max_reply is None:
                    body = await response.aread()
                else:
                    chunks = cast(AsyncGenerator[bytes, None], response.aiter_bytes())
                    body = await _read_capped(chunks, self._max_reply)
                return HttpResponse(
                    status=response.status_code,
                    headers=[
                        (k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers.raw
                    ],
                    body=body,
                )
            if scope.cancelled_caught:
                raise _total_timeout(stage)
            raise TransportError("read", "body read interrupted", response_started=True)
        finally:
            await _close_response(response, chunks)

    def _check_announced(self, response: httpx.Response) -> None:
        cap = self._max_reply
        length = response.headers.get("content-length")
        if cap is not None and length is not None and length.isdigit() and int(length) > cap:
            raise reply_too_large(cap, int(length), announced=True)

    def open_stream(self, request: HttpRequest, timeouts: Timeouts) -> _HttpxStreamContext:
        """Perform the exchange; the context yields the response as its body arrives.

        Raises:
            TransportError: (on entry or from ``receive``) the exchange failed or timed out.
        """
        return _HttpxStreamContext(self, request, timeouts)

    def statistics(self) -> HttpxTransportStatistics:
        """Request counters of this transport."""
        return HttpxTransportStatistics(requests=self._requests, streams_open=self._streams_open)

    async def aclose(self) -> None:
        """Close the client and every pooled connection."""
        self._closed = True
        with (
            trio.CancelScope(shield=True, deadline=trio.current_time() + _CLOSE_GRACE),
            suppress(*_CLOSE_ERRORS),
        ):
            await self._client.aclose()
