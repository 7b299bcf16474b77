"""``reuse_streams=False``: the lean transport closes a connection after a streamed reply itself,
for servers that close it right after every streamed reply (llama-server)."""

from __future__ import annotations

from agentcore import Timeouts
from agentcore._transports.http11 import Origin
from agentcore._transports.lean import LeanTransport
from agentcore.wire import HttpRequest
from tests.transport.transport_server import Exchange, serve

QUICK = Timeouts(connect=5.0, read=5.0, total=10.0)


async def _stream_then_close_late(exchange: Exchange) -> None:
    # The server's close comes only once the client has asked again: reusing the connection
    # would always race it.
    await exchange.start_chunked(200, [("content-type", "text/event-stream")])
    await exchange.send_chunk(b"data: [DONE]\\n\\n")
    await exchange.end_chunked()
    exchange.close_after = True


async def test_streamed_replies_do_not_leave_a_connection_to_reuse() -> None:
    async with serve(_stream_then_close_late) as server:
        transport = LeanTransport(Origin.from_url(server.url), max_connections=2,
                                  reuse_streams=False)  # fmt: skip
        request = HttpRequest("POST", server.url + "/chat/completions", [], b"{}", True)
        try:
            for _ in range(3):
                async with transport.open_stream(request, QUICK) as stream:
                    while await stream.receive():
                        pass
            stats = transport.statistics()
        finally:
            await transport.aclose()
    assert (stats.requests, stats.retries, stats.connections_opened) == (3, 0, 3)
    assert stats.connections_idle == 0
    assert server.accepted == len(server.requests) == 3


async def test_whole_replies_still_reuse_the_connection() -> None:
    async with serve() as server:
        transport = LeanTransport(Origin.from_url(server.url), max_connections=2,
                                  reuse_streams=False)  # fmt: skip
        request = HttpRequest("POST", server.url + "/chat/completions", [], b"{}")
        try:
            for _ in range(3):
                assert (await transport.send(request, QUICK)).status == 200
        finally:
            await transport.aclose()
    assert server.accepted == 1
