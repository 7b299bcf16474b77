"""The model request path: a slot around each attempt, back-off between attempts without one.

Theory of operation
-------------------
One :meth:`ModelRequests.send` is one logical model request, made of attempts. Each attempt
takes an inference slot from the :class:`~agentcore._driver.slot_limiter.SlotLimiter` (FIFO, by
priority or by attained service), performs one exchange through the model client, and gives the
slot back at once, telling the limiter whether the server signalled overload (for the adaptive
limit). A failed attempt that the retry policy allows to retry sleeps its back-off *without* a
slot and queues again; the first success or the final failure ends the request. The model
client never raises for server or network failures (they come back classified), so the only
exceptions here are cancellations, which release the slot on their way out.

With model fallback, a backend's circuit breaker (:attr:`ModelRequests.breaker`,
:mod:`agentcore._driver.breaker`) is told the outcome of every attempt; once it opens, a
failed request stops retrying here (its back-off is cut short) and falls over to the next
backend.

Every step is a step event (:mod:`agentcore._observe.steps`) pushed to one optional sink: the
run's (``run.steps``), or :attr:`ModelRequests.sink` for requests made outside any run. With
no sink nothing is built but the failure path's events (a retry, a request failed for good),
which go to the log sink (:func:`~agentcore._observe.log_sink.failure_sink`).

Statistics are bounded aggregates (counters and :class:`~agentcore._driver.stats.Distribution`
sketches) plus a ring of the latest requests, so a driver kept open for days does not grow.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Protocol

import attrs
import trio

from .._codecs.codec import Delta
from .._codecs.exchange import Exchange
from .._core.events import CallModel, ErrorKind, ModelError, ModelFailed, ModelResponded
from .._core.messages import Usage
from .._core.ratebudget import Reservation
from .._core.retry import RetryPolicy
from .._observe.log_sink import failure_sink, run_sink
from .._observe.steps import (
    ModelReplied,
    RequestFailed,
    RequestQueued,
    RequestStarted,
    RetryScheduled,
    StepSink,
)
from .._transports.deltas import stream_exchange
from .._transports.model_client import ModelClient
from .breaker import BackendBreaker, PassedOver
from .limit_scope import documents_shared_limits
from .observed import step_deltas
from .rate_limiter import RateLimiter
from .runs import Granted, Run
from .slot_limiter import Parked, Slot, SlotLimiter
from .stats import RequestTotals

__all__ = ["ModelRequests"]


class StreamSink(Protocol):
    """Where the deltas of a streamed request go (``Driver.generate_stream``)."""

    @property
    def delivered(self) -> bool:
        """Whether a delta reached the caller: the request is not retried after that."""
        ...

    async def __call__(self, deltas: Sequence[Delta]) -> None: ...


def _queued(steps: StepSink, run: Run | None, call: CallModel) -> None:
    run_id = None if run is None else run.id
    now = trio.current_time()
    steps.push(RequestQueued(run_id, call.request_id, call.hints.turn, call.params, now))


def attained_service(run: Run | None) -> int:
    """The service ``run`` has received so far, as the ``attained`` slot policy counts it: the
    tokens of its replies (0 for a request outside any run)."""
    return 0 if run is None else run.loop.usage.completion_tokens


def least_served_first(call: CallModel, service: int) -> CallModel:
    """``call`` with the ``attained`` policy's order as its priority hint (``-service``: the
    least served run is the most urgent), so the server orders its queue as the slot line
    does; the dialect writes it in the engine's own direction."""
    if call.hints.priority == -service:
        return call
    return attrs.evolve(call, hints=attrs.evolve(call.hints, priority=-service))


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
        if documents_shared_limits(client):
            self.rates.scope.shared = True
        self._limiter = limiter
        self._attained = limiter.policy == "attained"
        """The slot line orders by attained service (computed only then)."""
        self._retry = retry
        self._random = random
        self.stats = RequestTotals()
        """What was measured; model fallback makes every backend share one."""
        self.sink: StepSink | None = None
        """Where the step events of requests made outside any run go (``None``: nobody
        listens but the log sink, see :func:`~agentcore._observe.log_sink.run_sink`)."""
        self.breaker: BackendBreaker | None = None
        """This backend's circuit breaker (set by model fallback on every backend but the
        last): told every attempt's outcome; once open, a retry here stops and falls over."""

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
        :attr:`AgentLoop.opening_priority`), for a run without step events only: nothing
        observes it queueing then, and ``run.pending_model`` must be set before the request is
        sent."""
        if isinstance(call, int):
            priority = call
        else:
            priority = call.hints.priority
            if run.steps is not None:
                _queued(run.steps, run, call)
        service = attained_service(run) if self._attained else 0
        slot = self._limiter.park(run.index, priority, wake, run, service)
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
        probe: int = 0,
    ) -> ModelResponded | ModelFailed:
        """Make ``call`` through a slot, retrying as the policy allows; record its statistics.

        With ``sink``, each attempt is streamed into it, and a failure after a delta was
        delivered is final. Each step is reported to the run's step sink (``run.steps``; for
        a request outside any run, :attr:`sink`). ``granted``: the slot and rate reservation
        of the first attempt, from :meth:`park` (the slot is given back on every way out).
        ``probe``: the ticket of the :attr:`breaker`'s probe, when this request is it.
        """
        steps = self.sink if run is None else run.steps
        if run is None and steps is None:
            steps = run_sink()  # the log sink, while a DEBUG line would be seen
        if self._attained:
            call = least_served_first(call, attained_service(run))
        first = trio.current_time()
        attempts = 0
        held = 0.0  # time spent in providers' queues (Batch API hops): not the retry budget's
        slot_wait = 0.0
        previous: ModelError | None = None
        failed: ErrorKind | None = None
        # One frame from the run down to the exchange: every coroutine frame between a task
        # and its checkpoints is resumed at each task switch, so the attempt is not a call.
        while True:
            if granted is None:
                granted = await self._queue(call, run, steps)
            slot, reservation = granted
            granted = None
            admitted = self._admit(slot, reservation, failed, probe)
            if not admitted:
                if admitted is None:  # the backend's breaker opened while this request waited
                    if failed is None:
                        raise PassedOver  # never sent here: fallback starts it on the next one
                    now = trio.current_time()
                    break  # falls over with its last failure
                slot_wait += slot.wait  # given back, to wait for rate budget holding none
                continue
            attempts += 1
            slot_wait += slot.wait
            self.stats.attempts += 1
            if run is not None and attempts == 1:
                run.turns += 1
            try:
                deltas = (
                    sink if steps is None else self._started(call, run, steps, sink, slot, attempts)
                )
                if deltas is None:
                    exchange = await self._client.exchange(call)
                else:
                    exchange = await stream_exchange(self._client, call, deltas)
            except BaseException:
                self._limiter.release(slot)
                self.rates.cancelled(reservation)
                raise
            now = trio.current_time()
            event = exchange.event
            held += exchange.held
            self._ended(call, run, exchange, slot, reservation, now)
            if self.breaker is not None:
                self.breaker.record(now, event, probe)
                probe = 0  # a probe's first attempt is its verdict
            if isinstance(event, ModelResponded):
                break
            ended = await self._back_off(
                call, run, steps, sink, event.error, previous, attempts, now - first - held, now
            )
            if ended is not None:
                now = ended
                break
            previous = event.error
            failed = event.error.kind
        if steps is not None or isinstance(event, ModelFailed):
            self._report(call, run, steps, exchange, attempts, now)
        if run is not None:
            run.ttft += (exchange.ttft,)
        latency = now - slot.granted_at
        self._record(call, run, event, attempts, slot_wait, latency, now - first, exchange.ttft)
        return event

    async def _queue(self, call: CallModel, run: Run | None, steps: StepSink | None) -> Granted:
        """Wait for rate budget holding no slot, then for a slot; returns both."""
        if steps is not None:
            await steps.settle()
        rates = self.rates
        reservation = await rates.reserve(call)
        if steps is not None:
            _queued(steps, run, call)
        owner = call.request_id if run is None else run.index
        service = attained_service(run) if self._attained else 0
        try:
            slot = await self._limiter.slot(owner, call.hints.priority, service)
        except BaseException:
            rates.unsent(reservation)
            raise
        return slot, reservation

    def _admit(
        self, slot: Slot, reservation: Reservation | None, failed: ErrorKind | None, probe: int
    ) -> bool | None:
        """Whether an attempt holding ``slot`` may be written now, after every wait (whichever
        way it queued: in this task, parked in the line, started inline). ``False``: a 429's
        hold began, or limits became known, while it queued: the slot and the charge are given
        back, to wait for budget first, holding no slot. ``None``: the :attr:`breaker` no longer
        lets the request be sent here (``failed``: why its last attempt failed, ``probe``: its
        probe ticket); the slot and the charge are given back."""
        rates = self.rates
        breaker = self.breaker
        verdict: bool | None
        if rates.budget.limited and not rates.may_send(reservation):  # no limit: it may
            verdict = False
        elif breaker is not None and not breaker.may_send(failed, probe):
            verdict = None
        else:
            if reservation is None:
                rates.blind += 1  # sent before any limit is known
            return True
        self._limiter.release(slot)
        rates.unsent(reservation)
        return verdict

    def _started(  # noqa: PLR0917 - private, called once per attempt of an observed request
        self,
        call: CallModel,
        run: Run | None,
        steps: StepSink,
        sink: StreamSink | None,
        slot: Slot,
        attempt: int,
    ) -> StreamSink | None:
        """Report an attempt's start; returns where its deltas go (``sink``, or the step sink
        when it takes deltas)."""
        run_id = None if run is None else run.id
        # Now, not ``slot.granted_at``: a slot handed over at a release is granted before this
        # task runs again, and a timeline lane must not start before then.
        now = trio.current_time()
        steps.push(
            RequestStarted(run_id, call.request_id, call.hints.turn, attempt, slot.wait, now)
        )
        return step_deltas(steps, run_id, call, attempt) if steps.deltas else sink

    def _ended(  # noqa: PLR0917 - private, called once per attempt
        self,
        call: CallModel,
        run: Run | None,
        exchange: Exchange,
        slot: Slot,
        reservation: Reservation | None,
        now: float,
    ) -> None:
        """An attempt's exchange ended at ``now``: settle its rate charge, give its slot back
        (telling the limiter how it went) and add it to the run's counters."""
        event = exchange.event
        self.rates.replied(call, reservation, event, exchange.rate)
        if isinstance(event, ModelFailed):
            self._limiter.release(slot, failed=event.error.kind, now=now)
        else:
            self._limiter.release(slot, succeeded=True, now=now)
        if run is not None:
            run.attempts += 1
            run.model_time += now - slot.granted_at
            run.slot_wait += slot.wait

    async def _back_off(  # noqa: PLR0917 - private, called once per failed attempt
        self,
        call: CallModel,
        run: Run | None,
        steps: StepSink | None,
        sink: StreamSink | None,
        error: ModelError,
        previous: ModelError | None,
        attempts: int,
        elapsed: float,
        now: float,
    ) -> float | None:
        """After a failed attempt (``error``, ending at ``now``, ``elapsed`` seconds of the
        request's retry budget spent: since it began, less the time its attempts were held in
        a provider's queue; ``previous``: the failure before), sleep the back-off and return
        ``None`` to try again, or return when the request ended: the failure is final, a
        delta was delivered, or the :attr:`breaker` opened (before or during the back-off)."""
        deadline = trio.current_effective_deadline()
        wait = self._retry.delay(
            attempt=attempts,
            error=error,
            elapsed=elapsed,
            random=self._random,
            remaining=None if deadline == math.inf else deadline - now,
            previous=previous,
        )
        if wait is None or (sink is not None and sink.delivered):
            return now
        breaker = self.breaker
        if breaker is not None and not breaker.may_send(error.kind):
            return now  # the breaker opened: the request falls over now instead
        run_id = None if run is None else run.id
        failure_sink(steps).push(
            RetryScheduled(run_id, call.request_id, attempts, error, wait, now)
        )
        if breaker is None:
            await trio.sleep(wait)
        elif not await breaker.back_off(wait, error.kind):
            return trio.current_time()  # it opened during the back-off
        return None

    def _report(  # noqa: PLR0917 - private, called once per observed or failed request
        self,
        call: CallModel,
        run: Run | None,
        steps: StepSink | None,
        exchange: Exchange,
        attempts: int,
        now: float,
    ) -> None:
        """Report a request's end: a failure to ``steps`` or the log sink, a reply to
        ``steps``."""
        run_id = None if run is None else run.id
        event = exchange.event
        turn = call.hints.turn
        if isinstance(event, ModelFailed):
            failure_sink(steps).push(
                RequestFailed(run_id, call.request_id, turn, attempts, event.error, now)
            )
        elif steps is not None:
            steps.push(
                ModelReplied(
                    run_id,
                    call.request_id,
                    turn,
                    attempts,
                    event.message,
                    event.usage,
                    event.finish_reason,
                    exchange.ttft,
                    now,
                )
            )

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
            ),
            call.hints.turn,
        )
