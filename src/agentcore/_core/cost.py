"""The cost ledger: tokens per model and tier, priced from a table the user may override.

Theory of operation
-------------------
Every answered model request adds its ``usage`` to the ledger under its model and the tier
that served it (``standard``, ``flex`` or ``batch``): uncached prompt tokens, cached prompt
tokens (priced separately: providers bill a prompt-cache hit at a fraction of the input price)
and completion tokens. A request refused on flex for capacity and sent on to the standard tier
counts once, on the tier that answered it; the refusal is counted as a fallback (a refused flex
attempt is not charged by the providers).

:meth:`CostLedger.report` prices the counts with a :data:`PriceTable` (USD per million tokens
per model and tier; nothing is looked up on a network) and also prices the *same* tokens at the
standard tier: the difference is the saving. A model without a price in the table is counted
and named in :attr:`CostReport.unpriced`, and the costs are then ``None`` rather than a number
that leaves it out.

The ledger is bounded: its keys are the (model, tier) pairs seen, and the per-run costs it
keeps for the results file are taken out when a run's record is written, the oldest dropped
past :data:`MAX_RUNS`.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, Literal

import attrs

from .errors import ConfigError
from .messages import Usage

__all__ = [
    "DEFAULT_PRICES",
    "MAX_RUNS",
    "PRICE_TIERS",
    "CostLedger",
    "CostReport",
    "Price",
    "PriceTable",
    "PriceTier",
    "RunCost",
    "TierTokens",
    "merge_prices",
    "price_for",
]

PriceTier = Literal["standard", "flex", "batch"]
PRICE_TIERS: Final[tuple[PriceTier, ...]] = ("standard", "flex", "batch")

MAX_RUNS: Final = 100_000
"""Per-run costs kept at most until their record is written (the oldest are dropped)."""

_PER_TOKEN = 1e-6  # prices are per million tokens


def _price(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None and attribute.name == "cached_input":
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ConfigError(f"Price.{attribute.name} must be a number >= 0, got {value!r}")


@attrs.frozen
class Price:
    """USD per million tokens of one model on one tier."""

    input: float = attrs.field(validator=_price)
    """Uncached prompt tokens."""
    output: float = attrs.field(validator=_price)
    """Completion tokens (reasoning tokens included, as the providers bill them)."""
    cached_input: float | None = attrs.field(default=None, validator=_price)
    """Prompt tokens read from the provider's prompt cache (``None``: the input price)."""

    def cost(self, tokens: TierTokens) -> float:
        """The USD cost of ``tokens`` at this price."""
        cached = self.input if self.cached_input is None else self.cached_input
        uncached = tokens.prompt_tokens - tokens.cached_tokens
        total = uncached * self.input + tokens.cached_tokens * cached
        return (total + tokens.completion_tokens * self.output) * _PER_TOKEN


PriceTable = Mapping[str, Mapping[PriceTier, Price]]
"""Prices per model name, then per tier."""

# Prices change: these are a starting point, not a bill. Source: the providers' pricing pages,
# https://openai.com/api/pricing (OpenAI: flex is priced at Batch API rates) and
# https://docs.anthropic.com/en/docs/about-claude/pricing (Anthropic: Message Batches at 50 %,
# "cache read" as the cached price), as read in June 2025. USD per million tokens. Override or
# extend them with ``prices=`` (``open_driver``) or ``agentcore run --prices FILE.json``.
_OPENAI_O3 = (Price(2.00, 8.00, 0.50), Price(1.00, 4.00, 0.25))
_OPENAI_O4_MINI = (Price(1.10, 4.40, 0.275), Price(0.55, 2.20, 0.138))
_OPENAI_41_MINI = (Price(0.40, 1.60, 0.10), Price(0.20, 0.80, 0.05))
_OPENAI_4O_MINI = (Price(0.15, 0.60, 0.075), Price(0.075, 0.30, 0.0375))
_CLAUDE_SONNET_4 = (Price(3.00, 15.00, 0.30), Price(1.50, 7.50, 0.15))
_CLAUDE_HAIKU_35 = (Price(0.80, 4.00, 0.08), Price(0.40, 2.00, 0.04))


def _openai(pair: tuple[Price, Price]) -> Mapping[PriceTier, Price]:
    standard, discounted = pair
    return MappingProxyType({"standard": standard, "flex": discounted, "batch": discounted})


def _anthropic(pair: tuple[Price, Price]) -> Mapping[PriceTier, Price]:
    standard, batch = pair
    return MappingProxyType({"standard": standard, "batch": batch})


DEFAULT_PRICES: Final[PriceTable] = MappingProxyType(
    {
        "o3": _openai(_OPENAI_O3),
        "o4-mini": _openai(_OPENAI_O4_MINI),
        "gpt-4.1-mini": _openai(_OPENAI_41_MINI),
        "gpt-4o-mini": _openai(_OPENAI_4O_MINI),
        "claude-sonnet-4-20250514": _anthropic(_CLAUDE_SONNET_4),
        "claude-3-5-haiku-20241022": _anthropic(_CLAUDE_HAIKU_35),
    }
)
"""A small default price table (see the comment above it for its source and date)."""

_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}$")
"""A dated snapshot of a model (``o3-2025-04-16``) is priced as the model."""


def _as_price(model: str, tier: str, value: Any) -> Price:
    if isinstance(value, Price):
        return value
    if isinstance(value, Mapping):
        unknown = set(value) - {"input", "output", "cached_input"}
        if unknown or "input" not in value or "output" not in value:
            raise ConfigError(
                f"the price of {model!r} on {tier!r} needs 'input' and 'output' (and may have "
                f"'cached_input'), USD per million tokens; got {dict(value)!r}"
            )
        return Price(value["input"], value["output"], value.get("cached_input"))
    raise ConfigError(f"the price of {model!r} on {tier!r} must be a Price or a mapping")


def merge_prices(
    overrides: Mapping[str, Any] | None, base: PriceTable = DEFAULT_PRICES
) -> PriceTable:
    """``base`` with the user's prices laid over it, model by model and tier by tier.

    ``overrides`` maps a model name to a mapping of tier (``standard``, ``flex``, ``batch``) to
    a :class:`Price` or a mapping ``{"input", "output", "cached_input"}`` (USD per million
    tokens), as read from a JSON file.

    Raises:
        ConfigError: an unknown tier or a malformed price.
    """
    if overrides is None:
        return base
    if not isinstance(overrides, Mapping):
        raise ConfigError(f"prices must be a mapping of model to tier prices, got {overrides!r}")
    merged: dict[str, Mapping[PriceTier, Price]] = dict(base)
    for model, tiers in overrides.items():
        if not isinstance(model, str) or not isinstance(tiers, Mapping):
            raise ConfigError(f"prices: {model!r} must map tier names to prices")
        entry: dict[PriceTier, Price] = dict(merged.get(model, {}))
        for tier, value in tiers.items():
            if tier not in PRICE_TIERS:
                raise ConfigError(f"prices: unknown tier {tier!r} for {model!r}; use {PRICE_TIERS}")
            entry[tier] = _as_price(model, tier, value)
        merged[model] = MappingProxyType(entry)
    return MappingProxyType(merged)


def price_for(prices: PriceTable, model: str, tier: PriceTier) -> Price | None:
    """The price of ``model`` on ``tier``: its own entry, else the entry of the model it is a
    dated snapshot of; ``None`` when the table has neither."""
    entry = prices.get(model)
    if entry is None:
        entry = prices.get(_DATED.sub("", model))
    return None if entry is None else entry.get(tier)


@attrs.frozen
class TierTokens:
    """Tokens one tier served, and their cost."""

    requests: int = 0
    prompt_tokens: int = 0
    """All prompt tokens, cached ones included."""
    cached_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    """USD at this tier's prices (``None``: a model has no price here)."""


@attrs.frozen
class CostReport:
    """What a batch's tokens cost, per tier, and what they would have cost on standard."""

    tiers: Mapping[str, TierTokens]
    """Per tier that served requests (``standard``, ``flex``, ``batch``)."""
    cost: float | None
    """USD for every answered request (``None`` when a model is unpriced)."""
    standard_cost: float | None
    """USD the same tokens cost on the standard tier."""
    flex_attempts: int
    """Attempts sent on flex that the server answered (with a reply or a refusal)."""
    flex_refused: int
    """Of those, refused for capacity and sent on to the standard tier at once."""
    unpriced: tuple[str, ...] = ()
    """Models (with their tier) that the price table has no price for."""

    @property
    def savings(self) -> float | None:
        """USD saved against the standard tier."""
        if self.cost is None or self.standard_cost is None:
            return None
        return self.standard_cost - self.cost

    @property
    def savings_ratio(self) -> float | None:
        """The saving as a share of the standard cost (``0.5``: half the price)."""
        saved = self.savings
        if saved is None or not self.standard_cost:
            return None
        return saved / self.standard_cost

    @property
    def fallback_rate(self) -> float | None:
        """Share of flex requests refused for capacity and served on standard."""
        return self.flex_refused / self.flex_attempts if self.flex_attempts else None


@attrs.frozen
class RunCost:
    """What one run's requests cost (a results-file record's ``cost``)."""

    usd: float | None
    standard_usd: float | None
    requests: Mapping[str, int]
    """Answered requests per tier."""


def _add_tokens(tokens: TierTokens, usage: Usage) -> TierTokens:
    return TierTokens(
        tokens.requests + 1,
        tokens.prompt_tokens + usage.prompt_tokens,
        tokens.cached_tokens + min(usage.cached_tokens or 0, usage.prompt_tokens),
        tokens.completion_tokens + usage.completion_tokens,
    )


class CostLedger:
    """Counts tokens per model and tier and prices them (see the module docstring).

    Args:
        prices: the price table (default: :data:`DEFAULT_PRICES`).
    """

    def __init__(self, prices: PriceTable = DEFAULT_PRICES) -> None:
        self.prices = prices
        self._tokens: dict[tuple[str, PriceTier], TierTokens] = {}
        self.flex_attempts = 0
        self.flex_refused = 0
        self._runs: OrderedDict[str, tuple[float | None, float | None, dict[str, int]]] = (
            OrderedDict()
        )

    def add(self, model: str, tier: PriceTier, usage: Usage, run: str | None = None) -> None:
        """Count one answered request of ``model`` served on ``tier`` (of run ``run``)."""
        key = (model, tier)
        self._tokens[key] = _add_tokens(self._tokens.get(key, TierTokens()), usage)
        if run is None:
            return
        one = _add_tokens(TierTokens(), usage)
        cost, standard = self._price(model, tier, one), self._price(model, "standard", one)
        spent, spent_standard, requests = self._runs.pop(run, (0.0, 0.0, {}))
        requests[tier] = requests.get(tier, 0) + 1
        self._runs[run] = (
            None if spent is None or cost is None else spent + cost,
            None if spent_standard is None or standard is None else spent_standard + standard,
            requests,
        )
        while len(self._runs) > MAX_RUNS:
            self._runs.popitem(last=False)

    def flex_sent(self, refused: bool) -> None:
        """Count one attempt answered on flex; ``refused``: refused for capacity and sent on
        to the standard tier."""
        self.flex_attempts += 1
        self.flex_refused += refused

    def take_run(self, run: str) -> RunCost | None:
        """The cost of run ``run``'s requests, forgotten once taken (``None``: none counted)."""
        found = self._runs.pop(run, None)
        if found is None:
            return None
        usd, standard, requests = found
        return RunCost(usd, standard, MappingProxyType(dict(requests)))

    def _price(self, model: str, tier: PriceTier, tokens: TierTokens) -> float | None:
        price = price_for(self.prices, model, tier)
        return None if price is None else price.cost(tokens)

    def report(self) -> CostReport:
        """The ledger priced with :attr:`prices`."""
        tiers: dict[str, TierTokens] = {}
        unpriced: list[str] = []
        cost: float | None = 0.0
        standard: float | None = 0.0
        for (model, tier), tokens in sorted(self._tokens.items()):
            at_tier = self._price(model, tier, tokens)
            at_standard = self._price(model, "standard", tokens)
            if at_tier is None:
                unpriced.append(f"{model} ({tier})")
            elif tier != "standard" and at_standard is None:
                unpriced.append(f"{model} (standard)")
            cost = None if cost is None or at_tier is None else cost + at_tier
            standard = None if standard is None or at_standard is None else standard + at_standard
            seen = tiers.get(tier, TierTokens(cost=0.0))
            tiers[tier] = TierTokens(
                seen.requests + tokens.requests,
                seen.prompt_tokens + tokens.prompt_tokens,
                seen.cached_tokens + tokens.cached_tokens,
                seen.completion_tokens + tokens.completion_tokens,
                None if seen.cost is None or at_tier is None else seen.cost + at_tier,
            )
        return CostReport(
            MappingProxyType(tiers),
            cost,
            standard,
            self.flex_attempts,
            self.flex_refused,
            tuple(unpriced),
        )
