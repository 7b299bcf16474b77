"""``ScriptedModel``: an in-process model for deterministic tests of agents and schedules.

Replies come from a *policy* (a function of the ``CallModel``) or from a *script* (a sequence
of replies served in order). Latency is spent in trio time with ``trio.sleep``, so under
``trio.testing.MockClock(autojump_threshold=0)`` a run that "takes" minutes finishes at once
and its virtual timings are exact. The model implements the driver's ``ModelClient``
protocol, so a driver opened on it exercises the real slot limiter, retries, tool executor
and cancellation paths.

A reply may be given as:

- ``str``: a final text answer;
- :class:`~agentcore.core.AssistantMessage`: text and/or tool calls;
- :class:`~agentcore.core.ModelResponded` or :class:`~agentcore.core.ModelFailed`: used as is (the
  request id is set to the call's);
- :class:`~agentcore.ModelError`: the request fails with this error (set ``retryable`` and
  ``retry_after`` to exercise retries);
- :class:`StreamCut`: a streamed reply that breaks after some text (a plain exchange fails
  at once with the same error).

Streamed exchanges (``Driver.generate_stream``, runs watched with deltas) cut each reply into
deltas of ``chunk`` characters: the first arrives after ``ttft`` (or at once), the others are
spread evenly over the rest of the latency.

The model also records what it saw: every call in arrival order, and how many exchanges were
in flight at once (``peak_in_flight``), which tests use to check the slot limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import attrs
import trio

from .._codecs.classify import truncated_stream
from .._codecs.exchange import Exchange
from .._core.events import CallModel, ErrorKind, ModelError, ModelFailed, ModelResponded
from .._core.messages import AssistantMessage, Message, Usage
from .._transports.deltas import reply_deltas
from .._transports.model_client import DeltaSink

__all__ = ["Reply", "ScriptedModel", "StreamCut"]


@attrs.frozen
class StreamCut:
    """A reply whose stream breaks: ``partial`` text arrives, then the connection is lost.

    The failure is the one a real truncated stream gives (``ErrorKind.CONNECTION``,
    retryable), so the driver retries it unless a delta already reached the caller.
    """

    partial: str
    error: ModelError = attrs.field(factory=lambda: truncated_stream("stream cut (scripted)"))


Reply = str | AssistantMessage | ModelResponded | ModelFailed | ModelError | StreamCut
"""What a policy or a script may answer (see the module documentation)."""

Policy = Callable[[CallModel], Reply]
Latency = float | Callable[[CallModel], float]


def _chars(message: Message) -> int:
    if not isinstance(message, AssistantMessage):  # system, user and tool messages
        return len(message.content)
    total = len(message.content or "")
    for call in message.tool_calls:
        total += len(call.name) + len(call.arguments)
    return total


def _estimated_usage(call: CallModel, reply: AssistantMessage) -> Usage:
    # About four characters per token; exact numbers do not matter, only that they are
    # deterministic and grow with the text.
    prompt = sum(map(_chars, call.messages)) // 4 + 1
    completion = _chars(reply) // 4 + 1
    return Usage(prompt_tokens=prompt, completion_tokens=completion)


class ScriptedModel:
    """A model whose replies come from a policy function or a script, with trio-time latency.

    Args:
        replies: a function ``CallModel -> Reply``, or a sequence of replies served in order
            to whichever request comes next. When a script runs out the request fails with a
            final ``PROTOCOL`` error naming the problem.
        latency: seconds each exchange takes (a number, or a function of the call).
        ttft: seconds to the first token of a reply with content; reported as the exchange's
            time to first token (capped at the latency). ``None``: not reported.
        chunk: characters per delta of a streamed reply.

    Attributes:
        calls: every ``CallModel`` received, in arrival order.
        in_flight: exchanges running now.
        peak_in_flight: the most exchanges ever running at once.
    """

    def __init__(
        self,
        replies: Policy | Iterable[Reply],
        *,
        latency: Latency = 0.0,
        ttft: float | None = None,
        chunk: int = 4,
    ) -> None:
        self._policy: Policy | None
        self._script: Iterator[Reply] | None
        if callable(replies):
            self._policy, self._script = replies, None
        else:
            self._policy, self._script = None, iter(list(replies))
        self._latency = latency
        self._ttft = ttft
        self._chunk = chunk
        self.calls: list[CallModel] = []
        self.in_flight = 0
        self.peak_in_flight = 0

    def _reply_for(self, call: CallModel) -> Reply:
        if self._policy is not None:
            return self._policy(call)
        assert self._script is not None
        try:
            return next(self._script)
        except StopIteration:
            return ModelError(
                kind=ErrorKind.PROTOCOL,
                message=f"script exhausted at request {call.request_id!r}",
            )

    def _event_for(self, call: CallModel, reply: Reply) -> ModelResponded | ModelFailed:
        if isinstance(reply, str):
            reply = AssistantMessage(content=reply)
        if isinstance(reply, AssistantMessage):
            finish = "tool_calls" if reply.tool_calls else "stop"
            return ModelResponded(call.request_id, reply, _estimated_usage(call, reply), finish)
        if isinstance(reply, ModelError):
            return ModelFailed(call.request_id, reply)
        if isinstance(reply, StreamCut):
            return ModelFailed(call.request_id, reply.error)
        return attrs.evolve(reply, request_id=call.request_id)

    async def exchange(self, call: CallModel) -> Exchange:
        """Answer ``call`` after its latency (see
        :class:`~agentcore._transports.model_client.ModelClient`)."""
        self.calls.append(call)
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            event = self._event_for(call, self._reply_for(call))
            latency = self._latency(call) if callable(self._latency) else self._latency
            ttft: float | None = None
            if self._ttft is not None and isinstance(event, ModelResponded):
                ttft = min(self._ttft, latency)
                await trio.sleep(ttft)
                await trio.sleep(latency - ttft)
            elif latency == 0:
                await trio.lowlevel.checkpoint()  # what ``trio.sleep(0)`` does, a frame fewer
            else:
                await trio.sleep(latency)
            return Exchange(event, ttft)
        finally:
            self.in_flight -= 1

    async def exchange_streaming(self, call: CallModel, sink: DeltaSink) -> Exchange:
        """Answer ``call`` delta by delta into ``sink`` (see the module documentation)."""
        self.calls.append(call)
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            reply = self._reply_for(call)
            event = self._event_for(call, reply)
            latency = self._latency(call) if callable(self._latency) else self._latency
            if isinstance(reply, StreamCut):
                deltas = reply_deltas(AssistantMessage(reply.partial), self._chunk)
            elif isinstance(event, ModelResponded):
                deltas = reply_deltas(event.message, self._chunk)
            else:
                deltas = []
            first = min(self._ttft or 0.0, latency)
            await trio.sleep(first)
            ttft: float | None = None
            if deltas:
                ttft = first
                gap = (latency - first) / len(deltas)
                for k, delta in enumerate(deltas):
                    if k:
                        await trio.sleep(gap)
                    await sink((delta,))
                await trio.sleep(gap)
            else:
                await trio.sleep(latency - first)
            return Exchange(event, ttft)
        finally:
            self.in_flight -= 1

    async def aclose(self) -> None:
        """Nothing to release; present for the ``ModelClient`` protocol."""
        await trio.lowlevel.checkpoint()
