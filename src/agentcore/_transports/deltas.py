"""Deltas of a streamed reply on their way from a model client to whoever watches.

:func:`stream_exchange` performs one attempt at a model request and hands the reply's deltas
to a :data:`~agentcore._transports.model_client.DeltaSink` as they arrive. Clients that can stream
(:class:`~agentcore._transports.model_client.StreamingModelClient`: the HTTP client,
``ScriptedModel``)
do it themselves; for any other client the whole reply is cut into deltas once it is in, so
every model client works with ``Driver.generate_stream`` and with delta step events.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._codecs.codec import Delta, TextDelta, ToolCallDelta
from .._codecs.exchange import Exchange
from .._core.events import CallModel, ModelResponded
from .._core.messages import AssistantMessage
from .model_client import DeltaSink, ModelClient

__all__ = ["reply_deltas", "stream_exchange"]


def _pieces(text: str, size: int | None) -> list[str]:
    if not text:
        return []
    if size is None or size >= len(text):
        return [text]
    return [text[i : i + size] for i in range(0, len(text), size)]


def reply_deltas(message: AssistantMessage, size: int | None = None) -> list[Delta]:
    """The deltas a streaming server would have sent for ``message``.

    Text comes first, then each tool call (its id and name with the first piece of its
    arguments). ``size`` cuts text and arguments into pieces of at most that many characters
    (``None``: one piece each).
    """
    deltas: list[Delta] = [TextDelta(piece) for piece in _pieces(message.content or "", size)]
    for index, call in enumerate(message.tool_calls):
        pieces = _pieces(call.arguments, size) or [""]
        deltas.append(ToolCallDelta(index, call.id, call.name, pieces[0]))
        deltas.extend(ToolCallDelta(index, arguments=piece) for piece in pieces[1:])
    return deltas


async def stream_exchange(client: ModelClient, call: CallModel, sink: DeltaSink) -> Exchange:
    """One attempt at ``call`` whose deltas go to ``sink`` as they arrive."""
    streaming = getattr(client, "exchange_streaming", None)
    if streaming is not None:
        exchange: Exchange = await streaming(call, sink)
        return exchange
    exchange = await client.exchange(call)
    event = exchange.event
    if isinstance(event, ModelResponded):
        deltas: Sequence[Delta] = reply_deltas(event.message)
        if deltas:
            await sink(deltas)
    return exchange
