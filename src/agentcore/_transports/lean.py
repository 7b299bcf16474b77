"""A lean HTTP/1.1 :class:`~agentcore._transports.protocol.Transport` on h11 and trio sockets.

This module holds the socket side; the bytes of requests and the parsing of responses are the
sans-IO :mod:`.http11` (:class:`~.http11.RequestEncoder`, :class:`~.http11.ResponseReader`).

Theory of operation
-------------------
The transport talks to exactly one origin (scheme, host, port). The driver bounds how many
model calls run at once (its inference slots), so the transport never queues: every exchange
takes a connection of its own, and a connection serves one exchange at a time.

Idle connections sit on a free list used as a stack. An exchange pops the most recently used
connection (the one least likely to have been timed out by the server) or, when the list is
empty, opens a new one. Nothing ever scans the list: there is no pool search and no polling of
idle sockets, so the cost of a request does not depend on how many connections exist.

A connection goes back on the list only after a clean keep-alive cycle: the request was sent
whole, the response was read to its end, and h11 reports both sides ``DONE`` (a server that
answered ``Connection: close`` or framed its body by closing leaves its side ``MUST_CLOSE``).
Anything else (an error, a timeout, a cancellation, a caller leaving a stream before its end)
closes the socket at once, synchronously, so an unknown state is never reused and no socket
outlives its exchange. The free list holds at most ``max_connections`` entries.

Servers close kept-alive connections whenever they like (llama-server does right after every
streamed reply although it announced keep-alive, most servers after an idle timeout). Before an
idle connection is reused, a zero-timeout readiness check looks at its socket: an idle HTTP/1.1
connection has nothing to read, so a readable one has been closed by the peer (or holds bytes
nobody asked for) and is closed instead of written to. The request is then written once, on a
live connection. The check cannot see a close that is still in flight; an exchange that fails
on a *reused* connection before any byte of the response arrived is therefore still retried
once on a fresh connection. Once a response byte arrived, the server has seen the request and
nothing is retried.

A server may answer before it has read the whole request body and close the connection (a
``413`` for a body too large; RFC 9112, section 9.5). The client's write then fails, while the
answer already sits in the socket's receive buffer: when a write fails, the response is read
all the same, and the write's failure is reported only if no response head arrives. Such a
connection is never reused (h11 is told the send failed). Over TLS the answer is lost: trio's
``SSLStream`` is broken after a failed send.

One event pump reads every response: the exchange feeds the connection's
:class:`~.http11.ResponseReader` with what each read returned and takes its events (head,
body bytes, end, or "need data") until it has what it came for: the head (:meth:`start`), the
body (``send``), whatever body bytes are there (``open_stream``), or, without waiting, the end
of a body a streaming caller left early (:meth:`_Exchange.finish`).

Time limits come from :class:`~agentcore._codecs.http.Timeouts`. One trio cancel scope covers an
exchange; before every I/O call its deadline moves to the earlier of the ``total`` deadline and
now + the limit of that step (``connect`` for opening the connection and the TLS handshake,
``read`` for the request write and every wait for response bytes). A caller's own cancellation
passes through untouched; the scope only catches its own deadline.

Every failure leaves as :class:`~agentcore.wire.TransportError`; ``response_started`` tells whether
any response byte had arrived.
"""

from __future__ import annotations

import contextlib
import functools
import math
import select
import socket
import ssl
from typing import Any, cast

import attrs
import h11
import trio

from .._codecs.http import Headers, HttpRequest, HttpResponse, Timeouts
from .._codecs.reply_limit import DEFAULT_MAX_REPLY_BYTES, check_max_reply_bytes
from .._core.errors import ConfigError, TransportError
from .http11 import (
    END,
    NEED_DATA,
    EncodedRequest,
    Origin,
    RequestEncoder,
    ResponseReader,
    decode_headers,
)

__all__ = ["LeanTransport", "LeanTransportStatistics", "Origin"]

# One receive_some call takes whatever the kernel holds, up to this much. A chat completion
# fits in one read; a streamed body arrives as the server flushes it.
_READ_SIZE = 65536

# Failure kinds that, on a reused connection and before any response byte, mean the server
# had dropped the connection while it sat idle.
_STALE_KINDS = frozenset({"closed", "read", "write"})

# poll() has no descriptor limit; select() (on platforms without poll) does.
_POLL = getattr(select, "poll", None)

_DONE = h11.DONE
_IO_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


@attrs.frozen
class LeanTransportStatistics:
    """Connection counters of a :class:`LeanTransport`."""

    connections_open: int
    """Sockets currently open (idle plus in use)."""
    connections_idle: int
    """Sockets on the free list."""
    connections_opened: int
    """Sockets opened since the transport was created."""
    requests: int
    """Exchanges started."""
    retries: int
    """Exchanges retried on a fresh connection after a reused one turned out dead."""
    closed_by_peer: int = 0
    """Idle connections found closed by the server before reuse (and not written to)."""


class _Connection:
    """One socket and the h11 state machine of its current exchange.

    Plain connections do their I/O on the non-blocking stdlib socket with trio's
    ``wait_readable``/``wait_writable`` (what ``trio.SocketStream`` does, minus its layers);
    TLS connections go through ``trio.SSLStream``.
    """

    __slots__ = ("after_stream", "h11", "sock", "tls")

    def __init__(
        self, sock: socket.socket | trio.socket.SocketType, tls: trio.SSLStream[Any] | None
    ):
        self.sock = sock
        """Plain: the stdlib socket used for I/O. TLS: the trio socket below the stream."""
        self.tls = tls
        self.h11 = h11.Connection(h11.CLIENT)
        self.after_stream = False
        """Its last exchange was a streamed one (see ``LeanTransport.release``)."""

    def send_now(self, data: bytes) -> int:
        """Write what the kernel takes without waiting; how many bytes that was.

        TLS connections write nothing here (their records go through :meth:`send_rest`).
        """
        if self.tls is not None:
            return 0
        try:
            return cast(socket.socket, self.sock).send(data)
        except BlockingIOError:
            return 0

    async def send_rest(self, data: bytes, sent: int) -> None:
        """Write ``data[sent:]``, waiting for the socket as needed."""
        if self.tls is not None:
            await self.tls.send_all(data[sent:] if sent else data)
            return
        sock = cast(socket.socket, self.sock)
        view = memoryview(data)
        while sent < len(data):
            await trio.lowlevel.wait_writable(sock)
            with contextlib.suppress(BlockingIOError):
                sent += sock.send(view[sent:])

    async def receive_some(self, wait_first: bool) -> bytes:
        """The next bytes from the peer (``b""`` at its end).

        ``wait_first`` skips the first read attempt when the data cannot be there yet (right
        after sending a request); otherwise, data read without waiting is followed by a
        checkpoint, so every call is one.
        """
        if self.tls is not None:
            return cast(bytes, await self.tls.receive_some(_READ_SIZE))
        sock = cast(socket.socket, self.sock)
        if wait_first:
            await trio.lowlevel.wait_readable(sock)
        else:
            try:
                data = sock.recv(_READ_SIZE)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(sock)
            else:
                await trio.lowlevel.checkpoint()
                return data
        while True:
            try:
                return sock.recv(_READ_SIZE)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(sock)

    def receive_now(self) -> bytes:
        """Bytes the kernel already holds, without waiting (``b""`` if none, or for TLS)."""
        if self.tls is not None:
            return b""
        try:
            return cast(socket.socket, self.sock).recv(_READ_SIZE)
        except BlockingIOError:
            return b""

    def peer_closed(self) -> bool:
        """Whether the idle socket is readable now (zero-timeout check, no read).

        Between exchanges the server has nothing to send, so readable means it closed the
        connection (EOF or a reset), or sent bytes that belong to no request; either way the
        connection must not carry another request.
        """
        fd = self.sock.fileno()
        if fd == -1:
            return True
        try:
            if _POLL is not None:
                poller = _POLL()
                poller.register(fd, select.POLLIN | select.POLLPRI)
                return bool(poller.poll(0))
            readable, _, failed = select.select([fd], [], [fd], 0)
        except (OSError, ValueError):
            return True
        return bool(readable or failed)

    def close(self) -> bool:
        """Close the socket now (no await); ``False`` if it was closed already."""
        sock = self.sock
        if sock.fileno() == -1:
            return False
        if self.tls is None:
            trio.lowlevel.notify_closing(sock)
        sock.close()
        return True


@functools.cache
def _client_ssl_context(verify: bool) -> ssl.SSLContext:
    # Loading the system CA store is slow; contexts are shared by every transport.
    context = ssl.create_default_context()
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["http/1.1"])
    return context


def _describe(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    text = str(exc) or type(exc).__name__
    if cause is not None and isinstance(exc, trio.BrokenResourceError):
        text = f"{text}: {cause or type(cause).__name__}"
    return text


class LeanTransport:
    """HTTP/1.1 to one origin, one kept-alive connection per concurrent exchange.

    Safe to use from many trio tasks at once; the number of connections follows the number of
    concurrent exchanges, which the caller bounds.

    Args:
        origin: the server; requests must carry absolute URLs on this origin.
        max_connections: how many idle connections are kept for reuse.
        verify: verify the server's TLS certificate (``https`` only): ``True`` with the
            system's CA store, ``False`` not at all, or an ``ssl.SSLContext`` to use as it is
            (a private CA, client certificates).
        max_reply_bytes: the cap on one response body (see :mod:`agentcore._codecs.reply_limit`);
            ``None`` for no cap.
        reuse_streams: keep a connection for reuse after a streamed response. Off for servers
            known to close right after every streamed reply (llama-server): their close races
            the next request, so the connection is closed by us instead.
    """

    def __init__(
        self,
        origin: Origin,
        *,
        max_connections: int,
        verify: bool | ssl.SSLContext = True,
        max_reply_bytes: int | None = DEFAULT_MAX_REPLY_BYTES,
        reuse_streams: bool = True,
    ) -> None:
        if max_connections < 1:
            raise ConfigError(f"max_connections must be at least 1, not {max_connections}")
        self.max_reply = check_max_reply_bytes(max_reply_bytes)
        """The cap on one response body (``None``: none)."""
        self._origin = origin
        self.encode = RequestEncoder(origin).encode
        """The bytes of a request to this origin."""
        self._max_idle = max_connections
        self._ssl: ssl.SSLContext | None = None
        if origin.scheme == "https":
            self._ssl = (
                verify if isinstance(verify, ssl.SSLContext) else _client_ssl_context(verify)
            )
        self._idle: list[_Connection] = []
        self._opened = 0
        self._discarded = 0
        self._requests = 0
        self._retries = 0
        self._peer_closed = 0
        self._closes_after_streams = not reuse_streams
        """Known (``reuse_streams=False``) or learned: the server closes a connection after a
        streamed reply although it announced keep-alive (llama-server does); such connections
        are then not kept for reuse."""
        self._closed = False

    @property
    def origin(self) -> Origin:
        """The server this transport talks to."""
        return self._origin

    # ---- connections (what an exchange asks of its transport) ----

    def checkout(self) -> _Connection | None:
        """Count a new exchange and hand it the most recently used idle connection that the
        server has not closed (``None``: there is none, open one with :meth:`connect`).

        Raises:
            TransportError: the transport is closed.
        """
        if self._closed:
            raise TransportError("closed", "the transport is closed")
        self._requests += 1
        idle = self._idle
        while idle:
            conn = idle.pop()
            if not conn.peer_closed():
                return conn
            self._closes_after_streams |= conn.after_stream
            self.discard(conn)
            self._peer_closed += 1
        return None

    def stale(self, conn: _Connection) -> None:
        """A reused connection failed before any response byte (the server had dropped it):
        close it; the exchange is retried once on a fresh one."""
        self._closes_after_streams |= conn.after_stream
        self.discard(conn)
        self._retries += 1

    async def connect(self, exchange: _Exchange) -> _Connection:
        """Open a connection for ``exchange`` (its ``connect`` time limit applies)."""
        exchange.arm(exchange.timeouts.connect, "connect")
        exchange.phase = "connecting"
        origin = self._origin
        try:
            tcp = await trio.open_tcp_stream(origin.host, origin.port)
        except OSError as exc:
            raise TransportError("connect", f"cannot connect to {origin}: {exc}") from exc
        if self._ssl is None:
            # Take the socket out of trio's stream (TCP_NODELAY stays set on it).
            raw = socket.socket(fileno=tcp.socket.detach())
            raw.setblocking(False)
            conn = _Connection(raw, None)
        else:
            tls = trio.SSLStream(tcp, self._ssl, server_hostname=origin.host, https_compatible=True)
            try:
                await tls.do_handshake()
            except BaseException as exc:
                tcp.socket.close()
                if isinstance(exc, trio.BrokenResourceError | OSError):
                    raise TransportError(
                        "connect", f"TLS handshake with {origin} failed: {_describe(exc)}"
                    ) from exc
                raise
            conn = _Connection(tcp.socket, tls)
        self._opened += 1
        return conn

    def discard(self, conn: _Connection) -> None:
        """Close ``conn`` now, without awaiting (safe in cleanup paths and under cancellation)."""
        if conn.close():
            self._discarded += 1

    def release(self, conn: _Connection, *, streamed: bool = False) -> None:
        """Keep ``conn`` for reuse after a clean cycle, otherwise close it.

        A connection whose reply was streamed is not kept once the server was seen closing
        such connections: the close races the next request, which would then be written
        twice (once on the dying connection, once on a fresh one).
        """
        state = conn.h11
        conn.after_stream = streamed
        if (
            state.our_state is _DONE
            and state.their_state is _DONE
            and not self._closed
            and len(self._idle) < self._max_idle
            and not (streamed and self._closes_after_streams)
        ):
            state.start_next_cycle()
            self._idle.append(conn)
        else:
            self.discard(conn)

    # ---- the Transport interface ----

    async def send(self, request: HttpRequest, timeouts: Timeouts) -> HttpResponse:
        """Perform the exchange and read the whole body.

        Raises:
            TransportError: the exchange failed or timed out.
        """
        encoded = self.encode(request)
        exchange = _Exchange(self, timeouts)
        with exchange.scope:
            try:
                head = await exchange.start(encoded)
                body = await exchange.read_body()
            except BaseException:
                exchange.abandon()
                raise
            return HttpResponse(head.status_code, decode_headers(head), body)
        raise exchange.timed_out()

    def open_stream(self, request: HttpRequest, timeouts: Timeouts) -> _LeanStreamContext:
        """Perform the exchange; the context yields the response as its body arrives.

        Leaving the context before the body ended closes the connection (unless the rest of
        the body had already been received).

        Raises:
            TransportError: (on entry or from ``receive``) the exchange failed or timed out.
        """
        return _LeanStreamContext(self, request, timeouts)

    def statistics(self) -> LeanTransportStatistics:
        """Connection and request counters."""
        return LeanTransportStatistics(
            connections_open=self._opened - self._discarded,
            connections_idle=len(self._idle),
            connections_opened=self._opened,
            requests=self._requests,
            retries=self._retries,
            closed_by_peer=self._peer_closed,
        )

    async def aclose(self) -> None:
        """Close the idle connections; connections in use close when their exchange ends.
        Later requests fail with ``TransportError("closed")``."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            self.discard(conn)
        await trio.lowlevel.checkpoint()


class _Exchange:
    """One request and its response, on at most one connection at a time.

    The owner enters :attr:`scope` around every group of calls; :meth:`arm` moves the scope's
    deadline before each I/O call. On any exception the owner calls :meth:`abandon`, and when
    the scope caught its own deadline it raises :meth:`timed_out`.
    """

    __slots__ = (
        "conn",
        "deadline",
        "limit",
        "phase",
        "reader",
        "scope",
        "streamed",
        "timeouts",
        "transport",
    )

    def __init__(self, transport: LeanTransport, timeouts: Timeouts) -> None:
        self.transport = transport
        self.timeouts = timeouts
        total = timeouts.total
        self.deadline = math.inf if total is None else trio.current_time() + total
        self.scope = trio.CancelScope(deadline=self.deadline)
        self.conn: _Connection | None = None
        self.reader: ResponseReader | None = None
        """The response on :attr:`conn` (a retry on a fresh connection gets a new one)."""
        self.streamed = False
        """The body is handed over as it arrives (``open_stream``)."""
        self.phase = "sending the request"
        self.limit = "total"

    @property
    def started(self) -> bool:
        """Whether any byte of the response arrived."""
        reader = self.reader
        return reader is not None and reader.started

    def arm(self, seconds: float | None, limit: str) -> None:
        """Bound the next I/O call by ``seconds`` (and the total deadline)."""
        deadline = self.deadline
        if seconds is not None:
            at = trio.current_time() + seconds
            if at < deadline:
                self.scope.deadline = at
                self.limit = limit
                return
        self.scope.deadline = deadline
        self.limit = "total"

    def timed_out(self) -> TransportError:
        return TransportError(
            "timeout",
            f"{self.phase} exceeded the {self.limit} time limit",
            response_started=self.started,
        )

    def abandon(self) -> None:
        """Close the connection in use, if any: its state is unknown."""
        conn = self.conn
        if conn is not None:
            self.conn = None
            self.transport.discard(conn)

    async def _write(self, conn: _Connection, data: bytes) -> None:
        try:
            # A request usually fits in the socket buffer at once; the time limit is only
            # needed when the write has to wait.
            sent = conn.send_now(data)
            if sent < len(data):
                self.arm(self.timeouts.read, "read")
                await conn.send_rest(data, sent)
        except _IO_ERRORS as exc:
            raise TransportError("write", f"sending the request failed: {_describe(exc)}") from exc

    async def fill(self, conn: _Connection, reader: ResponseReader, wait_first: bool) -> None:
        """Feed ``reader`` the next bytes from the socket (``b""`` at its end)."""
        self.arm(self.timeouts.read, "read")
        try:
            data = await conn.receive_some(wait_first)
        except _IO_ERRORS as exc:
            raise TransportError(
                "read",
                f"receiving the response failed: {_describe(exc)}",
                response_started=reader.started,
            ) from exc
        reader.feed(data)

    async def _send_and_read_head(self, conn: _Connection, encoded: EncodedRequest) -> h11.Response:
        reader = self.reader = ResponseReader(conn.h11, encoded.standin, self.transport.max_reply)
        self.phase = "sending the request"
        try:
            await self._write(conn, encoded.head)
            if encoded.body is not None:
                await self._write(conn, encoded.body)
        except TransportError as failed:  # the server may have answered early (module docstring)
            conn.h11.send_failed()
            self.phase = "waiting for the response"
            try:
                return await self._read_head(conn, reader, wait_first=False)
            except TransportError:
                raise failed from None
        self.phase = "waiting for the response"
        return await self._read_head(conn, reader, wait_first=True)

    async def _read_head(
        self, conn: _Connection, reader: ResponseReader, *, wait_first: bool
    ) -> h11.Response:
        await self.fill(conn, reader, wait_first)
        got = reader.next_event()
        while got is NEED_DATA:
            await self.fill(conn, reader, False)
            got = reader.next_event()
        assert type(got) is h11.Response  # nothing else comes before the head
        self.phase = "reading the body"
        return got

    async def start(self, encoded: EncodedRequest) -> h11.Response:
        """Send the request and read the response head, retrying once on a fresh connection
        when a reused one turns out to be dead."""
        transport = self.transport
        conn = self.conn = transport.checkout()
        if conn is not None:
            try:
                return await self._send_and_read_head(conn, encoded)
            except TransportError as exc:
                if self.started or exc.kind not in _STALE_KINDS:
                    raise
            self.conn = None
            transport.stale(conn)
        conn = self.conn = await transport.connect(self)
        return await self._send_and_read_head(conn, encoded)

    async def read_body(self) -> bytes:
        """Read the rest of the body and give the connection back."""
        return await self._read(to_end=True)

    async def read_available(self) -> bytes:
        """Every body byte that can be decoded now, reading from the socket only if there is
        none; ``b""`` at the end of the body (the connection is then given back)."""
        if self.conn is None:
            await trio.lowlevel.checkpoint()
            return b""
        return await self._read(to_end=False)

    async def _read(self, *, to_end: bool) -> bytes:
        """Body bytes up to the end of the body (``to_end``), or else as soon as there are
        some; at the end of the body the connection is given back."""
        conn, reader = self.conn, self.reader
        assert conn is not None
        assert reader is not None
        pieces: list[bytes] = []
        while True:
            got = reader.next_event()
            if got is NEED_DATA:
                if pieces and not to_end:
                    break
                await self.fill(conn, reader, False)
            elif got is END:
                self.conn = None
                self.transport.release(conn, streamed=self.streamed)
                break
            else:
                pieces.append(cast(bytes, got))
        return b"".join(pieces)  # one bytes piece is returned as it is, h11's bytearray copied

    def finish(self) -> None:
        """Give the connection back if the rest of the body has already arrived, else close it.

        A streaming caller usually stops at the last event of the body (``data: [DONE]``)
        without asking for the end; the chunked terminator is then in the reader's buffer or
        in the socket's, and the connection can still be reused. Nothing here waits.
        """
        conn, reader = self.conn, self.reader
        if conn is None or reader is None:
            return
        self.conn = None
        try:
            while True:
                got = reader.next_event()
                if got is NEED_DATA:
                    data = conn.receive_now()
                    if not data:
                        break
                    reader.feed(data)
                elif got is END:
                    self.transport.release(conn, streamed=self.streamed)
                    return
        except (TransportError, *_IO_ERRORS):
            pass
        self.transport.discard(conn)


class _LeanResponseStream:
    """The body of one streamed response, read from its connection on demand."""

    __slots__ = ("_error", "_exchange", "headers", "status")

    def __init__(self, exchange: _Exchange, head: h11.Response) -> None:
        self._exchange = exchange
        self._error: TransportError | None = None
        self.status: int = head.status_code
        self.headers: Headers = tuple(decode_headers(head))

    async def receive(self) -> bytes:
        """Every body byte that can be decoded now, waiting for more if there is none;
        ``b""`` once the body is complete.

        Raises:
            TransportError: the connection failed, the body was truncated or a limit expired.
        """
        if self._error is not None:
            await trio.lowlevel.checkpoint()
            raise self._error
        exchange = self._exchange
        exchange.scope = trio.CancelScope(deadline=exchange.deadline)
        with exchange.scope:
            try:
                return await exchange.read_available()
            except TransportError as exc:
                self._error = exc
                exchange.abandon()
                raise
            except BaseException:
                self._error = TransportError(
                    "closed", "the stream was interrupted", response_started=True
                )
                exchange.abandon()
                raise
        self._error = exchange.timed_out()
        raise self._error


class _LeanStreamContext:
    __slots__ = ("_exchange", "_request", "_timeouts", "_transport")

    def __init__(self, transport: LeanTransport, request: HttpRequest, timeouts: Timeouts):
        self._transport = transport
        self._request = request
        self._timeouts = timeouts
        self._exchange: _Exchange | None = None

    async def __aenter__(self) -> _LeanResponseStream:
        encoded = self._transport.encode(self._request)
        exchange = _Exchange(self._transport, self._timeouts)
        exchange.streamed = True
        with exchange.scope:
            try:
                head = await exchange.start(encoded)
            except BaseException:
                exchange.abandon()
                raise
            self._exchange = exchange
            return _LeanResponseStream(exchange, head)
        raise exchange.timed_out()

    async def __aexit__(self, *exc_info: object) -> None:
        exchange = self._exchange
        if exchange is not None:
            self._exchange = None
            exchange.finish()
