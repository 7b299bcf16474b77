"""Inference-slot policy: who gets the next slot, and how many slots there are.

Theory of operation
-------------------
A *slot* is the right to have one model request in flight against the backend. The driver
takes one around each HTTP exchange and gives it back as soon as the response is read; tools
and retry back-off sleeps never hold one. This module holds the decisions, as plain objects
with no clock and no I/O; ``_slot_limiter`` wraps them for trio.

:class:`SlotQueue` counts slots in use and keeps the waiters. Its invariants:

- ``in_use <= limit`` whenever the limit has not just been lowered. Lowering the limit never
  takes a slot back: the queue simply grants nothing until enough slots are released.
- A slot is *handed over*: :meth:`SlotQueue.release` does not decrement and re-increment
  around a waiter, it returns the waiters that were granted a slot (already counted in
  ``in_use``). The caller must wake exactly those waiters.
- Newcomers never overtake waiters: :meth:`SlotQueue.try_acquire` fails while anyone waits,
  even if a slot is free (trio ``CapacityLimiter`` semantics). This cannot strand a waiter,
  because every event that frees a slot or raises the limit grants slots at once.
- Order: ``"fifo"`` serves waiters in arrival order; ``"priority"`` serves the highest
  priority first and, among equal priorities, the earliest arrival; ``"attained"`` serves
  the waiter whose run has received the least service so far first (its ``service``: the
  driver passes the tokens the run has received), among equal services the earliest
  arrival, with starvation bounded by age: once :attr:`SlotQueue.age_limit` slots have
  been granted since the oldest waiter queued, the oldest waiter goes next. A waiter that
  queued behind ``k`` others is therefore granted within ``age_limit + k + 1`` grants,
  whatever services arrive after it (least attained service alone would let a long run
  wait for ever behind a stream of fresh ones).
- A waiter that gives up (its task was cancelled) is withdrawn in O(1); its place in line is
  dropped lazily when it reaches the front. The line holds the waiters themselves, no wrapper
  per wait: a waiter is live while the id map holds it; a FIFO place left by a withdrawn
  waiter is recognised by a count of stale places per waiter (a waiter withdrawn and queued
  again has its stale place ahead of its live one), a priority or attained place by its
  sequence number (an attained waiter has two places, one in the service heap and one in the
  arrival line; whichever is granted first makes the other stale).

:class:`AdaptiveLimit` is the AIMD arithmetic for an optional adaptive limit: every
successful exchange adds ``1 / limit`` (so the limit grows by about one per window of
``limit`` successes), every overload signal (429, 529, 503...) multiplies it by
``decrease_factor``. It stays within ``[floor, ceiling]``; the ceiling is the user's
``max_inflight``, so the adaptive limit can only ever be *lower* than what the user allowed.
One burst of overload answers counts once: each slot remembers the *epoch* (number of
decreases so far) in which it was granted, and an overload signal from a slot granted before
the latest decrease is ignored, since that decrease already reacted to the same congestion.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Iterator
from typing import Generic, Literal, TypeVar

import attrs

from .errors import ConfigError

__all__ = ["AGE_LIMIT", "SLOT_POLICIES", "AdaptiveLimit", "SlotPolicy", "SlotQueue"]

W = TypeVar("W")

SlotPolicy = Literal["fifo", "priority", "attained"]
"""How waiters are ordered: arrival order; highest priority first; or least attained service
first (ties in arrival order for both, starvation bounded for ``attained``)."""

SLOT_POLICIES: tuple[SlotPolicy, ...] = ("fifo", "priority", "attained")
"""Every slot policy, in the order the documentation lists them."""

AGE_LIMIT = 1024
"""Default :attr:`SlotQueue.age_limit`: grants after which the oldest ``attained`` waiter is
served whatever its service (about a minute of a 32-slot server at 2 s per request)."""


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


# ``in_use`` changes twice per request: assignments skip attrs' validating ``__setattr__``
# (the limit is checked explicitly where it changes).
@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class SlotQueue(Generic[W]):
    """Slot accounting and the waiting line for one limiter.

    Args:
        limit: how many slots may be in use at once (at least 1).
        policy: ``"fifo"``, ``"priority"`` or ``"attained"``.
        age_limit: for ``"attained"``: grants after which the oldest waiter goes next.
    """

    limit: int = attrs.field()
    policy: SlotPolicy = "fifo"
    age_limit: int = AGE_LIMIT
    in_use: int = attrs.field(default=0, init=False)
    _fifo: deque[W] = attrs.field(factory=deque, init=False)
    _heap: list[tuple[float, int, W]] = attrs.field(factory=list, init=False)
    """Priority places (``-priority``) or attained places (``service``), then arrival."""
    _arrivals: deque[tuple[int, int, W]] = attrs.field(factory=deque, init=False)
    """``attained``: (sequence number, grants when queued, waiter) in arrival order."""
    _grants: int = attrs.field(default=0, init=False)
    """Slots granted to waiters so far (the age of an ``attained`` waiter is counted in them)."""
    _entries: dict[int, W] = attrs.field(factory=dict, init=False)
    """The waiters in line, by id."""
    _stale: dict[int, int] = attrs.field(factory=dict, init=False)
    """FIFO places of withdrawn waiters still in the line, counted per waiter id."""
    _seqs: dict[int, int] = attrs.field(factory=dict, init=False)
    """The sequence number of each priority or attained waiter's live place."""
    _waiting: int = attrs.field(default=0, init=False)
    _seq: Iterator[int] = attrs.field(factory=itertools.count, init=False)

    @limit.validator
    def _check_limit(self, _attribute: object, value: int) -> None:
        if not _is_count(value):
            raise ConfigError(f"slot limit must be an int >= 1, got {value!r}")

    def __attrs_post_init__(self) -> None:
        if self.policy not in SLOT_POLICIES:
            raise ConfigError(
                f"slot policy must be one of {list(SLOT_POLICIES)}, got {self.policy!r}"
            )
        if not _is_count(self.age_limit):
            raise ConfigError(f"age_limit must be an int >= 1, got {self.age_limit!r}")

    @property
    def waiting(self) -> int:
        """How many waiters are in line."""
        return self._waiting

    def try_acquire(self) -> bool:
        """Take a slot at once if one is free and nobody is waiting."""
        if self._waiting == 0 and self.in_use < self.limit:
            self.in_use += 1
            return True
        return False

    def enqueue(self, waiter: W, priority: int = 0, service: float = 0) -> None:
        """Put ``waiter`` in line. ``priority`` matters only for the ``"priority"`` policy,
        ``service`` (what the waiter's run has received so far) only for ``"attained"``.

        ``waiter`` must be hashable by identity and must not already be waiting.
        """
        key = id(waiter)
        if key in self._entries:
            raise ValueError("waiter is already in line")
        self._entries[key] = waiter
        self._waiting += 1
        policy = self.policy
        if policy == "fifo":
            self._fifo.append(waiter)
            return
        seq = next(self._seq)
        self._seqs[key] = seq
        if policy == "priority":
            heapq.heappush(self._heap, (-priority, seq, waiter))
        else:
            heapq.heappush(self._heap, (service, seq, waiter))
            self._arrivals.append((seq, self._grants, waiter))

    def withdraw(self, waiter: W) -> bool:
        """Take ``waiter`` out of line; ``False`` if it was not waiting (already granted)."""
        key = id(waiter)
        if self._entries.pop(key, None) is None:
            return False
        if self.policy == "fifo":
            self._stale[key] = self._stale.get(key, 0) + 1
        else:
            del self._seqs[key]
        self._waiting -= 1
        if len(self._fifo) + len(self._heap) + len(self._arrivals) > 3 * self._waiting + 64:
            self._compact()
        return True

    def _compact(self) -> None:
        # Withdrawn places are dropped lazily when they reach the front; a line whose front
        # never moves (a low priority under steady high-priority traffic, a stalled server)
        # would keep them forever. Rebuilding once they outnumber the live ones keeps the
        # line's memory within twice its waiters, at amortised O(1) per withdrawal.
        stale = self._stale
        kept: deque[W] = deque()
        for waiter in reversed(self._fifo):  # a live place comes after its waiter's stale ones
            key = id(waiter)
            if stale.get(key):
                stale[key] -= 1
            else:
                kept.appendleft(waiter)
        self._fifo = kept
        stale.clear()
        seqs = self._seqs
        self._heap = [item for item in self._heap if seqs.get(id(item[2])) == item[1]]
        heapq.heapify(self._heap)
        self._arrivals = deque(item for item in self._arrivals if seqs.get(id(item[2])) == item[0])

    def release(self) -> list[W]:
        """Give one slot back. Returns the waiters now granted a slot (to be woken)."""
        if self.in_use <= 0:
            raise RuntimeError("release() without a slot in use")
        self.in_use -= 1
        return self._grant()

    def set_limit(self, limit: int) -> list[W]:
        """Change the limit. Returns the waiters granted a slot because it grew."""
        if not _is_count(limit):
            raise ConfigError(f"slot limit must be an int >= 1, got {limit!r}")
        self.limit = limit
        return self._grant()

    def _pop(self) -> W | None:
        fifo, stale = self._fifo, self._stale
        while fifo:
            waiter = fifo.popleft()
            if stale:
                key = id(waiter)
                count = stale.get(key)
                if count:
                    if count == 1:
                        del stale[key]
                    else:
                        stale[key] = count - 1
                    continue
            return waiter
        heap, seqs = self._heap, self._seqs
        arrivals = self._arrivals
        while arrivals:
            seq, queued_at, waiter = arrivals[0]
            if seqs.get(id(waiter)) != seq:
                arrivals.popleft()  # granted from the heap, or withdrawn
                continue
            if self._grants - queued_at >= self.age_limit:
                arrivals.popleft()
                del seqs[id(waiter)]  # its heap place is stale now
                return waiter
            break
        while heap:
            _, seq, waiter = heapq.heappop(heap)
            if seqs.get(id(waiter)) == seq:
                del seqs[id(waiter)]
                return waiter
        return None

    def _grant(self) -> list[W]:
        granted: list[W] = []
        while self._waiting and self.in_use < self.limit:
            waiter = self._pop()
            if waiter is None:  # pragma: no cover - _waiting counts live waiters
                break
            del self._entries[id(waiter)]
            self._waiting -= 1
            self.in_use += 1
            self._grants += 1
            granted.append(waiter)
        return granted


@attrs.define(eq=False)
class AdaptiveLimit:
    """Additive-increase / multiplicative-decrease arithmetic for the slot limit.

    Args:
        ceiling: the highest limit (the user's ``max_inflight``); also the starting value.
        floor: the lowest limit (at least 1).
        decrease_factor: the multiplier applied on overload, in ``(0, 1)``.
    """

    ceiling: int
    floor: int = 1
    decrease_factor: float = 0.5
    value: float = attrs.field(init=False)
    """The current limit before rounding down."""
    epoch: int = attrs.field(default=0, init=False)
    """How many decreases happened so far."""

    def __attrs_post_init__(self) -> None:
        if not (_is_count(self.floor) and _is_count(self.ceiling) and self.floor <= self.ceiling):
            raise ConfigError(f"need 1 <= floor <= ceiling, got {self.floor!r}..{self.ceiling!r}")
        factor = self.decrease_factor
        if isinstance(factor, bool) or not isinstance(factor, int | float) or not 0 < factor < 1:
            raise ConfigError(f"decrease_factor must be in (0, 1), got {self.decrease_factor!r}")
        self.value = float(self.ceiling)

    @property
    def limit(self) -> int:
        """The limit to apply now: an integer in ``[floor, ceiling]``."""
        return max(self.floor, min(self.ceiling, int(self.value)))

    def on_success(self) -> int:
        """An exchange finished without an overload signal. Returns the new limit."""
        self.value = min(float(self.ceiling), self.value + 1.0 / self.limit)
        return self.limit

    def on_overload(self, granted_epoch: int) -> int:
        """The server signalled overload on a slot granted in ``granted_epoch``.

        Returns the new limit (unchanged when this congestion was already reacted to).
        """
        if granted_epoch >= self.epoch:
            self.value = max(float(self.floor), self.limit * self.decrease_factor)
            self.epoch += 1
        return self.limit
