"""A reply body is capped: a 100 MB body fails with a typed error and memory stays bounded."""

from __future__ import annotations

import tracemalloc

import pytest
import trio

from agentcore import ConfigError, ErrorKind, Timeouts
from agentcore._codecs.codec import TransportKind
from agentcore._codecs.openai import OpenAICodec
from agentcore._transports.factory import make_transport
from agentcore._transports.model_client import HttpModelClient
from agentcore.core import CallModel, ModelFailed, UserMessage
from agentcore.wire import HttpRequest, TransportError
from tests.transport.transport_server import Exchange, serve

QUICK = Timeouts(connect=5.0, read=10.0, total=60.0)
HUNDRED_MB = 100 * 1024 * 1024
CAP = 1024 * 1024
PIECE = b"x" * 65536


async def _endless_chunks(exchange: Exchange) -> None:
    """A chunked 100 MB body, written piece by piece (never held by the server either)."""
    await exchange.start_chunked(200, [("content-type", "application/json")])
    try:
        for _ in range(HUNDRED_MB // len(PIECE)):
            await exchange.send_chunk(PIECE)
        await exchange.end_chunked()
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        exchange.close_after = True


async def _announced(exchange: Exchange) -> None:
    """Announces 100 MB in content-length and sends the first piece only."""
    head = f"HTTP/1.1 200 OK\r\ncontent-length: {HUNDRED_MB}\r\n\r\n".encode()
    await exchange.send_raw(head + PIECE)
    await exchange.wait_for_client_close()


def _post(url: str) -> HttpRequest:
    return HttpRequest("POST", url + "/chat/completions", [], b"{}")


@pytest.mark.parametrize("kind", ["lean", "httpx"])
@pytest.mark.parametrize("handler", [_endless_chunks, _announced], ids=["chunked", "announced"])
async def test_a_100_mb_reply_fails_typed_with_bounded_memory(kind: TransportKind, handler) -> None:  # type: ignore[no-untyped-def]
    async with serve(handler) as server:
        transport = make_transport(server.url, kind=kind, max_connections=2, max_reply_bytes=CAP)
        tracemalloc.start()
        try:
            with pytest.raises(TransportError) as caught:
                await transport.send(_post(server.url), QUICK)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            await transport.aclose()
    assert caught.value.kind == "too_large"
    assert peak < 8 * CAP, f"peak {peak} bytes"


@pytest.mark.parametrize("kind", ["lean", "httpx"])
async def test_a_streamed_reply_past_the_cap_fails_typed(kind: TransportKind) -> None:
    async with serve(_endless_chunks) as server:
        transport = make_transport(server.url, kind=kind, max_connections=2, max_reply_bytes=CAP)
        received = 0
        try:
            with pytest.raises(TransportError) as caught:
                async with transport.open_stream(_post(server.url), QUICK) as stream:
                    while chunk := await stream.receive():
                        received += len(chunk)
        finally:
            await transport.aclose()
    assert caught.value.kind == "too_large"
    assert received <= CAP


@pytest.mark.parametrize("stream", [False, True])
async def test_model_client_reports_reply_too_large_as_final(stream: bool) -> None:
    async with serve(_endless_chunks) as server:
        transport = make_transport(server.url, kind="lean", max_connections=2, max_reply_bytes=CAP)
        codec = OpenAICodec(base_url=server.url, model="m", dialect="vllm")
        client = HttpModelClient(codec, transport, timeouts=QUICK, stream=stream)
        try:
            exchange = await client.exchange(CallModel("r/0", (UserMessage("hi"),)))
        finally:
            await client.aclose()
    assert isinstance(exchange.event, ModelFailed)
    error = exchange.event.error
    assert (error.kind, error.retryable) == (ErrorKind.REPLY_TOO_LARGE, False)


async def test_replies_under_the_cap_are_untouched() -> None:
    async def small(exchange: Exchange) -> None:
        await exchange.respond(200, [], b"y" * (CAP - 1))

    async with serve(small) as server:
        transport = make_transport(server.url, kind="lean", max_connections=2, max_reply_bytes=CAP)
        try:
            for _ in range(2):
                assert len((await transport.send(_post(server.url), QUICK)).body) == CAP - 1
        finally:
            await transport.aclose()


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "1"])
def test_max_reply_bytes_must_be_a_positive_integer(value: object) -> None:
    with pytest.raises(ConfigError):
        make_transport("http://127.0.0.1:1/v1", kind="lean", max_connections=1,
                       max_reply_bytes=value)  # type: ignore[arg-type]  # fmt: skip


def test_the_cap_is_a_backend_option() -> None:
    import agentcore

    default = agentcore.wire.backend("vllm://127.0.0.1:8000", model="m")
    assert default.max_reply_bytes == 16 * 1024 * 1024
    assert (
        agentcore.wire.backend("vllm://h", model="m", max_reply_bytes=None).max_reply_bytes is None
    )
    assert agentcore.wire.backend("vllm://h", model="m", max_reply_bytes=5).max_reply_bytes == 5
    with pytest.raises(ConfigError):
        agentcore.wire.backend("vllm://h", model="m", max_reply_bytes=0)
