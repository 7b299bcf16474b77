"""A model client that sends each request on a service tier and counts what each tier served.

Theory of operation
-------------------
:class:`TieredModelClient` holds one :class:`~agentcore._transports.model_client.HttpModelClient`
per wire tier (``standard``, ``flex``), sharing one codec and one transport (the flex one waits
longer for its answer), and the pure :class:`~agentcore._core.service_tier.TierPolicy`. The tier
is a property of each request: a request sent to flex carries ``service_tier="flex"``, which
the codec writes into it; one sent to standard carries none. An exchange goes to the policy's
first tier; when flex refuses it, :meth:`TierPolicy.after` decides inside the same exchange (and
the same inference slot): send it to the standard tier now (``flex-then-standard``: a routing,
not a retry, so no back-off and no retry attempt is spent), or hand the failure to the retry
layer (``flex``: an overload, retried with back-off).

The first flex request of a client goes alone: until one flex request has had an answer from
the server that is not a refusal of the model, the others wait at a gate. A model without
flex is then refused once, and the :class:`~agentcore.ConfigError` is raised by that request
and by every request after it without sending anything, so a batch stops before it spends
anything (a batch's warm-up sends that first request before the fan-out).

Every answered request is counted in the :class:`~agentcore._core.cost.CostLedger` under the
model and the tier that billed it, with its run (the request's session id): the tier the reply
says it was served on (OpenAI's ``service_tier``: a flex request may be served on ``default``),
else the tier it was sent on; prompt-cache writes are counted apart (priced above the input).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

import attrs
import trio

from .._codecs.codec import Codec
from .._codecs.exchange import Exchange
from .._core.cost import CostLedger, PriceTier, billed_tier, check_priced
from .._core.errors import ConfigError
from .._core.events import CallModel, ModelFailed, ModelResponded
from .._core.service_tier import TierPolicy, WireTier
from .model_client import DeltaSink, HttpModelClient

__all__ = ["TieredModelClient"]

_log = logging.getLogger("agentcore.batch")


class TieredModelClient:
    """A :class:`~agentcore._transports.model_client.StreamingModelClient` over one client per
    service tier (see the module docstring).

    Args:
        clients: an HTTP model client per wire tier the policy may use (``standard`` always;
            ``flex`` unless the tier is ``standard``), sharing one codec and one transport.
        policy: the tier option and the refusal routing.
        ledger: where answered requests are counted.
        model: the model name the ledger prices.

    Raises:
        ConfigError: the user's prices do not price the model on the tiers it may be billed
            on (without prices of the user's, a warning is logged: its cost is unknown).
    """

    def __init__(
        self,
        clients: Mapping[WireTier, HttpModelClient],
        policy: TierPolicy,
        ledger: CostLedger,
        model: str,
    ) -> None:
        if "standard" not in clients or (policy.first == "flex" and "flex" not in clients):
            raise ConfigError("a tiered client needs a client for every tier it may use")
        self._clients = dict(clients)
        self.policy = policy
        self.ledger = ledger
        self.model = model
        billed: tuple[PriceTier, ...] = ("standard",) if policy.first == "standard" else (
            "flex", "standard")  # fmt: skip
        warning = check_priced(ledger, model, billed)
        if warning is not None:
            _log.warning("%s", warning)
        self._confirmed = policy.first == "standard"
        self._probe: trio.Event | None = None
        self._refused: ConfigError | None = None

    def carry(self, run: str, replies: Iterable[ModelResponded]) -> None:
        """Count in run ``run``'s cost the replies a step journal restored it with (received
        and billed by the process before a resume), each at the tier it says it was served
        on, else the policy's first; apart in the report as replayed."""
        for event in replies:
            billed = billed_tier(event.service_tier, self.policy.first)
            self.ledger.add(self.model, billed, event, run, replayed=True)

    @property
    def tier_unchecked(self) -> bool:
        """Whether requests start on flex and no flex answer has shown the model offers it."""
        return not self._confirmed and self._refused is None

    @property
    def codec(self) -> Codec:
        """The standard tier's codec (its URL and model name the others share)."""
        return self._clients["standard"].codec

    @property
    def transport(self) -> object:
        """The transport every tier shares."""
        return self._clients["standard"].transport

    async def exchange(self, call: CallModel) -> Exchange:
        """One request, on its tier and, when flex refuses it for capacity, on the next."""
        return await self._tiered(call, None)

    async def exchange_streaming(self, call: CallModel, sink: DeltaSink) -> Exchange:
        """As :meth:`exchange`, streaming the answering tier's deltas into ``sink``."""
        return await self._tiered(call, sink)

    async def _tiered(self, call: CallModel, sink: DeltaSink | None) -> Exchange:
        tier = self.policy.first
        probing = False
        if tier == "flex":
            probing = await self._gate()
        try:
            while True:
                client = self._clients[tier]
                sent = attrs.evolve(call, service_tier="flex") if tier == "flex" else call
                if sink is None:
                    exchange = await client.exchange(sent)
                else:
                    exchange = await client.exchange_streaming(sent, sink)
                event = exchange.event
                if isinstance(event, ModelResponded):
                    if tier == "flex":
                        self.ledger.flex_sent(refused=False)
                        self._confirmed = True
                    billed = billed_tier(event.service_tier, tier)
                    run = call.hints.session_id or None
                    self.ledger.add(self.model, billed, event, run)
                    return exchange
                try:
                    following = self.policy.after(tier, event.error, self.model)
                except ConfigError as exc:
                    self._refused = exc
                    raise
                if tier == "flex" and event.error.status is not None:
                    self._confirmed = True  # the server took flex requests for this model
                if isinstance(following, str):
                    self.ledger.flex_sent(refused=True)
                    tier = following
                    continue
                if tier == "flex" and event.error.status is not None:
                    self.ledger.flex_sent(refused=False)
                if following is not event.error:
                    exchange = Exchange(ModelFailed(call.request_id, following), exchange.ttft,
                                        exchange.rate)  # fmt: skip
                return exchange
        finally:
            if probing and self._probe is not None:
                self._probe.set()
                self._probe = None

    async def _gate(self) -> bool:
        """Wait until flex is known to serve this model; ``True``: this request finds out."""
        while not self._confirmed:
            if self._refused is not None:
                raise self._refused
            if self._probe is None:
                self._probe = trio.Event()
                return True
            await self._probe.wait()
        if self._refused is not None:
            raise self._refused
        return False

    async def aclose(self) -> None:
        """Close the shared transport."""
        await self._clients["standard"].aclose()
