"""The trio side of rate limits: a line of waiters in front of the pure
:class:`~agentcore._core.ratebudget.RateBudget`.

Theory of operation
-------------------
Each model request attempt takes its estimated tokens from the budget *before* it queues for
an inference slot. When the budget cannot pay at once (or others are already waiting) the
attempt joins a FIFO line, holding nothing: no slot, no lock. Only the first waiter sleeps on
a timer, until the budget's ready time for it or until the budget changes (a reply's usage
corrected an estimate, headers taught a limit, a 429 held everyone back), whichever is first;
it then re-checks, takes its tokens and hands the front of the line to the next waiter. A
cancelled waiter leaves the line (handing the front on if it held it). The reply corrects the
reservation with its usage, teaches the budget what its headers said, and a 429 refunds the
reservation and, where the limits are known to be shared (below), holds every sender back for
the server's ``retry-after``. The hold also stops what was admitted before it began: an
attempt that reserved budget and then waited for an inference slot asks
:meth:`RateLimiter.may_send` once it holds the slot, just before it is written, and goes back
to the line if a hold began.

Whose refusal is a 429? It holds every sender back only where the limits are known to be
shared by every request (:attr:`RateLimiter.scope`, the rule of
:mod:`agentcore._driver.limit_scope` that a distributed batch's pause follows too): the user
configured them, a *successful* reply published them, or the API's provider documents one
limit for all of an organisation's requests. Elsewhere a 429 is the request's own: that
request alone waits its own ``retry-after`` (the retry policy), and an adaptive slot limit
shrinks as it does for overload; what such a refusal's headers claim
(``x-ratelimit-remaining-requests: 0``, say) is not taken as a limit either.

With no limit configured and none learned from headers yet, a reservation costs a few
attribute reads and never waits.
"""

from __future__ import annotations

from collections import OrderedDict

import attrs
import trio

from .._core.error_policy import policy_of
from .._core.events import CallModel, ModelFailed, ModelResponded
from .._core.ratebudget import RateBudget, RateObservation, Reservation
from .._core.token_estimate import (
    EstimateError,
    EstimateErrors,
    Features,
    TokenEstimator,
    prompt_features,
    shape_of,
)
from .limit_scope import LimitScope

__all__ = ["RateLimiter", "RateLimiterStatistics"]

_DEFAULT_PENALTY = 1.0
"""Seconds every sender holds back after a 429 that did not say how long."""


@attrs.frozen
class RateLimiterStatistics:
    """What the rate limiter did since the driver opened."""

    requests_per_minute: int | None
    """The request limit in force (configured or learned; ``None``: unknown)."""
    tokens_per_minute: int | None
    """The token limit in force (configured or learned; ``None``: unknown)."""
    waits: int
    """Attempts that had to wait for budget."""
    wait_time: float
    """Seconds spent waiting for budget, over all attempts."""
    rate_limited: int
    """Replies refused by the server for its rate limit (429)."""
    estimates: tuple[EstimateError, ...] = ()
    """How far the prompt-token estimates behind the reservations were from what the server
    counted, per request shape (only requests reserved against a known limit)."""


class _Waiter:
    __slots__ = ("front",)

    def __init__(self) -> None:
        self.front = trio.Event()
        """Set when this waiter reaches the front of the line."""


class RateLimiter:
    """Holds model request attempts back within their budget; see the module's docstring."""

    def __init__(
        self, requests_per_minute: int | None = None, tokens_per_minute: int | None = None
    ) -> None:
        self.budget = RateBudget(requests_per_minute, tokens_per_minute)
        self.estimator = TokenEstimator()
        self._errors = EstimateErrors()
        self._line: OrderedDict[_Waiter, None] = OrderedDict()
        self._changed = trio.Event()
        self._waits = 0
        self._wait_time = 0.0
        self._rate_limited = 0
        self.scope = LimitScope(requests_per_minute is not None or tokens_per_minute is not None)
        """Whether the limits are known to be shared by every request, so that a 429 holds
        every sender back (the request path sets it for a provider that documents them so)."""
        self.blind = 0
        """Attempts in flight that were sent before any limit was known."""
        self._blind_charge: int | None = None
        """What each of them was charged when the first limit became known."""

    async def reserve(self, call: CallModel) -> Reservation | None:
        """Wait until ``call`` may be sent and charge it; ``None`` when no limit is known."""
        budget = self.budget
        if not budget.limited:
            return None
        features = prompt_features(call)
        max_tokens = call.params.max_tokens
        now = trio.current_time()
        if not self._line:
            tokens = self.estimator.estimate(features, max_tokens)
            if budget.ready_at(now, tokens) <= now:
                return budget.take(now, tokens, self.estimator.prompt(features))
        return await self._wait_in_line(features, max_tokens, now)

    async def _wait_in_line(
        self, features: Features, max_tokens: int | None, started: float
    ) -> Reservation:
        """Wait at the back of the line, then at its front until the budget can pay; the
        estimate is made again each time the front waiter looks (replies meanwhile taught the
        estimator), so that requests queued before the first reply are not charged the
        prior's guess."""
        budget, line, estimator = self.budget, self._line, self.estimator
        me = _Waiter()
        line[me] = None
        if next(iter(line)) is me:
            me.front.set()
        self._waits += 1
        tokens = 0
        try:
            await me.front.wait()
            while True:
                now = trio.current_time()
                tokens = estimator.estimate(features, max_tokens)
                ready = budget.ready_at(now, tokens)
                if ready <= now:
                    break
                changed = self._changed
                with trio.move_on_at(ready):
                    await changed.wait()
        finally:
            del line[me]
            if line and me.front.is_set():
                next(iter(line)).front.set()
        now = trio.current_time()
        self._wait_time += now - started
        return budget.take(now, tokens, estimator.prompt(features))

    def _notify(self) -> None:
        """The budget changed: the front waiter re-checks."""
        self._changed.set()
        self._changed = trio.Event()

    def may_send(self, reservation: Reservation | None) -> bool:
        """Whether an attempt charged ``reservation`` (``None``: sent blind, no limit known
        when it queued) may be written now, after its waits: not while a 429's hold is in
        force, and not uncharged once a limit is known. If not, give the charge back
        (:meth:`unsent`) and :meth:`reserve` again, holding no slot."""
        budget = self.budget
        if not budget.limited:
            return True
        return reservation is not None and not budget.held(trio.current_time())

    def unsent(self, reservation: Reservation | None) -> None:
        """The attempt was cancelled before it was sent: give its charge back."""
        if reservation is not None:
            self.budget.refund(reservation, trio.current_time())
            self._notify()

    def cancelled(self, reservation: Reservation | None) -> None:
        """The attempt was cancelled after it was charged. The server may have counted it, so
        only the estimated tokens beyond nothing used are kept: it is settled as unused."""
        if reservation is not None:
            self.budget.settle(reservation, 0, trio.current_time())
            self._notify()
        elif self.blind:
            self.blind -= 1

    def replied(
        self,
        call: CallModel,
        reservation: Reservation | None,
        event: ModelResponded | ModelFailed,
        observation: RateObservation | None,
    ) -> None:
        """Account for one attempt's outcome and the rate-limit headers of its reply."""
        budget = self.budget
        if reservation is None and self.blind:
            self.blind -= 1
            if self._blind_charge is not None:
                # Charged when the limits became known: settle it like a reservation.
                reservation = Reservation(self._blind_charge)
        was_limited = budget.limited
        if (
            observation is None
            and reservation is None
            and not budget.limited
            and (
                isinstance(event, ModelResponded)
                or not policy_of(event.error.kind).holds_back_budget
            )
        ):
            return  # nothing is limited: keep the common path cheap
        readable = self.scope.learn(event, observation)
        now = trio.current_time()
        if isinstance(event, ModelResponded):
            usage = event.usage
            used = usage.prompt_tokens + usage.completion_tokens
            features = prompt_features(call)
            if reservation is not None and reservation.prompt:
                self._errors.record(shape_of(call), reservation.prompt, usage.prompt_tokens)
            self.estimator.learn(
                features, usage.prompt_tokens, usage.completion_tokens, call.params.max_tokens
            )
            if reservation is not None:
                budget.settle(reservation, used, now)
        elif policy_of(event.error.kind).holds_back_budget:
            self._rate_limited += 1
            retry_after = event.error.retry_after
            if self.scope.shared:
                # The quota is everyone's: nobody sends until the server's time is up. A 429
                # without that evidence is left to the request's own retry and to adaptive
                # concurrency.
                budget.penalize(now, _DEFAULT_PENALTY if retry_after is None else retry_after)
            if reservation is not None:
                budget.refund(reservation, now)
        elif reservation is not None:
            budget.settle(reservation, 0, now)
        if observation is not None and readable:
            # After the correction: what remains at the server already counts this request's
            # real usage, so it caps the corrected level rather than being corrected again.
            budget.observe(now, observation)
        if not was_limited and budget.limited and self.blind:
            # The first limits are known while other attempts, sent blind, are still in
            # flight: charge each an estimate now (settled by its own reply), so that the
            # budget does not spend what they are about to use.
            charge = self.estimator.estimate(prompt_features(call), call.params.max_tokens)
            self._blind_charge = charge
            for _ in range(self.blind):
                budget.take(now, charge)
        self._notify()

    def statistics(self) -> RateLimiterStatistics:
        """A snapshot of the limits in force and the waits so far."""
        rpm, tpm = self.budget.limits
        return RateLimiterStatistics(
            requests_per_minute=rpm,
            tokens_per_minute=tpm,
            waits=self._waits,
            wait_time=self._wait_time,
            rate_limited=self._rate_limited,
            estimates=self._errors.summary(),
        )
