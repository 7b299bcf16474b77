"""A rate budget shared by a fleet of workers, as pure arithmetic: the policy the batch's
server-side script runs.

Theory of operation
-------------------
The workers of a distributed batch usually send to one hosted API under one key: its requests-
and tokens-per-minute limits are the fleet's, not each worker's. :class:`SharedBudget` is that
one budget. It lives on the batch's server (``agentcore._distributed.scripts.RESERVE`` runs
exactly these steps atomically, with the server's clock as ``now``) and every worker reserves
from it before it sends.

Each limit is a bucket holding at most one minute's allowance and refilled at ``limit / 60``
a second (the hosted APIs' own description): the project's one token bucket
(:class:`~agentcore._core.tokenbucket.TokenBucket`), kept as the generic cell rate algorithm
keeps it, one number, the time at which the bucket is full again (``tat``, on the bucket's
clock ``now * rate``). A request costs one request and its estimated tokens. A limit is known
when it was configured or learned from a reply's headers; with both, the lower one applies,
and a limit that changes keeps the bucket's level. An unknown limit constrains nothing.

- :meth:`SharedBudget.reserve` takes the costs of a line of waiting requests, in order, and
  grants each at the time both buckets hold it, charging it for that time, as long as that
  time is within ``horizon`` seconds; it stops at the first that is not, and says when to
  ask again. One call serves a whole line: a round trip per call, not per request, and a
  worker sleeps out its grants' delays on its own.
- :meth:`SharedBudget.adjust` gives units back (positive) or charges them (negative): an
  estimate corrected by the reply's usage, a reservation refused with a 429 (which consumed
  nothing), what a worker spent on its local share while the server could not be reached.
- :meth:`SharedBudget.learn` and :meth:`SharedBudget.cap` take what a reply's headers said:
  the limits, and what remains, which caps the buckets (never raises them: the server's count
  lags requests in flight). :meth:`SharedBudget.update` applies a worker's learned limits,
  corrections and caps in the order the script does.
- :meth:`SharedBudget.hold` refuses every grant until a 429's ``retry-after`` has passed.

If the server cannot be reached, a worker goes on with :func:`local_share`: the same budget
with each limit divided by the live workers the server last counted, empty at the moment the
fleet's last grant may still be sent (``horizon`` after the worker's last successful call,
since no grant is ever made further ahead). Every worker doing the same, the fleet sends no
faster than its limits.

Times are seconds on any clock that every caller shares (the server's); nothing here reads a
clock or sleeps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs

from .tokenbucket import TokenBucket
from .validators import optional_int_at_least

__all__ = ["Grants", "SharedBudget", "local_share"]

_MINUTE = 60.0
_EARLY = 1e-9
"""Seconds of float rounding forgiven: a caller that slept exactly the computed wait finds
the bucket ready, not a few ulps short."""


@attrs.frozen
class Grants:
    """What one :meth:`SharedBudget.reserve` call granted."""

    delays: tuple[float, ...]
    """For the first ``len(delays)`` costs, in order: seconds from ``now`` until each may be
    sent (it was charged for that time)."""
    retry: float
    """Seconds from ``now`` until the first cost not granted could be (0 when all were)."""


def _lower(configured: int | None, learned: int | None) -> int | None:
    if configured is None:
        return learned
    if learned is None:
        return configured
    return min(configured, learned)


@attrs.define
class SharedBudget:
    """A fleet's requests and tokens per minute; see the module's theory of operation.

    Args:
        requests_per_minute: the configured request limit (``None``: only what headers say).
        tokens_per_minute: the configured token limit (``None``: only what headers say).
    """

    requests_per_minute: int | None = attrs.field(default=None, validator=optional_int_at_least(1))
    tokens_per_minute: int | None = attrs.field(default=None, validator=optional_int_at_least(1))
    learned_requests: int | None = None
    learned_tokens: int | None = None
    requests: TokenBucket | None = attrs.field(default=None, init=False)
    tokens: TokenBucket | None = attrs.field(default=None, init=False)
    held_until: float = -math.inf
    """Nothing is granted before this time (a 429's ``retry-after``)."""

    def __attrs_post_init__(self) -> None:
        self._resize(0.0)

    @property
    def limits(self) -> tuple[int | None, int | None]:
        """The request and token limits per minute in force (``None``: unknown)."""
        return (
            _lower(self.requests_per_minute, self.learned_requests),
            _lower(self.tokens_per_minute, self.learned_tokens),
        )

    def _resize(self, now: float) -> None:
        rpm, tpm = self.limits
        self.requests = _resized(self.requests, rpm, now)
        self.tokens = _resized(self.tokens, tpm, now)

    def levels(self, now: float) -> tuple[float | None, float | None]:
        """What is left of the request and token allowances at ``now`` (negative: owed)."""
        return (
            None if self.requests is None else self.requests.level(now),
            None if self.tokens is None else self.tokens.level(now),
        )

    def learn(self, now: float, limit_requests: int | None, limit_tokens: int | None) -> None:
        """Limits a reply's headers said (a limit that changes keeps its bucket's level)."""
        if limit_requests is not None and limit_requests > 0:
            self.learned_requests = limit_requests
        if limit_tokens is not None and limit_tokens > 0:
            self.learned_tokens = limit_tokens
        self._resize(now)

    def cap(self, now: float, requests: int | None, tokens: int | None) -> None:
        """What a reply's headers said remains: the levels go no higher."""
        if self.requests is not None and requests is not None:
            self.requests.cap(now, float(max(requests, 0)))
        if self.tokens is not None and tokens is not None:
            self.tokens.cap(now, float(max(tokens, 0)))

    def adjust(self, now: float, requests: float, tokens: float) -> None:
        """Give units back (positive) or charge them (negative)."""
        if self.requests is not None and requests:
            self.requests.add(now, requests)
        if self.tokens is not None and tokens:
            self.tokens.add(now, tokens)

    def update(
        self,
        now: float,
        *,
        learned: tuple[int | None, int | None] = (None, None),
        back: tuple[float, float] = (0.0, 0.0),
        remaining: tuple[int | None, int | None] = (None, None),
    ) -> None:
        """What one worker's call brings, in the order the script applies it: limits it
        learned, its corrections (requests and tokens given back, negative: charged), then
        what the headers said remains (which already counts the usage corrected)."""
        self.learn(now, *learned)
        self.adjust(now, *back)
        self.cap(now, *remaining)

    def hold(self, now: float, seconds: float) -> None:
        """Grant nothing for ``seconds`` from ``now`` (unless a longer hold is in force)."""
        if seconds > 0 and math.isfinite(seconds):
            self.held_until = max(self.held_until, now + seconds)

    def reserve(self, now: float, costs: Sequence[int], horizon: float) -> Grants:
        """Grant ``costs`` (estimated tokens, one request each) in order, each at the time
        both buckets hold it and no later than ``horizon`` seconds from ``now``."""
        held = self.held_until - now
        if held > _EARLY:
            return Grants((), held)
        delays: list[float] = []
        requests, tokens = self.requests, self.tokens
        for cost in costs:
            delay = 0.0
            if requests is not None:
                delay = requests.wait(now, 1.0)
            if tokens is not None:
                delay = max(delay, tokens.wait(now, float(cost)))
            if delay > horizon:
                return Grants(tuple(delays), delay - horizon)
            at = now + delay
            if requests is not None:
                requests.take(at, 1.0)
            if tokens is not None:
                tokens.take(at, float(max(cost, 0)))
            delays.append(delay)
        return Grants(tuple(delays), 0.0)


def _resized(bucket: TokenBucket | None, limit: int | None, now: float) -> TokenBucket | None:
    """The bucket of a limit per minute: one minute's allowance, refilled at ``limit / 60`` a
    second (a new limit keeps the level)."""
    if limit is None:
        return None
    if bucket is None:
        return TokenBucket(limit / _MINUTE, limit)
    if bucket.capacity == limit:
        return bucket
    return bucket.resized(now, limit / _MINUTE, limit)


def local_share(limits: tuple[int | None, int | None], live: int, empty_at: float) -> SharedBudget:
    """A worker's own budget while the fleet's cannot be reached: each known limit divided by
    the ``live`` workers (at least one unit a minute), empty at ``empty_at``."""
    workers = max(1, live)
    rpm, tpm = (None if limit is None else max(1, limit // workers) for limit in limits)
    budget = SharedBudget(rpm, tpm)
    for bucket in (budget.requests, budget.tokens):
        if bucket is not None:
            bucket.cap(empty_at, 0.0)
    return budget
