"""Behaviour of both transports (lean h11 and httpx) against scripted loopback servers."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import httpx
import orjson
import pytest
import trio

import agentcore
import agentcore.wire
from agentcore import ConfigError, Timeouts
from agentcore._codecs.http import header
from agentcore._transports.factory import TransportKind, make_transport
from agentcore._transports.hosted import HttpxTransport
from agentcore._transports.http11 import Origin
from agentcore._transports.lean import LeanTransport
from agentcore.wire import HttpRequest, Transport, TransportError, TransportErrorKind
from tests.transport.transport_server import (
    Exchange,
    LoopbackServer,
    ok_handler,
    serve,
    unused_port,
)

QUICK = Timeouts(connect=5.0, read=5.0, total=10.0)

KINDS: list[TransportKind] = ["lean", "httpx"]


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> TransportKind:
    return request.param  # type: ignore[no-any-return]


@asynccontextmanager
async def open_transport(
    server: LoopbackServer, kind: TransportKind, max_connections: int = 4
) -> AsyncIterator[Transport]:
    transport = make_transport(server.url, kind=kind, max_connections=max_connections)
    try:
        yield transport
    finally:
        await transport.aclose()


def post(
    server: LoopbackServer, path: str = "/chat/completions", body: bytes = b"{}"
) -> HttpRequest:
    return HttpRequest("POST", server.url + path, [("content-type", "application/json")], body)


def lean_stats(transport: Transport):  # type: ignore[no-untyped-def]
    assert isinstance(transport, LeanTransport)
    return transport.statistics()


# ---- requests and responses ----


async def test_request_is_framed_with_host_length_and_codec_headers(kind: TransportKind) -> None:
    async with serve() as server, open_transport(server, kind) as transport:
        request = HttpRequest(
            "POST",
            server.url + "/chat/completions?trace=1",
            [("Content-Type", "application/json"), ("X-Request-Id", "r-1")],
            b'{"model":"m"}',
        )
        response = await transport.send(request, QUICK)
        assert response.status == 200
        assert response.body == b'{"ok":true}'
        assert header(response.headers, "content-type") == "application/json"
        (seen,) = server.requests
        assert seen.method == "POST"
        assert seen.target == "/v1/chat/completions?trace=1"
        assert seen.header("host") == f"127.0.0.1:{server.port}"
        assert seen.header("content-length") == str(len(b'{"model":"m"}'))
        assert seen.header("x-request-id") == "r-1"
        assert seen.body == b'{"model":"m"}'


async def test_get_request_without_body(kind: TransportKind) -> None:
    async with serve() as server, open_transport(server, kind) as transport:
        response = await transport.send(HttpRequest("GET", server.url + "/models"), QUICK)
        assert response.status == 200
        (seen,) = server.requests
        assert seen.method == "GET"
        assert seen.target == "/v1/models"
        assert seen.body == b""


async def test_429_with_retry_after_is_an_ordinary_response(kind: TransportKind) -> None:
    async def busy(exchange: Exchange) -> None:
        await exchange.respond(429, [("retry-after", "7")], b'{"error":"slow down"}')

    async with serve(busy) as server, open_transport(server, kind) as transport:
        response = await transport.send(post(server), QUICK)
        assert response.status == 429
        assert header(response.headers, "retry-after") == "7"
        assert response.body == b'{"error":"slow down"}'
        streamed = await _read_stream(transport, post(server))
        assert streamed == (429, b'{"error":"slow down"}')


async def test_chunked_body_is_read_whole(kind: TransportKind) -> None:
    async def chunked(exchange: Exchange) -> None:
        await exchange.start_chunked(200)
        for piece in (b"alpha ", b"beta ", b"gamma"):
            await exchange.send_chunk(piece)
        await exchange.end_chunked()

    async with serve(chunked) as server, open_transport(server, kind) as transport:
        response = await transport.send(post(server), QUICK)
        assert response.body == b"alpha beta gamma"
        response = await transport.send(post(server), QUICK)
        assert response.body == b"alpha beta gamma"
        assert server.accepted == 1


async def test_many_chunks_in_one_segment_with_a_trailer_keep_the_connection(
    kind: TransportKind,
) -> None:
    pieces = [f"data: {i}\n\n".encode() for i in range(300)]

    async def chunked(exchange: Exchange) -> None:
        await exchange.start_chunked(200, [("content-type", "text/event-stream")])
        await exchange.send_chunks(pieces)
        await exchange.end_chunked([("x-checksum", "300")])

    async with serve(chunked) as server, open_transport(server, kind) as transport:
        response = await transport.send(post(server), QUICK)
        assert response.body == b"".join(pieces)
        assert await _read_stream(transport, post(server)) == (200, b"".join(pieces))
        assert await _read_stream(transport, post(server)) == (200, b"".join(pieces))
        assert server.accepted == 1


async def test_head_and_body_in_one_segment_are_both_read(kind: TransportKind) -> None:
    async def together(exchange: Exchange) -> None:
        await exchange.send_raw(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
            b"3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nx-t: 1\r\n\r\n"
        )

    async with serve(together) as server, open_transport(server, kind) as transport:
        assert (await transport.send(post(server), QUICK)).body == b"abcde"
        assert await _read_stream(transport, post(server)) == (200, b"abcde")


@pytest.mark.parametrize(
    "body",
    [b"zz\r\nabc\r\n0\r\n\r\n", b"3\r\nabcXY\r\n0\r\n\r\n", b"3\nabc\r\n0\r\n\r\n"],
    ids=["bad-size", "no-crlf-after-data", "bare-lf-size-line"],
)
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_malformed_chunk_framing_is_a_protocol_error(
    kind: TransportKind, body: bytes, streamed: bool
) -> None:
    async def malformed(exchange: Exchange) -> None:
        await exchange.send_raw(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + body)
        await exchange.wait_for_client_close()

    async with serve(malformed) as server, open_transport(server, kind) as transport:
        with pytest.raises(TransportError) as caught:
            if streamed:
                await _read_stream(transport, post(server))
            else:
                await transport.send(post(server), QUICK)
        assert caught.value.kind == "protocol"
        assert caught.value.response_started
        await server.wait_open(0)


async def _read_stream(transport: Transport, request: HttpRequest) -> tuple[int, bytes]:
    async with transport.open_stream(request, QUICK) as stream:
        pieces = []
        while chunk := await stream.receive():
            pieces.append(chunk)
        assert await stream.receive() == b""
        return stream.status, b"".join(pieces)


async def test_streamed_sse_body_arrives_in_pieces(kind: TransportKind) -> None:
    events = [b"data: one\n\n", b"data: two\n\n", b"data: [DONE]\n\n"]
    send_next, next_allowed = trio.open_memory_channel[None](0)

    async def sse(exchange: Exchange) -> None:
        await exchange.start_chunked(200, [("content-type", "text/event-stream")])
        for event in events:
            await exchange.send_chunk(event)
            await next_allowed.receive()
        await exchange.end_chunked()

    async with serve(sse) as server, open_transport(server, kind) as transport:
        async with transport.open_stream(post(server), QUICK) as stream:
            assert stream.status == 200
            assert header(stream.headers, "content-type") == "text/event-stream"
            for event in events:
                # The server sends the next event only once this one has been received.
                assert await stream.receive() == event
                await send_next.send(None)
            assert await stream.receive() == b""
        assert server.accepted == 1


# ---- keep-alive and connection reuse ----


async def test_sequential_requests_reuse_one_connection(kind: TransportKind) -> None:
    async with serve() as server, open_transport(server, kind) as transport:
        for _ in range(5):
            assert (await transport.send(post(server), QUICK)).status == 200
        for _ in range(2):
            assert await _read_stream(transport, post(server)) == (200, b'{"ok":true}')
        assert server.accepted == 1
        assert {seen.connection for seen in server.requests} == {0}


async def test_concurrent_requests_use_at_most_one_connection_each(kind: TransportKind) -> None:
    slots = 4
    async with serve() as server, open_transport(server, kind, slots) as transport:

        async def worker() -> None:
            for _ in range(5):
                assert (await transport.send(post(server), QUICK)).status == 200

        async with trio.open_nursery() as nursery:
            for _ in range(slots):
                nursery.start_soon(worker)
        assert len(server.requests) == 20
        assert server.accepted <= slots
        if kind == "lean":
            stats = lean_stats(transport)
            assert stats.connections_open == stats.connections_idle == server.accepted


async def test_server_closing_idle_connections_is_survived(kind: TransportKind) -> None:
    async def once(exchange: Exchange) -> None:
        await ok_handler(exchange)
        exchange.close_after = True  # no "Connection: close": the client learns it on reuse

    async with serve(once) as server, open_transport(server, kind) as transport:
        for _ in range(3):
            assert (await transport.send(post(server), QUICK)).status == 200
        assert await _read_stream(transport, post(server)) == (200, b'{"ok":true}')
        assert server.accepted == 4
        if kind == "lean":
            # Each close races the next request: seen before reuse, or retried after it.
            stats = lean_stats(transport)
            assert stats.retries + stats.closed_by_peer == 3


async def test_connection_closed_after_a_streamed_reply_is_not_written_to(
    kind: TransportKind,
) -> None:
    # llama-server's way: a chunked SSE reply that announces keep-alive, then a close.
    async def stream_then_close(exchange: Exchange) -> None:
        await exchange.start_chunked(200, [("content-type", "text/event-stream")])
        await exchange.send_chunk(b"data: [DONE]\n\n")
        await exchange.end_chunked()
        exchange.close_after = True

    async with serve(stream_then_close) as server, open_transport(server, kind) as transport:
        for _ in range(4):
            assert await _read_stream(transport, post(server)) == (200, b"data: [DONE]\n\n")
            await server.wait_open(0)  # the close has reached the client's socket
        assert server.accepted == len(server.requests) == 4
        if kind == "lean":
            stats = lean_stats(transport)
            # The first close is seen when the idle connection is checked; from then on the
            # transport knows this server closes after streams and keeps no such connection.
            assert (stats.requests, stats.retries, stats.closed_by_peer) == (4, 0, 1)
            assert stats.connections_open == 0


async def test_connection_close_header_retires_the_connection(kind: TransportKind) -> None:
    async def closing(exchange: Exchange) -> None:
        await exchange.respond(200, [("connection", "close")], b"bye")

    async with serve(closing) as server, open_transport(server, kind) as transport:
        for _ in range(2):
            assert (await transport.send(post(server), QUICK)).body == b"bye"
        assert server.accepted == 2
        if kind == "lean":
            assert lean_stats(transport).retries == 0
            assert lean_stats(transport).connections_open == 0


def _drop_second_request_on_first_connection():  # type: ignore[no-untyped-def]
    async def handler(exchange: Exchange) -> None:
        if exchange.seen.connection == 0 and exchange.seen.target.endswith("/second"):
            exchange.close_after = True  # read the request, then hang up without a reply
            return
        await ok_handler(exchange)

    return handler


async def test_reused_connection_dropped_before_reply_is_retried_once(kind: TransportKind) -> None:
    async with (
        serve(_drop_second_request_on_first_connection()) as server,
        open_transport(server, kind) as transport,
    ):
        assert (await transport.send(post(server, "/first"), QUICK)).status == 200
        if kind == "lean":
            # Lean: the request is sent again on a fresh connection and succeeds.
            assert (await transport.send(post(server, "/second"), QUICK)).status == 200
            assert [s.connection for s in server.requests] == [0, 0, 1]
            assert lean_stats(transport).retries == 1
        else:
            # httpx does not retry; the error says it is safe to retry.
            with pytest.raises(TransportError) as caught:
                await transport.send(post(server, "/second"), QUICK)
            assert caught.value.kind == "closed"
            assert not caught.value.response_started


async def test_fresh_connection_dropped_before_reply_is_not_retried(kind: TransportKind) -> None:
    async def hang_up(exchange: Exchange) -> None:
        exchange.close_after = True

    async with serve(hang_up) as server, open_transport(server, kind) as transport:
        with pytest.raises(TransportError) as caught:
            await transport.send(post(server), QUICK)
        assert caught.value.kind == "closed"
        assert not caught.value.response_started
        assert len(server.requests) == 1


async def test_no_retry_once_response_bytes_arrived(kind: TransportKind) -> None:
    async def handler(exchange: Exchange) -> None:
        if exchange.seen.target.endswith("/second"):
            await exchange.send_raw(b"HTTP/1.1 200 OK\r\ncontent-le")
            return
        await ok_handler(exchange)

    async with serve(handler) as server, open_transport(server, kind) as transport:
        await transport.send(post(server, "/first"), QUICK)
        with pytest.raises(TransportError) as caught:
            await transport.send(post(server, "/second"), QUICK)
        assert caught.value.kind in {"closed", "protocol"}
        assert len(server.requests) == 2
        if kind == "lean":
            # httpx only reports a complete head, so it cannot see a partial one.
            assert caught.value.response_started


# ---- broken responses ----


def _truncated(chunked: bool):  # type: ignore[no-untyped-def]
    async def handler(exchange: Exchange) -> None:
        if chunked:
            await exchange.start_chunked(200)
            await exchange.send_chunk(b"x" * 100)
        else:
            await exchange.send_raw(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n" + b"x" * 100)
        exchange.close_after = True

    return handler


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
async def test_server_closing_mid_body_is_a_started_failure(
    kind: TransportKind, chunked: bool, streamed: bool
) -> None:
    async with serve(_truncated(chunked)) as server, open_transport(server, kind) as transport:
        with pytest.raises(TransportError) as caught:
            if streamed:
                async with transport.open_stream(post(server), QUICK) as stream:
                    while await stream.receive():
                        pass
            else:
                await transport.send(post(server), QUICK)
        assert caught.value.kind in {"closed", "read"}
        assert caught.value.response_started
        await server.wait_open(0)
        if kind == "lean":
            assert lean_stats(transport).connections_open == 0


async def test_malformed_response_is_a_protocol_error(kind: TransportKind) -> None:
    async def garbage(exchange: Exchange) -> None:
        await exchange.send_raw(b"SPDY/9 banana\r\n\r\n")

    async with serve(garbage) as server, open_transport(server, kind) as transport:
        with pytest.raises(TransportError) as caught:
            await transport.send(post(server), QUICK)
        assert caught.value.kind == "protocol"
        assert caught.value.response_started


async def test_connection_refused_is_a_connect_failure(kind: TransportKind) -> None:
    url = f"http://127.0.0.1:{unused_port()}/v1"
    transport = make_transport(url, kind=kind, max_connections=2)
    try:
        with pytest.raises(TransportError) as caught:
            await transport.send(HttpRequest("POST", url + "/chat/completions"), QUICK)
        assert caught.value.kind == "connect"
        assert not caught.value.response_started
    finally:
        await transport.aclose()


# ---- time limits (virtual time: the server sleeps on trio's clock) ----


async def test_slow_response_head_hits_the_read_limit(
    kind: TransportKind, autojump_clock: trio.testing.MockClock
) -> None:
    async def slow(exchange: Exchange) -> None:
        await trio.sleep(3600)
        await ok_handler(exchange)

    async with serve(slow) as server, open_transport(server, kind) as transport:
        with pytest.raises(TransportError) as caught:
            await transport.send(post(server), Timeouts(connect=5, read=30, total=None))
        assert caught.value.kind == "timeout"
        assert not caught.value.response_started
        await server.wait_open(1)  # the server is still sleeping; the client side is gone
        if kind == "lean":
            assert lean_stats(transport).connections_open == 0


async def test_slow_stream_hits_the_total_limit(
    kind: TransportKind, autojump_clock: trio.testing.MockClock
) -> None:
    async def trickle(exchange: Exchange) -> None:
        await exchange.start_chunked(200, [("content-type", "text/event-stream")])
        for _ in range(1000):
            await exchange.send_chunk(b": keep-alive\n\n")
            await trio.sleep(1)
        await exchange.end_chunked()

    async with serve(trickle) as server, open_transport(server, kind) as transport:
        start = trio.current_time()
        with pytest.raises(TransportError) as caught:
            async with transport.open_stream(
                post(server), Timeouts(connect=5, read=5, total=20)
            ) as stream:
                while await stream.receive():
                    pass
        assert caught.value.kind == "timeout"
        assert caught.value.response_started
        assert 20 <= trio.current_time() - start < 25  # the total limit, not the read limit
        if kind == "lean":
            assert lean_stats(transport).connections_open == 0


# ---- cancellation, early exit, leaks, closing ----


async def test_cancelling_mid_stream_closes_the_connection(kind: TransportKind) -> None:
    async def endless(exchange: Exchange) -> None:
        await exchange.start_chunked(200, [("content-type", "text/event-stream")])
        await exchange.send_chunk(b"data: first\n\n")
        await exchange.wait_for_client_close()

    async with serve(endless) as server, open_transport(server, kind) as transport:
        with trio.CancelScope() as scope:
            async with transport.open_stream(post(server), QUICK) as stream:
                assert await stream.receive() == b"data: first\n\n"
                scope.cancel()
                await stream.receive()
        assert scope.cancelled_caught
        await server.wait_open(0)
        if kind == "lean":
            stats = lean_stats(transport)
            assert stats.connections_open == stats.connections_idle == 0


async def test_leaving_a_stream_early_closes_the_connection(kind: TransportKind) -> None:
    async def endless(exchange: Exchange) -> None:
        await exchange.start_chunked(200)
        await exchange.send_chunk(b"first")
        await exchange.wait_for_client_close()

    async with serve(endless) as server, open_transport(server, kind) as transport:
        async with transport.open_stream(post(server), QUICK) as stream:
            assert await stream.receive() == b"first"
        await server.wait_open(0)
        if kind == "lean":
            assert lean_stats(transport).connections_open == 0


async def test_cancelling_while_waiting_for_the_head_closes_the_connection(
    kind: TransportKind,
) -> None:
    started = trio.Event()

    async def stalled(exchange: Exchange) -> None:
        started.set()
        await exchange.wait_for_client_close()

    async with serve(stalled) as server, open_transport(server, kind) as transport:
        async with trio.open_nursery() as nursery:

            async def call() -> None:
                await transport.send(post(server), QUICK)

            nursery.start_soon(call)
            await started.wait()
            nursery.cancel_scope.cancel()
        await server.wait_open(0)
        if kind == "lean":
            assert lean_stats(transport).connections_open == 0


async def test_aclose_closes_idle_connections_and_refuses_new_requests(
    kind: TransportKind,
) -> None:
    async with serve() as server:
        transport = make_transport(server.url, kind=kind, max_connections=4)

        async def worker() -> None:
            await transport.send(post(server), QUICK)

        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(worker)
        assert server.open == server.accepted >= 1
        await transport.aclose()
        await server.wait_open(0)
        with pytest.raises(TransportError) as caught:
            await transport.send(post(server), QUICK)
        assert caught.value.kind == "closed"


async def test_mixed_failures_leak_no_connection(kind: TransportKind) -> None:
    async def mixed(exchange: Exchange) -> None:
        target = exchange.seen.target
        if target.endswith("/truncate"):
            await exchange.send_raw(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc")
        elif target.endswith("/stall"):
            await exchange.wait_for_client_close()
        else:
            await ok_handler(exchange)

    async with serve(mixed) as server:
        transport = make_transport(server.url, kind=kind, max_connections=3)

        async def call(path: str) -> None:
            with suppress(TransportError):
                await transport.send(post(server, path), QUICK)

        async with trio.open_nursery() as nursery:
            for i in range(12):
                nursery.start_soon(call, ["/ok", "/truncate", "/ok"][i % 3])
            with trio.move_on_after(0.2):
                async with trio.open_nursery() as stalls:
                    for _ in range(3):
                        stalls.start_soon(call, "/stall")
        if kind == "lean":
            stats = lean_stats(transport)
            assert stats.connections_open == stats.connections_idle <= 3
        await transport.aclose()
        await server.wait_open(0)
        if kind == "lean":
            assert lean_stats(transport).connections_open == 0


# ---- TLS ----


@pytest.fixture(scope="session")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def _server_tls(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    return context


async def test_https_with_a_trusted_certificate(
    kind: TransportKind, certificate: tuple[Path, Path]
) -> None:
    trusted = ssl.create_default_context(cafile=str(certificate[0]))
    async with serve(tls=_server_tls(certificate)) as server:
        transport: Transport
        if kind == "lean":
            transport = LeanTransport(
                Origin.from_url(server.url), max_connections=2, verify=trusted
            )
        else:
            transport = HttpxTransport(max_connections=2, client=httpx.AsyncClient(verify=trusted))
        try:
            for _ in range(3):
                assert (await transport.send(post(server), QUICK)).body == b'{"ok":true}'
            assert await _read_stream(transport, post(server)) == (200, b'{"ok":true}')
            assert server.accepted == 1
        finally:
            await transport.aclose()
        await server.wait_open(0)


async def test_https_verification_rejects_an_unknown_certificate(
    kind: TransportKind, certificate: tuple[Path, Path]
) -> None:
    async with serve(tls=_server_tls(certificate)) as server:
        async with open_transport(server, kind) as transport:
            with pytest.raises(TransportError) as caught:
                await transport.send(post(server), QUICK)
            assert caught.value.kind == "connect"
        transport = make_transport(server.url, kind=kind, max_connections=2, verify=False)
        try:
            assert (await transport.send(post(server), QUICK)).status == 200
        finally:
            await transport.aclose()


def _chat_reply(text: str) -> bytes:
    return orjson.dumps(
        {"id": "r", "object": "chat.completion", "model": "m",
         "choices": [{"index": 0, "finish_reason": "stop",
                      "message": {"role": "assistant", "content": text}}],
         "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}
    )  # fmt: skip


async def test_a_backends_verify_option_reaches_its_transport(
    kind: TransportKind, certificate: tuple[Path, Path]
) -> None:
    """``verify=`` is a backend option: a private CA as an ``ssl.SSLContext`` reaches the
    server, ``False`` skips the checks, and by default the unknown certificate is refused."""

    async def chat(exchange: Exchange) -> None:
        await exchange.respond(200, [("content-type", "application/json")], _chat_reply("hi"))

    agent = agentcore.Agent(instructions="Greet.")
    trusted = ssl.create_default_context(cafile=str(certificate[0]))
    async with serve(chat, tls=_server_tls(certificate)) as server:
        url = server.url + "/v1"
        for verify in (trusted, False):
            backend = agentcore.wire.backend(url, model="m", transport=kind, verify=verify)
            assert backend.verify is verify
            async with agentcore.open_driver(backend) as driver:
                result = await agent.run("hello", driver=driver)
            assert (result.status, result.output) == ("ok", "hi"), result.error
        async with agentcore.open_driver(
            url, model="m", transport=kind, retry=agentcore.RetryPolicy(max_attempts=1)
        ) as driver:
            refused = await agent.run("hello", driver=driver)
        assert refused.status == "failed"
        assert refused.error is not None and "connect" in refused.error.message
    with pytest.raises(ConfigError, match="verify must be"):
        agentcore.wire.backend(url, model="m", verify="no")


async def test_large_bodies_travel_both_ways(kind: TransportKind) -> None:
    big = bytes(range(256)) * 8192  # 2 MiB: more than one socket buffer either way

    async def echo(exchange: Exchange) -> None:
        await exchange.respond(
            200, [("content-type", "application/octet-stream")], exchange.seen.body
        )

    async with serve(echo) as server, open_transport(server, kind) as transport:
        response = await transport.send(post(server, body=big), QUICK)
        assert response.body == big
        status, streamed = await _read_stream(transport, post(server, body=big[:100_000]))
        assert (status, streamed) == (200, big[:100_000])
        assert server.accepted == 1


# ---- lean transport specifics ----


async def test_lean_refuses_a_url_on_another_origin() -> None:
    async with serve() as server, open_transport(server, "lean") as transport:
        with pytest.raises(TransportError) as caught:
            await transport.send(HttpRequest("POST", "http://example.com/v1/x"), QUICK)
        assert caught.value.kind is TransportErrorKind.REFUSED
        assert server.accepted == 0
        # The same origin spelled differently is accepted.
        other_spelling = f"HTTP://127.0.0.1:{server.port}/v1/models?a=1"
        assert (await transport.send(HttpRequest("GET", other_spelling), QUICK)).status == 200
        assert server.requests[0].target == "/v1/models?a=1"


@pytest.mark.parametrize("kind", ["lean", "httpx"])
@pytest.mark.parametrize(
    "headers",
    [
        [("bad name", "x")],
        [("x-ok", "line\r\nbreak")],
        [("x-ok", "café ☕")],
        [("x-ok", "a\x01b")],
    ],
    ids=["space-in-name", "crlf-in-value", "not-latin-1", "control-character"],
)
async def test_a_request_that_cannot_be_written_is_refused_before_any_byte_is_sent(
    headers: list[tuple[str, str]], kind: str
) -> None:
    async with serve() as server, open_transport(server, kind) as transport:
        with pytest.raises(TransportError) as caught:
            await transport.send(HttpRequest("POST", server.url + "/x", headers), QUICK)
        assert caught.value.kind is TransportErrorKind.REFUSED
        assert server.accepted == 0


async def test_lean_reuses_the_connection_when_a_stream_is_left_after_its_last_event() -> None:
    proceed_send, proceed = trio.open_memory_channel[None](0)
    terminated_send, terminated = trio.open_memory_channel[None](0)

    async def sse(exchange: Exchange) -> None:
        await exchange.start_chunked(200, [("content-type", "text/event-stream")])
        await exchange.send_chunk(b"data: [DONE]\n\n")
        await proceed.receive()
        await exchange.end_chunked()  # the chunked terminator, in a segment of its own
        await terminated_send.send(None)

    async with serve(sse) as server, open_transport(server, "lean") as transport:
        for _ in range(3):
            async with transport.open_stream(post(server), QUICK) as stream:
                assert await stream.receive() == b"data: [DONE]\n\n"
                await proceed_send.send(None)
                await terminated.receive()
                # Leave without asking for the end: the terminator is in the socket buffer.
        assert server.accepted == 1
        stats = lean_stats(transport)
        assert stats.connections_open == stats.connections_idle == 1


async def test_lean_statistics_count_requests_and_connections() -> None:
    async with serve() as server, open_transport(server, "lean", 2) as transport:
        for _ in range(3):
            await transport.send(post(server), QUICK)
        stats = lean_stats(transport)
        assert stats.requests == 3
        assert stats.connections_opened == 1
        assert stats.connections_open == stats.connections_idle == 1
        assert stats.retries == 0


@pytest.mark.parametrize(
    ("url", "kind", "slots"),
    [
        ("ftp://127.0.0.1/v1", "lean", 4),
        ("/v1/chat", "httpx", 4),
        ("http://127.0.0.1:8000/v1", "lean", 0),
        ("http://127.0.0.1:8000/v1", "curl", 4),
        ("http://127.0.0.1:notaport/v1", "lean", 4),
    ],
)
def test_make_transport_rejects_bad_configuration(url: str, kind: str, slots: int) -> None:
    with pytest.raises(ConfigError):
        make_transport(url, kind=kind, max_connections=slots)  # type: ignore[arg-type]


def test_make_transport_builds_the_requested_kind() -> None:
    lean = make_transport("https://api.example.com/v1", kind="lean", max_connections=2)
    assert isinstance(lean, LeanTransport)
    assert lean.origin == Origin("https", "api.example.com", 443)
    assert isinstance(
        make_transport("https://api.example.com", kind="httpx", max_connections=2), HttpxTransport
    )
