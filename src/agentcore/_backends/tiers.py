"""Service tiers and prices of a backend stack: the cost ledger, and a backend's tiered client.

A backend's tier is a field of its value (``wire.backend(url, service_tier=...)``,
:attr:`~agentcore.wire.Backend.service_tier`); the prices are the driver's
(``DriverOptions.prices``), since one ledger counts the tokens of all its backends.
:func:`ledger_for` makes that :class:`~agentcore._core.cost.CostLedger` when prices, a tier, a
Batch API backend or an exact cost were asked for, and checks an exact one; :func:`tiered_client`
wraps a backend's HTTP client in a :class:`~agentcore._transports.tiered.TieredModelClient`,
which asks for the flex tier on each request it sends there (the request's
``service_tier``, written by the codec; the policy itself is
:mod:`agentcore._core.service_tier`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import attrs

from .._codecs.http import Timeouts
from .._core.cost import CostLedger, PriceTable, PriceTier, merge_prices, price_for
from .._core.errors import ConfigError
from .._core.events import ModelResponded
from .._core.service_tier import TierPolicy, WireTier
from .._transports.batching import BatchModelClient
from .._transports.model_client import HttpModelClient, ModelClient
from .._transports.tiered import TieredModelClient
from .backend import Backend

__all__ = ["FLEX_TIMEOUT", "carry_cost", "ledger_for", "tiered_client"]

FLEX_TIMEOUT: Final = 900.0
"""Seconds a flex request may wait for its answer at least (OpenAI's flex guide advises
raising the client timeout to 15 minutes: flex requests queue for capacity)."""


def _flex_timeouts(timeouts: Timeouts) -> Timeouts:
    def longer(limit: float | None) -> float | None:
        return None if limit is None else max(limit, FLEX_TIMEOUT)

    return attrs.evolve(timeouts, read=longer(timeouts.read), total=longer(timeouts.total))


def _served_on(configured: Backend) -> tuple[PriceTier, ...]:
    """The tiers the requests of ``configured`` may be answered and priced on."""
    if configured.batch is not None:
        return ("batch", "standard")  # the standard price: what the batch saved
    if configured.service_tier == "flex":
        return ("flex", "standard")
    return ("flex", "standard") if configured.service_tier else ("standard",)


def ledger_for(
    prices: PriceTable | None, backends: Sequence[Backend | None], *, exact: bool = False
) -> CostLedger | None:
    """The driver's cost ledger over its backends (``None`` for a model client among them):
    made when ``prices`` are given, ``exact`` is asked, or a backend has a service tier or is
    a Batch API backend; ``None`` otherwise.

    Raises:
        ConfigError: prices or an exact cost with no backend to count tokens (model clients
            count none); with ``exact``, a backend's model without a price for a tier it may
            be answered on, or a price for a model no backend sends.
    """
    counted = [configured for configured in backends if configured is not None]
    asked = prices is not None or exact
    if not asked and not any(c.service_tier or c.batch for c in counted):
        return None
    if asked and not counted:
        raise ConfigError(
            "prices and exact_cost price the tokens of backends given by URL or Backend; "
            "a model client counts none into the cost ledger"
        )
    table = merge_prices(prices)
    if exact:
        _check_exact(table, prices or {}, counted)
    return CostLedger(table)


def _check_exact(
    table: PriceTable, given: Mapping[str, Mapping[PriceTier, object]], counted: list[Backend]
) -> None:
    missing = [
        f"{configured.model!r} on {tier!r}"
        for configured in counted
        for tier in _served_on(configured)
        if price_for(table, configured.model, tier) is None
    ]
    if missing:
        raise ConfigError(
            f"exact_cost=True: no price for {', '.join(missing)}; give one with prices="
        )
    models = sorted({configured.model for configured in counted})
    unknown = [model for model in given if not any(_sends(model, table, sent) for sent in models)]
    if unknown:
        raise ConfigError(
            f"exact_cost=True: prices= names {sorted(unknown)}, which no backend of this "
            f"driver sends (its models: {models})"
        )


def _sends(model: str, table: PriceTable, sent: str) -> bool:
    """Whether the table's entry ``model`` prices the requests of the model ``sent`` (the
    same name, or ``sent`` a dated snapshot of it)."""
    entry = table[model]
    return any(price_for({model: entry}, sent, tier) is not None for tier in entry)


def tiered_client(
    client: HttpModelClient, configured: Backend, ledger: CostLedger | None
) -> ModelClient:
    """``client`` as a tiered client counting into ``ledger`` (``client`` itself when there
    is no ledger). The flex tier is the same codec and transport, with the longer time limits
    of :data:`FLEX_TIMEOUT`: the requests it sends ask for flex themselves."""
    if ledger is None:
        return client
    policy = TierPolicy("standard" if configured.service_tier is None else configured.service_tier)
    clients: dict[WireTier, HttpModelClient] = {"standard": client}
    if policy.first == "flex":
        clients["flex"] = HttpModelClient(
            client.codec,
            client.transport,
            timeouts=_flex_timeouts(client.timeouts),
            stream=client.stream,
        )
    return TieredModelClient(clients, policy, ledger, configured.model)


def carry_cost(client: ModelClient, run: str, replies: Iterable[ModelResponded]) -> None:
    """Count in run ``run``'s cost (its results record's) the replies its step journal
    restored it with: a resumed run does not send them again, and the process that received
    them was billed for them but wrote no record. Only a client that keeps a ledger (a Batch
    API, a service tier) counts them; the report shows them apart, as replayed."""
    if isinstance(client, BatchModelClient | TieredModelClient):
        client.carry(run, replies)
