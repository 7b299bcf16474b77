"""The runs of one result stream, and the deadlines of those parked for a slot.

Theory of operation
-------------------
A run of a result stream (``Driver.stream``, hence every batch) is carried by a task only
while it has something to await: a model exchange, a tool, a back-off, the rate budget. When
it must wait for an inference slot it is *parked* in the slot line (``SlotLimiter.park``):
what waits in line is the run's state (its loop and pending request), not a task. A fresh run
is parked by the feeder before any task touches it.

The tasks are the feed's *workers* (``work(feed)``, the scheduler's, which calls
:meth:`Feed.at_work` and :meth:`Feed.rest`). A run that can go on (a fresh one, or one
granted a slot in line) is pushed on the ready line; a worker takes it and carries it until
it parks again or ends, then takes the next ready run, or waits idle for one. A push wakes an
idle worker if there is one. If every worker is busy, the pushing worker usually takes the
run itself as soon as its own run parks or ends; the feed's *hirer* task, woken by the push,
runs once the pushing task yields and starts a worker for each ready run still waiting then,
so a ready run (holding a granted slot) never waits for a busy worker. At most ``max_idle``
workers stay idle; the others end. So a batch of 100,000 agents waiting for 256 slots keeps
about as many tasks as it has runs in flight (holding a slot or running tools), not 100,000,
and a run going from the line to its slot costs at most a task switch, not a new task.

Results go into the stream's :class:`~agentcore._driver.runs.ResultQueue` in completion order; the
consumer takes them from there, so a worker never waits for the consumer.

A parked run has no cancel scope, so its deadline and its cancellation are applied here:

- a cancellation (``Run.cancel``) withdraws it from the line, which wakes it with no slot;
- a deadline is kept in a heap watched by one task per stream (started with the first
  parked run that has one); at the deadline the run is withdrawn and woken the same way.

A run woken with no slot starts its new task under a cancel scope that is already cancelled
or past its deadline, so its first checkpoint ends it exactly as if its task had been waiting
in line all along. The feed counts live runs (parked or not) so that the stream's nursery
stays open until the last one has delivered its result.

Heap entries hold the :class:`~agentcore._driver.slot_limiter.Parked` waiter, which drops its
callback (and with it the run) once granted, so a stale entry costs a few dozen bytes; the
heap is rebuilt when it holds more than twice as many entries as the stream has live runs.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Awaitable, Callable

import trio

from .._core.results import Result
from .runs import Granted, Group, Ready, ResultQueue, Run
from .slot_limiter import Parked

__all__ = ["Feed", "in_line"]


def in_line(run: Run, got: Granted | Parked) -> bool:
    """Whether ``run`` was parked in the slot line (its feed then watches its deadline), or
    ``got`` its slot at once."""
    if not isinstance(got, Parked):
        return False
    run.parked = got
    feed = run.feed
    assert feed is not None
    feed.parked(got, run.deadline)
    return True


class Feed:
    """One result stream's nursery, workers, ready line, results and parked deadlines."""

    def __init__(  # noqa: PLR0917 - private, one call site
        self,
        nursery: trio.Nursery,
        results: ResultQueue,
        active: trio.CapacityLimiter | None,
        group: Group,
        work: Callable[[Feed], Awaitable[object]],
        max_idle: int,
    ) -> None:
        self.nursery = nursery
        self.group = group
        """The stream's runs."""
        self.active = active
        """The stream's ``max_active`` limiter, if any."""
        self.live = 0
        """Runs started and not yet ended (parked ones included)."""
        self._fed = False
        self._results = results
        self._work = work
        self._max_idle = max_idle
        self._ready: deque[Ready] = deque()
        self._idle_workers = 0
        """Workers parked in ``_lot`` and not yet woken."""
        self._woken = 0
        """Workers woken or started that have not looked at the ready line yet."""
        self._lot = trio.lowlevel.ParkingLot()
        self._hiring = False
        self._hirer_lot = trio.lowlevel.ParkingLot()
        self._hirer = trio.CancelScope()
        self._deadlines: list[tuple[float, int, Parked]] = []
        self._seq = itertools.count()
        self._watching: trio.CancelScope | None = None
        nursery.start_soon(self._hire)

    # ------------------------------------------------------------------ runs and results

    def started(self) -> None:
        """A run of the stream has started."""
        self.live += 1

    def ended(self, result: Result) -> None:
        """A run has ended with ``result``: it waits for the consumer in completion order,
        so the worker does not wait for the consumer."""
        self._results.put(result)
        self.live -= 1
        if self.live == 0:
            self._deadlines.clear()
            if self._watching is not None:
                self._watching.cancel()
            if self._fed:
                self._finish()

    def dropped(self) -> None:
        """A run ended without a result (its stream is being left)."""
        self.live -= 1
        if self.live == 0 and self._fed:
            self._finish()

    def fed(self) -> None:
        """No further run will start: once the last one has ended, the feed's tasks end."""
        self._fed = True
        if self.live == 0:
            self._finish()

    def _finish(self) -> None:
        self._idle_workers = 0
        self._lot.unpark_all()
        self._hirer.cancel()

    # ------------------------------------------------------------------ workers

    def push(self, ready: Ready) -> None:
        """Put a run that can go on in the ready line; a worker will carry it."""
        self._ready.append(ready)
        if self._idle_workers:
            self._idle_workers -= 1
            self._woken += 1
            self._lot.unpark()
        elif not self._hiring:
            # Every worker is busy. The one pushing may well take this run itself as soon as
            # its own run parks or ends, without a task switch: the hirer, which runs once
            # the pushing task yields, starts workers only for runs still waiting by then.
            self._hiring = True
            self._hirer_lot.unpark()

    def abandon(self) -> list[Ready]:
        """The stream was left with runs still going: nothing will carry the runs in the
        ready line; they are returned (the caller gives back the slots granted to them)."""
        self._fed = True
        self.live = 0
        ready = list(self._ready)
        self._ready.clear()
        return ready

    async def _hire(self) -> None:
        ready = self._ready
        with self._hirer:
            while True:
                if not self._hiring:
                    await self._hirer_lot.park()
                self._hiring = False
                # Runs that no woken worker is on its way to take.
                for _ in range(len(ready) - self._woken):
                    self._woken += 1
                    self.nursery.start_soon(self._work, self)

    def at_work(self) -> deque[Ready]:
        """A worker (started or woken) takes up its work: returns the ready line, whose
        runs it carries until it is empty, then calls :meth:`rest`."""
        self._woken -= 1
        return self._ready

    async def rest(self) -> bool:
        """The ready line is empty: wait idle until woken (``True``: call :meth:`at_work`
        again), or ``False`` at once when the worker should end (the stream is done, or
        enough workers are idle already)."""
        if (self._fed and self.live == 0) or self._idle_workers >= self._max_idle:
            return False
        self._idle_workers += 1
        await self._lot.park()
        return True

    # ------------------------------------------------------------------ deadlines

    def parked(self, parked: Parked, deadline: float) -> None:
        """Watch ``deadline`` for a run parked as ``parked``."""
        if deadline == math.inf:
            return
        heap = self._deadlines
        if len(heap) > 2 * self.live + 64:
            heap[:] = [entry for entry in heap if entry[2].on_grant is not None]
            heapq.heapify(heap)
        heapq.heappush(heap, (deadline, next(self._seq), parked))
        if self._watching is None:
            self._watching = trio.CancelScope(deadline=deadline)
            self.nursery.start_soon(self._watch)
        elif deadline < self._watching.deadline:
            self._watching.deadline = deadline

    async def _watch(self) -> None:
        heap = self._deadlines
        while True:
            scope = self._watching
            assert scope is not None
            with scope:
                await trio.sleep_forever()
            now = trio.current_time()
            while heap and heap[0][0] <= now:
                heapq.heappop(heap)[2].withdraw()
            if not heap:
                self._watching = None
                return
            self._watching = trio.CancelScope(deadline=heap[0][0])
