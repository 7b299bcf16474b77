"""A shared back-off: when a backend whose limits every worker shares says "slow down", every
worker waits.

Theory of operation
-------------------
:class:`SharedBackoff` wraps the worker's model client (the driver's retries and slots stay
as they are, around it). An attempt that fails with a kind whose row in the error table
(:data:`~agentcore._core.error_policy.ERROR_POLICY`) says ``pauses_fleet`` (rate limited,
overloaded), from a backend whose limits are known to be shared by every request (the one
rule of :class:`~agentcore._driver.limit_scope.LimitScope`, which the driver's hold after a 429
follows too: limits configured, published by a successful reply, here or, through the fleet's
budget, on any worker, or documented by the API's provider), publishes a pause on the batch's
``pause`` key: ``scripts.PAUSE`` sets it with a time to
live of the server's ``retry-after`` (or ``default_pause``), but only when that outlasts the
pause already there. Before each attempt, a worker looks at the key's remaining time (at
most every ``check_every`` seconds, otherwise it uses what it saw last) and sleeps it out,
plus up to 10 % jitter so the workers do not all resume in the same instant. The server's
clock measures the pause, so the workers' clocks need not agree.

Without that evidence the refusal is the request's own (a balancer or gateway refusing one
request while the next would pass, a self-hosted server shedding load): nothing is published,
and the refused request waits its own ``retry-after`` in the driver's retry while an adaptive
slot limit shrinks, as in one process.

The back-off is best effort: when the server cannot be reached, attempts go ahead and the
driver's own back-off still applies.

With a :class:`~agentcore._distributed.budget.FleetBudget`, each attempt first reserves its
request and estimated tokens from the fleet's rate budget (which grants nothing while the
pause is set) and settles them with the reply.
"""

from __future__ import annotations

import math
import random

import attrs
import trio

from .._codecs.codec import says_schema_on_final
from .._codecs.exchange import Exchange
from .._core.error_policy import policy_of
from .._core.events import CallModel, ModelFailed
from .._driver.limit_scope import LimitScope, documents_shared_limits
from .._transports.model_client import ModelClient
from .budget import FleetBudget
from .connection import Connection, is_server_error

__all__ = ["SharedBackoff"]


@attrs.define(eq=False)
class SharedBackoff:
    """A model client that backs off together with every other worker of the batch."""

    _inner: ModelClient
    _conn: Connection
    _key: str
    """The batch's pause key."""
    _default_pause: float = attrs.field(default=1.0, kw_only=True)
    """Seconds to pause for when the answer gave no ``retry-after``."""
    _check_every: float = attrs.field(default=0.1, kw_only=True)
    """Seconds between two reads of the pause key."""
    _rng: random.Random = attrs.field(factory=random.Random, kw_only=True)
    budget: FleetBudget | None = attrs.field(default=None, kw_only=True)
    """The fleet's rate budget each attempt reserves from first, if any."""
    scope: LimitScope = attrs.field(
        default=attrs.Factory(lambda self: LimitScope.of(self._inner, configured=False), True),
        kw_only=True,
    )
    """Whether the backend's limits are known to be shared (the worker says whether they were
    configured; replies and the fleet's budget add evidence)."""
    _checked_at: float = attrs.field(default=-math.inf, init=False)
    _until: float = attrs.field(default=-math.inf, init=False)
    pauses_published: int = attrs.field(default=0, init=False)
    waits: int = attrs.field(default=0, init=False)

    @property
    def schema_on_final(self) -> bool:
        """The wrapped client's (its requests are its own)."""
        return says_schema_on_final(self._inner)

    @property
    def shared_limits_documented(self) -> bool:
        """Whether the wrapped client's API documents its limits as shared: the worker's driver
        then holds all of its senders from the first 429, as the fleet pauses."""
        return documents_shared_limits(self._inner)

    async def exchange(self, call: CallModel) -> Exchange:
        """Reserve from the fleet's budget, wait out a published pause, make the attempt,
        publish a pause if told to slow down."""
        budget = self.budget
        ticket = None if budget is None else await budget.reserve(call)
        try:
            await self._wait()
            exchange = await self._inner.exchange(call)
        except BaseException:
            if budget is not None and ticket is not None:
                budget.cancelled(ticket)
            raise
        event = exchange.event
        readable = self.scope.learn(event, exchange.rate)
        if budget is not None and ticket is not None:
            budget.settle(ticket, call, exchange, readable=readable)
        if (
            isinstance(event, ModelFailed)
            and policy_of(event.error.kind).pauses_fleet
            and self.shared
        ):
            pause = event.error.retry_after or self._default_pause
            await self._publish(pause)
        return exchange

    @property
    def shared(self) -> bool:
        """Whether a refusal is every worker's: this worker's evidence, or limits the fleet's
        budget knows (configured, or learned by any worker from a successful reply)."""
        budget = self.budget
        return self.scope.shared or (budget is not None and budget.limits != (None, None))

    async def _wait(self) -> None:
        now = trio.current_time()
        if now - self._checked_at >= self._check_every:
            self._checked_at = now
            try:
                remaining_ms = int(await self._conn.command("PTTL", self._key))
            except Exception as exc:
                if not is_server_error(exc):
                    raise
                remaining_ms = -1
            self._until = now + remaining_ms / 1000 if remaining_ms > 0 else -math.inf
        if self._until > now:
            self.waits += 1
            pause = self._until - now
            await trio.sleep(pause * (1 + 0.1 * self._rng.random()))

    async def _publish(self, pause: float) -> None:
        try:
            await self._conn.script("PAUSE", [self._key], [str(max(1, int(pause * 1000)))])
        except Exception as exc:
            if not is_server_error(exc):
                raise
            return
        self.pauses_published += 1
        self._checked_at = -math.inf  # see the new pause at the next attempt

    async def aclose(self) -> None:
        """Close the wrapped client."""
        await self._inner.aclose()
