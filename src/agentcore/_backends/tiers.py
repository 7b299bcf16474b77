"""Service tiers and prices of a backend stack: the options, and the tiered client of a backend.

``open_driver(..., service_tier="flex-then-standard", prices={...})`` (and a fallback's
``Fallback(url, options={"service_tier": ...})``) are read here: :func:`split_tier` takes the
tier out of a backend's options before the backend is configured, :func:`ledger_for` makes the
driver's one :class:`~agentcore._core.cost.CostLedger` when a tier or prices were given, and
:func:`tiered_client` wraps a backend's HTTP client in a
:class:`~agentcore._transports.tiered.TieredModelClient` whose flex client sends
``service_tier: "flex"`` (the policy itself is :mod:`agentcore._core.service_tier`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from .._codecs.http import Timeouts
from .._codecs.openai import OpenAICodec
from .._core.cost import CostLedger, merge_prices
from .._core.errors import ConfigError
from .._core.service_tier import ServiceTier, TierPolicy, WireTier, check_service_tier
from .._transports.model_client import HttpModelClient, ModelClient
from .._transports.tiered import TieredModelClient
from .backend import Backend
from .urls import backend as make_backend

__all__ = ["FLEX_TIMEOUT", "ledger_for", "split_prices", "split_tier", "tiered_client"]

FLEX_TIMEOUT: Final = 900.0
"""Seconds a flex request may wait for its answer at least (OpenAI's flex guide advises
raising the client timeout to 15 minutes: flex requests queue for capacity)."""


def _flex_timeouts(timeouts: Timeouts) -> Timeouts:
    def longer(limit: float | None) -> float | None:
        return None if limit is None else max(limit, FLEX_TIMEOUT)

    return attrs.evolve(timeouts, read=longer(timeouts.read), total=longer(timeouts.total))


def split_tier(options: Mapping[str, Any]) -> tuple[ServiceTier | None, dict[str, Any]]:
    """A backend's ``service_tier`` option (checked) and its other options."""
    rest = dict(options)
    tier = rest.pop("service_tier", None)
    return (None if tier is None else check_service_tier(tier)), rest


def split_prices(options: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The driver's ``prices`` option and the backend's other options."""
    rest = dict(options)
    return rest.pop("prices", None), rest


def ledger_for(prices: Any, tiers: list[ServiceTier | None]) -> CostLedger | None:
    """The driver's cost ledger: made when ``prices`` or any backend's tier was given.

    Raises:
        ConfigError: malformed prices.
    """
    if prices is None and all(tier is None for tier in tiers):
        return None
    return CostLedger(merge_prices(prices))


def tiered_client(
    client: HttpModelClient,
    configured: Backend,
    rebind: tuple[str, str, str | None, Mapping[str, Any]],
    tier: ServiceTier | None,
    ledger: CostLedger | None,
) -> ModelClient:
    """``client`` as a tiered client counting into ``ledger`` (``client`` itself when there
    is no ledger). ``rebind``: the URL, model, key and options ``configured`` was made from,
    to make the flex tier's codec.

    Raises:
        ConfigError: a flex tier on a backend that has none (Anthropic, Bedrock).
    """
    if ledger is None:
        return client
    policy = TierPolicy("standard" if tier is None else tier)
    clients: dict[WireTier, HttpModelClient] = {"standard": client}
    if policy.first == "flex":
        if not isinstance(configured.codec, OpenAICodec):
            raise ConfigError(
                f"service_tier={policy.tier!r}: the {configured.name} backend has no flex tier "
                "(OpenAI-compatible APIs do; for Anthropic use anthropic-batch://)"
            )
        url, model, api_key, options = rebind
        extra = dict(options.get("extra_body") or {})
        extra["service_tier"] = "flex"
        flex = make_backend(url, model=model, api_key=api_key, **{**options, "extra_body": extra})
        clients["flex"] = HttpModelClient(
            flex.codec,
            client.transport,
            timeouts=_flex_timeouts(client.timeouts),
            stream=client.stream,
        )
    model = getattr(configured.codec, "model", "")
    return TieredModelClient(clients, policy, ledger, model if isinstance(model, str) else "")
