"""The trio driver: performs the effects of many agent loops against one shared backend.

Theory of operation
-------------------
An agent loop is a pure state machine: it emits effects and consumes events. The driver turns
each effect into an action and each action's outcome into the next event:

- ``CallModel`` -> take an inference slot -> one HTTP exchange -> give the slot back. A failed
  exchange that is worth retrying sleeps its back-off *without* a slot and queues again. The
  final ``ModelResponded`` or ``ModelFailed`` goes to the loop.
- ``CallTool`` -> the tool executor (coalescing, caching, per-tool limits and timeouts live
  there). No slot is held while a tool runs. Its ``ToolReturned``/``ToolFailed`` goes to the
  loop.
- ``Finish`` / ``Abort`` -> the run ends; its :class:`Result` is built from the effect.

One run is owned by one task (:meth:`Driver.run`). A lone effect is awaited inline; several
effects of one turn (parallel tool calls) run as tasks of a per-run nursery and report through
a memory channel, and the loop sees each outcome as it arrives. Once the loop has ended, the
nursery is cancelled, so results of tools still running are dropped rather than fed to a loop
that would reject them.

Cancellation and deadlines
--------------------------
Each run executes inside its own cancel scope, whose deadline is the run's deadline.
:meth:`Driver.cancel` and :meth:`ResultStream.cancel` cancel the scopes of the runs concerned
(and mark them, so runs started afterwards end at once). When a run's scope fires, whatever it
awaited is abandoned (a slot wait, an exchange, a back-off sleep, tools) and the loop is told
why: ``CancelRequested`` for a cancellation, ``ModelFailed`` with ``ErrorKind.DEADLINE`` for a
deadline that interrupted a model request, ``CancelRequested("deadline")`` for one that
interrupted tools. The loop answers with ``Abort`` and the run returns a ``cancelled`` or
``failed`` result with the transcript so far. Nothing waits for other agents: each run only
ever waits for its own work. A cancellation coming from *outside* (a cancel scope of the
caller) is not absorbed: it propagates as usual in trio.

Slots
-----
The slot limiter (:mod:`agentcore._slot_limiter` over the pure :mod:`agentcore._slots`) is the
only place that bounds model requests; ``max_inflight`` is a hard cap whatever the policy or
the adaptive limit does.
"""

from __future__ import annotations

import math
import random
from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Literal

import attrs
import trio

from ._backends import backend as make_backend
from ._codec import Backend
from ._errors import ConfigError, InternalError, LocalProtocolError
from ._events import (
    Abort,
    AbortKind,
    AbortReason,
    CallModel,
    CallTool,
    CancelRequested,
    Effect,
    ErrorKind,
    Event,
    Finish,
    ModelError,
    ModelFailed,
    ModelResponded,
)
from ._http import Timeouts
from ._loop import AgentLoop, RunState
from ._messages import Message, Usage
from ._model_client import HttpModelClient, ModelClient
from ._rejection import repeated_rejection
from ._retry import RetryPolicy
from ._sim import open_sim_server
from ._slot_limiter import SlotLimiter
from ._slots import SlotPolicy
from ._stats import DriverStatistics, RequestStats, Summary
from ._tool_executor import ToolExecutor, open_tool_executor
from ._tools import Tool
from ._transports import TransportKind, make_transport

__all__ = ["Driver", "Result", "ResultStream", "RunTimings", "Status", "open_driver"]

Status = Literal["ok", "failed", "cancelled"]
"""How a run ended: with an output, without one, or because it was cancelled."""

_OVERLOAD_KINDS = frozenset({ErrorKind.RATE_LIMITED, ErrorKind.OVERLOADED})
_DEFAULT_RETRY = RetryPolicy()
_DEFAULT_TIMEOUTS = Timeouts()


@attrs.frozen
class RunTimings:
    """Where the time of one run went. Instants are trio time (``trio.current_time()``)."""

    started: float
    ended: float
    model_time: float
    """Seconds of model exchanges (a slot held), retries included."""
    tool_time: float
    """Seconds during which at least one tool call was running."""
    slot_wait: float
    """Seconds spent waiting for slots."""
    ttft: tuple[float | None, ...]
    """Time to first token of each model request, in order (``None`` when not streamed)."""
    attempts: int
    """HTTP exchanges made, retries included."""

    @property
    def wall(self) -> float:
        """Seconds from start to end."""
        return self.ended - self.started


@attrs.frozen
class Result:
    """How one agent run ended.

    ``status`` is ``"ok"`` when the loop finished with an output, ``"cancelled"`` when the run
    was cancelled, ``"failed"`` otherwise (model failure, exhausted budgets, deadline); then
    ``error`` says why.
    """

    index: int
    """The run's index (its position in the input of a batch)."""
    status: Status
    output: Any
    """The loop's output (``None`` unless ``status == "ok"``)."""
    error: AbortReason | None
    transcript: tuple[Message, ...]
    usage: Usage
    timings: RunTimings
    turns: int
    """Model requests made (sent at least once)."""


@attrs.define(eq=False)
class _Run:
    """The mutable bookkeeping of one run, owned by its task."""

    index: int
    loop: AgentLoop
    scope: trio.CancelScope
    started: float
    cancelled: bool = False
    pending_model: CallModel | None = None
    turns: int = 0
    attempts: int = 0
    model_time: float = 0.0
    slot_wait: float = 0.0
    ttft: list[float | None] = attrs.field(factory=list)
    tools_running: int = 0
    tools_since: float = 0.0
    tool_time: float = 0.0

    def cancel(self) -> None:
        self.cancelled = True
        self.scope.cancel()

    def tool_started(self) -> None:
        if self.tools_running == 0:
            self.tools_since = trio.current_time()
        self.tools_running += 1

    def tool_ended(self) -> None:
        self.tools_running -= 1
        if self.tools_running == 0:
            self.tool_time += trio.current_time() - self.tools_since


@attrs.define(eq=False)
class _Group:
    """Runs that are cancelled together (one batch, or the whole driver)."""

    runs: set[_Run] = attrs.field(factory=set)
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True
        for run in list(self.runs):
            run.cancel()


class ResultStream:
    """Results of a batch in completion order; iterate with ``async for``.

    Made by :meth:`Driver.stream`. The iteration ends once every run has reported.
    """

    def __init__(self, receive: trio.MemoryReceiveChannel[Result], group: _Group) -> None:
        self._receive = receive
        self._group = group

    def __aiter__(self) -> ResultStream:
        return self

    async def __anext__(self) -> Result:
        try:
            return await self._receive.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    def cancel(self) -> None:
        """End every run of this batch promptly.

        Runs still going (or not started yet) report a ``cancelled`` result; results that
        finished before stay as they were. Iteration goes on until every run has reported.
        """
        self._group.cancel()

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` (or :meth:`Driver.cancel`) was called."""
        return self._group.cancelled


def _first_effects(loop: AgentLoop) -> tuple[Effect, ...]:
    state = loop.state
    if state is RunState.IDLE:
        return loop.start()
    if state in (RunState.AWAITING_MODEL, RunState.AWAITING_TOOLS):
        # A loop restored from a snapshot resumes with the effects it still awaits.
        return loop.outstanding()
    raise LocalProtocolError(f"the loop cannot be run: it is {state.name}", state=state)


def _deadline_error() -> ModelError:
    return ModelError(kind=ErrorKind.DEADLINE, message="the run's deadline passed")


class Driver:
    """Runs agent loops against one backend. Open it with :func:`open_driver`."""

    def __init__(
        self,
        *,
        client: ModelClient,
        limiter: SlotLimiter,
        executor: ToolExecutor,
        retry: RetryPolicy,
        rng: random.Random,
        backend: Backend | None = None,
    ) -> None:
        self._client = client
        self.backend = backend
        """The configured backend (``None`` when the driver was given a model client)."""
        self._limiter = limiter
        self._executor = executor
        self._retry = retry
        self._random = rng.random
        self._everything = _Group()
        self._opened = trio.current_time()
        self._closed_at: float | None = None
        self._requests: list[RequestStats] = []
        self._attempts = 0
        self._ends: dict[Status, int] = {"ok": 0, "failed": 0, "cancelled": 0}

    @property
    def limiter(self) -> SlotLimiter:
        """The inference-slot limiter (its ``statistics()`` shows slots in use and holders)."""
        return self._limiter

    @property
    def executor(self) -> ToolExecutor:
        """The tool executor."""
        return self._executor

    # ------------------------------------------------------------------------ runs

    async def run(
        self, loop: AgentLoop, *, index: int = 0, deadline: float | None = None
    ) -> Result:
        """Drive ``loop`` to its end.

        Args:
            loop: a fresh agent loop (``start()`` is called here), or one restored from a
                snapshot (its outstanding effects are performed again).
            index: reported as :attr:`Result.index`.
            deadline: trio time (``trio.current_time()`` scale) after which the run ends
                with a ``failed`` result.

        Returns:
            The run's :class:`Result`; failures of the model or the tools are inside it.

        Raises:
            trio.Cancelled: a cancel scope of the caller was cancelled.
            LocalProtocolError: the loop had already ended, or it rejected an event (a bug
                in the loop or the driver).
        """
        return await self._run(loop, index, deadline, None)

    async def _run(
        self,
        loop: AgentLoop,
        index: int,
        deadline: float | None,
        group: _Group | None,
    ) -> Result:
        run = self._open_run(loop, index, deadline, group)
        end: Finish | Abort | None = None
        try:
            effects = _first_effects(loop)
            with run.scope:
                end = await self._drive(run, effects)
        finally:
            self._close_run(run, group)
        return self._result(run, end)

    def _open_run(
        self, loop: AgentLoop, index: int, deadline: float | None, group: _Group | None
    ) -> _Run:
        scope = trio.CancelScope(deadline=math.inf if deadline is None else deadline)
        run = _Run(index, loop, scope, trio.current_time())
        everything = self._everything
        everything.runs.add(run)
        if everything.cancelled:
            run.cancel()
        if group is not None:
            group.runs.add(run)
            if group.cancelled:
                run.cancel()
        return run

    def _close_run(self, run: _Run, group: _Group | None) -> None:
        self._everything.runs.discard(run)
        if group is not None:
            group.runs.discard(run)

    async def _drive(self, run: _Run, effects: tuple[Effect, ...]) -> Finish | Abort:
        loop = run.loop
        while True:
            if len(effects) == 1:
                # The common case (a model request, or a single tool call) runs inline, with
                # ``_perform`` unrolled: every coroutine frame between the run and its trio
                # checkpoints is resumed at each task switch.
                effect = effects[0]
                event: Event
                if isinstance(effect, CallModel):
                    run.pending_model = effect
                    event = await self._request(effect, run)
                    run.pending_model = None
                elif isinstance(effect, CallTool):
                    run.tool_started()
                    try:
                        event = await self._executor.call(effect)
                    finally:
                        run.tool_ended()
                else:
                    return effect
                effects = loop.handle(event)
                continue
            calls: list[CallModel | CallTool] = []
            for effect in effects:
                if isinstance(effect, Finish | Abort):
                    return effect
                calls.append(effect)
            if not calls:
                raise InternalError("the loop is waiting for an event but requested nothing")
            effects = await self._perform_parallel(run, calls)

    async def _perform_parallel(
        self, run: _Run, calls: list[CallModel | CallTool]
    ) -> tuple[Effect, ...]:
        """Perform ``calls`` at once, feeding each outcome to the loop as it arrives.

        Returns the loop's effects once nothing is outstanding, or as soon as the loop ends
        (the calls still running are then cancelled and their outcomes dropped).
        """
        send, receive = trio.open_memory_channel[Event](math.inf)
        async with trio.open_nursery() as nursery:
            outstanding = 0
            while True:
                for call in calls:
                    nursery.start_soon(self._perform_into, run, call, send)
                outstanding += len(calls)
                effects = run.loop.handle(await receive.receive())
                outstanding -= 1
                if outstanding == 0:
                    return effects
                if any(isinstance(e, Finish | Abort) for e in effects):
                    nursery.cancel_scope.cancel()
                    return effects
                calls = [e for e in effects if isinstance(e, CallModel | CallTool)]

    async def _perform_into(
        self, run: _Run, call: CallModel | CallTool, send: trio.MemorySendChannel[Event]
    ) -> None:
        send.send_nowait(await self._perform(run, call))

    async def _perform(self, run: _Run, call: CallModel | CallTool) -> Event:
        if isinstance(call, CallTool):
            run.tool_started()
            try:
                return await self._executor.call(call)
            finally:
                run.tool_ended()
        run.pending_model = call
        event = await self._request(call, run)
        run.pending_model = None
        return event

    def _interrupted(self, run: _Run) -> Finish | Abort:
        """Tell the loop why its run stopped; return the effect that ends it."""
        event: Event
        if run.cancelled:
            event = CancelRequested("cancelled")
        elif run.pending_model is not None:
            event = ModelFailed(run.pending_model.request_id, _deadline_error())
        else:
            event = CancelRequested("deadline")
        for effect in run.loop.handle(event):
            if isinstance(effect, Finish | Abort):
                return effect
        raise InternalError(f"the loop did not end after {event!r}")

    def _result(self, run: _Run, end: Finish | Abort | None) -> Result:
        if end is None:
            end = self._interrupted(run)
        status: Status
        if isinstance(end, Finish):
            status, output, error = "ok", end.output, None
        else:
            output, error = None, end.reason
            cancelled = end.reason.kind is AbortKind.CANCELLED and run.cancelled
            status = "cancelled" if cancelled else "failed"
        self._ends[status] += 1
        timings = RunTimings(
            started=run.started,
            ended=trio.current_time(),
            model_time=run.model_time,
            tool_time=run.tool_time,
            slot_wait=run.slot_wait,
            ttft=tuple(run.ttft),
            attempts=run.attempts,
        )
        return Result(
            index=run.index,
            status=status,
            output=output,
            error=error,
            transcript=end.transcript,
            usage=end.usage,
            timings=timings,
            turns=run.turns,
        )

    # ------------------------------------------------------------------------ batches

    @asynccontextmanager
    async def stream(
        self,
        loops: Iterable[AgentLoop],
        *,
        timeout: float | None = None,
        max_active: int | None = None,
    ) -> AsyncIterator[ResultStream]:
        """Run many loops at once; results arrive in completion order.

        ::

            async with driver.stream(loops) as results:
                async for result in results:
                    ...

        Leaving the block early cancels the runs still going (without reporting them) and
        waits for nothing but their prompt exit. :meth:`ResultStream.cancel` instead ends every
        remaining run with a ``cancelled`` result, which the iteration still delivers.

        Args:
            loops: fresh agent loops; run ``i`` gets index ``i``. Consumed lazily.
            timeout: seconds each run may take from its own start (``None``: no limit).
            max_active: runs in progress at once (``None``: all). Slots bound the model
                requests either way; this bounds memory for very large batches.

        Yields:
            The :class:`ResultStream`.
        """
        if max_active is not None and max_active < 1:
            raise ConfigError(f"max_active must be at least 1, got {max_active}")
        group = _Group()
        send, receive = trio.open_memory_channel[Result](0)
        async with _body_nursery() as nursery:
            nursery.start_soon(self._feed, loops, timeout, max_active, group, send)
            try:
                yield ResultStream(receive, group)
            finally:
                nursery.cancel_scope.cancel()

    async def _feed(
        self,
        loops: Iterable[AgentLoop],
        timeout: float | None,
        max_active: int | None,
        group: _Group,
        send: trio.MemorySendChannel[Result],
    ) -> None:
        active = trio.CapacityLimiter(max_active) if max_active is not None else None
        async with send, trio.open_nursery() as nursery:
            for index, loop in enumerate(loops):
                # Once cancelled, the remaining runs start without waiting for room: each
                # ends at once with a ``cancelled`` result.
                holds = active is not None and not (group.cancelled or self._everything.cancelled)
                if holds:
                    assert active is not None
                    await active.acquire_on_behalf_of(index)
                # ``send`` itself is closed once the nursery has waited for every run, so
                # the runs share it (a clone per run would cost a checkpoint to close).
                nursery.start_soon(
                    self._run_and_send,
                    loop,
                    index,
                    timeout,
                    group,
                    send,
                    active if holds else None,
                )

    async def _run_and_send(  # noqa: PLR0917 - private, called positionally by start_soon
        self,
        loop: AgentLoop,
        index: int,
        timeout: float | None,
        group: _Group,
        send: trio.MemorySendChannel[Result],
        active: trio.CapacityLimiter | None,
    ) -> None:
        # ``_run`` spelled out here: one coroutine frame fewer per agent, resumed at every
        # task switch of the run and kept in memory while it waits.
        try:
            deadline = None if timeout is None else trio.current_time() + timeout
            run = self._open_run(loop, index, deadline, group)
            end: Finish | Abort | None = None
            try:
                effects = _first_effects(loop)
                with run.scope:
                    end = await self._drive(run, effects)
            finally:
                self._close_run(run, group)
            result = self._result(run, end)
        finally:
            if active is not None:
                active.release_on_behalf_of(index)
        await send.send(result)

    def _close(self) -> None:
        self.cancel()
        self._closed_at = trio.current_time()

    def cancel(self) -> None:
        """End every run of this driver promptly, now and from now on.

        Each run reports a ``cancelled`` result (see :class:`ResultStream`); runs that
        already finished keep their results.
        """
        self._everything.cancel()

    # ------------------------------------------------------------------------ model requests

    async def call_model(
        self, call: CallModel, *, deadline: float | None = None
    ) -> ModelResponded | ModelFailed:
        """Make one model request through a slot, with retries, outside any agent run.

        Args:
            call: the request.
            deadline: trio time after which the request fails with ``ErrorKind.DEADLINE``.

        Returns:
            The reply, or the final failure.
        """
        with trio.CancelScope(deadline=math.inf if deadline is None else deadline):
            return await self._request(call, None)
        return ModelFailed(call.request_id, _deadline_error())

    async def _request(self, call: CallModel, run: _Run | None) -> ModelResponded | ModelFailed:
        limiter = self._limiter
        first = trio.current_time()
        owner = call.request_id if run is None else run.index
        priority = call.hints.priority
        attempts = 0
        slot_wait = 0.0
        previous: ModelError | None = None
        while True:
            slot = await limiter.acquire(owner, priority)
            attempts += 1
            self._attempts += 1
            if run is not None and attempts == 1:
                run.turns += 1
            slot_wait += slot.wait
            try:
                exchange = await self._client.exchange(call)
            except BaseException:
                limiter.release(slot)
                raise
            now = trio.current_time()
            latency = now - slot.granted_at
            event = exchange.event
            if isinstance(event, ModelFailed):
                limiter.release(slot, overloaded=event.error.kind in _OVERLOAD_KINDS, now=now)
            else:
                limiter.release(slot, succeeded=True, now=now)
            if run is not None:
                run.attempts += 1
                run.model_time += latency
                run.slot_wait += slot.wait
            if isinstance(event, ModelResponded):
                break
            if repeated_rejection(previous, event.error):
                break  # the same server error twice: deterministic, final
            previous = event.error
            deadline = trio.current_effective_deadline()
            wait = self._retry.delay(
                attempt=attempts,
                error=event.error,
                elapsed=now - first,
                random=self._random,
                remaining=None if deadline == math.inf else deadline - now,
            )
            if wait is None:
                break
            await trio.sleep(wait)
        if run is not None:
            run.ttft.append(exchange.ttft)
        usage = event.usage if isinstance(event, ModelResponded) else Usage()
        self._requests.append(
            RequestStats(  # positional: this runs once per model request
                call.request_id,
                None if run is None else run.index,
                attempts,
                slot_wait,
                latency,
                now - first,
                exchange.ttft,
                usage.prompt_tokens,
                usage.completion_tokens,
                usage.cached_tokens,
                event.error.kind if isinstance(event, ModelFailed) else None,
                event.finish_reason if isinstance(event, ModelResponded) else None,
            )
        )
        return event

    # ------------------------------------------------------------------------ metrics

    def statistics(self) -> DriverStatistics:
        """Everything measured since the driver opened, as a frozen value."""
        now = trio.current_time() if self._closed_at is None else self._closed_at
        wall = now - self._opened
        requests = tuple(self._requests)
        known = [r for r in requests if r.cached_tokens is not None]
        known_prompt = sum(r.prompt_tokens for r in known)
        cached = sum(r.cached_tokens or 0 for r in known)
        tools = self._executor.statistics()
        slots = self._limiter.statistics()
        capacity = slots.max_inflight * wall
        return DriverStatistics(
            wall_time=wall,
            runs=sum(self._ends.values()),
            runs_ok=self._ends["ok"],
            runs_failed=self._ends["failed"],
            runs_cancelled=self._ends["cancelled"],
            requests=requests,
            attempts=self._attempts,
            failed_requests=sum(1 for r in requests if r.error is not None),
            latency=Summary.of(r.latency for r in requests),
            ttft=Summary.of(r.ttft for r in requests if r.ttft is not None),
            slot_wait=Summary.of(r.slot_wait for r in requests),
            prompt_tokens=sum(r.prompt_tokens for r in requests),
            completion_tokens=sum(r.completion_tokens for r in requests),
            cached_tokens=cached,
            cached_ratio=cached / known_prompt if known_prompt else None,
            truncated_replies=sum(1 for r in requests if r.finish_reason == "length"),
            tool_calls=tools.requests,
            tool_executions=tools.executions,
            dedup_ratio=tools.dedup_ratio if tools.requests else None,
            tools=tools,
            slots=slots,
            slot_utilisation=slots.busy_time / capacity if capacity > 0 else None,
        )


@asynccontextmanager
async def _body_nursery() -> AsyncIterator[trio.Nursery]:
    """A nursery around a ``yield`` whose body's own exception is re-raised unwrapped.

    trio wraps everything leaving a nursery in an exception group; an error raised by the
    caller's ``async with`` body should reach the caller as itself. The body's exception is
    caught, the nursery cancelled and closed, and the exception re-raised outside it.
    """
    raised: BaseException | None = None
    async with trio.open_nursery() as nursery:
        try:
            yield nursery
        except BaseException as exc:  # re-raised below, once the nursery is closed
            raised = exc
            nursery.cancel_scope.cancel()
    if raised is not None:
        raise raised


# ---------------------------------------------------------------------------- opening


def _check_choice(name: str, value: object, allowed: tuple[object, ...]) -> None:
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise ConfigError(f"{name} must be one of {choices}; got {value!r}")


async def _open_client(
    stack: AsyncExitStack,
    target: str | Backend,
    *,
    model: str,
    max_inflight: int,
    stream: bool | None,
    timeouts: Timeouts,
    transport: TransportKind | None,
    api_key: str | None,
    options: dict[str, Any],
) -> tuple[ModelClient, Backend]:
    configured = make_backend(target, model=model, api_key=api_key, **options)
    if configured.name == "sim":
        # The embedded simulator: start it on a free loopback port, then talk to it as an
        # OpenAI-compatible server in the ``sim`` dialect with the same options.
        config = configured.options.get("config")
        server = await stack.enter_async_context(open_sim_server(port=0, config=config))
        rest = {k: v for k, v in configured.options.items() if k != "config"}
        configured = make_backend(server.url, model=model, api_key=api_key, dialect="sim", **rest)
    kind = configured.transport if transport is None else transport
    _check_choice("transport", kind, ("lean", "httpx"))
    moved = make_transport(
        configured.base_url,
        kind=kind,
        max_connections=max_inflight,
        max_reply_bytes=configured.max_reply_bytes,
        reuse_streams=configured.reuse_streams,
    )
    client = HttpModelClient(
        configured.codec,
        moved,
        timeouts=timeouts,
        stream=configured.stream if stream is None else stream,
    )
    stack.push_async_callback(client.aclose)
    return client, configured


@asynccontextmanager
async def open_driver(
    backend: str | Backend | ModelClient,
    *,
    model: str = "",
    max_inflight: int = 32,
    slot_policy: SlotPolicy = "fifo",
    adaptive: bool = False,
    tools: Iterable[Tool[..., Any]] = (),
    stream: bool | None = None,
    retry: RetryPolicy = _DEFAULT_RETRY,
    timeouts: Timeouts = _DEFAULT_TIMEOUTS,
    transport: TransportKind | None = None,
    api_key: str | None = None,
    seed: int | None = None,
    **backend_options: Any,
) -> AsyncIterator[Driver]:
    """Open a driver: a slot limiter, a tool executor and a model client for one backend.

    ::

        async with agentcore.open_driver("vllm://127.0.0.1:8000", model="m") as driver:
            result = await driver.run(loop)

    Args:
        backend: a backend URL (``vllm://host:port``, ``sim://``...), a configured
            :class:`~agentcore._codec.Backend`, or any model client (for example a
            ``ScriptedModel``; it stays the caller's to close).
        model: the model name sent to the backend.
        max_inflight: the hard cap on model requests in flight (inference slots); also the
            number of connections the transport keeps.
        slot_policy: ``"fifo"``, or ``"priority"`` to serve the highest ``hints.priority``
            first.
        adaptive: shrink the slot limit when the server signals overload and grow it back
            on success (never above ``max_inflight``).
        tools: the tools agents may call (made with :func:`agentcore.tool`).
        stream: stream replies (``None``: the backend's default). Needed for time to first
            token.
        retry: the retry policy for failed model requests.
        timeouts: transport time limits per exchange.
        transport: ``"lean"`` or ``"httpx"`` (``None``: the backend's default).
        api_key: the API key for hosted backends.
        seed: seeds the back-off jitter, for reproducible schedules.
        **backend_options: dialect options passed to :func:`agentcore.backend`.

    Yields:
        The :class:`Driver`. Leaving the block closes the tool executor and the transport.

    Raises:
        ConfigError: an invalid option or backend.
    """
    if isinstance(max_inflight, bool) or not isinstance(max_inflight, int) or max_inflight < 1:
        raise ConfigError(f"max_inflight must be a positive integer, got {max_inflight!r}")
    _check_choice("slot_policy", slot_policy, ("fifo", "priority"))
    # The tool executor keeps a nursery open around our ``yield``; an exception of the
    # caller's block is taken out before it would be wrapped in an exception group there,
    # and re-raised as itself once everything is closed.
    raised: BaseException | None = None
    async with AsyncExitStack() as stack:
        client: ModelClient
        configured: Backend | None = None
        if isinstance(backend, str | Backend):
            client, configured = await _open_client(
                stack,
                backend,
                model=model,
                max_inflight=max_inflight,
                stream=stream,
                timeouts=timeouts,
                transport=transport,
                api_key=api_key,
                options=backend_options,
            )
        elif isinstance(backend, ModelClient):
            given = (("stream", stream), ("transport", transport), ("api_key", api_key))
            extras = [name for name, value in given if value is not None]
            extras += list(backend_options)
            if extras:
                raise ConfigError(
                    f"{', '.join(extras)} apply to backends given by URL, not to a model client"
                )
            client = backend
        else:
            raise ConfigError(
                f"expected a backend URL, a Backend or a model client; got {backend!r}"
            )
        executor = await stack.enter_async_context(open_tool_executor(tools))
        driver = Driver(
            client=client,
            limiter=SlotLimiter(max_inflight, policy=slot_policy, adaptive=adaptive),
            executor=executor,
            retry=retry,
            rng=random.Random(seed),
            backend=configured,
        )
        try:
            yield driver
        except BaseException as exc:  # re-raised below, once everything is closed
            raised = exc
        finally:
            driver._close()
    if raised is not None:
        raise raised
