"""A server that answers before the request body is written whole (RFC 9112, section 9.5): both
transports report its answer, not the failed write.

The server reads the request head only, answers ``413`` with ``Connection: close`` and closes
the socket with the body unread (the simulated server does this for a body over 32 MiB). The
body is far larger than the socket buffers on both sides can hold, so the client is always
still writing when the server closes: the write fails (``EPIPE`` / ``ECONNRESET``) while the
answer already sits in the client's receive buffer.
"""

from __future__ import annotations

import socket

import pytest
import trio

from agentcore import Timeouts
from agentcore._transports.factory import TransportKind, make_transport
from agentcore.wire import HttpRequest, TransportError

QUICK = Timeouts(connect=5.0, read=5.0, total=20.0)
BODY = b"x" * (16 * 1024 * 1024)
"""Larger than the server's receive buffer (64 KiB) plus the client's send buffer (Linux
grows it to 4 MiB at most)."""
ANSWER = b'{"error":{"message":"request body too large"}}'


async def _answer_early(listener: trio.SocketListener, heads: list[bytes]) -> None:
    """Serve each connection: read the head, answer 413, close without reading the body."""
    while True:
        stream = await listener.accept()
        async with stream:
            head = b""
            while b"\r\n\r\n" not in head:
                data = await stream.receive_some(4096)
                if not data:
                    break
                head += data
            heads.append(head.partition(b"\r\n\r\n")[0])
            await stream.send_all(
                b"HTTP/1.1 413 Payload Too Large\r\ncontent-type: application/json\r\n"
                b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER)
            )


@pytest.mark.parametrize("kind", ["lean", "httpx"])
async def test_an_early_answer_is_reported_instead_of_the_failed_write(
    kind: TransportKind,
) -> None:
    sock = trio.socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)  # accepted sockets inherit it
    await sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    listener = trio.SocketListener(sock)
    port = sock.getsockname()[1]
    heads: list[bytes] = []
    url = f"http://127.0.0.1:{port}/v1"
    async with listener, trio.open_nursery() as nursery:
        nursery.start_soon(_answer_early, listener, heads)
        transport = make_transport(url, kind=kind, max_connections=2)
        try:
            request = HttpRequest("POST", url + "/chat/completions", (), BODY)
            response = await transport.send(request, QUICK)
            assert response.status == 413
            assert response.body == ANSWER
            # The connection is not reused: the next request opens a fresh one and gets the
            # same answer.
            again = await transport.send(request, QUICK)
            assert again.status == 413
        except TransportError as exc:  # pragma: no cover - the defect this test is about
            pytest.fail(f"the server's 413 was lost: {exc!r}")
        finally:
            await transport.aclose()
        nursery.cancel_scope.cancel()
    assert len(heads) == 2
    assert all(h.startswith(b"POST /v1/chat/completions HTTP/1.1") for h in heads)
