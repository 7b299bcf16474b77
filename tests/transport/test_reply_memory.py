"""One large reply costs a small multiple of its size in memory, plain and streamed.

The traced peak (``tracemalloc``) of one exchange through ``HttpModelClient`` against a
loopback server answering a ~10 MB chat completion, the decoded reply kept, stays within three
times the body's size on both transports. (``bench/bench_reply_memory.py`` measures more shapes
and the resident growth; docs/transport.md states the figure.)
"""

from __future__ import annotations

import json
import tracemalloc

import pytest

from agentcore import ErrorKind, Timeouts
from agentcore._codecs.codec import StreamDecoder, TransportKind
from agentcore._codecs.http import Headers, HttpRequest
from agentcore._codecs.openai import OpenAICodec
from agentcore._transports.factory import make_transport
from agentcore._transports.model_client import HttpModelClient
from agentcore.core import CallModel, ModelFailed, ModelResponded, UserMessage
from tests.transport.transport_server import Exchange, serve

QUICK = Timeouts(connect=5.0, read=30.0, total=60.0)
TEXT = ("the quick brown fox jumps over the lazy dog " * 240_000)[:10_000_000]


def _plain() -> bytes:
    message = {"role": "assistant", "content": TEXT}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    body = json.dumps({"object": "chat.completion", "choices": [choice]}).encode()
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
    return head % len(body) + body


def _streamed() -> bytes:
    """The whole reply in one SSE event, then the finishing event (one HTTP chunk each)."""

    def chunk(delta: dict[str, str], finish: str | None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        event = b"data: %s\n\n" % json.dumps({"choices": [choice]}).encode()
        return b"%x\r\n%s\r\n" % (len(event), event)

    done = b"data: [DONE]\n\n"
    body = chunk({"content": TEXT}, None) + chunk({}, "stop")
    body += b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done)
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked"
    return head + b"\r\n\r\n" + body


@pytest.mark.parametrize("kind", ["lean", "httpx"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_one_large_reply_costs_at_most_three_times_its_size(
    kind: TransportKind, stream: bool
) -> None:
    response = _streamed() if stream else _plain()
    body_size = len(response) - response.index(b"\r\n\r\n") - 4

    async def answer(exchange: Exchange) -> None:
        await exchange.send_raw(response)

    async with serve(answer) as server:
        codec = OpenAICodec(base_url=server.url, model="m")
        transport = make_transport(server.url, kind=kind, max_connections=2)
        client = HttpModelClient(codec, transport, timeouts=QUICK, stream=stream)
        call = CallModel("mem-0/0", (UserMessage("Write the report."),))
        tracemalloc.start()
        try:
            exchange = await client.exchange(call)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            await client.aclose()
    assert isinstance(exchange.event, ModelResponded), exchange.event
    assert exchange.event.message.content == TEXT
    assert peak <= 3 * body_size, f"peak {peak / body_size:.1f} times the body"


class _BytesOnlyCodec:
    """The OpenAI codec behind the public ``Codec`` protocol alone (no ``decode_text``)."""

    def __init__(self, codec: OpenAICodec) -> None:
        self._codec = codec
        self.bodies: list[type] = []

    def encode(self, call: CallModel, *, stream: bool = False) -> HttpRequest:
        return self._codec.encode(call, stream=stream)

    def decode(
        self, request_id: str, status: int, headers: Headers, body: bytes
    ) -> ModelResponded | ModelFailed:
        self.bodies.append(type(body))
        return self._codec.decode(request_id, status, headers, body)

    def stream_decoder(self, request_id: str) -> StreamDecoder:
        return self._codec.stream_decoder(request_id)


@pytest.mark.parametrize("kind", ["lean", "httpx"])
async def test_a_large_reply_reaches_a_codec_without_decode_text_as_bytes(
    kind: TransportKind,
) -> None:
    response = _plain()

    async def answer(exchange: Exchange) -> None:
        await exchange.send_raw(response)

    async with serve(answer) as server:
        codec = _BytesOnlyCodec(OpenAICodec(base_url=server.url, model="m"))
        transport = make_transport(server.url, kind=kind, max_connections=2)
        client = HttpModelClient(codec, transport, timeouts=QUICK)
        try:
            exchange = await client.exchange(CallModel("m-0/0", (UserMessage("x"),)))
        finally:
            await client.aclose()
    assert codec.bodies == [bytes]
    assert isinstance(exchange.event, ModelResponded)
    assert exchange.event.message.content == TEXT


async def test_a_large_reply_that_is_not_utf8_fails_as_a_protocol_error() -> None:
    body = b'{"choices": [{"index": 0, "message": {"content": "\xff' + b"x" * 300_000 + b'"}}]}'
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"

    async def answer(exchange: Exchange) -> None:
        await exchange.send_raw(head % len(body) + body)

    async with serve(answer) as server:
        codec = OpenAICodec(base_url=server.url, model="m")
        client = HttpModelClient(codec, make_transport(server.url, kind="lean", max_connections=2))
        try:
            exchange = await client.exchange(CallModel("m-0/0", (UserMessage("x"),)))
        finally:
            await client.aclose()
    assert isinstance(exchange.event, ModelFailed)
    assert exchange.event.error.kind is ErrorKind.PROTOCOL
