"""The model request path: a slot around each attempt, back-off between attempts without one.

Theory of operation
-------------------
One :meth:`ModelRequests.send` is one logical model request, made of attempts. Each attempt
takes an inference slot from the :class:`~agentcore._slot_limiter.SlotLimiter` (FIFO or by
priority), performs one exchange through the model client, and gives the slot back at once,
telling the limiter whether the server signalled overload (for the adaptive limit). A failed
attempt that the retry policy allows to retry sleeps its back-off *without* a slot and queues
again; the first success or the final failure ends the request. The model client never raises
for server or network failures (they come back classified), so the only exceptions here are
cancellations, which release the slot on their way out.

Statistics are bounded aggregates (counters and :class:`~agentcore._stats.Distribution`
sketches) plus a ring of the latest requests, so a driver kept open for days does not grow.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

import trio

from ._core.events import CallModel, ErrorKind, ModelFailed, ModelResponded
from ._core.messages import Usage
from ._core.retry import RetryPolicy
from ._model_client import ModelClient
from ._rate_limiter import RateLimiter
from ._results import Run
from ._slot_limiter import SlotLimiter
from ._stats import RECENT_REQUESTS, Distribution, RequestStats

__all__ = ["ModelRequests"]

_OVERLOAD_KINDS = frozenset({ErrorKind.RATE_LIMITED, ErrorKind.OVERLOADED})


class ModelRequests:
    """Sends model requests for one driver and keeps their statistics."""

    def __init__(
        self,
        client: ModelClient,
        limiter: SlotLimiter,
        retry: RetryPolicy,
        random: Callable[[], float],
        rates: RateLimiter | None = None,
    ) -> None:
        self._client = client
        self.rates = RateLimiter() if rates is None else rates
        """Request and token budgets: waited on, holding no slot, before each attempt."""
        self._limiter = limiter
        self._retry = retry
        self._random = random
        self.attempts = 0
        """Exchanges made, retries included."""
        self.requests = 0
        """Requests that ended."""
        self.failed = 0
        """Requests that failed for good."""
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cached_tokens = 0
        """Summed over the requests whose cached count is known."""
        self.known_prompt_tokens = 0
        """Prompt tokens of the requests whose cached count is known."""
        self.latency = Distribution()
        self.ttft = Distribution()
        self.slot_wait = Distribution()
        self.recent: deque[RequestStats] = deque(maxlen=RECENT_REQUESTS)
        """The latest requests in detail."""

    async def send(self, call: CallModel, run: Run | None) -> ModelResponded | ModelFailed:
        """Make ``call`` through a slot, retrying as the policy allows; record its statistics."""
        limiter = self._limiter
        first = trio.current_time()
        owner = call.request_id if run is None else run.index
        priority = call.hints.priority
        attempts = 0
        slot_wait = 0.0
        rates = self.rates
        while True:
            reservation = await rates.reserve(call)
            try:
                slot = await limiter.acquire(owner, priority)
            except BaseException:
                rates.unsent(reservation)
                raise
            if reservation is None and rates.budget.limited:
                # Limits became known (a reply's headers, a 429) while this request queued
                # for its slot: give the slot back and wait for budget first, holding none.
                slot_wait += slot.wait
                limiter.release(slot)
                continue
            if reservation is None:
                rates.blind += 1  # sent before any limit is known
            attempts += 1
            self.attempts += 1
            if run is not None and attempts == 1:
                run.turns += 1
            slot_wait += slot.wait
            try:
                exchange = await self._client.exchange(call)
            except BaseException:
                limiter.release(slot)
                rates.cancelled(reservation)
                raise
            now = trio.current_time()
            latency = now - slot.granted_at
            event = exchange.event
            rates.replied(call, reservation, event, exchange.rate)
            if isinstance(event, ModelFailed):
                limiter.release(slot, overloaded=event.error.kind in _OVERLOAD_KINDS, now=now)
            else:
                limiter.release(slot, succeeded=True, now=now)
            if run is not None:
                run.attempts += 1
                run.model_time += latency
                run.slot_wait += slot.wait
            if isinstance(event, ModelResponded):
                break
            deadline = trio.current_effective_deadline()
            wait = self._retry.delay(
                attempt=attempts,
                error=event.error,
                elapsed=now - first,
                random=self._random,
                remaining=None if deadline == math.inf else deadline - now,
            )
            if wait is None:
                break
            await trio.sleep(wait)
        if run is not None:
            run.ttft.append(exchange.ttft)
        self._record(call, run, event, attempts, slot_wait, latency, now - first, exchange.ttft)
        return event

    def _record(  # noqa: PLR0917 - private, called once per request
        self,
        call: CallModel,
        run: Run | None,
        event: ModelResponded | ModelFailed,
        attempts: int,
        slot_wait: float,
        latency: float,
        elapsed: float,
        ttft: float | None,
    ) -> None:
        usage = event.usage if isinstance(event, ModelResponded) else Usage()
        failed = isinstance(event, ModelFailed)
        self.requests += 1
        self.failed += failed
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        if usage.cached_tokens is not None:
            self.cached_tokens += usage.cached_tokens
            self.known_prompt_tokens += usage.prompt_tokens
        self.latency.add(latency)
        self.slot_wait.add(slot_wait)
        if ttft is not None:
            self.ttft.add(ttft)
        self.recent.append(
            RequestStats(  # positional: this runs once per model request
                call.request_id,
                None if run is None else run.index,
                attempts,
                slot_wait,
                latency,
                elapsed,
                ttft,
                usage.prompt_tokens,
                usage.completion_tokens,
                usage.cached_tokens,
                event.error.kind if isinstance(event, ModelFailed) else None,
            )
        )
