"""One token bucket, the pure policy behind every rate limit: model requests and tokens per
minute, tool calls per second, and the simulated server's limits.

Theory of operation
-------------------
A bucket holds at most ``capacity`` units and refills continuously at ``rate`` units a second;
what a request costs is taken from it, and a request that finds too little waits until the
refill has put it there. That is how hosted APIs describe their per-minute limits (Anthropic
names the token bucket; OpenAI's limits behave as one) and how a tool's ``rate``/``burst``
reads.

The bucket is kept as one number, as the generic cell rate algorithm (GCRA) keeps it: the
*theoretical arrival time* ``tat``, the time at which the bucket will be full again if nothing
more is taken. It is measured on the bucket's own clock, which reads ``now * rate`` at time
``now`` (seconds times units a second: one tick per unit), so that whole costs add up exactly.
Everything follows from it and the time ``now`` the caller passes in, with ``clock = now *
rate``:

- the level is ``capacity - max(0, tat - clock)`` (``tat <= clock``: full);
- taking ``cost`` moves ``tat`` to ``max(tat, clock) + cost``, whether or not there was enough:
  a level below zero is a debt the refill pays off first;
- a request costing ``cost`` may go once the level holds ``min(cost, capacity)``: one dearer
  than the whole bucket needs a full one, as servers admit it; :meth:`TokenBucket.wait` says
  how long that is from ``now``;
- giving back moves ``tat`` earlier, never before ``clock`` (the level never passes the
  capacity); capping the level (what a server says remains) moves it later.

Each operation is a function of ``(tat, now, its argument)`` that returns the new ``tat``. So
the same policy can be run where ``tat`` is shared, for example as one small script that a
Valkey server runs atomically over one key for a fleet of workers, with the server's clock as
``now``: there is a single value to read and write, and a key whose ``tat`` has passed holds a
full bucket and may expire. A fresh bucket has ``tat = -inf`` (full at any time).

Times are seconds on any monotonic clock; nothing here reads a clock or sleeps.
"""

from __future__ import annotations

import math

import attrs

__all__ = ["TokenBucket"]

_EARLY = 1e-9
"""Seconds of float rounding forgiven: a caller that slept exactly the computed wait finds
the bucket ready, not a few ulps short."""


@attrs.define
class TokenBucket:
    """A bucket of ``capacity`` units refilled at ``rate`` units a second; see the module's
    theory of operation.

    Args:
        rate: units added per second (positive).
        capacity: the most the bucket holds (positive); it starts full.
    """

    rate: float
    capacity: float
    tat: float = -math.inf
    """When the bucket is full again, on its own clock (``now * rate``); the whole of its
    state."""

    def level(self, now: float) -> float:
        """The units in the bucket at ``now`` (negative: owed)."""
        return self.capacity - max(0.0, self.tat - now * self.rate)

    def wait(self, now: float, cost: float) -> float:
        """Seconds from ``now`` until a request costing ``cost`` may be taken (0: at once)."""
        need = min(max(cost, 0.0), self.capacity)
        wait = (self.tat - (self.capacity - need)) / self.rate - now
        return 0.0 if wait <= _EARLY else wait

    def take(self, now: float, cost: float) -> None:
        """Take ``cost`` units at ``now``, going into debt if the bucket holds less."""
        if cost > 0:
            self.tat = max(self.tat, now * self.rate) + cost

    def give(self, now: float, amount: float) -> None:
        """Put ``amount`` units back at ``now`` (a refund), up to the capacity."""
        clock = now * self.rate
        if amount > 0 and self.tat > clock:
            self.tat = max(clock, self.tat - amount)

    def add(self, now: float, amount: float) -> None:
        """Give ``amount`` back when positive, take it when negative."""
        if amount >= 0:
            self.give(now, amount)
        else:
            self.take(now, -amount)

    def cap(self, now: float, level: float) -> None:
        """Lower the level at ``now`` to ``level`` if it is higher (never raises it)."""
        self.tat = max(self.tat, now * self.rate + self.capacity - level)

    def until_full(self, now: float) -> float:
        """Seconds from ``now`` until the bucket is full again."""
        return max(0.0, self.tat / self.rate - now)

    def resized(self, now: float, rate: float, capacity: float) -> TokenBucket:
        """The bucket with a new rate and capacity from ``now`` on, keeping its level at
        ``now`` (within the new capacity)."""
        bucket = TokenBucket(rate, capacity)
        bucket.cap(now, self.level(now))
        return bucket
