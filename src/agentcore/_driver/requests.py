"""The model request path: a slot around each attempt, back-off between attempts without one.

Theory of operation
-------------------
One :meth:`ModelRequests.send` is one logical model request, made of attempts. Each attempt
takes an inference slot from the :class:`~agentcore._driver.slot_limiter.SlotLimiter` (FIFO or by
priority), performs one exchange through the model client, and gives the slot back at once,
telling the limiter whether the server signalled overload (for the adaptive limit). A failed
attempt that the retry policy allows to retry sleeps its back-off *without* a slot and queues
again; the first success or the final failure ends the request. The model client never raises
for server or network failures (they come back classified), so the only exceptions here are
cancellations, which release the slot on their way out.

Statistics are bounded aggregates (counters and :class:`~agentcore._driver.stats.Distribution`
sketches) plus a ring of the latest requests, so a driver kept open for days does not grow.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import trio

from .._codecs.codec import Delta
from .._codecs.exchange import Exchange
from .._core.events import CallModel, ModelError, ModelFailed, ModelResponded
from .._core.messages import Usage
from .._core.ratebudget import Reservation
from .._core.retry import RetryPolicy
from .._observe.log import DRIVER
from .._observe.observer import Observer
from .._observe.steps import ModelReplied, RequestFailed, RequestStarted, RetryScheduled
from .._transports.deltas import stream_exchange
from .._transports.model_client import ModelClient
from .observed import step_deltas
from .rate_limiter import RateLimiter
from .runs import Run
from .slot_limiter import Parked, Slot, SlotLimiter
from .stats import RequestTotals

__all__ = ["ModelRequests"]

Granted = tuple[Slot, Reservation | None]
"""A slot taken for a request's first attempt, with its rate reservation."""

_LOG = DRIVER


def _fields(
    call: CallModel, run: Run | None, attempt: int, error: ModelError | None
) -> dict[str, Any]:
    return {
        "agent": None if run is None else run.index,
        "request_id": call.request_id,
        "attempt": attempt,
        "error_kind": None if error is None else error.kind.value,
        "status": None if error is None else error.status,
    }


def _log_attempt(
    call: CallModel, run: Run | None, attempt: int, exchange: Exchange, latency: float
) -> None:
    event = exchange.event
    error = event.error if isinstance(event, ModelFailed) else None
    _LOG.debug(
        "model request %s attempt %d: %s in %.3f s",
        call.request_id,
        attempt,
        "ok" if error is None else error.kind.value,
        latency,
        extra={**_fields(call, run, attempt, error), "latency": latency, "ttft": exchange.ttft},
    )


class StreamSink(Protocol):
    """Where the deltas of a streamed request go (``Driver.generate_stream``)."""

    @property
    def delivered(self) -> bool:
        """Whether a delta reached the caller: the request is not retried after that."""
        ...

    async def __call__(self, deltas: Sequence[Delta]) -> None: ...


class ModelRequests:
    """Sends model requests for one driver and keeps their statistics."""

    def __init__(
        self,
        client: ModelClient,
        limiter: SlotLimiter,
        retry: RetryPolicy,
        random: Callable[[], float],
        name: str = "",
        *,
        rates: RateLimiter | None = None,
    ) -> None:
        self.name = name
        """The backend's name in ``RequestStats.backend`` (set with model fallback)."""
        self._client = client
        self.rates = RateLimiter() if rates is None else rates
        """Request and token budgets: waited on, holding no slot, before each attempt."""
        self._limiter = limiter
        self._retry = retry
        self._random = random
        self.stats = RequestTotals()
        """What was measured; model fallback makes every backend share one."""
        self.observer: Observer | None = None
        """Told about slot waits, attempts and back-offs (``None``: nobody listens)."""

    async def park(
        self, call: CallModel, run: Run, wake: Callable[[Run, Slot | None], object]
    ) -> Granted | Parked:
        """Queue the first attempt of ``call`` for a slot without holding the task.

        Waits for what comes before the slot line (step events to settle, the rate budget),
        then takes a free slot (returned, with the rate reservation: pass it to :meth:`send`
        as ``granted``) or parks ``run`` in the line: ``wake(run, slot)`` is called once a
        slot is granted, or ``wake(run, None)`` when the parked waiter is withdrawn; the rate
        reservation waits in ``run.reservation`` (give it back with :meth:`unused` or
        ``rates.unsent`` if the slot goes unused).
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        if run.steps is not None:
            await run.steps.settle()
        return self.park_now(call, run, wake, await self.rates.reserve(call))

    def park_now(
        self,
        call: CallModel | int,
        run: Run,
        wake: Callable[[Run, Slot | None], object],
        reservation: Reservation | None = None,
    ) -> Granted | Parked:
        """:meth:`park` once what comes before the slot line is done (or not needed: no step
        events, no rate limit known), with the rate ``reservation`` made for it.

        ``call`` may be only the priority of a request not built yet (a fresh loop's first,
        :attr:`AgentLoop.opening_priority`): nothing observes it queueing then, and
        ``run.pending_model`` must be set before the request is sent."""
        if isinstance(call, int):
            priority = call
        else:
            priority = call.hints.priority
            if self.observer is not None:
                self.observer.queued(call, run.index, trio.current_time())
        slot = self._limiter.park(run.index, priority, wake, run)
        if isinstance(slot, Slot):
            return slot, reservation
        run.reservation = reservation
        return slot

    def unused(self, granted: Granted) -> None:
        """Give back a slot from :meth:`park` that no attempt used, and its rate charge."""
        slot, reservation = granted
        self._limiter.release(slot)
        self.rates.unsent(reservation)

    async def send(
        self,
        call: CallModel,
        run: Run | None,
        sink: StreamSink | None = None,
        granted: Granted | None = None,
    ) -> ModelResponded | ModelFailed:
        """Make ``call`` through a slot, retrying as the policy allows; record its statistics.

        With ``sink``, each attempt is streamed into it, and a failure after a delta was
        delivered is final. A run with step events (``run.steps``) reports each step there.
        ``granted``: the slot and rate reservation of the first attempt, from :meth:`park`
        (the slot is given back on every way out).
        """
        steps = None if run is None else run.steps
        limiter = self._limiter
        first = trio.current_time()
        owner = call.request_id if run is None else run.index
        priority = call.hints.priority
        attempts = 0
        slot_wait = 0.0
        observer = self.observer
        token = None
        previous: ModelError | None = None
        rates = self.rates
        while True:
            if granted is not None:
                slot, reservation = granted
                granted = None
            else:
                if steps is not None:
                    await steps.settle()
                reservation = await rates.reserve(call)
                if observer is not None:
                    observer.queued(call, None if run is None else run.index, trio.current_time())
                try:
                    slot = await limiter.slot(owner, priority)
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
            if observer is not None:
                # Now, not ``slot.granted_at``: a slot handed over at a release is granted before
                # this task runs again, and a timeline lane must not start before it is free.
                token = observer.attempt_started(
                    call,
                    None if run is None else run.index,
                    attempts,
                    slot.wait,
                    trio.current_time(),
                )
            self.stats.attempts += 1
            if run is not None and attempts == 1:
                run.turns += 1
            slot_wait += slot.wait
            try:
                if steps is not None:
                    assert run is not None
                    steps.push(
                        RequestStarted(
                            run.index,
                            call.request_id,
                            call.hints.turn,
                            attempts,
                            slot.wait,
                            slot.granted_at,
                        )
                    )
                    if steps.deltas:
                        sink = step_deltas(steps, run.index, call, attempts)
                if sink is None:
                    exchange = await self._client.exchange(call)
                else:
                    exchange = await stream_exchange(self._client, call, sink)
            except BaseException:
                limiter.release(slot)
                if observer is not None:
                    observer.attempt_ended(token, None, trio.current_time())
                rates.cancelled(reservation)
                raise
            now = trio.current_time()
            latency = now - slot.granted_at
            event = exchange.event
            rates.replied(call, reservation, event, exchange.rate)
            if isinstance(event, ModelFailed):
                limiter.release(slot, failed=event.error.kind, now=now)
            else:
                limiter.release(slot, succeeded=True, now=now)
            if observer is not None:
                observer.attempt_ended(token, exchange, now)
            if _LOG.isEnabledFor(logging.DEBUG):
                _log_attempt(call, run, attempts, exchange, latency)
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
                previous=previous,
            )
            previous = event.error
            if wait is None or (sink is not None and sink.delivered):
                break
            if _LOG.isEnabledFor(logging.INFO):
                _LOG.info(
                    "model request %s attempt %d failed (%s); retrying in %.2f s",
                    call.request_id,
                    attempts,
                    event.error.kind.value,
                    wait,
                    extra={**_fields(call, run, attempts, event.error), "wait": wait},
                )
            if observer is not None:
                observer.backoff(call, None if run is None else run.index, event.error, wait, now)
            if steps is not None:
                assert run is not None
                steps.push(
                    RetryScheduled(run.index, call.request_id, attempts, event.error, wait, now)
                )
            await trio.sleep(wait)
        if isinstance(event, ModelFailed) and _LOG.isEnabledFor(logging.WARNING):
            _LOG.warning(
                "model request %s failed after %d attempt(s): %s: %s",
                call.request_id,
                attempts,
                event.error.kind.value,
                event.error.message,
                extra=_fields(call, run, attempts, event.error),
            )
        if observer is not None:
            observer.request_ended(call, event, now)
        if run is not None:
            run.ttft += (exchange.ttft,)
        if steps is not None:
            assert run is not None
            steps.push(
                ModelReplied(
                    run.index,
                    call.request_id,
                    call.hints.turn,
                    attempts,
                    event.message,
                    event.usage,
                    event.finish_reason,
                    exchange.ttft,
                    now,
                )
                if isinstance(event, ModelResponded)
                else RequestFailed(
                    run.index, call.request_id, call.hints.turn, attempts, event.error, now
                )
            )
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
        self.stats.add(
            (
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
                self.name,
                event.finish_reason if isinstance(event, ModelResponded) else None,
            )
        )
