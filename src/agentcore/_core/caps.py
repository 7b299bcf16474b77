"""Concurrency caps for tool calls: pure FIFO admission, per agent turn and per shared cap.

Theory of operation
-------------------
A *cap* is a number of units; a call holds one unit while it is in progress and gives it back
when it ends. Two policies live here, both sans-IO (no clock, no tasks): the caller asks, the
policy answers who may go now, and the caller does the waiting.

:class:`CapQueue` is one cap shared by any number of callers (a tool's ``max_concurrency``
across a driver, a batch's ``max_tool_concurrency`` across all its tools). Transitions:

- ``acquire(waiter)``: a unit is free and nobody is queued: the waiter holds it now
  (``True``). Otherwise it joins the back of the queue (``False``). A queue that is not empty
  never lets a newcomer overtake it, even when a unit happens to be free for an instant.
- ``release()``: a holder is done. Its unit goes straight to the head of the queue, which is
  returned (it holds the unit from now on: the caller wakes it), or is freed (``None``).
- ``withdraw(waiter)``: a queued waiter gives up (its caller was cancelled). It never held a
  unit, so none is freed.

Invariants (checked by the stateful property test): at most ``limit`` units are held; units
are granted in the order waiters asked; no waiter is queued while a unit is free; each waiter
that asked is granted once or withdrawn once, never both, never twice.

:class:`TurnCaps` is the per-turn cap: a model reply asking for many calls of one tool runs
them at most ``cap`` at a time *within that turn*, in the order the model listed them. It
keeps no waiters of its own beyond the turn's call ids: ``admit`` says which of the turn's
calls may start now, and ``ended(call_id)`` names the next one that may start. Each call is
started exactly once, none is dropped, and a tool without a cap is never held back.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable, Mapping
from typing import Generic, TypeVar

import attrs

from .errors import ConfigError, LocalProtocolError

__all__ = ["CapQueue", "TurnCaps", "check_cap"]

W = TypeVar("W", bound=Hashable)


def check_cap(name: str, value: object) -> int | None:
    """``value`` as a cap (``None``: no cap).

    Raises:
        ConfigError: ``value`` is not ``None`` or a positive integer.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    return value


@attrs.define(eq=False)
class CapQueue(Generic[W]):
    """A counting cap with a FIFO queue of waiters; see the module's theory of operation."""

    limit: int = attrs.field()
    _held: int = attrs.field(default=0, init=False)
    _queue: dict[W, None] = attrs.field(factory=dict, init=False)
    """Waiters in the order they asked (a dict: ordered, with O(1) withdrawal)."""

    @limit.validator
    def _check(self, _: object, value: int) -> None:
        check_cap("limit", value)

    @property
    def held(self) -> int:
        """Units held now."""
        return self._held

    @property
    def waiting(self) -> int:
        """Waiters queued now."""
        return len(self._queue)

    def acquire(self, waiter: W) -> bool:
        """Take a unit for ``waiter`` (``True``) or queue it (``False``).

        Raises:
            LocalProtocolError: ``waiter`` is queued already.
        """
        if self._held < self.limit and not self._queue:
            self._held += 1
            return True
        if waiter in self._queue:
            raise LocalProtocolError(f"waiter {waiter!r} is queued already")
        self._queue[waiter] = None
        return False

    def release(self) -> W | None:
        """Give a unit back: the waiter it passes to (it holds the unit now), or ``None``.

        Raises:
            LocalProtocolError: no unit is held.
        """
        if self._held == 0:
            raise LocalProtocolError("release() without a held unit")
        if self._queue:
            waiter = next(iter(self._queue))
            del self._queue[waiter]
            return waiter  # the unit changes hands: ``held`` stays the same
        self._held -= 1
        return None

    def withdraw(self, waiter: W) -> None:
        """Take a queued ``waiter`` out of the queue (it holds nothing).

        Raises:
            LocalProtocolError: ``waiter`` is not queued.
        """
        try:
            del self._queue[waiter]
        except KeyError:
            raise LocalProtocolError(f"waiter {waiter!r} is not queued") from None


@attrs.define(eq=False)
class TurnCaps:
    """The calls of one agent turn, started at most ``caps[tool]`` at a time per tool.

    Args:
        caps: the per-turn cap of each capped tool, by name (tools not named are uncapped).
    """

    caps: Mapping[str, int]
    _running: dict[str, int] = attrs.field(factory=dict, init=False)
    _held: dict[str, deque[str]] = attrs.field(factory=dict, init=False)
    """Per tool, the call ids waiting for their turn, in the model's order."""
    _tool_of: dict[str, str] = attrs.field(factory=dict, init=False)
    """The tool of each call admitted and not ended yet."""
    _known: set[str] = attrs.field(factory=set, init=False)
    """Every call id taken so far (a call id is started at most once)."""

    def admit(self, calls: Iterable[tuple[str, str]]) -> list[str]:
        """Take the turn's ``(call_id, tool)`` pairs, in the model's order; return the ids
        that may start now (the rest start as earlier ones end, see :meth:`ended`).

        Raises:
            LocalProtocolError: a call id is known already.
        """
        now: list[str] = []
        for call_id, tool in calls:
            if call_id in self._known:
                raise LocalProtocolError(f"call {call_id!r} is known already")
            self._known.add(call_id)
            cap = self.caps.get(tool)
            held = self._held.get(tool)
            if cap is None or (not held and self._running.get(tool, 0) < cap):
                self._running[tool] = self._running.get(tool, 0) + 1
                self._tool_of[call_id] = tool
                now.append(call_id)
            else:
                if held is None:
                    held = self._held[tool] = deque()
                held.append(call_id)
        return now

    def ended(self, call_id: str) -> str | None:
        """Call ``call_id`` ended: the id of the held call of the same tool that may start
        now, or ``None``.

        Raises:
            LocalProtocolError: ``call_id`` was not started.
        """
        tool = self._tool_of.pop(call_id, None)
        if tool is None:
            raise LocalProtocolError(f"call {call_id!r} was not started")
        held = self._held.get(tool)
        if held:
            follower = held.popleft()
            self._tool_of[follower] = tool
            return follower
        self._running[tool] -= 1
        return None

    @property
    def waiting(self) -> int:
        """Calls held back now."""
        return sum(len(q) for q in self._held.values())

    def running(self, tool: str) -> int:
        """Calls of ``tool`` started and not ended."""
        return self._running.get(tool, 0)
