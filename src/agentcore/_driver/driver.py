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

A run of :meth:`Driver.run` or :meth:`Driver.watch` is owned by one task. A run of a result
stream (:meth:`Driver.stream`, hence every batch) has a task only while it has something to
await: waiting for a slot it is *parked* in the slot line as data (its loop and pending
request), and a worker of the stream's :class:`~agentcore._driver.feed.Feed` carries it on once the
line grants it a slot (see :mod:`agentcore._driver.feed`). A lone effect is awaited inline; several
effects of one turn (parallel tool calls) run as tasks of a per-run nursery and report through
a memory channel, and the loop sees each outcome as it arrives. Once the loop has ended, the
nursery is cancelled, so results of tools still running are dropped rather than fed to a loop
that would reject them.

Cancellation and deadlines
--------------------------
Each run executes inside a cancel scope standing for it, whose deadline is the run's deadline
(a stream's worker reuses one scope for the runs it carries one after another, until one is
cancelled). :meth:`Driver.cancel` and :meth:`ResultStream.cancel` cancel the scopes of the runs
concerned and take parked ones out of the slot line (and mark them, so runs started afterwards
end at once); the deadline of a parked run is watched by its feed. When a run's scope fires,
whatever it awaited is abandoned (a slot wait, an exchange, a back-off sleep, tools) and the
loop is told why: ``CancelRequested`` for a cancellation, ``ModelFailed`` with
``ErrorKind.DEADLINE`` for a deadline that interrupted a model request,
``CancelRequested("deadline")`` for one that interrupted tools. The loop answers with ``Abort``
and the run returns a ``cancelled`` or ``failed`` result with the transcript so far. Nothing
waits for other agents: each run only ever waits for its own work. A cancellation coming from
*outside* (a cancel scope of the caller) is not absorbed: it propagates as usual in trio.

Slots
-----
The slot limiter (:mod:`agentcore._driver.slot_limiter` over the pure :mod:`agentcore._core.slots`)
is the only place that bounds model requests; ``max_inflight`` is a hard cap whatever the policy or
the adaptive limit does.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import trio

from .._codecs.classify import deadline_error
from .._codecs.codec import Backend
from .._core.budgets import BudgetExceeded, UsageLimits
from .._core.errors import ConfigError, InternalError, LocalProtocolError
from .._core.events import (
    Abort,
    AbortKind,
    AbortReason,
    CallModel,
    CallTool,
    CancelRequested,
    Effect,
    Event,
    Finish,
    ModelFailed,
    ModelResponded,
)
from .._core.fallback import FallbackPolicy
from .._core.loop import AgentLoop, RunState
from .._core.messages import Message, ModelParams, ToolSpec, Usage
from .._core.results import Result, RunTimings, Status
from .._core.retry import RetryPolicy
from .._observe.log import DRIVER
from .._observe.observer import CURRENT_RUN, Observer
from .._observe.steps import StepChannel, StepSink, StepStream, open_step_channel
from .._tools.executor import ToolExecutor
from .._tools.spec import Tool
from .._transports.model_client import ModelClient
from .budget_guard import BudgetGuard, OnBudget
from .fallback import FallbackRequests
from .feed import Feed
from .generate import Generation, GenerationStream, build_call
from .generate import generate as _generate
from .generate import generate_stream as _generate_stream
from .observed import observed_tool_call, run_ended
from .rate_limiter import RateLimiter
from .requests import Granted, ModelRequests
from .runs import Group, ResultQueue, ResultStream, Run
from .slot_limiter import Parked, Slot, SlotLimiter
from .stats import DriverStatistics

__all__ = ["Driver"]

_NO_PARAMS = ModelParams()


def _first_effects(loop: AgentLoop) -> tuple[Effect, ...]:
    state = loop.state
    if state is RunState.IDLE:
        return loop.start()
    if state in (RunState.AWAITING_MODEL, RunState.AWAITING_TOOLS):
        # A loop restored from a snapshot resumes with the effects it still awaits.
        return loop.outstanding()
    raise LocalProtocolError(f"the loop cannot be run: it is {state.name}", state=state)


_FEED_STRIDE = 64
"""A stream's feeder yields to the runs it started once per this many (without ``max_active``,
every run starts at once: parking 100,000 takes a second or more)."""


def _opening_call(loop: AgentLoop) -> CallModel:
    """The first request of a loop whose :attr:`~AgentLoop.opening_priority` was known."""
    call = loop.start()[0]
    assert isinstance(call, CallModel)
    return call


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
        fallbacks: Sequence[tuple[str, ModelClient, SlotLimiter]] = (),
        fallback_policy: FallbackPolicy | None = None,
        primary_name: str = "primary",
        backend: Backend | None = None,
        deps: Any = None,
        rates: RateLimiter | None = None,
    ) -> None:
        self._deps = deps
        self._client = client
        self.backend = backend
        """The configured backend (``None`` when the driver was given a model client)."""
        self._limiter = limiter
        self._executor = executor
        self._requests: ModelRequests | FallbackRequests = ModelRequests(
            client, limiter, retry, rng.random, rates=rates
        )
        self._rates = self._requests.rates
        """The primary backend's request and token budgets."""
        self._wake_run = self._wake
        """The one bound method every parked run is woken through (none per park)."""
        self._parker: ModelRequests | None = self._requests
        """Where runs of result streams park for a slot without a task (``None`` with model
        fallback, whose runs wait in their tasks)."""
        if fallbacks:
            self._requests = _fallback_requests(
                self._requests,
                primary_name,
                fallbacks,
                fallback_policy or FallbackPolicy(),
                (retry, rng),
            )
            self._parker = None
        self._everything = Group()
        """Runs of :meth:`run`, and the flag of :meth:`cancel`."""
        self._groups: set[Group] = set()
        """The result streams open now (their runs are in their own group only)."""
        self._opened = trio.current_time()
        self._closed_at: float | None = None
        self._ends: dict[Status, int] = {"ok": 0, "failed": 0, "cancelled": 0}
        self._observer: Observer | None = None

    @property
    def client(self) -> ModelClient:
        """The primary backend's model client."""
        return self._client

    @property
    def limiter(self) -> SlotLimiter:
        """The inference-slot limiter (its ``statistics()`` shows slots in use and holders)."""
        return self._limiter

    @property
    def self_hosted(self) -> bool:
        """Whether the backend is a server we run (vLLM, SGLang, Dynamo, ``sim://``...):
        batches warm the shared prefix by default. ``False`` for hosted APIs and model
        clients."""
        return self.backend is not None and self.backend.self_hosted

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
            assert run.scope is not None  # a run's task is not parked
            with run.scope:
                end = await self._drive(run, effects)
        finally:
            self._close_run(run, group)
        return self._observed(self._result(run, end))

    def _open_run(
        self, loop: AgentLoop, index: int, deadline: float | None, group: Group | None
    ) -> Run:
        deadline = math.inf if deadline is None else deadline
        # A stream's run gets its scope from the worker that carries it (``_work``).
        scope = None if group is not None else trio.CancelScope(deadline=deadline)
        run = Run(index, loop, scope, trio.current_time(), deadline)
        run.deps = self._deps
        if self._observer is not None:
            self._observer.run_started(index, run.started)
            CURRENT_RUN.set(index)
        # A run is listed once: in its stream's group, or (runs of ``run()``) in everything.
        owner = self._everything if group is None else group
        owner.runs.add(run)
        if owner.cancelled or self._everything.cancelled:
            run.cancel()
        if group is not None:
            run.guard = group.guard
            run.steps = group.steps
            if group.deps is not None:
                run.deps = group.deps
            if group.describe is not None:
                run.input_index, run.input = group.describe(index)
        return run

    def _close_run(self, run: Run, group: Group | None) -> None:
        (self._everything if group is None else group).runs.discard(run)

    async def _drive(
        self,
        run: Run,
        effects: tuple[Effect, ...],
        parks: bool = False,
        granted: Granted | None = None,
    ) -> Finish | Abort | None:
        """Perform ``effects`` and what follows them until the loop ends (its last effect is
        returned) or, if the run ``parks`` (a stream's run), until it parks for a slot
        (``None``).

        ``granted``: the slot (and rate reservation) for ``effects``, a single ``CallModel``
        whose run was parked.
        """
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
                    if parks:
                        assert self._parker is not None
                        if granted is None:
                            if run.guard is not None:
                                await run.guard.before_request()
                            got = await self._parker.park(effect, run, self._wake_run)
                            if self._in_line(run, got):
                                return None  # the line wakes the run into a worker
                            assert not isinstance(got, Parked)
                            granted = got
                        event = await self._parker.send(effect, run, None, granted)
                        granted = None
                        if run.guard is not None:
                            run.guard.after_request(event)
                    elif run.guard is None:
                        event = await self._requests.send(effect, run)
                    else:
                        event = await self._send_budgeted(run, effect)
                    run.pending_model = None
                elif isinstance(effect, CallTool):
                    if run.guard is not None:
                        await run.guard.before_tool_call()
                    run.tool_started()
                    try:
                        if run.steps is None:
                            event = await self._executor.call(effect, run.tool_context)
                        else:
                            await run.steps.settle()
                            event = await observed_tool_call(
                                self._executor, run.steps, run.index, effect, run.tool_context
                            )
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
                if run.steps is not None:
                    await run.steps.settle()
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

    async def _send_budgeted(self, run: Run, call: CallModel) -> ModelResponded | ModelFailed:
        guard = run.guard
        await guard.before_request()
        event = await self._requests.send(call, run)
        guard.after_request(event)
        return event

    async def _perform(self, run: Run, call: CallModel | CallTool) -> Event:
        if isinstance(call, CallTool):
            if run.guard is not None:
                await run.guard.before_tool_call()
            run.tool_started()
            try:
                if run.steps is None:
                    return await self._executor.call(call, run.tool_context)
                return await observed_tool_call(
                    self._executor, run.steps, run.index, call, run.tool_context
                )
            finally:
                run.tool_ended()
        run.pending_model = call
        if run.guard is None:
            event = await self._requests.send(call, run)
        else:
            event = await self._send_budgeted(run, call)
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
        if run.budget is not None and isinstance(end, Abort):
            end = _over_budget(end, run.budget)
        status: Status
        if isinstance(end, Finish):
            status, output, error = "ok", end.output, None
        else:
            output, error = None, end.reason
            cancelled = end.reason.kind is AbortKind.CANCELLED and run.cancelled
            status = "cancelled" if cancelled else "failed"
            if DRIVER.isEnabledFor(logging.INFO):
                DRIVER.info(
                    "agent %d %s: %s",
                    run.index,
                    status,
                    end.reason.message,
                    extra={"agent": run.index, "status": status, "reason": end.reason.kind.value},
                )
        self._ends[status] += 1
        if run.steps is not None:
            run.steps.push(run_ended(run.index, end, status, run.turns))
        timings = RunTimings(
            started=run.started,
            ended=trio.current_time(),
            model_time=run.model_time,
            tool_time=run.tool_time,
            slot_wait=run.slot_wait,
            ttft=run.ttft,
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
            served_by=() if run.served_by is None else tuple(run.served_by),
        )

    # ------------------------------------------------------------------------ batches

    @asynccontextmanager
    async def stream(
        self,
        loops: Iterable[AgentLoop],
        *,
        timeout: float | None = None,
        max_active: int | None = None,
        budget: UsageLimits | None = None,
        on_budget: OnBudget = "finish",
        steps: StepSink | None = None,
        deps: Any = None,
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
            budget: usage limits of the whole batch (see :class:`~agentcore.UsageLimits`):
                once one has no room, no further run starts (each reports ``failed`` with
                ``AbortKind.BUDGET_EXHAUSTED``).
            on_budget: what a spent batch budget does to the runs already going:
                ``"finish"`` lets them end on their own, ``"cancel"`` ends them at once
                (``failed``, with the budget as the reason).
            steps: a :class:`StepSink` that receives the step events of every run (see
                docs/watching.md); ``None``: no events are built.
            deps: the ``deps`` of these runs' :class:`~agentcore.RunContext` (``None``: the
                driver's).

        Yields:
            The :class:`ResultStream`.
        """
        group = self._group(steps=steps, deps=deps, budget=budget, on_budget=on_budget)
        async with self._stream(loops, timeout, max_active, group) as results:
            yield results

    def _group(
        self,
        *,
        steps: StepSink | None = None,
        deps: Any = None,
        describe: Callable[[int], tuple[int, Any]] | None = None,
        budget: UsageLimits | None = None,
        on_budget: OnBudget = "finish",
    ) -> Group:
        """The runs of one batch: their step sink, ``deps``, inputs and usage budget."""
        group = Group(steps=steps, deps=deps, describe=describe)
        if budget is not None:
            if not isinstance(budget, UsageLimits):
                raise ConfigError(f"budget must be a UsageLimits, got {budget!r}")
            group.guard = BudgetGuard(budget, on_budget, group)
        return group

    @asynccontextmanager
    async def _stream(
        self,
        loops: Iterable[AgentLoop],
        timeout: float | None,
        max_active: int | None,
        group: Group,
    ) -> AsyncIterator[ResultStream]:
        if max_active is not None and max_active < 1:
            raise ConfigError(f"max_active must be at least 1, got {max_active}")
        queue = ResultQueue()
        self._groups.add(group)
        try:
            async with _body_nursery() as nursery:
                nursery.start_soon(self._feed, loops, timeout, max_active, group, queue)
                try:
                    yield ResultStream(queue, group)
                finally:
                    nursery.cancel_scope.cancel()
        finally:
            self._groups.discard(group)
            if group.feed is not None:
                self._abandon(group)

    def _abandon(self, group: Group) -> None:
        """A stream was left with runs still going: runs parked in the slot line leave it, and
        the slots granted to runs that no worker took up are given back (in that order, so
        that no slot given back goes to a run of the same stream)."""
        for run in group.runs:
            parked = run.parked
            if parked is not None:
                run.parked = None
                parked.withdraw()
        for _, _, granted, _ in group.feed.abandon():
            if granted is not None:
                assert self._parker is not None
                self._parker.unused(granted)

    async def _feed(
        self,
        loops: Iterable[AgentLoop],
        timeout: float | None,
        max_active: int | None,
        group: Group,
        results: ResultQueue,
    ) -> None:
        active = trio.CapacityLimiter(max_active) if max_active is not None else None
        # ``results`` is closed once the nursery has waited for every run.
        try:
            async with trio.open_nursery() as nursery:
                feed = group.feed = Feed(
                    nursery,
                    results,
                    active,
                    group,
                    self._work,
                    self._limiter.statistics().max_inflight,
                )
                await self._feed_runs(feed, loops, timeout, active, group)
                feed.fed()
        finally:
            results.close()

    async def _feed_runs(
        self,
        feed: Feed,
        loops: Iterable[AgentLoop],
        timeout: float | None,
        active: trio.CapacityLimiter | None,
        group: Group,
    ) -> None:
        for index, loop in enumerate(loops):
            # Once cancelled, the remaining runs start without waiting for room: each
            # ends at once with a ``cancelled`` result.
            holds = active is not None and not (group.cancelled or self._everything.cancelled)
            if holds:
                assert active is not None
                await active.acquire_on_behalf_of(index)
            elif index % _FEED_STRIDE == _FEED_STRIDE - 1:
                # Let the runs started so far go on: the first requests leave at once
                # instead of after the whole input is parked.
                await trio.lowlevel.checkpoint()
            if group.guard is not None:
                refused = group.guard.refuses_run()
                if refused is not None:
                    if holds:
                        assert active is not None
                        active.release_on_behalf_of(index)
                    self._ends["failed"] += 1
                    feed.started()
                    feed.ended(_not_started(loop, index, refused, trio.current_time()))
                    continue
            deadline = None if timeout is None else trio.current_time() + timeout
            run = self._open_run(loop, index, deadline, group)
            run.admitted = holds
            run.feed = feed
            feed.started()
            self._start(run, feed)

    def _start(self, run: Run, feed: Feed) -> None:
        """Start a stream's run: park its first request at once when nothing has to be
        awaited before the slot line, else hand it to a worker."""
        parker = self._parker
        if (
            parker is None
            or run.guard is not None
            or run.steps is not None
            or run.cancelled
            or parker.rates.budget.limited
        ):
            feed.push(run, None, None, False)
            return
        loop = run.loop
        priority = loop.opening_priority if self._observer is None else None
        if priority is not None:
            # The request is built once the run leaves the line (``_wake``): a run waiting
            # for its first slot is its loop, its ``Run`` and its place in line.
            got = parker.park_now(priority, run, self._wake_run)
            if self._in_line(run, got):
                return
            run.pending_model = call = _opening_call(loop)
            effects: tuple[Effect, ...] = (call,)
        else:
            effects = _first_effects(loop)
            if len(effects) != 1 or not isinstance(effects[0], CallModel):
                feed.push(run, effects, None, False)
                return
            run.pending_model = effects[0]
            got = parker.park_now(effects[0], run, self._wake_run)
            if self._in_line(run, got):
                return
        assert not isinstance(got, Parked)
        feed.push(run, effects, got, False)

    @staticmethod
    def _in_line(run: Run, got: Granted | Parked) -> bool:
        """Whether ``run`` was parked in the slot line (its feed watches its deadline), or
        ``got`` its slot at once."""
        if not isinstance(got, Parked):
            return False
        run.parked = got
        run.feed.parked(got, run.deadline)
        return True

    def _wake(self, run: Run, slot: Slot | None) -> None:
        """A parked run was granted a slot (or withdrawn: ``None``): a worker carries it on."""
        run.parked = None
        call = run.pending_model
        if call is None:  # parked before its loop started (``_start``): its first request
            call = run.pending_model = _opening_call(run.loop)
        assert self._parker is not None
        reservation, run.reservation = run.reservation, None
        feed = run.feed
        if slot is None:
            self._parker.rates.unsent(reservation)
            feed.push(run, (call,), None, True)
        else:
            feed.push(run, (call,), (slot, reservation), False)

    async def _work(self, feed: Feed) -> None:
        """The body of a stream's worker: carry the runs of the ready line, rest, repeat.

        Each item is a run and where it resumes: from its start (``effects`` ``None``) or
        from the slot line (``effects`` is its pending request, with the ``granted`` slot, or
        ``woken`` without one: cancelled or past its deadline). A run is carried until it
        ends (its result goes to the feed) or parks again. The runs share one cancel scope,
        which stands for the run being carried (``run.scope``, with its deadline) and is
        replaced only once it has been cancelled: a scope per run would cost more than the
        rest of a resumption. (One frame for all of it: every frame between a worker and
        its checkpoints is resumed at each task switch.)
        """
        current: Run | None = None
        try:
            while True:
                ready = feed.at_work()
                while ready:
                    with trio.CancelScope() as scope:
                        while ready:
                            run, effects, granted, woken = ready.popleft()
                            current = run
                            run.scope = scope
                            deadline = run.deadline
                            if deadline != math.inf:
                                scope.deadline = deadline
                            if run.cancelled:
                                scope.cancel()
                            if self._observer is not None:
                                CURRENT_RUN.set(run.index)
                            if woken:
                                await trio.lowlevel.checkpoint()
                            if effects is None:
                                effects = _first_effects(run.loop)
                            driving = self._drive(run, effects, self._parker is not None, granted)
                            # Not kept by this frame while the run goes on (a tool call may
                            # last): the request and the slot are done with once sent.
                            effects = granted = None
                            end = await driving
                            run.scope = None
                            if deadline != math.inf:
                                scope.deadline = math.inf
                            current = None
                            if end is not None:
                                self._close_run(run, feed.group)
                                await self._finish(run, feed, end)
                            if scope.cancel_called:
                                break
                    if current is not None:
                        # The scope ended the run's segment: it was cancelled or its deadline
                        # passed; the loop is told why in ``_result``.
                        run, current = current, None
                        self._close_run(run, feed.group)
                        await self._finish(run, feed, None)
                if not await feed.rest():
                    return
        except BaseException:
            if current is not None:  # the stream is being left: no result
                self._close_run(current, feed.group)
                self._admitted(current, feed)
                feed.dropped()
            raise

    async def _finish(self, run: Run, feed: Feed, end: Finish | Abort | None) -> None:
        """Hand a stream run's result to the feed (``end`` ``None``: it was interrupted)."""
        try:
            result = self._result(run, end)
            if self._observer is not None:
                self._observed(result)
            if run.steps is not None:
                await run.steps.settle()
        except BaseException:
            self._admitted(run, feed)
            feed.dropped()
            raise
        self._admitted(run, feed)
        feed.ended(result)

    @staticmethod
    def _admitted(run: Run, feed: Feed) -> None:
        if run.admitted:
            assert feed.active is not None
            feed.active.release_on_behalf_of(run.index)

    def _close(self) -> None:
        self.cancel()
        self._closed_at = trio.current_time()
        if self._observer is not None:
            self._observer.close()

    # ------------------------------------------------------------------------ observers

    def _observe(self, observer: Observer | None) -> None:
        """Tell ``observer`` about runs, slot waits, attempts, back-offs and tool executions."""
        self._observer = observer
        self._requests.observer = observer
        self._executor.observer = observer

    def _observed(self, result: Result) -> Result:
        if self._observer is not None:
            self._observer.run_ended(result, result.timings.ended)
        return result

    def cancel(self) -> None:
        """End every run of this driver promptly, now and from now on.

        Each run reports a ``cancelled`` result (see :class:`ResultStream`); runs that
        already finished keep their results.
        """
        self._everything.cancel()
        for group in list(self._groups):
            for run in list(group.runs):
                run.cancel()

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

    async def generate(
        self,
        messages: str | Iterable[Message],
        *,
        tools: Iterable[Tool[..., Any] | ToolSpec] = (),
        output: Any = None,
        params: ModelParams = _NO_PARAMS,
        priority: int = 0,
        deadline: float | None = None,
        request_id: str | None = None,
    ) -> Generation:
        """Ask the model once, through a slot, with retries and statistics, outside any run.

        ::

            reply = await driver.generate("Name three primes.")
            print(reply.text)

        Args:
            messages: the conversation (a string is one user message).
            tools: tools the model may ask for (the calls come back in the reply; they are
                not run).
            output: a type the reply must structure into (:attr:`Generation.output`).
            params: sampling parameters.
            priority: the request's priority (for ``slot_policy="priority"`` and servers).
            deadline: trio time after which the request fails with ``ErrorKind.DEADLINE``.
            request_id: the request's id (default: a fresh ``generate-N``).

        Returns:
            The :class:`Generation`.

        Raises:
            GenerationError: the request failed for good, or the reply did not fit
                ``output``.
            ConfigError: invalid messages, tools or output type.
        """
        call = build_call(
            messages,
            tools=tools,
            output=output,
            params=params,
            priority=priority,
            request_id=request_id,
        )
        return await _generate(self._requests, call, output, deadline)

    def generate_stream(
        self,
        messages: str | Iterable[Message],
        *,
        tools: Iterable[Tool[..., Any] | ToolSpec] = (),
        output: Any = None,
        params: ModelParams = _NO_PARAMS,
        priority: int = 0,
        deadline: float | None = None,
        request_id: str | None = None,
        buffer: int = 16,
    ) -> AbstractAsyncContextManager[GenerationStream]:
        """Like :meth:`generate`, with the reply's deltas as they arrive.

        ::

            async with driver.generate_stream("Tell me a story.") as deltas:
                async for delta in deltas:
                    if isinstance(delta, agentcore.wire.TextDelta):
                        print(delta.text, end="")

        The request is streamed whatever the backend's default. It is retried only until
        its first delta reached the stream; a failure after that ends the iteration with
        :class:`GenerationError`. Leaving the block (at the end, early, or cancelled) stops
        the request and releases its slot.

        Args:
            buffer: deltas the stream holds before the request waits for the caller.
            (the others as for :meth:`generate`)

        Yields:
            The :class:`GenerationStream`.
        """
        call = build_call(
            messages,
            tools=tools,
            output=output,
            params=params,
            priority=priority,
            request_id=request_id,
        )
        return _generate_stream(self._requests, call, output, deadline, buffer)

    # ------------------------------------------------------------------------ watching

    @asynccontextmanager
    async def watch(
        self,
        loop: AgentLoop,
        *,
        deltas: bool = False,
        buffer: int = 64,
        index: int = 0,
        deadline: float | None = None,
    ) -> AsyncIterator[StepStream]:
        """Run ``loop`` and receive its step events as they happen.

        ::

            async with driver.watch(loop) as steps:
                async for step in steps:
                    print(step)
            result = steps.result

        The events come in the run's order, through a channel of ``buffer`` events. A slow
        consumer slows this run only: events produced while a slot is held never wait (they
        queue), and the run waits for the consumer only where it holds no slot. Leaving the
        block before the last event cancels the run.

        Args:
            loop: as for :meth:`run`.
            deltas: also stream each model reply as :class:`ModelDelta` events.
            buffer: events the channel holds.
            index: reported as the run's index.
            deadline: as for :meth:`run`.

        Yields:
            The :class:`StepStream`; its ``result`` is set once the run has ended.
        """
        channel, stream = open_step_channel(buffer, deltas=deltas)
        async with _body_nursery() as nursery:
            nursery.start_soon(self._watched, loop, index, deadline, channel, stream)
            try:
                yield stream
            finally:
                nursery.cancel_scope.cancel()

    async def _watched(
        self,
        loop: AgentLoop,
        index: int,
        deadline: float | None,
        channel: StepChannel,
        stream: StepStream,
    ) -> None:
        run = self._open_run(loop, index, deadline, None)
        run.steps = channel
        end: Finish | Abort | None = None
        try:
            effects = _first_effects(loop)
            assert run.scope is not None  # a run's task is not parked
            with run.scope:
                end = await self._drive(run, effects)
        finally:
            self._close_run(run, None)
        stream.result = self._result(run, end)
        await channel.aclose()

    # ------------------------------------------------------------------------ metrics

    def statistics(self) -> DriverStatistics:
        """Everything measured since the driver opened, as a frozen value.

        O(1) in the number of requests: percentiles come from bounded sketches (see
        :class:`~agentcore._driver.stats.Summary`), and only the latest requests are kept in detail.
        """
        now = trio.current_time() if self._closed_at is None else self._closed_at
        wall = now - self._opened
        requests = self._requests.stats
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
            recent_requests=requests.recent,
            attempts=requests.attempts,
            failed_requests=requests.failed,
            latency=requests.latency.summary(),
            ttft=requests.ttft.summary(),
            slot_wait=requests.slot_wait.summary(),
            prompt_tokens=requests.prompt_tokens,
            completion_tokens=requests.completion_tokens,
            cached_tokens=cached,
            cached_ratio=cached / known_prompt if known_prompt else None,
            truncated_replies=requests.truncated,
            tool_calls=tools.requests,
            tool_executions=tools.executions,
            dedup_ratio=tools.dedup_ratio if tools.requests else None,
            tools=tools,
            slots=slots,
            slot_utilisation=slots.busy_time / capacity if capacity > 0 else None,
            served_by=dict(requests.served_by),
            rates=self._rates.statistics(),
        )


def _fallback_requests(
    primary: ModelRequests,
    primary_name: str,
    fallbacks: Sequence[tuple[str, ModelClient, SlotLimiter]],
    policy: FallbackPolicy,
    retrying: tuple[RetryPolicy, random.Random],
) -> FallbackRequests:
    retry, rng = retrying
    names = [name for name, _, _ in fallbacks]
    if primary_name in names or len(set(names)) != len(names):
        raise ConfigError(f"backend names must be distinct, got {[primary_name, *names]}")
    primary.name = primary_name
    routes = [(primary_name, primary)]
    for name, client, limiter in fallbacks:
        routes.append((name, ModelRequests(client, limiter, retry, rng.random, name)))
    return FallbackRequests(routes, policy)


def _over_budget(end: Abort, exceeded: BudgetExceeded) -> Abort:
    """The abort of a run cancelled because its batch's budget ran out."""
    if end.reason.kind is not AbortKind.CANCELLED:
        return end
    reason = AbortReason(AbortKind.BUDGET_EXHAUSTED, exceeded.describe(), budget=exceeded)
    return Abort(reason, end.transcript, end.usage)


def _not_started(loop: AgentLoop, index: int, exceeded: BudgetExceeded, now: float) -> Result:
    """The result of a run its batch's spent budget did not let start."""
    return Result(
        index=index,
        status="failed",
        output=None,
        error=AbortReason(AbortKind.BUDGET_EXHAUSTED, exceeded.describe(), budget=exceeded),
        transcript=loop.transcript,
        usage=Usage(),
        timings=RunTimings(now, now, 0.0, 0.0, 0.0, (), 0),
        turns=0,
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
