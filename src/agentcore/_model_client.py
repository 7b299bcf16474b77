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

import time
from typing import Protocol, runtime_checkable

import attrs
import trio

from ._codecs.classify import connection_error, truncated_stream
from ._codecs.codec import Codec, Delta, TextDelta
from ._codecs.http import Timeouts
from ._codecs.ratelimits import read_rate_headers
from ._core.errors import AgentcoreError, TransportError
from ._core.events import CallModel, ErrorKind, ModelError, ModelFailed, ModelResponded
from ._core.ratebudget import RateObservation
from ._transports.protocol import Transport

__all__ = ["Exchange", "HttpModelClient", "ModelClient"]


@attrs.frozen
class Exchange:
    """The outcome of one attempt at a model request."""

    event: ModelResponded | ModelFailed
    ttft: float | None = None
    """Seconds from the start of the attempt to the first non-empty delta (streamed replies
    only)."""
    rate: RateObservation | None = None
    """What the reply's rate-limit headers said (``None``: nothing)."""


@runtime_checkable
class ModelClient(Protocol):
    """Performs model exchanges. Implementations never raise for server or network failures.

    :class:`HttpModelClient` speaks HTTP through a codec and a transport;
    :class:`~agentcore.testing._scripted.ScriptedModel` answers in process for tests.
    """

    async def exchange(self, call: CallModel) -> Exchange:
        """One attempt at ``call``: a ``ModelResponded`` or a classified ``ModelFailed``."""
        ...

    async def aclose(self) -> None:
        """Release what the client holds (connections). It is unusable afterwards."""
        ...


_DEFAULT_TIMEOUTS = Timeouts()


def _nonempty(delta: Delta) -> bool:
    if isinstance(delta, TextDelta):
        return bool(delta.text)
    return bool(delta.arguments or delta.name or delta.id)


def _transport_failure(exc: TransportError) -> ModelError:
    if exc.kind == "timeout":
        return ModelError(kind=ErrorKind.TIMEOUT, message=str(exc), retryable=True)
    return connection_error(str(exc))


def _unusable(exc: AgentcoreError) -> ModelError:
    # A codec refusing a request or bytes it cannot handle: retrying would not help.
    return ModelError(kind=ErrorKind.PROTOCOL, message=str(exc))


class HttpModelClient:
    """A :class:`ModelClient` over HTTP: ``codec`` builds and reads messages, ``transport``
    moves them.

    Args:
        codec: the backend's wire dialect.
        transport: the HTTP transport (owned: :meth:`aclose` closes it).
        timeouts: transport time limits per exchange.
        stream: request streamed replies (needed to measure time to first token).
    """

    def __init__(
        self,
        codec: Codec,
        transport: Transport,
        *,
        timeouts: Timeouts = _DEFAULT_TIMEOUTS,
        stream: bool = False,
    ) -> None:
        self.codec = codec
        self.transport = transport
        self.timeouts = timeouts
        self.stream = stream

    async def exchange(self, call: CallModel) -> Exchange:
        """One attempt at ``call`` (see :meth:`ModelClient.exchange`)."""
        if self.stream:
            return await self._streamed(call)
        try:
            request = self.codec.encode(call, stream=False)
            response = await self.transport.send(request, self.timeouts)
        except TransportError as exc:
            return Exchange(ModelFailed(call.request_id, _transport_failure(exc)))
        except AgentcoreError as exc:
            return Exchange(ModelFailed(call.request_id, _unusable(exc)))
        event = self.codec.decode(call.request_id, response.status, response.headers, response.body)
        return Exchange(event, None, read_rate_headers(response.headers, time.time()))

    async def _streamed(self, call: CallModel) -> Exchange:
        started = trio.current_time()
        ttft: float | None = None
        try:
            request = self.codec.encode(call, stream=True)
            async with self.transport.open_stream(request, self.timeouts) as response:
                if not 200 <= response.status < 300:
                    body = bytearray()
                    while chunk := await response.receive():
                        body += chunk
                    event = self.codec.decode(
                        call.request_id, response.status, response.headers, bytes(body)
                    )
                    return Exchange(event, None, read_rate_headers(response.headers, time.time()))
                rate = read_rate_headers(response.headers, time.time())
                decoder = self.codec.stream_decoder(call.request_id)
                while chunk := await response.receive():
                    deltas = decoder.feed(chunk)
                    if ttft is None and any(_nonempty(d) for d in deltas):
                        ttft = trio.current_time() - started
                return Exchange(decoder.finish(), ttft, rate)
        except TransportError as exc:
            if exc.response_started:
                error = truncated_stream(f"stream interrupted: {exc}")
            else:
                error = _transport_failure(exc)
            return Exchange(ModelFailed(call.request_id, error), ttft)
        except AgentcoreError as exc:
            return Exchange(ModelFailed(call.request_id, _unusable(exc)), ttft)

    async def aclose(self) -> None:
        """Close the transport."""
        await self.transport.aclose()
