"""The trio side of the inference-slot limiter: parks and wakes tasks as ``SlotQueue`` decides.

All decisions (who goes next, how many slots exist, how the adaptive limit moves) are made by
the pure objects in :mod:`agentcore._core.slots`; this module only parks the waiting task, wakes
the tasks the queue granted a slot to, and keeps time-based statistics.

A granted waiter is given its :class:`Slot` when it is rescheduled
(``trio.lowlevel.reschedule`` with the slot as the value), so a slot handed to a task can never
be lost: once a task has been rescheduled its wait cannot be aborted by a cancellation, and a
task cancelled before being granted is withdrawn from the line in its abort callback. A task
waiting in line is parked directly on trio's wait (:meth:`SlotLimiter.slot`), without a
coroutine frame of the limiter's own.

A waiter may also be *parked* (:meth:`SlotLimiter.park`): a callback and its subject in line,
with no task behind them. When a slot is granted to it the callback is called with the subject
and the slot (from the task that released it; it must not block: the driver hands the run to a
worker there); when it is taken out of line (:meth:`Parked.withdraw`), with ``None``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import Any

import attrs
import outcome
import trio

from .._core.error_policy import policy_of
from .._core.events import ErrorKind
from .._core.slots import AdaptiveLimit, SlotPolicy, SlotQueue

__all__ = ["Parked", "Slot", "SlotLimiter", "SlotStatistics"]


@attrs.frozen
class SlotStatistics:
    """A snapshot of the slot limiter."""

    max_inflight: int
    """The user's hard cap."""
    limit: int
    """The limit in force (below ``max_inflight`` only when the adaptive limit shrank it)."""
    in_use: int
    waiting: int
    peak_in_use: int
    """The most slots ever in use at once."""
    acquisitions: int
    busy_time: float
    """Slot-seconds spent in use (completed holds only)."""
    wait_time: float
    """Seconds spent waiting for slots, summed over acquisitions."""
    overloads: int
    """Overload signals reported on release."""
    holders: tuple[Hashable, ...]
    """The owners of the slots in use, in no particular order."""


@attrs.define(eq=False)
class Slot:
    """One held slot. Give it back with :meth:`SlotLimiter.release`."""

    owner: Hashable
    granted_at: float
    wait: float
    """Seconds the holder waited for it."""
    epoch: int
    released: bool = False


@attrs.define(eq=False)
class _Waiter:
    task: trio.lowlevel.Task
    queue: SlotQueue[_Waiter | Parked]
    owner: Hashable
    asked_at: float

    def abort(self, _raise_cancel: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
        # Cancelled before being granted a slot (a granted waiter is never aborted: it has
        # been rescheduled already).
        self.queue.withdraw(self)
        return trio.lowlevel.Abort.SUCCEEDED

    def granted(self, slot: Slot) -> None:
        trio.lowlevel.reschedule(self.task, outcome.Value(slot))


@attrs.define(eq=False)
class Parked:
    """A waiter in line with no task behind it (see :meth:`SlotLimiter.park`)."""

    queue: SlotQueue[_Waiter | Parked]
    owner: Hashable
    asked_at: float
    on_grant: Callable[[Any, Slot | None], object] | None
    """Called once, with ``subject`` and the slot (``None``: withdrawn); then dropped, with
    the subject, so a waiter kept elsewhere after its turn holds nothing of its own."""
    subject: Any

    def granted(self, slot: Slot | None) -> None:
        on_grant, subject = self.on_grant, self.subject
        self.on_grant = self.subject = None
        assert on_grant is not None
        on_grant(subject, slot)

    def withdraw(self) -> bool:
        """Take the waiter out of line and call its callback with ``None``. ``False`` (and no
        call) when it was no longer in line."""
        if not self.queue.withdraw(self):
            return False
        self.granted(None)
        return True


class SlotLimiter:
    """Bounds the model requests in flight; hands slots out FIFO, by priority or by attained
    service.

    Args:
        max_inflight: the hard cap on slots in use.
        policy: ``"fifo"`` (arrival order), ``"priority"`` (highest priority first) or
            ``"attained"`` (least service so far first, starvation bounded).
        adaptive: shrink the limit on overload signals and grow it back on success (AIMD),
            never above ``max_inflight`` and never below 1.
    """

    def __init__(
        self, max_inflight: int, *, policy: SlotPolicy = "fifo", adaptive: bool = False
    ) -> None:
        self._queue: SlotQueue[_Waiter | Parked] = SlotQueue(max_inflight, policy)
        self._max_inflight = max_inflight
        self._adaptive = AdaptiveLimit(max_inflight) if adaptive else None
        self._holders: dict[int, Slot] = {}
        self._peak = 0
        self._acquisitions = 0
        self._busy = 0.0
        self._wait = 0.0
        self._overloads = 0

    @property
    def limit(self) -> int:
        """The limit in force."""
        return self._queue.limit

    @property
    def policy(self) -> SlotPolicy:
        """The order waiters are served in."""
        return self._queue.policy

    async def acquire(self, owner: Hashable = None, priority: int = 0, service: float = 0) -> Slot:
        """Wait for a slot and take it.

        Args:
            owner: who holds the slot (shown in :attr:`SlotStatistics.holders`).
            priority: higher is served first under the ``"priority"`` policy.
            service: what the owner has received so far; less is served first under the
                ``"attained"`` policy.

        Returns:
            The held slot.
        """
        return await self.slot(owner, priority, service)

    def slot(
        self, owner: Hashable = None, priority: int = 0, service: float = 0
    ) -> Awaitable[Slot]:
        """:meth:`acquire` without a coroutine frame of its own while the task waits in line:
        await the result at once (the task is put in line by this call).

        Args:
            owner: who holds the slot (shown in :attr:`SlotStatistics.holders`).
            priority: higher is served first under the ``"priority"`` policy.
            service: less is served first under the ``"attained"`` policy.

        Returns:
            An awaitable of the held slot.
        """
        queue = self._queue
        if queue.waiting == 0 and queue.in_use < queue.limit:
            return self._take_free(owner)
        waiter = _Waiter(trio.lowlevel.current_task(), queue, owner, trio.current_time())
        queue.enqueue(waiter, priority, service)
        return trio.lowlevel.wait_task_rescheduled(waiter.abort)

    def park(
        self,
        owner: Hashable,
        priority: int,
        on_grant: Callable[[Any, Slot | None], object],
        subject: Any,
        service: float = 0,
    ) -> Slot | Parked:
        """Take a free slot at once, or put ``subject`` in line with no task behind it.

        Returns the slot when one was free (``on_grant`` is not called), else the
        :class:`Parked` waiter: ``on_grant(subject, slot)`` is later called once, with the
        granted slot (from the task that released it, so it must not block), or with
        ``None`` if the waiter is withdrawn first. (A shared ``on_grant`` and the waiting
        thing as ``subject`` cost no closure per wait.)
        """
        queue = self._queue
        now = trio.current_time()
        if queue.try_acquire():
            return self._grant(owner, now, now)
        parked = Parked(queue, owner, now, on_grant, subject)
        queue.enqueue(parked, priority, service)
        return parked

    async def _take_free(self, owner: Hashable) -> Slot:
        await trio.lowlevel.checkpoint_if_cancelled()
        now = trio.current_time()
        if self._queue.try_acquire():
            slot = self._grant(owner, now, now)
            await trio.lowlevel.cancel_shielded_checkpoint()
            return slot
        return await self.slot(owner)  # pragma: no cover - taken while checking cancellation

    def release(
        self,
        slot: Slot,
        *,
        failed: ErrorKind | None = None,
        succeeded: bool = False,
        now: float | None = None,
    ) -> None:
        """Give ``slot`` back.

        Args:
            slot: a slot from :meth:`acquire`; releasing it twice is an error.
            failed: why the exchange failed, if it did; a kind whose row in the error table
                says ``slows_down`` (rate limited, overloaded) counts as an overload signal
                and shrinks an adaptive limit.
            succeeded: the exchange succeeded; grows an adaptive limit back.
            now: the current trio time, if the caller has just read it.
        """
        overloaded = failed is not None and policy_of(failed).slows_down
        if slot.released:
            raise RuntimeError("slot released twice")
        slot.released = True
        del self._holders[id(slot)]
        self._busy += (trio.current_time() if now is None else now) - slot.granted_at
        if overloaded:
            self._overloads += 1
        woken = self._queue.release()
        if self._adaptive is not None and (overloaded or succeeded):
            if overloaded:
                limit = self._adaptive.on_overload(slot.epoch)
            else:
                limit = self._adaptive.on_success()
            if limit != self._queue.limit:
                woken += self._queue.set_limit(limit)
        if woken:
            now = trio.current_time() if now is None else now
            for waiter in woken:
                waiter.granted(self._grant(waiter.owner, waiter.asked_at, now))

    def _grant(self, owner: Hashable, asked_at: float, granted_at: float) -> Slot:
        epoch = self._adaptive.epoch if self._adaptive is not None else 0
        slot = Slot(owner, granted_at, granted_at - asked_at, epoch)
        self._holders[id(slot)] = slot
        self._acquisitions += 1
        self._wait += slot.wait
        in_use = self._queue.in_use
        self._peak = max(self._peak, in_use)
        return slot

    def statistics(self) -> SlotStatistics:
        """The current counters as a frozen value."""
        return SlotStatistics(
            max_inflight=self._max_inflight,
            limit=self._queue.limit,
            in_use=self._queue.in_use,
            waiting=self._queue.waiting,
            peak_in_use=self._peak,
            acquisitions=self._acquisitions,
            busy_time=self._busy,
            wait_time=self._wait,
            overloads=self._overloads,
            holders=tuple(slot.owner for slot in self._holders.values()),
        )
