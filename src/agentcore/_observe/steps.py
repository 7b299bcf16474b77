"""Step events: the one vocabulary for what a run does, pushed to sinks as it happens.

Theory of operation
-------------------
Every moment of a run that anything reports (a watcher, the trace file, OpenTelemetry, the
``agentcore.*`` log lines) is one event here, built once and pushed to one optional
:class:`StepSink`: the run's ``Run.steps``, or the request path's own sink for requests made
outside any run (``generate``, ``call_model``, warm-up). The driver calls ``sink.push(event)``
at each step: the run started, a model request queued for a slot, got it, a delta arrived,
the model replied, a retry was scheduled, the request failed for good, a tool call started,
waited for a concurrency cap, reported progress or ended, the run ended. ``push`` never
waits, so it is safe while an inference slot is held. At the points where the run itself may
wait without holding a slot (before it queues for a slot, before it starts tools, before it
reports its end) the driver awaits ``sink.settle()``: that is where back-pressure applies.

Several listeners of one run (a watcher, the driver's trace writer) are one :class:`Tee`
(:func:`tee`). Nothing is built for a run nobody listens to: ``Run.steps`` is ``None`` and
each step costs one ``is None`` test. The one exception is the failure path, which is rare:
a retry, a request failed for good, a failed tool call, a run that did not finish are pushed
to the run's sink or, when it has none, straight to the log sink
(:mod:`agentcore._observe.log_sink`), so that the ``agentcore.*`` log lines need no listener
per run.

Runs are named by their run id (``run``): a number unique among one driver's runs, handed out
in the order runs start (the first run of a driver is ``0``). :class:`RunStarted` maps it to
the run's index (its input's place in a batch).

:class:`StepChannel`, the sink behind ``Driver.watch``, puts events into a bounded trio memory
channel. While the channel has room, ``push`` sends at once; when it is full, events wait in a
backlog in order (every later event too, so the order is kept), and ``settle`` feeds the
backlog to the channel, waiting for the consumer. A slow consumer therefore slows only its own
run, and only where that run holds no slot: other runs never wait for it. The backlog holds at
most the events between two settle points: one model reply's deltas (bounded by the reply's
length) plus one turn's tool events (bounded by the calls of one reply). A
:class:`ToolProgress` is a sample rather than a fact: it is dropped while a backlog exists, so
a long tool's progress never grows the backlog.

Events are frozen attrs values; :func:`agentcore.core.dumps` encodes them (the class-level
``name`` is a stable snake_case name, e.g. for an SSE ``event:`` line).
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

import attrs
import trio

from .._codecs.codec import TextDelta, ToolCallDelta
from .._core.errors import ConfigError
from .._core.events import (
    AbortReason,
    ModelError,
    ToolError,
)
from .._core.messages import AssistantMessage, ModelParams, Usage

if TYPE_CHECKING:
    from .._core.results import Result

__all__ = [
    "HopChanged",
    "Listener",
    "ModelDelta",
    "RequestQueued",
    "RunStarted",
    "Tee",
    "ModelReplied",
    "RequestFailed",
    "RequestStarted",
    "RetryScheduled",
    "RunAborted",
    "RunFinished",
    "StepChannel",
    "StepEvent",
    "StepSink",
    "StepStream",
    "ToolEnded",
    "ToolProgress",
    "ToolStarted",
    "ToolWaited",
    "tee",
]

ToolCap = Literal["turn", "batch", "tool"]
"""Which cap a tool call waited for: its tool's per-turn cap, its batch's cap over all tools,
or its tool's ``max_concurrency`` across the driver."""

ToolSource = Literal["executed", "coalesced", "cached"]
"""How a tool call got its outcome: its own execution, a concurrent identical call's, or the
result cache."""


@attrs.frozen
class RunStarted:
    """A run started (its first event)."""

    name: ClassVar[str] = "run_started"
    run: int
    """The run's id: unique among the driver's runs, in the order they started."""
    index: int
    """The run's index (``Result.index``: its input's place in a batch)."""
    at: float
    """trio time."""


@attrs.frozen
class RequestQueued:
    """A model request attempt starts waiting for an inference slot (after its rate budget)."""

    name: ClassVar[str] = "request_queued"
    run: int | None
    """The run's id (``None``: a request outside any run)."""
    request_id: str
    turn: int
    params: ModelParams
    """The request's sampling parameters."""
    at: float


@attrs.frozen
class RequestStarted:
    """A model request attempt got its inference slot and is being sent."""

    name: ClassVar[str] = "request_started"
    run: int | None
    """The run's id (``None``: a request outside any run)."""
    request_id: str
    turn: int
    """0-based model request of the run."""
    attempt: int
    """1 for the first attempt, 2 for the first retry..."""
    slot_wait: float
    """Seconds this attempt waited for its slot."""
    at: float
    """trio time the attempt is sent (its slot is held from here to the attempt's end)."""


@attrs.frozen
class ModelDelta:
    """A piece of the reply arrived (only when deltas were asked for)."""

    name: ClassVar[str] = "model_delta"
    run: int | None
    request_id: str
    attempt: int
    delta: TextDelta | ToolCallDelta

    @property
    def text(self) -> str:
        """The text this delta adds (``""`` for a tool-call fragment)."""
        delta = self.delta
        return delta.text if isinstance(delta, TextDelta) else ""


@attrs.frozen
class ModelReplied:
    """The model answered the request (after ``attempts`` attempts)."""

    name: ClassVar[str] = "model_replied"
    run: int | None
    request_id: str
    turn: int
    attempts: int
    message: AssistantMessage
    usage: Usage
    finish_reason: str | None
    ttft: float | None
    """Seconds from the start of the last attempt to its first token (streamed replies)."""
    at: float
    """trio time the last attempt ended."""


@attrs.frozen
class RequestFailed:
    """The request failed for good (its retries are spent, or it was not retryable)."""

    name: ClassVar[str] = "request_failed"
    run: int | None
    request_id: str
    turn: int
    attempts: int
    error: ModelError
    at: float


@attrs.frozen
class RetryScheduled:
    """An attempt failed; the request is sent again after ``delay`` seconds (no slot held)."""

    name: ClassVar[str] = "retry_scheduled"
    run: int | None
    request_id: str
    attempt: int
    """The attempt that failed."""
    error: ModelError
    delay: float
    at: float


@attrs.frozen
class ToolStarted:
    """A tool call was handed to the tool executor."""

    name: ClassVar[str] = "tool_started"
    run: int
    call_id: str
    tool: str
    arguments: Mapping[str, Any]
    at: float


@attrs.frozen
class ToolEnded:
    """A tool call ended: ``error`` is ``None`` when it returned ``content``."""

    name: ClassVar[str] = "tool_ended"
    run: int
    call_id: str
    tool: str
    content: str | None
    error: ToolError | None
    source: ToolSource
    duration: float
    at: float
    calls: int = 1
    """The calls the execution answered (``source`` ``"executed"``: itself and the calls that
    joined it), else 1."""
    exception: BaseException | None = attrs.field(default=None, eq=False, repr=False)
    """For the call that ran a failed execution: what the tool raised, with its traceback
    (``None`` for a timeout, and for every other call)."""
    failures: int = 0
    """For the call that ran a failed execution: the tool's failed executions so far in the
    driver, this one included (0 for every other call); the log lines are bounded by it."""

    @property
    def failed(self) -> bool:
        """Whether the call failed."""
        return self.error is not None


@attrs.frozen
class RunFinished:
    """The run ended with an output."""

    name: ClassVar[str] = "run_finished"
    status: ClassVar[Literal["ok"]] = "ok"
    """The run's status (a :class:`RunAborted` carries ``"failed"`` or ``"cancelled"``), so that
    either end of a run answers ``event.status``."""
    run: int
    output: Any
    usage: Usage
    turns: int
    at: float


@attrs.frozen
class RunAborted:
    """The run ended without an output (``status`` ``"failed"`` or ``"cancelled"``)."""

    name: ClassVar[str] = "run_aborted"
    run: int
    status: Literal["failed", "cancelled"]
    reason: AbortReason
    usage: Usage
    turns: int
    at: float


@attrs.frozen
class ToolWaited:
    """A tool call waited for a concurrency cap (no inference slot held), and got through it.

    Pushed when the wait ends, between the call's :class:`ToolStarted` and its
    :class:`ToolEnded` (whose ``duration`` includes the wait). A call may wait for the turn's
    cap, then the batch's, then (for its execution) the tool's.
    """

    name: ClassVar[str] = "tool_waited"
    run: int
    call_id: str
    tool: str
    cap: ToolCap
    since: float
    """trio time the wait began."""
    at: float
    """trio time the call got through the cap."""

    @property
    def wait(self) -> float:
        """Seconds waited."""
        return self.at - self.since


@attrs.frozen
class ToolProgress:
    """A long tool reported how far it has got (``RunContext.progress``); never waits."""

    name: ClassVar[str] = "tool_progress"
    run: int
    call_id: str
    tool: str
    fraction: float
    """The share done, from 0 to 1."""
    message: str
    at: float


@attrs.frozen
class HopChanged:
    """A Batch API hop was polled or changed (``openai-batch://``, ``anthropic-batch://``):
    it was submitted, a poll found its status and progress, or it ended, was split, refused
    for good or cancelled (``note`` says which, in words). Not tied to a run: a hop holds the
    calls of many (``run`` is ``None``)."""

    name: ClassVar[str] = "hop_changed"
    run: None
    hop: int
    """The hop's number (the journal's: continued after a resume)."""
    batch_id: str | None
    status: str
    """``submitted``, the provider's status word, or ``split``, ``refused``, ``dead``,
    ``cancelled``."""
    requests: int
    done: int
    """Lines the provider reports answered."""
    polled: bool
    """Whether a poll found this (else a submission or an end)."""
    note: str
    at: float


StepEvent = (
    RunStarted
    | RequestQueued
    | RequestStarted
    | ModelDelta
    | ModelReplied
    | RequestFailed
    | RetryScheduled
    | ToolStarted
    | ToolEnded
    | RunFinished
    | RunAborted
    | ToolWaited
    | ToolProgress
    | HopChanged
)
"""Every step event a run (or a Batch API backend's hop) can push."""


class StepSink(Protocol):
    """Where a run's step events go (see the module's theory of operation).

    Attributes:
        deltas: whether model replies are streamed to the sink as :class:`ModelDelta` events.
    """

    deltas: bool

    def push(self, event: StepEvent) -> None:
        """Take one event now; never waits (it may be called while a slot is held)."""
        ...

    async def settle(self) -> None:
        """Wait until the consumer has room again (called where the run holds no slot)."""
        ...


class Listener(StepSink, Protocol):
    """A sink a driver keeps for all its runs (the trace writer, OpenTelemetry): told every
    run's events and those of requests outside runs, and closed with the driver."""

    def close(self) -> None:
        """Finish (called once, when the driver closes)."""
        ...


class Tee:
    """Several sinks as one: each event goes to every sink, in order; ``settle`` waits for
    each. ``deltas`` is set when any sink wants deltas (the others then receive them too)."""

    __slots__ = ("_sinks", "deltas")

    def __init__(self, sinks: Sequence[StepSink]) -> None:
        self._sinks = tuple(sinks)
        self.deltas = any(s.deltas for s in self._sinks)

    def push(self, event: StepEvent) -> None:
        for sink in self._sinks:
            sink.push(event)

    async def settle(self) -> None:
        for sink in self._sinks:
            await sink.settle()


def tee(*sinks: StepSink | None) -> StepSink | None:
    """One sink for ``sinks`` (``None`` entries left out): ``None``, the one, or a :class:`Tee`."""
    found = [s for s in sinks if s is not None]
    if not found:
        return None
    return found[0] if len(found) == 1 else Tee(found)


class StepChannel:
    """A :class:`StepSink` over a bounded memory channel, with an ordered backlog."""

    def __init__(self, send: trio.MemorySendChannel[StepEvent], *, deltas: bool) -> None:
        self.deltas = deltas
        self._send = send
        self._backlog: deque[StepEvent] = deque()
        self._closed = False
        # Several runs may share one channel (a batch): one of them feeds the backlog at a
        # time, so an event leaves the backlog only once it is in the channel.
        self._feeding = trio.Lock()

    def push(self, event: StepEvent) -> None:
        if self._closed:
            return
        if self._backlog and type(event) is ToolProgress:
            return  # a sample, not a fact: a consumer that fell behind skips it
        if not self._backlog:
            try:
                self._send.send_nowait(event)
            except trio.WouldBlock:
                pass
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                # The consumer went away: the run goes on unobserved.
                self._closed = True
                return
            else:
                return
        self._backlog.append(event)

    async def settle(self) -> None:
        backlog = self._backlog
        if not backlog:
            return
        async with self._feeding:
            while backlog and not self._closed:
                try:
                    await self._send.send(backlog[0])
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self._closed = True
                    backlog.clear()
                    return
                backlog.popleft()

    async def aclose(self) -> None:
        """Deliver the backlog, then end the consumer's iteration."""
        await self.settle()
        self._closed = True
        await self._send.aclose()


class StepStream:
    """The step events of one watched run, in order; iterate with ``async for``.

    Made by :meth:`Driver.watch`. The iteration ends after the run's last event
    (:class:`RunFinished` or :class:`RunAborted`); :attr:`result` is then set.
    """

    def __init__(self, receive: trio.MemoryReceiveChannel[StepEvent]) -> None:
        self._receive = receive
        self.result: Result | None = None
        """The run's :class:`~agentcore.Result`, once it has ended."""

    def __aiter__(self) -> AsyncIterator[StepEvent]:
        return self

    async def __anext__(self) -> StepEvent:
        try:
            return await self._receive.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None


def open_step_channel(buffer: int, *, deltas: bool) -> tuple[StepChannel, StepStream]:
    """A connected sink and stream; ``buffer`` events fit in the channel."""
    if isinstance(buffer, bool) or not isinstance(buffer, int) or buffer < 1:
        raise ConfigError(f"buffer must be a positive integer, got {buffer!r}")
    send, receive = trio.open_memory_channel[StepEvent](buffer)
    return StepChannel(send, deltas=deltas), StepStream(receive)
