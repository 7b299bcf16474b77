""":class:`Cap`: a concurrency cap shared by trio tasks, FIFO, over the pure
:class:`~agentcore._core.caps.CapQueue`.

A task that finds the cap full parks (no polling, no task of its own) until a holder's
:meth:`Cap.release` hands it the unit; a parked task that is cancelled leaves the queue and
holds nothing. :meth:`Cap.acquire` returns when the wait began, so callers can report the
wait as a step event (:class:`~agentcore.ToolWaited`).
"""

from __future__ import annotations

import trio

from .._core.caps import CapQueue

__all__ = ["Cap"]


class Cap:
    """At most ``limit`` holders at once; the others wait in the order they came."""

    __slots__ = ("_queue",)

    def __init__(self, limit: int) -> None:
        self._queue: CapQueue[trio.lowlevel.Task] = CapQueue(limit)

    @property
    def limit(self) -> int:
        """Holders at most."""
        return self._queue.limit

    @property
    def held(self) -> int:
        """Units held now."""
        return self._queue.held

    @property
    def waiting(self) -> int:
        """Tasks waiting now."""
        return self._queue.waiting

    async def acquire(self) -> float | None:
        """Hold a unit: ``None`` when one was free at once, else the trio time the wait
        began. Pair every return with :meth:`release`.

        Raises:
            trio.Cancelled: while waiting (no unit is then held).
        """
        queue = self._queue
        me = trio.lowlevel.current_task()
        if queue.acquire(me):
            return None
        since = trio.current_time()

        def abort(_: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
            queue.withdraw(me)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)
        return since

    def release(self) -> None:
        """Give the unit back: the first waiter, if any, holds it from now on."""
        follower = self._queue.release()
        if follower is not None:
            trio.lowlevel.reschedule(follower)
