"""What each kind of failed model request means to every layer: one row per :class:`ErrorKind`.

Every decision that depends on *why* a request failed is read from :data:`ERROR_POLICY`, and
from nowhere else:

- the classifier (:mod:`agentcore._codecs.classify`, and the Bedrock codec) sets
  ``ModelError.retryable`` from ``retryable`` (a server's ``x-should-retry`` header and a
  reply status outside the error range may override it for one error);
- the retry policy (:mod:`agentcore._core.retry`) ends a request whose failure repeats word
  for word when ``final_when_repeated`` (the repeated-rejection rule, see
  :mod:`agentcore._core.rejection`), unless ``RetryPolicy.stop_on_repeat`` is off;
- the request path tells an adaptive slot limit to shrink on ``slows_down``;
- the rate limiter holds back a per-minute budget on ``holds_back_budget`` (every sender only
  where the limits are known to be shared, :mod:`agentcore._driver.limit_scope`);
- model fallback (:mod:`agentcore._core.fallback`) moves a request to the next backend by
  default on ``falls_over``, and refuses to be told to on a kind without ``may_fall_over``;
- a backend's circuit breaker (:class:`~agentcore._core.fallback.CircuitBreaker`) counts a
  failed attempt towards opening by default on ``trips_breaker``;
- distributed workers publish a pause that every worker waits out on ``pauses_fleet``, where
  the limits are known to be shared (the rate limiter's hold requires the same evidence);
- a batch's warm-up stops the batch before it starts on ``fatal_at_warm_up``;
- the testing kit's strategies draw ``retryable`` from ``retryable``.

A layer never keeps its own set of kinds: it asks :func:`policy_of` (or a set derived from
the table by :func:`kinds_where`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Literal

import attrs

from .events import ErrorKind

__all__ = ["ERROR_POLICY", "KindPolicy", "kinds_where", "policy_of"]

Column = Literal[
    "retryable",
    "final_when_repeated",
    "slows_down",
    "holds_back_budget",
    "falls_over",
    "may_fall_over",
    "trips_breaker",
    "pauses_fleet",
    "fatal_at_warm_up",
]


@attrs.frozen
class KindPolicy:
    """How every layer treats one kind of failure (one row of :data:`ERROR_POLICY`)."""

    retryable: bool = False
    """Another attempt may succeed: the classifier's default for ``ModelError.retryable``."""
    final_when_repeated: bool = False
    """The same failure (kind, status, code and message) on the retry of the same request is
    deterministic, and ends the request (when ``RetryPolicy.stop_on_repeat`` is on)."""
    slows_down: bool = False
    """The server asks for less load: an adaptive slot limit shrinks."""
    holds_back_budget: bool = False
    """A rate-limit answer: a per-minute budget waits before sending more."""
    falls_over: bool = False
    """In :class:`~agentcore.FallbackPolicy`'s default ``on``: another backend may well not
    fail the same way."""
    may_fall_over: bool = True
    """May be named in ``FallbackPolicy.on`` at all."""
    trips_breaker: bool = False
    """In :class:`~agentcore.CircuitBreaker`'s default ``on``: the backend could not be reached
    or did not answer at all, so a few such attempts in a row send new requests straight to
    the next backend for a cool-down. Not a kind the server answers with (it is alive)."""
    pauses_fleet: bool = False
    """Distributed workers publish a pause that every worker of the batch waits out, where
    the backend's limits are known to be shared (:mod:`agentcore._driver.limit_scope`)."""
    fatal_at_warm_up: bool = False
    """A warm-up request failing so (after its retries) stops the batch before it starts:
    every job would fail the same way."""


_ROWS: dict[ErrorKind, KindPolicy] = {
    # Transient, and a sign of load: retried, slows down, another backend may have room.
    ErrorKind.RATE_LIMITED: KindPolicy(
        retryable=True,
        slows_down=True,
        holds_back_budget=True,
        falls_over=True,
        pauses_fleet=True,
    ),
    ErrorKind.OVERLOADED: KindPolicy(
        retryable=True, slows_down=True, falls_over=True, pauses_fleet=True
    ),
    # Usually transient; the same 5xx word for word twice is deterministic (llama-server's
    # "500 Failed to parse tool call arguments as JSON" for a history it cannot render).
    ErrorKind.SERVER: KindPolicy(retryable=True, final_when_repeated=True, falls_over=True),
    # No answer at all: a few in a row open the backend's circuit breaker.
    ErrorKind.TIMEOUT: KindPolicy(retryable=True, falls_over=True, trips_breaker=True),
    ErrorKind.CONFLICT: KindPolicy(retryable=True),
    # Cannot connect, reset, cut stream; at warm-up (after retries) no job could connect.
    ErrorKind.CONNECTION: KindPolicy(
        retryable=True, falls_over=True, trips_breaker=True, fatal_at_warm_up=True
    ),
    # The request's own fault: the same request fails the same way anywhere.
    ErrorKind.BAD_REQUEST: KindPolicy(),
    # A configuration to fix, not to hide behind another backend; every job would hit it.
    ErrorKind.AUTH: KindPolicy(fatal_at_warm_up=True),
    # An unknown route or model: another backend may serve it; every job would hit it here.
    ErrorKind.NOT_FOUND: KindPolicy(falls_over=True, fatal_at_warm_up=True),
    ErrorKind.TOO_LARGE: KindPolicy(),
    ErrorKind.QUOTA: KindPolicy(fatal_at_warm_up=True),
    # A 2xx reply that did not follow the protocol (cut short or garbled on its way): damage
    # in transit as often as a server bug, so retried within the retry policy's bounds.
    ErrorKind.PROTOCOL: KindPolicy(retryable=True),
    # The run has no time left: not for a retry, nor for another backend.
    ErrorKind.DEADLINE: KindPolicy(may_fall_over=False),
    # The same reply would be as large again.
    ErrorKind.REPLY_TOO_LARGE: KindPolicy(),
}

ERROR_POLICY: Final[Mapping[ErrorKind, KindPolicy]] = MappingProxyType(_ROWS)
"""One row per :class:`~agentcore.ErrorKind` (read-only)."""


def policy_of(kind: ErrorKind) -> KindPolicy:
    """The row of ``kind``."""
    return _ROWS[kind]


def kinds_where(column: Column) -> frozenset[ErrorKind]:
    """The kinds whose row has ``column`` set, in the table's current state."""
    return frozenset(kind for kind, row in _ROWS.items() if getattr(row, column))
