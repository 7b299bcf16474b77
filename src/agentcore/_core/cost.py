"""The cost ledger: tokens per model and tier, priced from a table the user may override.

Theory of operation
-------------------
Every answered model request adds its ``usage`` to the ledger under its model and the tier
that billed it (``standard``, ``flex``, ``batch`` or ``priority``: the tier the reply says it
was served on where it says one, else the tier it was sent on): uncached prompt tokens, cached
prompt tokens (priced separately: providers bill a prompt-cache hit at a fraction of the input
price), prompt tokens written to the cache (Anthropic bills them above the input price: 1.25x
for a five-minute entry, 2x for a one-hour one) and completion tokens. A request refused on
flex for capacity and sent on to the standard tier counts once, on the tier that answered it;
the refusal is counted as a fallback (a refused flex attempt is not charged by the providers).
An answer a resumed run replays from a Batch API journal was billed to the run that submitted
its batch: it counts in its agent's cost (the agent's record), and apart in the report
(:attr:`CostReport.replayed_requests`), not in the run's own cost.

:meth:`CostLedger.report` prices the counts with a :data:`PriceTable` (USD per million tokens
per model and tier; nothing is looked up on a network) and also prices the *same* tokens at the
standard tier: the difference is the saving. A model is found in the table by its name, or by
the name of the family it is a dated snapshot or alias of (``o3-2025-04-16``,
``claude-sonnet-4-20250514``, ``claude-3-5-haiku-latest``, ``claude-sonnet-4-0``). A model
without a price in the table is counted and named in :attr:`CostReport.unpriced`, and the costs
are then ``None`` rather than a number that leaves it out.

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
from .events import ModelResponded
from .messages import Usage

__all__ = [
    "DEFAULT_PRICES",
    "MAX_RUNS",
    "PRICES_READ",
    "PRICE_TIERS",
    "CostLedger",
    "CostReport",
    "Price",
    "PriceTable",
    "PriceTier",
    "RunCost",
    "TierTokens",
    "billed_tier",
    "check_priced",
    "merge_prices",
    "model_family",
    "price_for",
    "unpriced",
]

PriceTier = Literal["standard", "flex", "batch", "priority"]
PRICE_TIERS: Final[tuple[PriceTier, ...]] = ("standard", "flex", "batch", "priority")

MAX_RUNS: Final = 100_000
"""Per-run costs kept at most until their record is written (the oldest are dropped)."""

_PER_TOKEN = 1e-6  # prices are per million tokens


_OPTIONAL_PRICES = frozenset({"cached_input", "cache_write", "cache_write_1h"})
_PRICE_FIELDS = frozenset({"input", "output", *_OPTIONAL_PRICES})


def _price(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None and attribute.name in _OPTIONAL_PRICES:
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
    cache_write: float | None = attrs.field(default=None, validator=_price)
    """Prompt tokens written to the prompt cache with a five-minute lifetime (``None``: the
    input price, as for providers that bill no writes)."""
    cache_write_1h: float | None = attrs.field(default=None, validator=_price)
    """Prompt tokens written to the prompt cache with a one-hour lifetime (``None``: the
    five-minute write price)."""

    def cost(self, tokens: TierTokens) -> float:
        """The USD cost of ``tokens`` at this price."""
        cached = self.input if self.cached_input is None else self.cached_input
        write = self.input if self.cache_write is None else self.cache_write
        write_1h = write if self.cache_write_1h is None else self.cache_write_1h
        written = tokens.cache_write_tokens
        uncached = tokens.prompt_tokens - tokens.cached_tokens - written
        total = uncached * self.input + tokens.cached_tokens * cached
        total += (written - tokens.cache_write_1h_tokens) * write
        total += tokens.cache_write_1h_tokens * write_1h
        return (total + tokens.completion_tokens * self.output) * _PER_TOKEN


PriceTable = Mapping[str, Mapping[PriceTier, Price]]
"""Prices per model name, then per tier."""

# Prices change: these are a starting point, not a bill. USD per million tokens. Override or
# extend them with ``prices=`` (``open_driver``) or ``agentcore run --prices FILE.json``.
#
# Anthropic, as read on 2026-11-28 from https://platform.claude.com/docs/en/about-claude/pricing
# (base input, 5-minute and 1-hour cache writes, cache hits, output) and the model overview
# pages of Claude Sonnet 5 and 5.5; model names follow the API's ``claude-<family>-<version>``.
# Message Batches bill input and output at 50 %; the page does not say the batch discount
# applies to cache writes and hits, so the batch tier bills those at the standard rates (the
# safe side: a bill never under-counted). Claude Haiku 5.5 and Opus 5.5 are left out: their
# cache prices were not on a page read (Haiku 5.5 also bills by prompt length).
#
# OpenAI's pricing page (https://developers.openai.com/api/docs/pricing) was not among the
# pages that could be read; its standard prices here are those it has long published (as
# quoted, with that page as their source, by third-party price lists read on 2026-11-28), and
# the priority prices are from https://openai.com/api-priority-processing/ (read the same day).
# Flex is billed at Batch API rates (OpenAI's flex guide), on the models that offer it. Whether
# a batch bills cached input below its input price is not confirmed: the batch tier bills
# cached input at the batch input price (the safe side).


def _openai(
    standard: Price, *, flex: bool = False, priority: Price | None = None
) -> Mapping[PriceTier, Price]:
    half = Price(standard.input / 2, standard.output / 2)  # cached input: the input price
    tiers: dict[PriceTier, Price] = {"standard": standard, "batch": half}
    if flex:
        cached = None if standard.cached_input is None else standard.cached_input / 2
        tiers["flex"] = Price(standard.input / 2, standard.output / 2, cached)
    if priority is not None:
        tiers["priority"] = priority
    return MappingProxyType(tiers)


def _claude(
    base: float, write_5m: float, write_1h: float, hit: float, output: float
) -> Mapping[PriceTier, Price]:
    standard = Price(base, output, hit, write_5m, write_1h)
    batch = Price(base / 2, output / 2, hit, write_5m, write_1h)
    return MappingProxyType({"standard": standard, "batch": batch})


_OPUS_45 = _claude(5.00, 6.25, 10.00, 0.50, 25.00)
_OPUS_4 = _claude(15.00, 18.75, 30.00, 1.50, 75.00)
_SONNET_4 = _claude(3.00, 3.75, 6.00, 0.30, 15.00)
_SONNET_5 = _claude(2.00, 2.50, 4.00, 0.20, 10.00)

DEFAULT_PRICES: Final[PriceTable] = MappingProxyType(
    {
        "gpt-5": _openai(Price(1.25, 10.00, 0.125), flex=True, priority=Price(2.50, 20.00, 0.25)),
        "gpt-5-mini": _openai(
            Price(0.25, 2.00, 0.025), flex=True, priority=Price(0.45, 3.60, 0.045)
        ),
        "gpt-5-nano": _openai(Price(0.05, 0.40, 0.005), flex=True),
        "gpt-4.1": _openai(Price(2.00, 8.00, 0.50), priority=Price(3.50, 14.00, 0.875)),
        "gpt-4.1-mini": _openai(Price(0.40, 1.60, 0.10)),
        "gpt-4o": _openai(Price(2.50, 10.00, 1.25)),
        "gpt-4o-mini": _openai(Price(0.15, 0.60, 0.075)),
        "o3": _openai(Price(2.00, 8.00, 0.50), flex=True),
        "o4-mini": _openai(Price(1.10, 4.40, 0.275), flex=True),
        "claude-fable-5-1": _claude(10.00, 12.50, 20.00, 0.25, 50.00),
        "claude-opus-5": _OPUS_45,
        "claude-opus-4-8": _OPUS_45,
        "claude-opus-4-7": _OPUS_45,
        "claude-opus-4-6": _OPUS_45,
        "claude-opus-4-5": _OPUS_45,
        "claude-opus-4-1": _OPUS_4,
        "claude-opus-4": _OPUS_4,
        "claude-sonnet-5-5": _SONNET_5,
        "claude-sonnet-5": _SONNET_5,
        "claude-sonnet-4-6": _SONNET_4,
        "claude-sonnet-4-5": _SONNET_4,
        "claude-sonnet-4": _SONNET_4,
        "claude-3-7-sonnet": _SONNET_4,
        "claude-haiku-4-5": _claude(1.00, 1.25, 2.00, 0.10, 5.00),
        "claude-3-5-haiku": _claude(0.80, 1.00, 1.60, 0.08, 4.00),
    }
)
"""A default price table (see the comment above it for its sources and the date they were
read)."""

PRICES_READ: Final = "2026-11-28"
"""When the default table's prices were read (see the comment above it)."""

_SUFFIXES = (
    re.compile(r"-\d{4}-\d{2}-\d{2}$"),  # OpenAI's dated snapshots: o3-2025-04-16
    re.compile(r"-\d{8}$"),  # Anthropic's: claude-sonnet-4-20250514
    re.compile(r"-latest$"),  # claude-3-5-haiku-latest
    re.compile(r"-0$"),  # claude-sonnet-4-0
)
"""What names a snapshot or an alias of a model family, priced as the family."""


def model_family(prices: PriceTable, model: str) -> str | None:
    """The name ``model`` has in ``prices``: its own, or its family's (without a date, a
    ``-latest`` or a ``-0`` suffix); ``None`` when neither is in the table."""
    if model in prices:
        return model
    for suffix in _SUFFIXES:
        family = suffix.sub("", model)
        if family != model and family in prices:
            return family
    return None


def _as_price(model: str, tier: str, value: Any) -> Price:
    if isinstance(value, Price):
        return value
    if isinstance(value, Mapping):
        unknown = set(value) - _PRICE_FIELDS
        if unknown or "input" not in value or "output" not in value:
            raise ConfigError(
                f"the price of {model!r} on {tier!r} needs 'input' and 'output' (and may have "
                f"'cached_input', 'cache_write', 'cache_write_1h'), USD per million tokens; "
                f"got {dict(value)!r}"
            )
        return Price(
            value["input"],
            value["output"],
            value.get("cached_input"),
            value.get("cache_write"),
            value.get("cache_write_1h"),
        )
    raise ConfigError(f"the price of {model!r} on {tier!r} must be a Price or a mapping")


def merge_prices(
    overrides: Mapping[str, Any] | None, base: PriceTable = DEFAULT_PRICES
) -> PriceTable:
    """``base`` with the user's prices laid over it, model by model and tier by tier.

    ``overrides`` maps a model name to a mapping of tier (``standard``, ``flex``, ``batch``,
    ``priority``) to a :class:`Price` or a mapping ``{"input", "output", "cached_input",
    "cache_write", "cache_write_1h"}`` (USD per million tokens), as read from a JSON file.

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
    """The price of ``model`` on ``tier``: its own entry, else its family's
    (:func:`model_family`); ``None`` when the table has neither."""
    family = model_family(prices, model)
    return None if family is None else prices[family].get(tier)


def unpriced(prices: PriceTable, model: str, tiers: tuple[PriceTier, ...]) -> tuple[str, ...]:
    """``model (tier)`` for each of ``tiers`` on which ``prices`` has no price for ``model``."""
    return tuple(f"{model} ({tier})" for tier in tiers if price_for(prices, model, tier) is None)


def check_priced(ledger: CostLedger, model: str, tiers: tuple[PriceTier, ...]) -> str | None:
    """What a client billing ``model`` on ``tiers`` into ``ledger`` should say when the
    ledger's prices miss it: ``None`` when they do not, else a warning to show (an exact
    ledger, ``exact_cost=True``, refuses to open instead: :mod:`agentcore._backends.tiers`)."""
    missing = unpriced(ledger.prices, model, tiers) if model else ()
    if not missing:
        return None
    return (
        f"no price for {', '.join(missing)}: its cost is counted as unknown; pass "
        "prices={model: {tier: {'input': ..., 'output': ...}}} (agentcore run --prices) to "
        "price it"
    )


def billed_tier(reported: str | None, sent: PriceTier) -> PriceTier:
    """The tier a reply is billed at: the one it says it was served on (OpenAI's
    ``service_tier``: ``default``, ``flex``, ``priority``, ``scale``; Anthropic's
    ``standard``, ``priority``, ``batch``), else the one it was ``sent`` on."""
    if reported is None:
        return sent
    word = reported.lower()
    if word in ("default", "standard", "auto", "scale"):
        return "standard"
    for tier in PRICE_TIERS:
        if word == tier:
            return tier
    return sent


@attrs.frozen
class TierTokens:
    """Tokens one tier served, and their cost."""

    requests: int = 0
    prompt_tokens: int = 0
    """All prompt tokens, cached ones and cache writes included."""
    cached_tokens: int = 0
    """Of those, read from the prompt cache."""
    completion_tokens: int = 0
    cost: float | None = None
    """USD at this tier's prices (``None``: a model has no price here)."""
    cache_write_tokens: int = 0
    """Of the prompt tokens, written to the prompt cache."""
    cache_write_1h_tokens: int = 0
    """Of those, written with a one-hour lifetime."""


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
    replayed_requests: int = 0
    """Replies a resumed run counts without having sent them: answers replayed from a Batch
    API journal, and replies its step journal restored its agents with. The process before
    the resume was billed for them, so they count in their agents' costs (the results
    records) but not in :attr:`cost`."""
    replayed_cost: float | None = 0.0
    """USD of those answers (``None``: a model has no price)."""

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


def _add_tokens(tokens: TierTokens, usage: Usage, writes: tuple[int, int]) -> TierTokens:
    cached = min(usage.cached_tokens or 0, usage.prompt_tokens)
    written = min(writes[0], usage.prompt_tokens - cached)
    return TierTokens(
        tokens.requests + 1,
        tokens.prompt_tokens + usage.prompt_tokens,
        tokens.cached_tokens + cached,
        tokens.completion_tokens + usage.completion_tokens,
        cache_write_tokens=tokens.cache_write_tokens + written,
        cache_write_1h_tokens=tokens.cache_write_1h_tokens + min(writes[1], written),
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
        self._replayed: dict[tuple[str, PriceTier], TierTokens] = {}
        self._runs: OrderedDict[str, tuple[float | None, float | None, dict[str, int]]] = (
            OrderedDict()
        )

    def add(
        self,
        model: str,
        tier: PriceTier,
        counted: ModelResponded | Usage,
        run: str | None = None,
        *,
        replayed: bool = False,
    ) -> None:
        """Count one answered request of ``model`` billed on ``tier`` (of run ``run``).

        Args:
            counted: the reply, counted with what it says it cost (its usage and its cache
                writes), or a usage alone (no cache writes).
            replayed: an answer replayed from a journal, billed to an earlier run: counted in
                the run's cost, apart in the report.
        """
        if isinstance(counted, ModelResponded):
            usage = counted.usage
            writes = (counted.cache_write_tokens, counted.cache_write_1h_tokens)
        else:
            usage, writes = counted, (0, 0)
        key = (model, tier)
        counts = self._replayed if replayed else self._tokens
        counts[key] = _add_tokens(counts.get(key, TierTokens()), usage, writes)
        if run is None:
            return
        one = _add_tokens(TierTokens(), usage, writes)
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
                seen.cache_write_tokens + tokens.cache_write_tokens,
                seen.cache_write_1h_tokens + tokens.cache_write_1h_tokens,
            )
        replayed: float | None = 0.0
        for (model, tier), tokens in self._replayed.items():
            at_tier = self._price(model, tier, tokens)
            replayed = None if replayed is None or at_tier is None else replayed + at_tier
        return CostReport(
            MappingProxyType(tiers),
            cost,
            standard,
            self.flex_attempts,
            self.flex_refused,
            tuple(unpriced),
            sum(t.requests for t in self._replayed.values()),
            replayed,
        )
