"""The trio side of a backend's circuit breaker (model fallback only).

The decisions are the pure :class:`~agentcore._core.fallback.Breaker` (its theory of operation
is in :mod:`agentcore._core.fallback`); this wrapper gives it trio's clock and one thing the
pure state cannot do: wake the requests sleeping a back-off on this backend when the breaker
opens, so that they fall over at once rather than at the end of their sleep. One per backend
that has a next one, set as ``ModelRequests.breaker``.
"""

from __future__ import annotations

import trio

from .._core.events import ErrorKind, ModelFailed, ModelResponded
from .._core.fallback import Admission, Breaker, BreakerState, CircuitBreaker

__all__ = ["BackendBreaker", "PassedOver"]


class PassedOver(Exception):
    """Raised by the request path when a request admitted by a backend's breaker was not sent
    there after all: the breaker opened while it waited for its first slot. Model fallback
    catches it and starts the request on the next backend."""


class BackendBreaker:
    """A backend's :class:`~agentcore._core.fallback.Breaker`, on trio time.

    Args:
        policy: the breaker's configuration.
        falls_over: the kinds that fall over to the next backend (``FallbackPolicy.on``).
    """

    def __init__(self, policy: CircuitBreaker, falls_over: frozenset[ErrorKind]) -> None:
        self.state = Breaker(policy, falls_over)
        """The pure state machine (read it for the state and its counters)."""
        self._opened = trio.Event()
        """Set while the breaker is not closed: back-offs on this backend end early."""

    def admit(self) -> Admission:
        """Whether a new request is made on this backend now (see ``Breaker.admit``)."""
        return self.state.admit(trio.current_time())

    def record(self, now: float, event: ModelResponded | ModelFailed, probe: int) -> None:
        """The outcome of an attempt on this backend, which ended at ``now``."""
        state = self.state
        state.record(now, event.error.kind if isinstance(event, ModelFailed) else None, probe)
        if state.state is BreakerState.CLOSED:
            if self._opened.is_set():
                self._opened = trio.Event()
        else:
            self._opened.set()

    def abandon(self, probe: int) -> None:
        """The probe with ticket ``probe`` ended without an outcome: the next request probes."""
        self.state.abandon(trio.current_time(), probe)

    def may_send(self, failed: ErrorKind | None, probe: int = 0) -> bool:
        """Whether a request may make an attempt here now (see ``Breaker.may_send``)."""
        return self.state.may_send(failed, probe)

    async def back_off(self, seconds: float, kind: ErrorKind) -> bool:
        """Sleep a retry's back-off of ``seconds`` after a failure of ``kind``, cut short if
        the breaker opens meanwhile; returns whether the request may then try here again
        (``False``: it goes on to the next backend)."""
        state = self.state
        if state.state is BreakerState.CLOSED and kind in state.falls_over:
            with trio.move_on_after(seconds):
                await self._opened.wait()
        else:
            await trio.sleep(seconds)
        return state.may_send(kind)
