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
The slot limiter (:mod:`agentcore._slot_limiter` over the pure :mod:`agentcore._core.slots`) is the
only place that bounds model requests; ``max_inflight`` is a hard cap whatever the policy or
the adaptive limit does.
"""

from __future__ import annotations

import math
import random
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

import trio

from ._codecs.classify import deadline_error
from ._core.errors import ConfigError, InternalError, LocalProtocolError
from ._core.events import (
    Abort,
    AbortKind,
    CallModel,
    CallTool,
    CancelRequested,
    Effect,
    Event,
    Finish,
    ModelFailed,
    ModelResponded,
)
from ._core.loop import AgentLoop, RunState
from ._core.retry import RetryPolicy
from ._model_client import ModelClient
from ._rate_limiter import RateLimiter
from ._requests import ModelRequests
from ._results import Group, Result, ResultStream, Run, RunTimings, Status
from ._slot_limiter import SlotLimiter
from ._stats import DriverStatistics
from ._tool_executor import ToolExecutor

__all__ = ["Driver"]


def _first_effects(loop: AgentLoop) -> tuple[Effect, ...]:
    state = loop.state
    if state is RunState.IDLE:
        return loop.start()
    if state in (RunState.AWAITING_MODEL, RunState.AWAITING_TOOLS):
        # A loop restored from a snapshot resumes with the effects it still awaits.
        return loop.outstanding()
    raise LocalProtocolError(f"the loop cannot be run: it is {state.name}", state=state)


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
        rates: RateLimiter | None = None,
    ) -> None:
        self._limiter = limiter
        self._executor = executor
        self._requests = ModelRequests(client, limiter, retry, rng.random, rates)
        self._everything = Group()
        self._opened = trio.current_time()
        self._closed_at: float | None = None
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
        group: Group | None,
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
        self, loop: AgentLoop, index: int, deadline: float | None, group: Group | None
    ) -> Run:
        scope = trio.CancelScope(deadline=math.inf if deadline is None else deadline)
        run = Run(index, loop, scope, trio.current_time())
        everything = self._everything
        everything.runs.add(run)
        if everything.cancelled:
            run.cancel()
        if group is not None:
            group.runs.add(run)
            if group.cancelled:
                run.cancel()
        return run

    def _close_run(self, run: Run, group: Group | None) -> None:
        self._everything.runs.discard(run)
        if group is not None:
            group.runs.discard(run)

    async def _drive(self, run: Run, effects: tuple[Effect, ...]) -> Finish | Abort:
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
                    event = await self._requests.send(effect, run)
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
        self, run: Run, calls: list[CallModel | CallTool]
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
        self, run: Run, call: CallModel | CallTool, send: trio.MemorySendChannel[Event]
    ) -> None:
        send.send_nowait(await self._perform(run, call))

    async def _perform(self, run: Run, call: CallModel | CallTool) -> Event:
        if isinstance(call, CallTool):
            run.tool_started()
            try:
                return await self._executor.call(call)
            finally:
                run.tool_ended()
        run.pending_model = call
        event = await self._requests.send(call, run)
        run.pending_model = None
        return event

    def _interrupted(self, run: Run) -> Finish | Abort:
        """Tell the loop why its run stopped; return the effect that ends it."""
        event: Event
        if run.cancelled:
            event = CancelRequested("cancelled")
        elif run.pending_model is not None:
            event = ModelFailed(run.pending_model.request_id, deadline_error())
        else:
            event = CancelRequested("deadline")
        for effect in run.loop.handle(event):
            if isinstance(effect, Finish | Abort):
                return effect
        raise InternalError(f"the loop did not end after {event!r}")

    def _result(self, run: Run, end: Finish | Abort | None) -> Result:
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
        group = Group()
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
        group: Group,
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
        group: Group,
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
            return await self._requests.send(call, None)
        return ModelFailed(call.request_id, deadline_error())

    # ------------------------------------------------------------------------ metrics

    def statistics(self) -> DriverStatistics:
        """Everything measured since the driver opened, as a frozen value.

        O(1) in the number of requests: percentiles come from bounded sketches (see
        :class:`~agentcore._stats.Summary`), and only the latest requests are kept in detail.
        """
        now = trio.current_time() if self._closed_at is None else self._closed_at
        wall = now - self._opened
        requests = self._requests
        known_prompt = requests.known_prompt_tokens
        cached = requests.cached_tokens
        tools = self._executor.statistics()
        slots = self._limiter.statistics()
        capacity = slots.max_inflight * wall
        return DriverStatistics(
            wall_time=wall,
            runs=sum(self._ends.values()),
            runs_ok=self._ends["ok"],
            runs_failed=self._ends["failed"],
            runs_cancelled=self._ends["cancelled"],
            requests=requests.requests,
            recent_requests=tuple(requests.recent),
            attempts=requests.attempts,
            failed_requests=requests.failed,
            latency=requests.latency.summary(),
            ttft=requests.ttft.summary(),
            slot_wait=requests.slot_wait.summary(),
            prompt_tokens=requests.prompt_tokens,
            completion_tokens=requests.completion_tokens,
            cached_tokens=cached,
            cached_ratio=cached / known_prompt if known_prompt else None,
            tool_calls=tools.requests,
            tool_executions=tools.executions,
            dedup_ratio=tools.dedup_ratio if tools.requests else None,
            tools=tools,
            slots=slots,
            slot_utilisation=slots.busy_time / capacity if capacity > 0 else None,
            rates=requests.rates.statistics(),
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
