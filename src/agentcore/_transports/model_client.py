"""Model clients: one model exchange, from a ``CallModel`` effect to a model event.

A :class:`ModelClient` performs exactly one attempt and never raises for a failing server or
network: every failure comes back as a ``ModelFailed`` event carrying a classified
:class:`~agentcore.ModelError`. The driver wraps each attempt in an inference slot and decides
about retries (:mod:`agentcore._core.retry`), so the slot is held only while the exchange runs and
never during a back-off sleep.

:class:`HttpModelClient` is codec + transport: the codec encodes the request and decodes the
answer, the transport moves the bytes. With streaming on, the body is fed piece by piece to the
codec's stream decoder and the time to first token (the first non-empty delta) is measured.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, runtime_checkable

import attrs
import trio

from .._codecs.classify import transport_failure, unusable_request
from .._codecs.codec import Codec, Delta, TextDelta, says_schema_on_final
from .._codecs.exchange import Exchange
from .._codecs.http import Headers, HttpRequest, Timeouts, header
from .._codecs.jsonbody import LARGE_DOCUMENT
from .._codecs.ratelimits import read_rate_headers
from .._codecs.redact import redact, secret_values
from .._core.errors import AgentcoreError, TransportError
from .._core.events import CallModel, ModelError, ModelFailed, ModelResponded
from .._core.ratebudget import RateObservation
from .._observe.log import TRANSPORT
from .protocol import Transport

__all__ = ["DeltaSink", "Exchange", "HttpModelClient", "ModelClient", "StreamingModelClient"]

DeltaSink = Callable[[Sequence[Delta]], Awaitable[None]]
"""Receives the deltas of a streamed reply as they are decoded (one call per body piece that
carried any). It may wait: the exchange (and its slot) waits with it."""


@runtime_checkable
class ModelClient(Protocol):
    """Performs model exchanges. Implementations never raise for server or network failures.

    :class:`HttpModelClient` speaks HTTP through a codec and a transport;
    :class:`~agentcore.testing._scripted.ScriptedModel` answers in process for tests.

    Optional: a ``schema_on_final`` attribute, ``True`` when a typed run's final request
    reaches the server with its output schema for guided decoding (the driver then leaves a
    task's default final instruction out: :attr:`~agentcore.Driver.schema_on_final`). A
    client without it counts as ``False``.
    """

    async def exchange(self, call: CallModel) -> Exchange:
        """One attempt at ``call``: a ``ModelResponded`` or a classified ``ModelFailed``."""
        ...

    async def aclose(self) -> None:
        """Release what the client holds (connections). It is unusable afterwards."""
        ...


@runtime_checkable
class StreamingModelClient(ModelClient, Protocol):
    """A model client that can hand out a reply's deltas while it arrives.

    The driver uses :meth:`exchange_streaming` for ``Driver.generate_stream`` and for runs
    whose step events include deltas; a client without it still works there: the deltas of
    its whole reply are handed on at once when it ends.
    """

    async def exchange_streaming(self, call: CallModel, sink: DeltaSink) -> Exchange:
        """One streamed attempt at ``call``, awaiting ``sink`` with each decoded delta batch."""
        ...


_DEFAULT_TIMEOUTS = Timeouts()


def _nonempty(delta: Delta) -> bool:
    if isinstance(delta, TextDelta):
        return bool(delta.text)
    return bool(delta.arguments or delta.name or delta.id)


def _whole_json(headers: Headers) -> bool:
    content_type = (header(headers, "content-type") or "").split(";", 1)[0].strip().lower()
    return content_type == "application/json" or content_type.endswith("+json")


_DecodeText = Callable[[str, int, Headers, str], ModelResponded | ModelFailed]


def _as_text(codec: Codec, status: int, body: bytes | bytearray) -> tuple[_DecodeText, str] | None:
    """For a large 2xx body and a codec that reads text (``decode_text``): that method and the
    body decoded from UTF-8, so that the caller can drop the bytes before the codec parses the
    text (the bytes, the text and the parsed reply are never alive at once; see
    :mod:`agentcore._codecs.jsonbody`). ``None``: decode the bytes."""
    if len(body) <= LARGE_DOCUMENT or not 200 <= status < 300:
        return None
    decode_text: _DecodeText | None = getattr(codec, "decode_text", None)
    if decode_text is None:
        return None
    try:
        text = str(body, "utf-8")
    except UnicodeDecodeError:
        return None  # the codec reports it
    return decode_text, text


def _failed(
    call: CallModel,
    error: ModelError,
    request: HttpRequest | None,
    ttft: float | None = None,
    rate: RateObservation | None = None,
) -> Exchange:
    """A failed exchange whose error text holds no secret: neither the request's own
    credentials (a 401 body echoing the key) nor a credential quoted by a lower layer."""
    secrets = secret_values(request.headers) if request is not None else ()
    message = redact(error.message, secrets)
    if message != error.message:
        error = attrs.evolve(error, message=message)
    if error.status is None and TRANSPORT.isEnabledFor(logging.DEBUG):
        TRANSPORT.debug(
            "request %s: %s: %s",
            call.request_id,
            error.kind.value,
            message,
            extra={"request_id": call.request_id, "error_kind": error.kind.value},
        )
    return Exchange(ModelFailed(call.request_id, error), ttft, rate)


@attrs.define(eq=False)
class HttpModelClient:
    """A :class:`ModelClient` over HTTP: ``codec`` builds and reads messages, ``transport``
    moves them.

    Args:
        codec: the backend's wire dialect.
        transport: the HTTP transport (owned: :meth:`aclose` closes it).
        timeouts: transport time limits per exchange.
        stream: request streamed replies (needed to measure time to first token).
    """

    codec: Codec
    transport: Transport
    timeouts: Timeouts = attrs.field(default=_DEFAULT_TIMEOUTS, kw_only=True)
    stream: bool = attrs.field(default=False, kw_only=True)

    @property
    def schema_on_final(self) -> bool:
        """Whether a typed run's final request carries its output schema: the codec's
        ``schema_on_final`` (see :attr:`~agentcore.wire.Backend.schema_on_final`)."""
        return says_schema_on_final(self.codec)

    async def exchange(self, call: CallModel) -> Exchange:
        """One attempt at ``call`` (see :meth:`ModelClient.exchange`)."""
        if self.stream:
            return await self._streamed(call)
        request: HttpRequest | None = None
        try:
            request = self.codec.encode(call, stream=False)
            response = await self.transport.send(request, self.timeouts)
        except TransportError as exc:
            return _failed(call, transport_failure(exc), request)
        except AgentcoreError as exc:
            return _failed(call, unusable_request(str(exc)), request)
        status, headers, body = response.status, response.headers, response.body
        del response  # the body's only other holder: a large one is dropped once decoded
        as_text = _as_text(self.codec, status, body)
        if as_text is None:
            event = self.codec.decode(call.request_id, status, headers, body)
        else:
            del body
            decode_text, text = as_text
            event = decode_text(call.request_id, status, headers, text)
        rate = read_rate_headers(headers, time.time())
        if isinstance(event, ModelFailed):
            return _failed(call, event.error, request, None, rate)
        return Exchange(event, None, rate)

    async def exchange_streaming(self, call: CallModel, sink: DeltaSink) -> Exchange:
        """One attempt at ``call``, streamed whatever ``stream`` says; ``sink`` gets the deltas
        (see :class:`StreamingModelClient`)."""
        return await self._streamed(call, sink)

    async def _streamed(self, call: CallModel, sink: DeltaSink | None = None) -> Exchange:
        started = trio.current_time()
        ttft: float | None = None
        request: HttpRequest | None = None
        try:
            request = self.codec.encode(call, stream=True)
            async with self.transport.open_stream(request, self.timeouts) as response:
                event: ModelResponded | ModelFailed
                if not 200 <= response.status < 300 or _whole_json(response.headers):
                    # An error, or a server that ignored ``stream: true`` and sent one JSON
                    # reply: either way the body is one JSON document.
                    body = bytearray()
                    while chunk := await response.receive():
                        body += chunk
                    as_text = _as_text(self.codec, response.status, body)
                    if as_text is None:
                        event = self.codec.decode(
                            call.request_id, response.status, response.headers, bytes(body)
                        )
                    else:
                        del body
                        decode_text, text = as_text
                        event = decode_text(
                            call.request_id, response.status, response.headers, text
                        )
                    whole = event.message.content if isinstance(event, ModelResponded) else None
                    if sink is not None and whole:
                        # Whole, not streamed: hand the reply's text over as one delta.
                        await sink([TextDelta(whole)])
                else:
                    decoder = self.codec.stream_decoder(call.request_id)
                    while chunk := await response.receive():
                        deltas = decoder.feed(chunk)
                        if ttft is None and any(_nonempty(d) for d in deltas):
                            ttft = trio.current_time() - started
                        if sink is not None and deltas:
                            await sink(deltas)
                    event = decoder.finish()
                rate = read_rate_headers(response.headers, time.time())
                if isinstance(event, ModelFailed):
                    return _failed(call, event.error, request, ttft, rate)
                return Exchange(event, ttft, rate)
        except TransportError as exc:
            return _failed(call, transport_failure(exc, streamed=True), request, ttft)
        except AgentcoreError as exc:
            return _failed(call, unusable_request(str(exc)), request, ttft)

    async def aclose(self) -> None:
        """Close the transport."""
        await self.transport.aclose()
