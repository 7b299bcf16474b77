"""The fleet's rate budget on a worker's side: a line of requests in front of the batch's
shared budget on the server, and the worker's local share while the server cannot be reached.

Theory of operation
-------------------
The budget itself is :class:`agentcore._core.fleetbudget.SharedBudget`, kept on the server in
the batch's ``budget`` hash and run by ``scripts.RESERVE`` with the server's clock. Before a
model attempt, :meth:`FleetBudget.reserve` estimates its tokens and joins this worker's line.
The first waiter leads: it sends one ``RESERVE`` carrying the costs of everyone in line (up to
:attr:`FleetBudget.batch`), together with what the worker has to report since its last call
(limits learned from headers and what they said remains, from successful replies, or from
refusals once the limits are known to be shared; corrections of earlier estimates, and the
tokens of attempts that failed other than with a 429); the server grants a prefix of the line,
each with the delay after which it may be sent (never more than a horizon ahead), and says
when to ask again for the rest. Granted waiters sleep out their delays on their own; the
leader asks again after that time but no sooner than half a horizon, or hands the lead to the
next waiter once it is granted itself. The horizon is long enough for about four requests of
every live worker at the fleet's rate (``horizon`` to ``max_horizon`` seconds), so a throttled
worker's round trip brings about two grants, and a call that finds the line empty is made at
once: a request costs at most about one round trip, and requests that arrive while one is
under way share the next.

After the attempt, :meth:`FleetBudget.settle` corrects the estimate with the reply's usage
and keeps the reply's rate headers; all of it goes with the next call. Every worker learns the
limits the others learned at its next call. A request refused with a 429 keeps its charge:
the API was short of what the budget granted, so the budget was ahead of the API by at least
that much (requests sent before the limits were known, say); a refund would keep the gap and
the next grant would be refused as well. Meanwhile the batch's pause, published by the shared
back-off, holds every grant (the script refuses to grant while it is set).

While no limit is known to the fleet (none configured, none learned), the server's answer is
trusted for ``check_every`` seconds and attempts go without a round trip; each is charged with
the worker's next call, so if the limits become known meanwhile, what was sent is in the
budget (what the API's headers say remains caps it too; a request counted by both only holds
the budget back).

When a call fails because the server cannot be reached, the worker goes on with its local
share (:func:`agentcore._core.fleetbudget.local_share`: each limit divided by the live workers
the server last counted, empty until a horizon after its last successful call, when the last
grant the fleet made may still be sent) and tries the server again every
``retry_every`` seconds; what it spent meanwhile is charged to the fleet's budget with its
next successful call. A call whose reply is lost after the server ran it (a timeout) may
have its reports applied twice.
"""

from __future__ import annotations

import math
from collections import deque
from itertools import islice

import attrs
import trio

from .._codecs.exchange import Exchange
from .._core.error_policy import policy_of
from .._core.events import CallModel, ModelResponded
from .._core.fleetbudget import SharedBudget, local_share
from .._core.token_estimate import TokenEstimator, prompt_features
from .address import Keys
from .connection import Connection, is_server_error

__all__ = ["BudgetStatistics", "FleetBudget", "Ticket"]


@attrs.define
class Ticket:
    """One attempt's claim on the fleet's budget."""

    tokens: int
    """The estimated tokens charged."""


@attrs.define
class BudgetStatistics:
    """What a worker's side of the fleet budget did."""

    reservations: int = 0
    """Attempts that went through the line (charged to the budget)."""
    calls: int = 0
    """Round trips to the server (each serves every request then in line)."""
    local: int = 0
    """Attempts granted from the local share while the server could not be reached."""
    waited: int = 0
    """Attempts granted with a delay."""
    wait_time: float = 0.0
    """Seconds of those delays, summed."""
    unlimited: int = 0
    """Attempts sent without a reservation (no limit known to the fleet)."""


class _Waiter:
    __slots__ = ("cost", "delay", "gone", "wake")

    def __init__(self, cost: int) -> None:
        self.cost = cost
        self.delay: float | None = None
        self.gone = False
        """Cancelled while in line (a grant that reaches it is given back)."""
        self.wake = trio.Event()


class FleetBudget:
    """A worker's side of the fleet's rate budget; see the module's docstring."""

    def __init__(
        self,
        conn: Connection,
        keys: Keys,
        name: str,
        *,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        horizon: float = 1.0,
        max_horizon: float = 30.0,
        tick: float = 0.05,
        batch: int = 256,
        window: float = 30.0,
        check_every: float = 1.0,
        retry_every: float = 0.5,
    ) -> None:
        self._conn = conn
        self._keys = [keys.budget, keys.pause, keys.budget_workers]
        self._name = name
        self._configured = (requests_per_minute, tokens_per_minute)
        self.horizon = horizon
        self.max_horizon = max_horizon
        self._granting = horizon
        """The horizon of the latest call (grants go no further ahead)."""
        self.tick = tick
        self.batch = batch
        self.window = window
        self.check_every = check_every
        self.retry_every = retry_every
        self.estimator = TokenEstimator()
        self.stats = BudgetStatistics()
        self._line: deque[_Waiter] = deque()
        self._leader: _Waiter | None = None
        self._next_call = -math.inf
        # What goes with the next call.
        self._learned: tuple[int | None, int | None] = (None, None)
        self._remaining: tuple[int | None, int | None] = (None, None)
        self._back = [0.0, 0.0]
        # What the last call said.
        self.limits: tuple[int | None, int | None] = self._configured
        self.live = 1
        self._known_at = -math.inf
        self._last_call = -math.inf
        # The local share, while the server cannot be reached.
        self._local: SharedBudget | None = None
        self._retry_at = -math.inf

    # ------------------------------------------------------------------ reserving

    async def reserve(self, call: CallModel) -> Ticket:
        """Wait until ``call`` may be sent within the fleet's budget; charge it."""
        tokens = self.estimator.estimate(prompt_features(call), call.params.max_tokens)
        now = trio.current_time()
        if (
            self.limits == (None, None)
            and now < self._known_at + self.check_every
            and self._learned == (None, None)
        ):
            # Sent at once, charged with the next call: should the fleet learn its limits
            # meanwhile, what was sent before is in the budget.
            self.stats.unlimited += 1
            self._back[0] -= 1
            self._back[1] -= tokens
            return Ticket(tokens)
        me = _Waiter(tokens)
        self._line.append(me)
        if self._leader is None:
            self._leader = me
        try:
            while me.delay is None:
                if self._leader is me:
                    await self._lead()
                else:
                    await me.wake.wait()
                    me.wake = trio.Event()
            self._hand_on(me)
            self.stats.reservations += 1
            if me.delay > 0:
                self.stats.waited += 1
                self.stats.wait_time += me.delay
                await trio.sleep(me.delay)
        except BaseException:
            me.gone = True
            if me in self._line:
                self._line.remove(me)
            self._hand_on(me)
            if me.delay is not None:
                self._give_back(1.0, float(tokens))
            raise
        return Ticket(tokens)

    def _hand_on(self, me: _Waiter) -> None:
        if self._leader is me:
            self._leader = self._line[0] if self._line else None
            if self._leader is not None:
                self._leader.wake.set()

    async def _lead(self) -> None:
        """One round for the line: wait for the time to ask, ask, hand out the grants."""
        wait = self._next_call - trio.current_time()
        if wait > 0:
            await trio.sleep(wait)
        waiting = list(islice(self._line, self.batch))
        horizon = self._horizon(waiting[0].cost)
        delays, retry = await self._ask([w.cost for w in waiting], horizon)
        for waiter, delay in zip(waiting, delays, strict=False):
            if waiter.gone:  # cancelled while the call was under way
                self._give_back(1.0, float(waiter.cost))
                continue
            self._line.remove(waiter)
            waiter.delay = delay
            waiter.wake.set()
        now = trio.current_time()
        if len(delays) < len(waiting):
            # Ask again once half a horizon's worth is grantable: about two of this worker's
            # share of the requests per round trip.
            self._next_call = now + max(retry, self.tick, horizon / 2)
        else:
            self._next_call = now

    def _horizon(self, cost: int) -> float:
        """How far ahead to grant: enough for about four requests of every live worker at
        the fleet's rate (at least :attr:`horizon`, at most :attr:`max_horizon`)."""
        rpm, tpm = self.limits
        rates = []
        if rpm is not None:
            rates.append(rpm / 60.0)
        if tpm is not None:
            rates.append(tpm / 60.0 / max(cost, 1))
        if not rates:
            return self.horizon
        self._granting = min(self.max_horizon, max(self.horizon, 4 * self.live / min(rates)))
        return self._granting

    async def _ask(self, costs: list[int], horizon: float) -> tuple[tuple[float, ...], float]:
        now = trio.current_time()
        if self._local is None or now >= self._retry_at:
            try:
                return await self._ask_server(costs, horizon)
            except Exception as exc:
                if not is_server_error(exc):
                    raise
                if self._local is None:
                    # Empty when the fleet's last grant may still be sent (from now if this
                    # worker never reached the server).
                    last = self._last_call
                    empty_at = now if last == -math.inf else last + self._granting
                    self._local = local_share(self.limits, self.live, empty_at)
                self._retry_at = now + self.retry_every
        assert self._local is not None
        grants = self._local.reserve(now, costs, horizon)
        taken = grants.delays
        self.stats.local += len(taken)
        # Owed to the fleet's budget once the server answers again.
        self._back[0] -= len(taken)
        self._back[1] -= sum(max(c, 0) for c in costs[: len(taken)])
        if len(taken) == len(costs):
            return taken, 0.0
        return taken, min(grants.retry, max(0.0, self._retry_at - now))

    async def _ask_server(
        self, costs: list[int], horizon: float
    ) -> tuple[tuple[float, ...], float]:
        learned, remaining, back = self._learned, self._remaining, self._back
        self._learned, self._remaining, self._back = (None, None), (None, None), [0.0, 0.0]
        try:
            reply = await self._conn.script(
                "RESERVE",
                self._keys,
                [
                    self._name, "", repr(horizon), repr(self.window),
                    *(_opt(v) for v in self._configured), *(_opt(v) for v in learned),
                    *(_opt(v) for v in remaining), repr(back[0]), repr(back[1]),
                    *(str(c) for c in costs),
                ],
            )  # fmt: skip
        except BaseException:
            # Not sent, or sent and its reply lost: report it all again with the next call.
            self._learned = _newer(self._learned, learned)  # what came meanwhile is newer
            self._remaining = _newer(self._remaining, remaining)
            self._back = [back[0] + self._back[0], back[1] + self._back[1]]
            raise
        self.stats.calls += 1
        now = trio.current_time()
        retry_us, rpm, tpm, live, _server_now = (int(x) for x in reply[:5])
        self.limits = (None if rpm < 0 else rpm, None if tpm < 0 else tpm)
        self.live = max(1, live)
        self._known_at = self._last_call = now
        self._local = None  # the server answers: what was spent locally went with this call
        return tuple(int(d) / 1e6 for d in reply[5:]), retry_us / 1e6

    # ------------------------------------------------------------------ after the attempt

    def settle(
        self, ticket: Ticket, call: CallModel, exchange: Exchange, *, readable: bool = True
    ) -> None:
        """Account for one attempt's outcome and, if ``readable``, its reply's rate headers
        (a refusal's are not, until the limits are known to be shared:
        :meth:`agentcore._driver.limit_scope.LimitScope.learn`).

        A request refused with a 429 keeps its charge: the API was short of what the budget
        granted, so the budget was ahead of it by at least that request; keeping it brings
        the budget back (a refund would keep the gap, and the next grant would be refused
        too)."""
        observation = exchange.rate
        if observation is not None and readable:
            self._learned = _newer(
                (observation.limit_requests, observation.limit_tokens), self._learned
            )
            self._remaining = (observation.remaining_requests, observation.remaining_tokens)
        event = exchange.event
        if isinstance(event, ModelResponded):
            usage = event.usage
            self.estimator.learn(
                prompt_features(call),
                usage.prompt_tokens,
                usage.completion_tokens,
                call.params.max_tokens,
            )
            used = usage.prompt_tokens + usage.completion_tokens
            self._give_back(0.0, float(ticket.tokens - used))
        elif not policy_of(event.error.kind).holds_back_budget:
            self._give_back(0.0, float(ticket.tokens))  # failed: no tokens used

    def cancelled(self, ticket: Ticket) -> None:
        """The attempt was cancelled after its reservation: the server may have counted it;
        its tokens are settled as unused."""
        self._give_back(0.0, float(ticket.tokens))

    def _give_back(self, requests: float, tokens: float) -> None:
        self._back[0] += requests
        self._back[1] += tokens
        if self._local is not None:
            self._local.adjust(trio.current_time(), requests, tokens)


def _opt(value: int | None) -> str:
    return "" if value is None else str(value)


def _newer(
    new: tuple[int | None, int | None], old: tuple[int | None, int | None]
) -> tuple[int | None, int | None]:
    return (old[0] if new[0] is None else new[0], old[1] if new[1] is None else new[1])
