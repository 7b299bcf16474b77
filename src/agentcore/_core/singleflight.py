"""The singleflight table: bookkeeping for sharing one execution among identical tool calls.

Theory of operation
-------------------
A *key* names a call: the tool's name plus the canonical JSON text of its arguments (see
:func:`canonical_arguments`), so two calls have the same key exactly when they would run the
same function with the same inputs. A *waiter* is whatever the caller uses to stand for one
pending call (a token object); waiters are compared by equality and must be hashable.

For each key the table holds at most one *flight*: the ordered set of waiters that want the
result of the one execution currently running for that key. Three transitions exist:

- ``join(key, waiter)``: if no flight exists for ``key``, one is created with ``waiter`` as its
  only member and ``join`` returns ``True``: the caller *leads* and must start the execution.
  Otherwise ``waiter`` is added to the existing flight and ``join`` returns ``False``: the
  caller waits for the execution someone else already started.
- ``leave(key, waiter)``: ``waiter`` stops waiting (its caller was cancelled). If others still
  wait, the execution goes on for them and ``leave`` returns ``False``. If ``waiter`` was the
  last one, the flight is removed and ``leave`` returns ``True``: the caller must cancel the
  execution, and must never report a completion for it (its outcome belongs to nobody).
- ``complete(key)``: the execution finished (with a result or an error). The flight is removed
  and its waiters are returned, in the order they joined, so the caller can hand the *same*
  outcome to each of them.

Invariants, all checked by the stateful tests:

- at most one flight, hence at most one execution, per key at any moment;
- each waiter that joined is released exactly once: by ``complete`` or by its own ``leave``;
- after ``complete`` or a final ``leave`` the key is free: the next ``join`` for it leads a
  fresh execution. The table never remembers outcomes. Coalescing is not caching: replaying
  an old result of a tool with side effects would silently change behaviour, so caching is a
  separate, per-tool opt-in built elsewhere.

The table is sans-IO: no clock, no tasks, no locks. It is driven by one thread (the trio
driver's), and every method is a synchronous, constant-time decision. Misuse (leaving a flight
one never joined, completing a key with no flight, joining twice with the same waiter) raises
:class:`~agentcore.core.LocalProtocolError`, because it means the caller lost track of its own
state.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping
from typing import Any, Generic, TypeVar

import attrs

from .errors import LocalProtocolError

__all__ = [
    "SingleflightStatistics",
    "SingleflightTable",
    "ToolKey",
    "canonical_arguments",
    "tool_key",
]

W = TypeVar("W", bound=Hashable)

_NONE: Any = object()  # no flight for a key (``None`` may be a waiter)

ToolKey = tuple[str, str]
"""``(tool name, canonical JSON of the arguments)``."""


def canonical_arguments(arguments: Mapping[str, Any]) -> str:
    """The canonical JSON text of a tool call's arguments.

    Keys are sorted at every level, separators are compact and non-ASCII text is kept as is,
    so two argument mappings that are equal as JSON give the same text. Values are compared
    as JSON, not as Python: ``1``, ``1.0`` and ``true`` stay distinct.

    Args:
        arguments: the arguments, made of JSON values (dicts with string keys, lists, tuples,
            str, int, float, bool, ``None``).

    Returns:
        The canonical text.

    Raises:
        TypeError: a value is not a JSON value (a set, an object...).
        ValueError: a structure is circular.
    """
    return _CANONICAL.encode(arguments)


# What ``json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``
# uses, built once instead of per call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def tool_key(name: str, arguments: Mapping[str, Any]) -> ToolKey:
    """The singleflight key of a call of tool ``name`` with ``arguments``.

    Raises:
        TypeError: see :func:`canonical_arguments`.
        ValueError: see :func:`canonical_arguments`.
    """
    return (name, canonical_arguments(arguments))


@attrs.frozen
class SingleflightStatistics:
    """A snapshot of a :class:`SingleflightTable`'s counters."""

    flights: int
    """Keys with an execution in flight now."""
    waiters: int
    """Waiters currently waiting, over all flights."""
    led: int
    """``join`` calls that started a new flight (executions requested)."""
    coalesced: int
    """``join`` calls that joined a flight already in the air."""
    completed: int
    """Flights ended by ``complete``."""
    abandoned: int
    """Flights ended because their last waiter left (executions to cancel)."""
    left: int
    """``leave`` calls (waiters that stopped waiting before completion)."""


@attrs.define(eq=False)
class SingleflightTable(Generic[W]):
    """Which waiters share which in-flight execution; see the module's theory of operation.

    Keys are usually :data:`ToolKey` values (from :func:`tool_key`), but any hashable value
    works.
    """

    _flights: dict[Hashable, Any] = attrs.field(factory=dict, init=False)
    """Per key: the lone waiter itself (most flights have one: no set is built for it), or
    an insertion-ordered dict of the waiters once a second one joins."""
    _led: int = attrs.field(default=0, init=False)
    _coalesced: int = attrs.field(default=0, init=False)
    _completed: int = attrs.field(default=0, init=False)
    _abandoned: int = attrs.field(default=0, init=False)
    _left: int = attrs.field(default=0, init=False)

    def join(self, key: Hashable, waiter: W) -> bool:
        """Add ``waiter`` to the flight for ``key``, creating the flight if there is none.

        Args:
            key: the call's key.
            waiter: a token for this pending call, not currently waiting on ``key``.

        Returns:
            ``True`` if a new flight was created: the caller leads and must start the
            execution. ``False`` if the caller joined an execution already in flight.

        Raises:
            LocalProtocolError: ``waiter`` already waits on ``key``.
        """
        flight = self._flights.get(key, _NONE)
        if flight is _NONE:
            self._flights[key] = waiter
            self._led += 1
            return True
        if type(flight) is not dict:
            flight = self._flights[key] = {flight: None}
        if waiter in flight:
            raise LocalProtocolError(f"waiter {waiter!r} already waits on {key!r}")
        flight[waiter] = None
        self._coalesced += 1
        return False

    def leave(self, key: Hashable, waiter: W) -> bool:
        """Remove ``waiter`` from the flight for ``key`` before the execution completed.

        Args:
            key: the call's key.
            waiter: a token that joined ``key`` and has not been released yet.

        Returns:
            ``True`` if ``waiter`` was the last one: the flight is gone, and the caller must
            cancel the execution and never call :meth:`complete` for it. ``False`` if other
            waiters remain.

        Raises:
            LocalProtocolError: no flight for ``key``, or ``waiter`` is not in it.
        """
        flight = self._flights.get(key, _NONE)
        if type(flight) is dict:
            if waiter not in flight:
                raise LocalProtocolError(f"waiter {waiter!r} does not wait on {key!r}")
            del flight[waiter]
            self._left += 1
            if flight:
                return False
        elif flight is _NONE or flight != waiter:
            raise LocalProtocolError(f"waiter {waiter!r} does not wait on {key!r}")
        else:
            self._left += 1
        del self._flights[key]
        self._abandoned += 1
        return True

    def complete(self, key: Hashable) -> tuple[W, ...]:
        """End the flight for ``key``: its execution finished.

        The key is forgotten, so the next :meth:`join` for it leads a new execution.

        Args:
            key: the call's key.

        Returns:
            The waiters of the flight, in the order they joined; each must receive the same
            outcome.

        Raises:
            LocalProtocolError: no flight for ``key`` (it was completed already, or its last
                waiter left).
        """
        flight = self._flights.pop(key, _NONE)
        if flight is _NONE:
            raise LocalProtocolError(f"no execution in flight for {key!r}")
        self._completed += 1
        return tuple(flight) if type(flight) is dict else (flight,)

    def waiters(self, key: Hashable) -> tuple[W, ...]:
        """The waiters of the flight for ``key``, in join order (empty if there is none)."""
        flight = self._flights.get(key, _NONE)
        if flight is _NONE:
            return ()
        return tuple(flight) if type(flight) is dict else (flight,)

    def __contains__(self, key: object) -> bool:
        """Whether an execution for ``key`` is in flight."""
        try:
            return key in self._flights
        except TypeError:
            return False

    def __len__(self) -> int:
        """The number of flights."""
        return len(self._flights)

    def statistics(self) -> SingleflightStatistics:
        """A frozen snapshot of the table's counters."""
        return SingleflightStatistics(
            flights=len(self._flights),
            waiters=sum(len(f) if type(f) is dict else 1 for f in self._flights.values()),
            led=self._led,
            coalesced=self._coalesced,
            completed=self._completed,
            abandoned=self._abandoned,
            left=self._left,
        )
