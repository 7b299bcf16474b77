"""The runner: it performs the effects of one agent loop at a time, for every kind of run.

Theory of operation
-------------------
An agent loop is a pure state machine: it emits effects and consumes events. The runner turns
each effect into an action and each action's outcome into the next event:

- ``CallModel`` -> take an inference slot -> one HTTP exchange -> give the slot back. A failed
  exchange that is worth retrying sleeps its back-off *without* a slot and queues again. The
  final ``ModelResponded`` or ``ModelFailed`` goes to the loop.
- ``CallTool`` -> the tool executor (coalescing, reuse, per-tool limits and timeouts live
  there). No slot is held while a tool runs. Its ``ToolReturned``/``ToolFailed`` goes to the
  loop. Two caps are the runner's, waited for before the executor, without a slot: a tool's
  per-turn cap (``max_per_turn``: the pure :class:`~agentcore._core.caps.TurnCaps` says which
  of a turn's calls start now; the others get no task until a call of their tool ends, then
  start in the model's order) and the batch's cap over all tools (``max_tool_concurrency``,
  a FIFO :class:`~agentcore._tools.caps.Cap` shared by the batch's runs). A wait for either is
  pushed as a ``ToolWaited`` step event when it ends. A run without caps pays one ``is None``
  test per call, a parallel turn one more.
- ``Finish`` / ``Abort`` -> the run ends; its :class:`Result` is built from the effect.

A run of ``Driver.run`` or ``Driver.watch`` is owned by one task (:meth:`Runner.run`). A run of
a result stream is carried by a worker of the stream scheduler (:mod:`.scheduler`) and
:meth:`Runner.drive` returns ``None`` when it parks for a slot (its state waits in the slot
line, not a task). A lone effect is awaited inline; several effects of one turn (parallel tool
calls) run as tasks of a per-run nursery and report through a memory channel, and the loop
sees each outcome as it arrives. Once the loop has ended, the nursery is cancelled, so results
of tools still running are dropped rather than fed to a loop that would reject them.

Cancellation and deadlines
--------------------------
Each run executes inside a cancel scope standing for it, whose deadline is the run's deadline
(a stream's worker reuses one scope for the runs it carries one after another, until one is
cancelled). ``Driver.cancel`` and ``ResultStream.cancel`` cancel the scopes of the runs
concerned and take parked ones out of the slot line (and mark them, so runs started afterwards
end at once); the deadline of a parked run is watched by its feed. When a run's scope fires,
whatever it awaited is abandoned (a slot wait, an exchange, a back-off sleep, tools) and the
loop is told why (:meth:`Runner.interrupted`): ``CancelRequested`` for a cancellation,
``ModelFailed`` with ``ErrorKind.DEADLINE`` for a deadline that interrupted a model request,
``CancelRequested("deadline")`` for one that interrupted tools. The loop answers with ``Abort``
and the run returns a ``cancelled`` or ``failed`` result with the transcript so far. Nothing
waits for other agents: each run only ever waits for its own work. A cancellation coming from
*outside* (a cancel scope of the caller) is not absorbed: it propagates as usual in trio.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import trio

from .._codecs.classify import deadline_error
from .._core.budgets import BudgetExceeded
from .._core.caps import TurnCaps
from .._core.errors import InternalError, LocalProtocolError
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
    ToolFailed,
    ToolReturned,
)
from .._core.journal import StepJournal
from .._core.loop import AgentLoop, RunState
from .._core.messages import Usage
from .._core.results import Result, RunTimings, Status
from .._observe.log_sink import run_sink
from .._observe.steps import StepSink, ToolWaited
from .._tools.executor import CallReport, ToolExecutor
from .fallback import FallbackRequests
from .feed import in_line
from .journaling import attach, handle_journaled, journal_end
from .observed import run_ended, run_started, tool_call, tool_failed
from .requests import ModelRequests
from .runs import Granted, Group, Run
from .slot_limiter import Parked, Slot

__all__ = ["Runner", "first_effects", "not_started", "opening_call"]


def first_effects(loop: AgentLoop) -> tuple[Effect, ...]:
    """The effects a loop starts (or, restored from a snapshot, resumes) with."""
    state = loop.state
    if state is RunState.IDLE:
        return loop.start()
    if state in (RunState.AWAITING_MODEL, RunState.AWAITING_TOOLS):
        # A loop restored from a snapshot resumes with the effects it still awaits.
        return loop.outstanding()
    raise LocalProtocolError(f"the loop cannot be run: it is {state.name}", state=state)


def opening_call(loop: AgentLoop) -> CallModel:
    """The first request of a loop whose :attr:`~AgentLoop.opening_priority` was known."""
    call = loop.start()[0]
    assert isinstance(call, CallModel)
    return call


def _ignore_wake(run: Run, slot: Slot | None) -> None:
    raise InternalError("a run parked without a stream scheduler")


def _no_ends() -> dict[Status, int]:
    return {"ok": 0, "failed": 0, "cancelled": 0}


@attrs.define(eq=False)
class Runner:
    """Drives runs: opens and closes them, performs their effects, builds their results.

    One per driver. ``requests`` sends model requests; ``parker`` is where the runs of result
    streams park for a slot without a task (``None`` with model fallback, whose runs wait in
    their tasks); ``wake`` is the one bound method parked runs are woken through (set by the
    stream scheduler).
    """

    requests: ModelRequests | FallbackRequests
    parker: ModelRequests | None
    executor: ToolExecutor
    deps: Any
    sink: StepSink | None
    """The driver's own listeners of every run (a trace file, OpenTelemetry), if any."""
    wake: Callable[[Run, Slot | None], None] = attrs.field(default=_ignore_wake, init=False)
    everything: Group = attrs.field(factory=Group, init=False)
    """Runs of ``Driver.run`` and ``Driver.watch``, and the flag of ``Driver.cancel``."""
    ends: dict[Status, int] = attrs.field(factory=_no_ends, init=False)
    _ids: Iterator[int] = attrs.field(factory=itertools.count, init=False)

    # ------------------------------------------------------------------ a run's life

    async def run(
        self,
        loop: AgentLoop,
        index: int,
        deadline: float | None,
        steps: StepSink | None = None,
        deps: Any = None,
        *,
        journal: StepJournal | None = None,
    ) -> Result:
        """Drive ``loop`` to its end in this task (``steps``: where its events go, besides the
        driver's own listeners; ``deps``: its tools' ``ctx.deps``, ``None``: the driver's;
        ``journal``: where its steps are journaled, if anywhere)."""
        run = self.open(loop, index, deadline, None, steps)
        if deps is not None:
            run.deps = deps
        if journal is not None:
            attach(run, journal)
        end: Finish | Abort | None = None
        try:
            effects = first_effects(loop)
            assert run.scope is not None  # a run's task is not parked
            with run.scope:
                end = await self.drive(run, effects)
        finally:
            self.everything.runs.discard(run)
        result = self.result(run, end)
        if run.journal is not None:
            await journal_end(run, result)
        return result

    def open(
        self,
        loop: AgentLoop,
        index: int,
        deadline: float | None,
        group: Group | None,
        steps: StepSink | None = None,
    ) -> Run:
        """A new run with the next run id, listed once: in its stream's group, or (no group)
        in ``everything``; its step events go to ``steps`` (or its group's sink) and to the
        driver's listeners."""
        deadline = math.inf if deadline is None else deadline
        # A stream's run gets its scope from the worker that carries it.
        scope = None if group is not None else trio.CancelScope(deadline=deadline)
        run = Run(index, loop, scope, trio.current_time(), deadline)
        run.id = next(self._ids)
        run.deps = self.deps
        run.steps = run_sink(steps if group is None else group.steps, self.sink)
        if run.steps is not None:
            run_started(run)
        owner = self.everything if group is None else group
        owner.runs.add(run)
        if owner.cancelled or self.everything.cancelled:
            run.cancel()
        if group is not None:
            run.guard = group.guard
            run.tool_cap = group.tool_cap
            if group.journal is not None:
                attach(run, group.journal)
            if group.deps is not None:
                run.deps = group.deps
            if group.describe is not None:
                run.input_index, run.input = group.describe(index)
        return run

    async def drive(
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
                # ``perform`` unrolled: every coroutine frame between the run and its trio
                # checkpoints is resumed at each task switch.
                effect = effects[0]
                event: Event
                if isinstance(effect, CallModel):
                    run.pending_model = effect
                    if parks:
                        parker = self.parker
                        assert parker is not None
                        if granted is None:
                            got = await parker.park(effect, run, self.wake)
                            if in_line(run, got):
                                return None  # the line wakes the run into a worker
                            assert not isinstance(got, Parked)
                            granted = got
                        if run.guard is not None:
                            # Reserved once the slot is granted, just before it is sent.
                            try:
                                await run.guard.before_request(run, effect)
                            except BaseException:
                                parker.unused(granted)
                                raise
                        event = await parker.send(effect, run, None, granted)
                        granted = None
                        if run.guard is not None:
                            run.guard.after_request(event)
                    elif run.guard is None:
                        event = await self.requests.send(effect, run)
                    else:
                        event = await self.send_budgeted(run, effect)
                    run.pending_model = None
                elif isinstance(effect, CallTool):
                    if run.tool_cap is not None:
                        event = await self.call_tool(run, effect)
                        if run.journal is None:
                            effects = loop.handle(event)
                        else:
                            effects = await handle_journaled(run, event, effect)
                        continue
                    if run.guard is not None and (
                        refused := await run.guard.before_tool_call(effect)
                    ):
                        if run.journal is None:
                            effects = loop.handle(refused)
                        else:
                            effects = await handle_journaled(run, refused, effect)
                        continue
                    run.tool_started()
                    try:
                        if run.steps is None:
                            # Inline, as above; a failure is still reported (to the log sink).
                            # The run's only call: its tools began when it did.
                            report = CallReport()
                            started = run.tools_since
                            event = await self.executor.call(effect, run.tool_context, report)
                            if type(event) is ToolFailed:
                                tool_failed(run, effect, event, report, started)
                        else:
                            event = await tool_call(self.executor, run, effect, run.tool_context)
                    finally:
                        run.tool_ended()
                else:
                    return effect
                if run.journal is None:
                    effects = loop.handle(event)
                else:
                    effects = await handle_journaled(run, event, effect)
                continue
            calls: list[CallModel | CallTool] = []
            for effect in effects:
                if isinstance(effect, Finish | Abort):
                    return effect
                calls.append(effect)
            if not calls:
                raise InternalError("the loop is waiting for an event but requested nothing")
            effects = await self.perform_parallel(run, calls)

    async def perform_parallel(
        self, run: Run, calls: list[CallModel | CallTool]
    ) -> tuple[Effect, ...]:
        """Perform ``calls`` at once, feeding each outcome to the loop as it arrives.

        Returns the loop's effects once nothing is outstanding, or as soon as the loop ends
        (the calls still running are then cancelled and their outcomes dropped).
        """
        send, receive = trio.open_memory_channel[Event](math.inf)
        caps = self.executor.turn_caps
        turn = None if not caps else _Turn(TurnCaps(caps))
        keys: dict[str, str] = {}  # idempotency keys by call id, for the journal
        async with trio.open_nursery() as nursery:
            outstanding = 0
            while True:
                if run.journal is not None:
                    keys.update(
                        (c.call_id, c.idempotency_key) for c in calls if type(c) is CallTool
                    )
                if run.steps is not None:
                    await run.steps.settle()
                if turn is None:
                    for call in calls:
                        nursery.start_soon(self._perform_into, run, call, send)
                else:
                    for call in turn.admit(calls):
                        nursery.start_soon(self._perform_into, run, call, send)
                outstanding += len(calls)
                event = await receive.receive()
                if turn is not None and type(event) in (ToolReturned, ToolFailed):
                    follower = turn.ended(event.call_id)  # type: ignore[union-attr]
                    if follower is not None:
                        call, since = follower
                        nursery.start_soon(self._perform_into, run, call, send, since)
                if run.journal is None:
                    effects = run.loop.handle(event)
                else:
                    effects = await handle_journaled(run, event, keys)
                outstanding -= 1
                if outstanding == 0:
                    return effects
                if any(isinstance(e, Finish | Abort) for e in effects):
                    nursery.cancel_scope.cancel()
                    return effects
                calls = [e for e in effects if isinstance(e, CallModel | CallTool)]

    async def _perform_into(
        self,
        run: Run,
        call: CallModel | CallTool,
        send: trio.MemorySendChannel[Event],
        held_since: float | None = None,
    ) -> None:
        if held_since is not None:
            assert isinstance(call, CallTool)
            send.send_nowait(await self.call_tool(run, call, held_since))
        else:
            send.send_nowait(await self.perform(run, call))

    async def send_budgeted(self, run: Run, call: CallModel) -> ModelResponded | ModelFailed:
        """Send ``call`` for a run whose batch has a usage budget."""
        guard = run.guard
        assert guard is not None
        await guard.before_request(run, call)
        event = await self.requests.send(call, run)
        guard.after_request(event)
        return event

    async def perform(self, run: Run, call: CallModel | CallTool) -> Event:
        """Perform one effect of ``run`` and return its outcome."""
        if isinstance(call, CallTool):
            return await self.call_tool(run, call)
        run.pending_model = call
        if run.guard is None:
            event = await self.requests.send(call, run)
        else:
            event = await self.send_budgeted(run, call)
        run.pending_model = None
        return event

    async def call_tool(
        self, run: Run, call: CallTool, held_since: float | None = None
    ) -> ToolReturned | ToolFailed:
        """Perform a tool call of ``run`` (the one copy besides the inline one of ``drive``):
        through its batch's cap first, if any; ``held_since``: when it began waiting for its
        turn's cap (``None``: it did not wait)."""
        if run.guard is not None and (refused := await run.guard.before_tool_call(call)):
            return refused
        steps = run.steps
        run.tool_started()
        try:
            if held_since is not None and steps is not None:
                now = trio.current_time()
                steps.push(ToolWaited(run.id, call.call_id, call.name, "turn", held_since, now))
            cap = run.tool_cap
            since = None if cap is None else await cap.acquire()
            try:
                if since is not None and steps is not None:
                    now = trio.current_time()
                    steps.push(ToolWaited(run.id, call.call_id, call.name, "batch", since, now))
                if steps is None:
                    report = CallReport()
                    started = trio.current_time()
                    event = await self.executor.call(call, run.tool_context, report)
                    if type(event) is ToolFailed:
                        tool_failed(run, call, event, report, started)
                    return event
                return await tool_call(self.executor, run, call, run.tool_context)
            finally:
                if cap is not None:
                    cap.release()
        finally:
            run.tool_ended()

    # ------------------------------------------------------------------ a run's end

    def interrupted(self, run: Run) -> Finish | Abort:
        """Tell the loop why its run stopped; return the effect that ends it."""
        event: Event
        if run.guard is not None and run.pending_model is not None:
            run.guard.release(run.pending_model)  # its reservation, if it held one
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

    def result(self, run: Run, end: Finish | Abort | None) -> Result:
        """The run's :class:`Result` (``end`` ``None``: it was interrupted), counted and
        reported to its step sink."""
        if end is None:
            end = self.interrupted(run)
        if run.budget is not None and isinstance(end, Abort):
            end = _over_budget(end, run.budget)
        status: Status
        if isinstance(end, Finish):
            status, output, error = "ok", end.output, None
        else:
            output, error = None, end.reason
            cancelled = end.reason.kind is AbortKind.CANCELLED and run.cancelled
            status = "cancelled" if cancelled else "failed"
        self.ends[status] += 1
        ended = trio.current_time()
        if run.steps is not None or type(end) is not Finish:
            run_ended(run, end, status, ended)
        timings = RunTimings(
            started=run.started,
            ended=ended,
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
            tool_failures=run.loop.tool_failures,
        )

    def refused(self, loop: AgentLoop, index: int, exceeded: BudgetExceeded) -> Result:
        """The result of a run its batch's spent budget did not let start (counted)."""
        self.ends["failed"] += 1
        return not_started(loop, index, exceeded, trio.current_time())


class _Turn:
    """The calls of one parallel turn under per-turn caps: which start now, which wait."""

    __slots__ = ("caps", "held")

    def __init__(self, caps: TurnCaps) -> None:
        self.caps = caps
        self.held: dict[str, tuple[CallTool, float]] = {}
        """The calls waiting for their turn, by call id, with the time they began waiting."""

    def admit(self, calls: list[CallModel | CallTool]) -> list[CallModel | CallTool]:
        """The calls that start now (model requests always do)."""
        tools = [c for c in calls if isinstance(c, CallTool)]
        now = set(self.caps.admit((c.call_id, c.name) for c in tools))
        if len(now) < len(tools):
            since = trio.current_time()
            for c in tools:
                if c.call_id not in now:
                    self.held[c.call_id] = (c, since)
        return [c for c in calls if not isinstance(c, CallTool) or c.call_id in now]

    def ended(self, call_id: str) -> tuple[CallTool, float] | None:
        """The held call that starts now that ``call_id`` ended, with its waiting start."""
        follower = self.caps.ended(call_id)
        return None if follower is None else self.held.pop(follower)


def _over_budget(end: Abort, exceeded: BudgetExceeded) -> Abort:
    """The abort of a run cancelled because its batch's budget ran out."""
    if end.reason.kind is not AbortKind.CANCELLED:
        return end
    reason = AbortReason(AbortKind.BUDGET_EXHAUSTED, exceeded.describe(), budget=exceeded)
    return Abort(reason, end.transcript, end.usage)


def not_started(loop: AgentLoop, index: int, exceeded: BudgetExceeded, now: float) -> Result:
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
