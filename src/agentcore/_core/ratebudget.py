"""Per-minute request and token budgets of a hosted model API, as pure arithmetic.

Theory of operation
-------------------
Hosted APIs allow so many requests and so many tokens per minute. Each of the two limits is
modelled as a :class:`~agentcore._core.tokenbucket.TokenBucket` that holds at most one minute's
allowance and refills continuously at ``limit / 60`` per second (how the providers describe
their limits). A limit is known when it
was configured or when a reply's headers told it (an :class:`RateObservation`); with both,
the lower one applies. An unknown limit does not constrain anything.

Admission in line. :meth:`RateBudget.ready_at` says when both buckets will hold a request's
cost (one request and its estimated tokens; a request dearer than a whole bucket needs a full
one, as servers admit it), and :meth:`RateBudget.take` charges them when it is sent. A server
keeping the same buckets therefore admits every request sent at its ready time. The caller
serves its waiters in arrival order and only the first of them sleeps, until that time or
until the budget changes, whichever comes first: a thousand waiting agents cost one timer,
and an estimate corrected downwards lets the line move sooner. After a 429,
:meth:`RateBudget.penalize` (with the server's ``retry-after``) holds every request back:
:meth:`RateBudget.held` says so to a request that was admitted before the hold began and is
about to be sent, which must then wait again.

Correction. Once the reply is in, :meth:`RateBudget.settle` gives back (or takes more of) the
difference between the estimate and the tokens actually used. A reservation whose request was
refused with a 429 (which consumed nothing at the server) is returned in full with
:meth:`RateBudget.refund`. What a reply's headers say is *remaining* caps the buckets (never
raises them: the server's count lags our requests in flight).

:class:`~agentcore._core.token_estimate.TokenEstimator` supplies the estimates.

Everything takes the current time as an argument (any monotonic clock, in seconds); nothing
here reads a clock or sleeps.
"""

from __future__ import annotations

import math

import attrs

from .errors import ConfigError
from .tokenbucket import TokenBucket

__all__ = ["RateBudget", "RateObservation", "Reservation"]

_MINUTE = 60.0


@attrs.frozen
class RateObservation:
    """What one reply's headers said about the limits (``None``: not said)."""

    limit_requests: int | None = None
    limit_tokens: int | None = None
    remaining_requests: int | None = None
    remaining_tokens: int | None = None
    reset_requests: float | None = None
    """Seconds until the request allowance is full again."""
    reset_tokens: float | None = None
    """Seconds until the token allowance is full again."""


@attrs.frozen
class Reservation:
    """One request's claim on the budget."""

    tokens: int
    """The estimated tokens taken."""
    prompt: int = 0
    """Of those, the estimated prompt tokens (0: not estimated apart)."""


@attrs.define
class _Limit:
    """One per-minute limit: the configured and learned values and the bucket of the lower."""

    configured: int | None
    learned: int | None = None
    bucket: TokenBucket | None = None
    """A minute's allowance, refilled over the minute; ``None`` while no limit is known."""

    @property
    def limit(self) -> int | None:
        if self.configured is None:
            return self.learned
        if self.learned is None:
            return self.configured
        return min(self.configured, self.learned)

    def current(self, now: float) -> TokenBucket | None:
        """The bucket for the limit in force (made full when it first becomes known, resized
        keeping its level when a lower or higher limit is learned)."""
        limit = self.limit
        bucket = self.bucket
        if limit is None:
            return None
        if bucket is None:
            bucket = self.bucket = TokenBucket(limit / _MINUTE, float(limit))
        elif bucket.capacity != limit:
            bucket = self.bucket = bucket.resized(now, limit / _MINUTE, float(limit))
        return bucket

    def ready_at(self, now: float, amount: float) -> float:
        """When a request costing ``amount`` may go (``now`` or later)."""
        bucket = self.current(now)
        return now if bucket is None else now + bucket.wait(now, amount)

    def add(self, now: float, amount: float) -> None:
        """Add ``amount`` (negative: take), within the limit."""
        bucket = self.current(now)
        if bucket is not None:
            bucket.add(now, amount)

    def learn(self, now: float, limit: int | None, remaining: int | None) -> None:
        if limit is not None and limit > 0:
            self.learned = limit
        bucket = self.current(now)
        if bucket is not None and remaining is not None:
            bucket.cap(now, float(max(remaining, 0)))


@attrs.define
class RateBudget:
    """Request and token budgets per minute; see the module's theory of operation.

    Args:
        requests_per_minute: the configured request limit (``None``: only what headers say).
        tokens_per_minute: the configured token limit (``None``: only what headers say).
    """

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    _requests: _Limit = attrs.field(init=False)
    _tokens: _Limit = attrs.field(init=False)
    blocked_until: float = attrs.field(default=-math.inf, init=False)
    """Nothing may be sent before this time (set by :meth:`penalize`)."""
    limited: bool = attrs.field(default=False, init=False, eq=False)
    """Whether any limit is known (otherwise reservations never wait): a limit configured,
    learned from a reply's headers, or a hold set by :meth:`penalize`. Once true it stays
    true (a limit is never forgotten); kept up to date by the methods that learn one, so
    that the request path reads a flag rather than working it out for each request."""

    def __attrs_post_init__(self) -> None:
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigError(f"{name} must be a positive integer or None, got {value!r}")
        self._requests = _Limit(self.requests_per_minute)
        self._tokens = _Limit(self.tokens_per_minute)
        self.limited = self.requests_per_minute is not None or self.tokens_per_minute is not None

    @property
    def limits(self) -> tuple[int | None, int | None]:
        """The request and token limits per minute in force (``None``: unknown)."""
        return self._requests.limit, self._tokens.limit

    def levels(self, now: float) -> tuple[float | None, float | None]:
        """What is left of the request and token allowances at ``now`` (negative: owed)."""
        found: list[float | None] = []
        for limit in (self._requests, self._tokens):
            bucket = limit.current(now)
            found.append(None if bucket is None else bucket.level(now))
        return found[0], found[1]

    def ready_at(self, now: float, tokens: int) -> float:
        """When a request estimated at ``tokens`` may be sent (``now`` if at once)."""
        amount = float(max(0, tokens))
        return max(
            now,
            self.blocked_until,
            self._requests.ready_at(now, 1.0),
            self._tokens.ready_at(now, amount),
        )

    def take(self, now: float, tokens: int, prompt: int = 0) -> Reservation:
        """Charge a request estimated at ``tokens`` (``prompt`` of them its prompt's), sent
        at ``now``."""
        tokens = max(0, tokens)
        self._requests.add(now, -1.0)
        self._tokens.add(now, -float(tokens))
        return Reservation(tokens, prompt)

    def settle(self, reservation: Reservation, used_tokens: int, now: float) -> None:
        """The request was answered having used ``used_tokens``: correct the estimate."""
        self._tokens.add(now, float(reservation.tokens - max(0, used_tokens)))

    def refund(self, reservation: Reservation, now: float) -> None:
        """The request consumed nothing (refused with a 429): give everything back."""
        self._requests.add(now, 1.0)
        self._tokens.add(now, float(reservation.tokens))

    def penalize(self, now: float, retry_after: float) -> None:
        """The server refused a request for its rate limit: send nothing for ``retry_after``."""
        if retry_after > 0 and math.isfinite(retry_after):
            self.blocked_until = max(self.blocked_until, now + retry_after)
            self.limited = True

    def held(self, now: float) -> bool:
        """Whether a hold set by :meth:`penalize` is in force at ``now``: nothing may be sent,
        whatever was reserved before it began."""
        return now < self.blocked_until

    def observe(self, now: float, observation: RateObservation) -> None:
        """Learn the limits and what remains from a reply's headers."""
        self._requests.learn(now, observation.limit_requests, observation.remaining_requests)
        self._tokens.learn(now, observation.limit_tokens, observation.remaining_tokens)
        if not self.limited:
            self.limited = self._requests.limit is not None or self._tokens.limit is not None
