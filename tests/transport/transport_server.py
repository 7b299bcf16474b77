"""A scripted HTTP/1.1 server on 127.0.0.1 for the transport tests.

Each request is handed to an async handler together with an :class:`Exchange`, which answers
properly (through h11) or misbehaves on the raw socket. The server counts the connections it
accepted and the ones still open, so tests can check reuse and leaks from the server's side.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial

import attrs
import h11
import trio


@attrs.frozen
class SeenRequest:
    connection: int
    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        for n, v in self.headers:
            if n == name:
                return v
        return None


class Exchange:
    """One request as the handler sees it, and the ways to answer it."""

    def __init__(self, stream: trio.abc.Stream, conn: h11.Connection, seen: SeenRequest) -> None:
        self._stream = stream
        self._conn = conn
        self.seen = seen
        self.close_after = False
        """Close the connection once the handler returns (even after a complete response)."""

    async def respond(
        self, status: int = 200, headers: list[tuple[str, str]] | None = None, body: bytes = b""
    ) -> None:
        pairs = list(headers or [])
        pairs.append(("content-length", str(len(body))))
        data = self._conn.send(h11.Response(status_code=status, headers=pairs)) or b""
        data += self._conn.send(h11.Data(data=body)) or b""
        data += self._conn.send(h11.EndOfMessage()) or b""
        await self._stream.send_all(data)

    async def start_chunked(self, status: int = 200, headers: list[tuple[str, str]] | None = None):
        pairs = [*(headers or []), ("transfer-encoding", "chunked")]
        await self._stream.send_all(
            self._conn.send(h11.Response(status_code=status, headers=pairs)) or b""
        )

    async def send_chunk(self, data: bytes) -> None:
        await self._stream.send_all(self._conn.send(h11.Data(data=data)) or b"")

    async def send_chunks(self, pieces: list[bytes]) -> None:
        """One HTTP chunk per piece, all in one write."""
        await self._stream.send_all(
            b"".join(self._conn.send(h11.Data(data=p)) or b"" for p in pieces)
        )

    async def end_chunked(self, trailer: list[tuple[str, str]] | None = None) -> None:
        end = h11.EndOfMessage(headers=trailer or [])
        await self._stream.send_all(self._conn.send(end) or b"")

    async def send_raw(self, data: bytes) -> None:
        """Bytes outside h11's control; the connection is closed afterwards."""
        self.close_after = True
        await self._stream.send_all(data)

    async def wait_for_client_close(self) -> None:
        """Read until the client closes its side (or breaks the connection)."""
        self.close_after = True
        try:
            while await self._stream.receive_some(65536):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass


Handler = Callable[[Exchange], Awaitable[None]]


async def ok_handler(exchange: Exchange) -> None:
    await exchange.respond(200, [("content-type", "application/json")], b'{"ok":true}')


class LoopbackServer:
    """Serves ``handler`` for every request; see :func:`serve`."""

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None) -> None:
        self._handler = handler
        self._tls = tls
        self.port = 0
        self.accepted = 0
        self.open = 0
        self.requests: list[SeenRequest] = []
        self._changed = trio.Event()

    @property
    def url(self) -> str:
        scheme = "https" if self._tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}/v1"

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_open(self, count: int, timeout: float = 5.0) -> None:
        """Wait until exactly ``count`` connections are open on the server side."""
        with trio.fail_after(timeout):
            while self.open != count:
                await self._changed.wait()

    async def _read_request(
        self, stream: trio.abc.Stream, conn: h11.Connection
    ) -> tuple[h11.Request, bytes] | None:
        request: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(65536))
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                assert request is not None
                return request, bytes(body)
            else:
                return None

    async def _serve_connection(self, stream: trio.abc.Stream) -> None:
        number = self.accepted
        self.accepted += 1
        self.open += 1
        self._notify()
        if self._tls is not None:
            stream = trio.SSLStream(stream, self._tls, server_side=True)
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                got = await self._read_request(stream, conn)
                if got is None:
                    break
                request, body = got
                seen = SeenRequest(
                    connection=number,
                    method=request.method.decode(),
                    target=request.target.decode(),
                    headers=tuple((n.decode(), v.decode()) for n, v in request.headers),
                    body=body,
                )
                self.requests.append(seen)
                exchange = Exchange(stream, conn, seen)
                await self._handler(exchange)
                if (
                    exchange.close_after
                    or conn.our_state is not h11.DONE
                    or conn.their_state is not h11.DONE
                ):
                    break
                conn.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            pass
        finally:
            await trio.aclose_forcefully(stream)
            self.open -= 1
            self._notify()


@asynccontextmanager
async def serve(
    handler: Handler = ok_handler, tls: ssl.SSLContext | None = None
) -> AsyncIterator[LoopbackServer]:
    """Run a :class:`LoopbackServer` on 127.0.0.1 (a free port) for the duration of the block."""
    server = LoopbackServer(handler, tls)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            partial(trio.serve_tcp, server._serve_connection, 0, host="127.0.0.1")
        )
        server.port = listeners[0].socket.getsockname()[1]
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()


def unused_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
