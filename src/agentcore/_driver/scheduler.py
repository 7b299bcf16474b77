"""The stream scheduler: the runs of result streams, fed, parked for slots and carried on.

Theory of operation
-------------------
A run of a result stream (``Driver.stream``, hence every batch) has a task only while it has
something to await. :meth:`StreamScheduler.open` starts a *feeder* task that opens one run per
loop (lazily, bounded by ``max_active``, yielding to the runs it started once per
:data:`FEED_STRIDE`) and hands each to :meth:`StreamScheduler.start`:

- a run whose first request can go straight to the slot line is *parked* there as data (its
  loop and, once known, its request; with :attr:`~agentcore.core.AgentLoop.opening_priority`
  not even the request is built until the slot is granted);
- any other run (a budget, step events, a rate budget, fallback, a restored loop) is pushed on
  its feed's ready line.

When the line grants a parked run its slot (or withdraws it: cancelled, past its deadline) it
calls :meth:`StreamScheduler.wake`, which pushes the run on the ready line with the grant (a
:class:`~agentcore._driver.runs.Ready` item). A worker of the feed (:meth:`StreamScheduler.work`)
carries ready runs through :meth:`Runner.drive <agentcore._driver.runner.Runner.drive>` until
each parks again or ends; an ended run's result goes to the feed's result queue in completion
order. The feed (:mod:`agentcore._driver.feed`) owns the workers, the ready line and the
deadlines of parked runs.

Leaving a stream's block early cancels its tasks; the runs still parked leave the line and the
slots granted to runs no worker took up are given back (:meth:`StreamScheduler.abandon`).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

import trio

from .._core.budgets import UsageLimits
from .._core.caps import check_cap
from .._core.errors import ConfigError
from .._core.events import Abort, CallModel, Effect, Finish
from .._core.journal import StepJournal
from .._core.loop import AgentLoop
from .._observe.steps import StepSink
from .._tools.caps import Cap
from .budget_guard import BudgetGuard, OnBudget
from .feed import Feed, in_line
from .journaling import journal_end
from .runner import Runner, first_effects, opening_call
from .runs import Group, Ready, ResultQueue, ResultStream, Run, RunFeed
from .slot_limiter import Parked, Slot

__all__ = ["FEED_STRIDE", "StreamScheduler", "body_nursery"]

FEED_STRIDE = 64
"""A stream's feeder yields to the runs it started once per this many (without ``max_active``,
every run starts at once: parking 100,000 takes a second or more)."""


class StreamScheduler:
    """Runs the result streams of one driver over its :class:`Runner`.

    The batch layer reaches it as ``Driver.streams``: :meth:`group` makes a stream's group of
    runs (step sink, ``deps``, inputs, usage budget) and :meth:`open` runs loops in it.
    """

    def __init__(self, runner: Runner, max_idle: int) -> None:
        self._runner = runner
        self._max_idle = max_idle
        self.groups: set[Group] = set()
        """The result streams open now (their runs are in their own group only)."""
        runner.wake = self._wake_run = self.wake
        """The one bound method every parked run is woken through (none made per park)."""

    @staticmethod
    def group(
        *,
        steps: StepSink | None = None,
        deps: Any = None,
        describe: Callable[[int], tuple[int, Any]] | None = None,
        budget: UsageLimits | None = None,
        on_budget: OnBudget = "finish",
        max_tool_concurrency: int | None = None,
        journal: StepJournal | None = None,
    ) -> Group:
        """The runs of one stream: their step sink, ``deps``, inputs, usage budget, cap on
        tool calls in progress at once and step journal."""
        group = Group(steps=steps, deps=deps, describe=describe, journal=journal)
        cap = check_cap("max_tool_concurrency", max_tool_concurrency)
        if cap is not None:
            group.tool_cap = Cap(cap)
        if budget is not None:
            if not isinstance(budget, UsageLimits):
                raise ConfigError(f"budget must be a UsageLimits, got {budget!r}")
            group.guard = BudgetGuard(budget, on_budget, group)
        return group

    def cancel(self) -> None:
        """Cancel every run of every open stream."""
        for group in list(self.groups):
            for run in list(group.runs):
                run.cancel()

    @asynccontextmanager
    async def open(
        self,
        loops: Iterable[AgentLoop],
        group: Group,
        *,
        timeout: float | None = None,
        max_active: int | None = None,
    ) -> AsyncIterator[ResultStream]:
        """Run ``loops`` as runs of ``group``; results arrive in completion order (see
        ``Driver.stream``)."""
        if max_active is not None and max_active < 1:
            raise ConfigError(f"max_active must be at least 1, got {max_active}")
        queue = ResultQueue()
        self.groups.add(group)
        try:
            async with body_nursery() as nursery:
                nursery.start_soon(self._feed, loops, timeout, max_active, group, queue)
                try:
                    yield ResultStream(queue, group)
                finally:
                    nursery.cancel_scope.cancel()
        finally:
            self.groups.discard(group)
            if group.feed is not None:
                self.abandon(group, group.feed)

    def abandon(self, group: Group, feed: RunFeed) -> None:
        """A stream was left with runs still going: runs parked in the slot line leave it, and
        the slots granted to runs that no worker took up are given back (in that order, so
        that no slot given back goes to a run of the same stream)."""
        for run in group.runs:
            parked = run.parked
            if parked is not None:
                run.parked = None
                parked.withdraw()
        for ready in feed.abandon():
            if ready.granted is not None:
                assert self._runner.parker is not None
                self._runner.parker.unused(ready.granted)

    # ------------------------------------------------------------------ feeding

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
                feed = group.feed = Feed(nursery, results, active, group, self.work, self._max_idle)
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
        runner = self._runner
        everything = runner.everything
        for index, loop in enumerate(loops):
            # Once cancelled, the remaining runs start without waiting for room: each
            # ends at once with a ``cancelled`` result.
            holds = active is not None and not (group.cancelled or everything.cancelled)
            if holds:
                assert active is not None
                await active.acquire_on_behalf_of(index)
            elif index % FEED_STRIDE == FEED_STRIDE - 1:
                # Let the runs started so far go on: the first requests leave at once
                # instead of after the whole input is parked.
                await trio.lowlevel.checkpoint()
            if group.guard is not None:
                refused = group.guard.refuses_run()
                if refused is not None:
                    if holds:
                        assert active is not None
                        active.release_on_behalf_of(index)
                    feed.started()
                    feed.ended(runner.refused(loop, index, refused))
                    continue
            deadline = None if timeout is None else trio.current_time() + timeout
            run = runner.open(loop, index, deadline, group)
            run.admitted = holds
            run.feed = feed
            feed.started()
            self.start(run, feed)

    def start(self, run: Run, feed: Feed) -> None:
        """Start a stream's run: park its first request at once when nothing has to be
        awaited before the slot line, else hand it to a worker."""
        runner = self._runner
        parker = runner.parker
        if (
            parker is None
            or run.guard is not None
            or run.steps is not None
            or run.cancelled
            or parker.rates.budget.limited
        ):
            feed.push(Ready(run))
            return
        loop = run.loop
        priority = loop.opening_priority
        if priority is not None:
            # The request is built once the run leaves the line (``wake``): a run waiting
            # for its first slot is its loop, its ``Run`` and its place in line.
            got = parker.park_now(priority, run, self._wake_run)
            if in_line(run, got):
                return
            run.pending_model = call = opening_call(loop)
            effects: tuple[Effect, ...] = (call,)
        else:
            effects = first_effects(loop)
            if len(effects) != 1 or not isinstance(effects[0], CallModel):
                feed.push(Ready(run, effects))
                return
            run.pending_model = effects[0]
            got = parker.park_now(effects[0], run, self._wake_run)
            if in_line(run, got):
                return
        assert not isinstance(got, Parked)
        feed.push(Ready(run, effects, got))

    def wake(self, run: Run, slot: Slot | None) -> None:
        """A parked run was granted a slot (or withdrawn: ``None``): a worker carries it on."""
        run.parked = None
        call = run.pending_model
        if call is None:  # parked before its loop started (``start``): its first request
            call = run.pending_model = opening_call(run.loop)
        parker = self._runner.parker
        assert parker is not None
        reservation, run.reservation = run.reservation, None
        feed = run.feed
        assert feed is not None
        if slot is None:
            parker.rates.unsent(reservation)
            feed.push(Ready(run, (call,), woken=True))
        else:
            feed.push(Ready(run, (call,), (slot, reservation)))

    # ------------------------------------------------------------------ workers

    async def work(self, feed: Feed) -> None:
        """The body of a stream's worker: carry the runs of the ready line, rest, repeat.

        Each item is a run and where it resumes (a :class:`~agentcore._driver.runs.Ready`). A
        run is carried until it ends (its result goes to the feed) or parks again. The runs
        share one cancel scope, which stands for the run being carried (``run.scope``, with
        its deadline) and is replaced only once it has been cancelled: a scope per run would
        cost more than the rest of a resumption. (One frame for all of it: every frame
        between a worker and its checkpoints is resumed at each task switch.)
        """
        runner = self._runner
        parks = runner.parker is not None
        group = feed.group
        current: Run | None = None
        run: Run | None = None
        end: Finish | Abort | None = None
        try:
            while True:
                ready = feed.at_work()
                while ready:
                    with trio.CancelScope() as scope:
                        while ready:
                            item = ready.popleft()
                            run = current = item.run
                            run.scope = scope
                            deadline = run.deadline
                            if deadline != math.inf:
                                scope.deadline = deadline
                            if run.cancelled:
                                scope.cancel()
                            if item.woken:
                                await trio.lowlevel.checkpoint()
                            effects = item.effects
                            if effects is None:
                                effects = first_effects(run.loop)
                            driving = runner.drive(run, effects, parks, item.granted)
                            # Not kept by this frame while the run goes on (a tool call may
                            # last): the request and the slot are done with once sent.
                            del item, effects
                            end = await driving
                            run.scope = None
                            if deadline != math.inf:
                                scope.deadline = math.inf
                            current = None
                            if end is not None:
                                group.runs.discard(run)
                                await self._finish(run, feed, end)
                            if scope.cancel_called:
                                break
                    if current is not None:
                        # The scope ended the run's segment: it was cancelled or its deadline
                        # passed; the loop is told why in ``Runner.result``.
                        run, current = current, None
                        group.runs.discard(run)
                        await self._finish(run, feed, None)
                # A resting worker keeps nothing of the last run it carried: its loop (the
                # transcript) and its end (the output) are its result's, delivered.
                run = end = None
                if not await feed.rest():
                    return
        except BaseException:
            if current is not None:  # the stream is being left: no result
                group.runs.discard(current)
                _admitted(current, feed)
                feed.dropped()
            raise

    async def _finish(self, run: Run, feed: Feed, end: Finish | Abort | None) -> None:
        """Hand a stream run's result to the feed (``end`` ``None``: it was interrupted)."""
        runner = self._runner
        try:
            result = runner.result(run, end)
            if run.journal is not None:
                await journal_end(run, result)
            if run.steps is not None:
                await run.steps.settle()
        except BaseException:
            _admitted(run, feed)
            feed.dropped()
            raise
        _admitted(run, feed)
        feed.ended(result)


def _admitted(run: Run, feed: Feed) -> None:
    """Give back the room ``run`` held in its stream's ``max_active`` limiter, if any."""
    if run.admitted:
        assert feed.active is not None
        feed.active.release_on_behalf_of(run.index)


@asynccontextmanager
async def body_nursery() -> AsyncIterator[trio.Nursery]:
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
