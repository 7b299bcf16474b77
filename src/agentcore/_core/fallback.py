"""Model fallback: which backend of an ordered list a failed request goes to next.

Theory of operation
-------------------
A driver may have several backends (or models), in order of preference: the primary first,
then its fallbacks. Every model request starts on the primary. Each backend makes the request
with its own inference slots and its own retries (:mod:`agentcore._core.retry`); when the
request fails *for good* there (a final error, or retries spent), :meth:`FallbackPolicy.next`
decides: if the error's kind is one the user named (``on``), the request goes to the next
backend of the list, from scratch; otherwise, or after the last backend, the failure is final
and goes to the loop. So a request visits the backends in list order, each at most once, and
stops at the first answer.

Which kinds fall over by default, and which may fall over at all, is read from the error
table (:data:`~agentcore._core.error_policy.ERROR_POLICY`, columns ``falls_over`` and
``may_fall_over``). A deadline never falls over: the run has no time left for another backend.

Circuit breaker
---------------
Without memory, every request would spend a dead backend's whole retry budget before falling
over. So each backend that has a next one keeps a :class:`Breaker`, configured by a
:class:`CircuitBreaker`, a state machine of three states driven by the outcome of every
attempt made there and by the clock (passed in: nothing here reads one):

- *closed* (the start): requests are sent. A failed attempt of a kind the breaker counts
  (``CircuitBreaker.on``, by default the error table's ``trips_breaker`` column: the backend
  could not be reached, or did not answer) adds one to a count of such failures in a row; a
  reply, or a failure the server answered with (it is alive), sets the count back to zero.
  When the count reaches ``failures``, the breaker *opens* for a cool-down of ``cooldown``.
- *open*: new requests pass this backend over and go straight to the next one. Requests
  admitted before (waiting for a slot, retrying, sleeping a back-off) ask
  :meth:`Breaker.may_send` before each attempt and after each failure: not yet sent, they go
  to the next backend; failed, they stop retrying and fall over. Outcomes of attempts made
  before it opened change nothing. Once the cool-down has passed, the next
  request to come is the *probe*, and the breaker is *half-open*.
- *half-open*: the probe alone is sent here (its first attempt; every other request passes
  over). Its outcome decides: a counted failure opens the breaker again with the cool-down
  doubled (up to ``max_cooldown``); anything else closes it and resets the cool-down. A probe
  that ends without an outcome (cancelled, past its deadline) hands the probe on: the next
  request probes.

Only kinds that also fall over are counted (``on`` meets :attr:`FallbackPolicy.on`): a
backend is passed over only for a failure the user lets fall over. The last backend has no
breaker: there is nowhere to pass it over to.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from typing import Any, Final

import attrs

from .error_policy import kinds_where, policy_of
from .errors import ConfigError
from .events import ErrorKind, ModelError
from .validators import check_items, int_at_least, number_at_least

__all__ = [
    "DEFAULT_BREAKER_ON",
    "DEFAULT_FALLBACK_ON",
    "Admission",
    "Breaker",
    "BreakerState",
    "CircuitBreaker",
    "FallbackPolicy",
]

DEFAULT_FALLBACK_ON: Final = kinds_where("falls_over")
"""The kinds whose row in the error table says ``falls_over``: failures another backend may
well not have (overload, rate limits, server errors, timeouts, unreachable servers, an unknown
model). Not the request's own faults (bad request, too large), not auth or quota (a
configuration to fix, not to hide)."""


def _error_kinds(field: str, value: Iterable[ErrorKind]) -> frozenset[ErrorKind]:
    """``value`` as a set of error kinds for the option ``field`` (``Class.on``)."""
    return frozenset(check_items(field, value, ErrorKind, "ErrorKind values"))


def _kinds(value: Iterable[ErrorKind]) -> frozenset[ErrorKind]:
    kinds = _error_kinds("FallbackPolicy.on", value)
    refused = sorted(kind.value for kind in kinds if not policy_of(kind).may_fall_over)
    if refused:
        raise ConfigError(
            f"FallbackPolicy.on cannot hold {', '.join(refused)}: such a failure cannot fall"
            " over to another backend (a deadline leaves the run no time)"
        )
    return kinds


@attrs.frozen
class FallbackPolicy:
    """Which final request failures go on to the next backend.

    Raises:
        ConfigError: ``on`` holds something that is not an :class:`~agentcore.ErrorKind`, or
            a kind that may not fall over (``ErrorKind.DEADLINE``).
    """

    on: frozenset[ErrorKind] = attrs.field(
        factory=lambda: kinds_where("falls_over"), converter=_kinds
    )
    """The error kinds that send a request to the next backend (default: the kinds whose row
    in the error table says ``falls_over``, :data:`DEFAULT_FALLBACK_ON`)."""

    def next(self, current: int, count: int, error: ModelError) -> int | None:
        """The backend to try after ``current`` (0-based, of ``count``) failed with ``error``.

        Returns:
            ``current + 1`` when ``error.kind`` is one of :attr:`on` and another backend
            follows; ``None`` when the failure is final.
        """
        if error.kind in self.on and current + 1 < count:
            return current + 1
        return None


# ----------------------------------------------------------------------------- circuit breaker

DEFAULT_BREAKER_ON: Final = kinds_where("trips_breaker")
"""The kinds whose row in the error table says ``trips_breaker``: the backend could not be
reached (connection refused or reset) or did not answer in time."""


def _breaker_kinds(value: Iterable[ErrorKind]) -> frozenset[ErrorKind]:
    return _error_kinds("CircuitBreaker.on", value)


def _finite(instance: Any, attribute: attrs.Attribute[Any], value: float) -> None:
    if not math.isfinite(value):
        raise ConfigError(f"CircuitBreaker.{attribute.name} must be finite, got {value!r}")


def _at_least_cooldown(instance: CircuitBreaker, attribute: Any, value: float) -> None:
    if value < instance.cooldown:
        raise ConfigError(
            f"CircuitBreaker.max_cooldown ({value!r}) must be at least cooldown"
            f" ({instance.cooldown!r})"
        )


@attrs.frozen
class CircuitBreaker:
    """When a backend that keeps failing is passed over for a while (model fallback only).

    Every backend but the last gets its own breaker (see the module's theory of operation):
    after ``failures`` attempts in a row fail with one of the kinds in :attr:`on`, new
    requests go straight to the next backend for ``cooldown`` seconds, and requests retrying
    there stop and fall over; then one probe request tries the backend again. A failed probe
    doubles the cool-down, up to ``max_cooldown``; a probe that gets an answer closes the
    breaker. ``open_driver(..., circuit_breaker=None)`` turns it off.

    Raises:
        ConfigError: ``failures`` not an int of at least 1, a cool-down not a positive finite
            number, ``max_cooldown`` below ``cooldown``, or ``on`` holding something that is
            not an :class:`~agentcore.ErrorKind`.
    """

    failures: int = attrs.field(default=3, validator=int_at_least(1))
    """Counted attempt failures in a row (any requests) that open the breaker."""
    cooldown: float = attrs.field(
        default=5.0, validator=[number_at_least(0, strictly=True), _finite]
    )
    """Seconds the backend is passed over after the breaker opens, before a probe."""
    max_cooldown: float = attrs.field(
        default=60.0,
        validator=[number_at_least(0, strictly=True), _finite, _at_least_cooldown],
    )
    """Seconds: the cool-down doubles after each failed probe, up to this."""
    on: frozenset[ErrorKind] = attrs.field(
        factory=lambda: kinds_where("trips_breaker"), converter=_breaker_kinds
    )
    """The error kinds that count (default: the kinds whose row in the error table says
    ``trips_breaker``, :data:`DEFAULT_BREAKER_ON`). Only those that also fall over
    (:attr:`FallbackPolicy.on`) are counted."""


class BreakerState(enum.Enum):
    """Where a :class:`Breaker` stands."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@attrs.frozen
class Admission:
    """What a :class:`Breaker` says to a request about to use its backend."""

    send: bool
    """Whether the request is made on this backend (else it goes to the next one at once)."""
    probe: int = 0
    """Nonzero: the request is the probe of a half-open breaker, with this ticket (give it to
    :meth:`Breaker.record` with the outcome of its first attempt, or to
    :meth:`Breaker.abandon` if it ends without one)."""


_SEND: Final = Admission(send=True)
_SKIP: Final = Admission(send=False)


@attrs.define
class Breaker:
    """One backend's circuit breaker: the state machine of the module's theory of operation.

    Args:
        policy: its configuration.
        falls_over: the kinds that fall over to the next backend (:attr:`FallbackPolicy.on`);
            only kinds of ``policy.on`` that are also here count.
    """

    policy: CircuitBreaker
    falls_over: frozenset[ErrorKind] = attrs.field(factory=lambda: kinds_where("falls_over"))
    state: BreakerState = attrs.field(default=BreakerState.CLOSED, init=False)
    failures: int = attrs.field(default=0, init=False)
    """Counted failures in a row while closed."""
    cooldown: float = attrs.field(init=False)
    """The cool-down of the next opening (or the current one, while open)."""
    reopens_at: float = attrs.field(default=-math.inf, init=False)
    """While open: when the next request becomes the probe."""
    opened: int = attrs.field(default=0, init=False)
    """Times the breaker opened (from closed, or after a failed probe)."""
    passed_over: int = attrs.field(default=0, init=False)
    """Requests sent straight to the next backend."""
    _ticket: int = attrs.field(default=0, init=False)
    """The ticket of the latest probe (nonzero once there was one)."""

    def __attrs_post_init__(self) -> None:
        self.cooldown = self.policy.cooldown

    @property
    def counted(self) -> frozenset[ErrorKind]:
        """The kinds that count towards opening."""
        return self.policy.on & self.falls_over

    def admit(self, now: float) -> Admission:
        """Whether a new request is made on this backend at ``now``."""
        state = self.state
        if state is BreakerState.CLOSED:
            return _SEND
        if state is BreakerState.OPEN and now >= self.reopens_at:
            self.state = BreakerState.HALF_OPEN
            self._ticket += 1
            return Admission(send=True, probe=self._ticket)
        self.passed_over += 1
        return _SKIP

    def may_send(self, failed: ErrorKind | None, probe: int = 0) -> bool:
        """Whether a request admitted earlier may make an attempt here now, after its waits.

        Args:
            failed: why its last attempt here failed (``None``: it has made none yet).
            probe: its probe ticket, until its first attempt's outcome is recorded.

        Returns:
            Always while closed, and for a probe's first attempt. Otherwise ``False`` (it
            goes to the next backend: not sent, or falling over with its last failure),
            unless its failure does not fall over (it would have nowhere to go).
        """
        if probe or self.state is BreakerState.CLOSED:
            return True
        return failed is not None and failed not in self.falls_over

    def record(self, now: float, failed: ErrorKind | None, probe: int = 0) -> None:
        """The outcome of an attempt made here, at ``now``: ``failed`` is its error's kind
        (``None``: a reply); ``probe`` the ticket of a probe's first attempt (else 0)."""
        counted = failed is not None and failed in self.policy.on and failed in self.falls_over
        state = self.state
        if state is BreakerState.CLOSED:
            if not counted:
                self.failures = 0
                return
            self.failures += 1
            if self.failures >= self.policy.failures:
                self._open(now)
        elif state is BreakerState.HALF_OPEN and probe and probe == self._ticket:
            if counted:
                self.cooldown = min(self.cooldown * 2.0, self.policy.max_cooldown)
                self._open(now)
            else:
                self.state = BreakerState.CLOSED
                self.failures = 0
                self.cooldown = self.policy.cooldown
        # Open, or half-open with a probe out: an attempt made before changes nothing.

    def abandon(self, now: float, probe: int) -> None:
        """The probe with ticket ``probe`` ended without an outcome (cancelled): the next
        request probes instead."""
        if self.state is BreakerState.HALF_OPEN and probe and probe == self._ticket:
            self.state = BreakerState.OPEN
            self.reopens_at = now

    def _open(self, now: float) -> None:
        self.state = BreakerState.OPEN
        self.failures = 0
        self.reopens_at = now + self.cooldown
        self.opened += 1
