"""One-shot generation on the driver: a reply, or its deltas as they arrive.

Theory of operation
-------------------
``Driver.generate`` and ``Driver.generate_stream`` build one ``CallModel`` from messages (plus
tools, an output type and parameters) and send it through the driver's model request path,
so it takes an inference slot per attempt, is retried by the driver's policy and counts in
the driver's statistics like any agent's request.

A stream runs its request in a task of its own, which hands each delta to a bounded memory
channel the caller iterates. The request may be retried only while nothing has been handed
over: once a delta is in the channel, a failure ends the iteration with
:class:`GenerationError` (a cut stream is never passed off as a shorter reply). After the last
delta comes the assembled :class:`Generation`. Leaving the ``async with`` block (at the end,
early, or by cancellation) cancels that task, which releases the slot on its way out.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._codecs.classify import deadline_error
from .._codecs.codec import Delta, TextDelta, ToolCallDelta
from .._core.config import _output_parts
from .._core.errors import AgentcoreError, ConfigError
from .._core.events import CallModel, ErrorKind, ModelError, ModelFailed, ModelResponded
from .._core.messages import (
    AgentHints,
    AssistantMessage,
    Message,
    ModelParams,
    ServerTiming,
    SystemMessage,
    ToolCall,
    ToolSpec,
    Usage,
    UserMessage,
)
from .._core.schema import ValidationFailed, parse_json_text, structure
from .._tools.spec import AnyTool, Tool

if TYPE_CHECKING:
    from .fallback import FallbackRequests
    from .requests import ModelRequests

__all__ = ["Generation", "GenerationError", "GenerationStream", "build_call"]

_ids = itertools.count()


@attrs.frozen
class Generation:
    """A model's whole reply to one :meth:`Driver.generate` (or the end of a stream)."""

    request_id: str
    message: AssistantMessage
    usage: Usage
    finish_reason: str | None
    output: Any = None
    """The reply structured into the requested output type (``None`` without one)."""
    timing: ServerTiming | None = None
    """Server-reported timing, when the backend gives it."""

    @property
    def text(self) -> str:
        """The reply's text (``""`` when it only called tools)."""
        return self.message.content or ""

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls the model asked for (not run: generation calls no tools)."""
        return self.message.tool_calls


class GenerationError(AgentcoreError):
    """A generation failed for good: retries spent, not retryable, or cut after a delta.

    Attributes:
        error: the classified :class:`~agentcore.ModelError`.
        request_id: the request's id.
    """

    def __init__(self, request_id: str, error: ModelError) -> None:
        super().__init__(f"{error.kind.value}: {error.message}")
        self.request_id = request_id
        self.error = error


def _messages(messages: str | Iterable[Message]) -> list[Message]:
    if isinstance(messages, str):
        return [UserMessage(messages)]
    result = list(messages)
    for m in result:
        if not isinstance(m, Message):  # the union of every message class
            raise ConfigError(f"not a message: {m!r}")
    if not result:
        raise ConfigError("generate needs at least one message")
    return result


def _specs(tools: Iterable[AnyTool | ToolSpec]) -> tuple[ToolSpec, ...]:
    specs = []
    for item in tools:
        if isinstance(item, Tool):
            specs.append(item.spec)
        elif isinstance(item, ToolSpec):
            specs.append(item)
        else:
            raise ConfigError(f"tools must be @agentcore.tool objects or ToolSpecs, got {item!r}")
    return tuple(specs)


def build_call(
    messages: str | Iterable[Message],
    *,
    tools: Iterable[AnyTool | ToolSpec],
    output: Any,
    params: ModelParams,
    priority: int,
    request_id: str | None,
) -> CallModel:
    """The ``CallModel`` of one generation (see :meth:`Driver.generate`)."""
    transcript = _messages(messages)
    specs = _specs(tools)
    if not isinstance(params, ModelParams):
        raise ConfigError(f"params must be ModelParams, got {params!r}")
    spec = None
    if output is not None:
        try:
            spec, instruction = _output_parts(output)
        except TypeError as exc:
            raise ConfigError(f"unsupported output type {output!r}: {exc}") from None
        # The instruction goes where an agent loop puts it, so the prefix matches.
        if isinstance(transcript[0], SystemMessage):
            first = transcript[0].content
            transcript[0] = SystemMessage(f"{first}\n\n{instruction}" if first else instruction)
        else:
            transcript.insert(0, SystemMessage(instruction))
    rid = f"generate-{next(_ids)}" if request_id is None else request_id
    return CallModel(
        rid,
        tuple(transcript),
        specs,
        params,
        AgentHints(rid, priority=priority),
        None if specs else spec,
    )


def finished(event: ModelResponded | ModelFailed, output: Any) -> Generation:
    """The :class:`Generation` of a final event, or :class:`GenerationError`."""
    if isinstance(event, ModelFailed):
        raise GenerationError(event.request_id, event.error)
    message = event.message
    value = None
    if output is not None and not message.tool_calls:
        try:
            value = structure(parse_json_text(message.content or ""), output)
        except ValidationFailed as exc:
            error = ModelError(
                ErrorKind.PROTOCOL, f"the reply does not fit {output!r}: {exc.message}"
            )
            raise GenerationError(event.request_id, error) from None
    return Generation(
        event.request_id, message, event.usage, event.finish_reason, value, event.timing
    )


async def generate(
    requests: ModelRequests | FallbackRequests, call: CallModel, output: Any, deadline: float | None
) -> Generation:
    event: ModelResponded | ModelFailed = ModelFailed(call.request_id, deadline_error())
    with trio.CancelScope(deadline=math.inf if deadline is None else deadline):
        event = await requests.send(call, None)
    return finished(event, output)


class _ChannelSink:
    """Hands deltas to the caller's channel; remembers that one got there."""

    __slots__ = ("_send", "delivered")

    def __init__(self, send: trio.MemorySendChannel[Delta | Generation | ModelFailed]) -> None:
        self._send = send
        self.delivered = False

    async def __call__(self, deltas: Sequence[Delta]) -> None:
        send = self._send
        for delta in deltas:
            await send.send(delta)
            self.delivered = True


class GenerationStream:
    """The deltas of one streamed generation; iterate with ``async for``.

    Yields :class:`~agentcore.wire.TextDelta` and :class:`~agentcore.wire.ToolCallDelta`
    values as they arrive, then one :class:`Generation` (the assembled reply, with usage and
    finish reason), which is also kept as :attr:`reply`.

    Raises (from the iteration):
        GenerationError: the request failed: before any delta (retries spent), or after one
            (the stream was cut; the deltas already seen are not a complete reply).
    """

    def __init__(
        self, receive: trio.MemoryReceiveChannel[Delta | Generation | ModelFailed], output: Any
    ) -> None:
        self._receive = receive
        self._output = output
        self.reply: Generation | None = None
        """The assembled reply, once the iteration reached it."""

    def __aiter__(self) -> GenerationStream:
        return self

    async def __anext__(self) -> TextDelta | ToolCallDelta | Generation:
        try:
            item = await self._receive.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None
        if isinstance(item, ModelFailed):
            raise GenerationError(item.request_id, item.error)
        if isinstance(item, Generation):
            self.reply = item
        return item

    async def text(self) -> str:
        """Consume the rest of the stream and return the reply's text."""
        async for _ in self:
            pass
        assert self.reply is not None
        return self.reply.text


async def _produce(
    requests: ModelRequests | FallbackRequests,
    call: CallModel,
    output: Any,
    deadline: float | None,
    send: trio.MemorySendChannel[Delta | Generation | ModelFailed],
) -> None:
    async with send:
        sink = _ChannelSink(send)
        event: ModelResponded | ModelFailed = ModelFailed(call.request_id, deadline_error())
        with trio.CancelScope(deadline=math.inf if deadline is None else deadline):
            event = await requests.send(call, None, sink)
        item: Generation | ModelFailed
        try:
            item = finished(event, output)
        except GenerationError as exc:
            item = ModelFailed(exc.request_id, exc.error)
        await send.send(item)


@asynccontextmanager
async def generate_stream(
    requests: ModelRequests | FallbackRequests,
    call: CallModel,
    output: Any,
    deadline: float | None,
    buffer: int,
) -> AsyncIterator[GenerationStream]:
    if isinstance(buffer, bool) or not isinstance(buffer, int) or buffer < 0:
        raise ConfigError(f"buffer must be a non-negative integer, got {buffer!r}")
    send, receive = trio.open_memory_channel[Delta | Generation | ModelFailed](buffer)
    raised: BaseException | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_produce, requests, call, output, deadline, send)
        try:
            yield GenerationStream(receive, output)
        except BaseException as exc:  # re-raised below, unwrapped, once the nursery is closed
            raised = exc
        finally:
            # At the end, or on leaving early: stop the request (its slot is released).
            nursery.cancel_scope.cancel()
            receive.close()
    if raised is not None:
        raise raised
