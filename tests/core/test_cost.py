"""The cost ledger: tokens per tier, cached input priced apart, savings against standard."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentcore import ConfigError
from agentcore._core.cost import (
    DEFAULT_PRICES,
    MAX_RUNS,
    PRICES_READ,
    CostLedger,
    Price,
    TierTokens,
    billed_tier,
    check_priced,
    merge_prices,
    model_family,
    price_for,
)
from agentcore._core.events import ModelResponded
from agentcore._core.messages import AssistantMessage, Usage

PRICES = merge_prices(
    {
        "m": {
            "standard": {"input": 2.0, "output": 8.0, "cached_input": 0.5},
            "flex": {"input": 1.0, "output": 4.0, "cached_input": 0.25},
        }
    }
)
usages = st.builds(
    lambda prompt, cached, completion: Usage(prompt, completion, min(cached, prompt)),
    st.integers(0, 10_000),
    st.integers(0, 10_000),
    st.integers(0, 5_000),
)


def test_cached_input_is_priced_apart_from_uncached_input() -> None:
    price = Price(input=2.0, output=8.0, cached_input=0.5)
    tokens = TierTokens(1, prompt_tokens=1_000_000, cached_tokens=400_000, completion_tokens=0)
    assert price.cost(tokens) == pytest.approx(600_000 * 2e-6 + 400_000 * 0.5e-6)
    assert Price(2.0, 8.0).cost(tokens) == pytest.approx(2.0)


def test_a_ledger_reports_cost_per_tier_and_the_saving_against_standard() -> None:
    ledger = CostLedger(PRICES)
    ledger.add("m", "flex", Usage(1000, 100, 600))
    ledger.add("m", "standard", Usage(1000, 100, 600))
    report = ledger.report()
    flex = (400 * 1.0 + 600 * 0.25 + 100 * 4.0) * 1e-6
    standard = (400 * 2.0 + 600 * 0.5 + 100 * 8.0) * 1e-6
    assert report.tiers["flex"].cost == pytest.approx(flex)
    assert report.tiers["standard"].cost == pytest.approx(standard)
    assert report.cost == pytest.approx(flex + standard)
    assert report.standard_cost == pytest.approx(2 * standard)
    assert report.savings == pytest.approx(standard - flex)


@given(st.lists(usages, max_size=20))
def test_all_flex_at_half_price_saves_half(usages_: list[Usage]) -> None:
    ledger = CostLedger(PRICES)
    for usage in usages_:
        ledger.add("m", "flex", usage)
    report = ledger.report()
    assert report.cost is not None
    assert report.standard_cost is not None
    assert report.cost == pytest.approx(report.standard_cost / 2)
    if report.standard_cost:
        assert report.savings_ratio == pytest.approx(0.5)


@given(st.lists(st.tuples(st.sampled_from(["standard", "flex"]), usages), max_size=20))
def test_tier_tokens_sum_to_what_was_added(entries: list[tuple[str, Usage]]) -> None:
    ledger = CostLedger(PRICES)
    for tier, usage in entries:
        ledger.add("m", tier, usage)  # type: ignore[arg-type]
    tiers = ledger.report().tiers
    assert sum(t.requests for t in tiers.values()) == len(entries)
    assert sum(t.prompt_tokens for t in tiers.values()) == sum(u.prompt_tokens for _, u in entries)
    assert sum(t.completion_tokens for t in tiers.values()) == sum(
        u.completion_tokens for _, u in entries
    )


def test_an_unpriced_model_is_named_and_its_cost_is_unknown_not_zero() -> None:
    ledger = CostLedger(PRICES)
    ledger.add("m", "flex", Usage(10, 10, 0))
    ledger.add("other", "flex", Usage(10, 10, 0))
    report = ledger.report()
    assert report.cost is None
    assert report.savings is None
    assert report.unpriced == ("other (flex)",)


def test_the_fallback_rate_is_refused_over_flex_attempts() -> None:
    ledger = CostLedger(PRICES)
    assert ledger.report().fallback_rate is None
    for refused in (True, False, False, True):
        ledger.flex_sent(refused)
    assert ledger.report().fallback_rate == pytest.approx(0.5)


def test_user_prices_override_the_default_table_tier_by_tier() -> None:
    merged = merge_prices({"o3": {"flex": {"input": 9, "output": 9}}})
    assert price_for(merged, "o3", "flex") == Price(9, 9)
    assert price_for(merged, "o3", "standard") == DEFAULT_PRICES["o3"]["standard"]
    assert DEFAULT_PRICES["o3"]["flex"] != Price(9, 9)


def test_a_dated_snapshot_is_priced_as_its_model_but_a_sibling_is_not() -> None:
    assert (
        price_for(DEFAULT_PRICES, "o3-2025-04-16", "standard") == DEFAULT_PRICES["o3"]["standard"]
    )
    assert price_for(DEFAULT_PRICES, "o3-mini", "standard") is None


def test_the_default_table_prices_flex_and_batch_at_half_or_less() -> None:
    for model, tiers in DEFAULT_PRICES.items():
        standard = tiers["standard"]
        for tier in ("flex", "batch"):
            if tier in tiers:
                assert tiers[tier].input <= standard.input / 2 + 1e-9, model
                assert tiers[tier].output <= standard.output / 2 + 1e-9, model


@pytest.mark.parametrize(
    "prices",
    [
        {"m": {"turbo": {"input": 1, "output": 1}}},
        {"m": {"flex": {"input": 1}}},
        {"m": {"flex": {"input": -1, "output": 1}}},
        {"m": {"flex": {"input": 1, "output": 1, "cache": 1}}},
        {"m": "cheap"},
        ["m"],
    ],
)
def test_malformed_prices_are_config_errors(prices: object) -> None:
    with pytest.raises(ConfigError):
        merge_prices(prices)  # type: ignore[arg-type]


def test_per_run_costs_are_taken_once_and_bounded() -> None:
    ledger = CostLedger(PRICES)
    ledger.add("m", "flex", Usage(1000, 0, 0), run="r1")
    ledger.add("m", "standard", Usage(1000, 0, 0), run="r1")
    taken = ledger.take_run("r1")
    assert taken is not None
    assert taken.usd == pytest.approx(1000 * 1e-6 + 1000 * 2e-6)
    assert taken.standard_usd == pytest.approx(2 * 1000 * 2e-6)
    assert dict(taken.requests) == {"flex": 1, "standard": 1}
    assert ledger.take_run("r1") is None
    for number in range(MAX_RUNS + 5):
        ledger.add("m", "flex", Usage(1, 0, 0), run=f"run-{number}")
    assert ledger.take_run("run-0") is None
    assert ledger.take_run(f"run-{MAX_RUNS + 4}") is not None


def test_cache_writes_are_priced_per_lifetime_above_the_input_price() -> None:
    # Claude Sonnet 4.5: $3 input, $3.75 for a 5-minute cache write, $6 for a 1-hour one,
    # $0.30 a cache hit, $15 output (per million tokens).
    price = DEFAULT_PRICES["claude-sonnet-4-5"]["standard"]
    tokens = TierTokens(1, prompt_tokens=12_000, cached_tokens=0, completion_tokens=500,
                        cache_write_tokens=10_000, cache_write_1h_tokens=4_000)  # fmt: skip
    expected = 2_000 * 3.0 + 6_000 * 3.75 + 4_000 * 6.0 + 500 * 15.0
    assert price.cost(tokens) == pytest.approx(expected * 1e-6)
    plain = (12_000 * 3.0 + 500 * 15.0) * 1e-6  # writes priced as plain input
    assert price.cost(tokens) > plain * 1.3


def test_a_ledger_counts_cache_writes_apart() -> None:
    ledger = CostLedger(merge_prices(None))
    reply = ModelResponded(
        "r", AssistantMessage("ok"), Usage(11_000, 100, 1_000), cache_write_tokens=10_000
    )
    ledger.add("claude-sonnet-4-5", "standard", reply)
    report = ledger.report()
    assert report.tiers["standard"].cache_write_tokens == 10_000
    expected = (1_000 * 0.30 + 10_000 * 3.75 + 100 * 15.0) * 1e-6
    assert report.cost == pytest.approx(expected)


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-sonnet-4-0", "claude-sonnet-4"),
        ("claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("claude-3-5-haiku-20241022", "claude-3-5-haiku"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("o3-2025-04-16", "o3"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
    ],
)
def test_snapshots_and_aliases_are_priced_as_their_family(model: str, family: str) -> None:
    assert model_family(DEFAULT_PRICES, model) == family
    assert price_for(DEFAULT_PRICES, model, "batch") == DEFAULT_PRICES[family]["batch"]


def test_a_family_is_not_taken_for_a_sibling() -> None:
    assert model_family(DEFAULT_PRICES, "claude-sonnet-4-5") != "claude-sonnet-4"
    assert model_family(DEFAULT_PRICES, "claude-sonnet-9") is None


def test_the_billed_tier_is_the_one_the_reply_names() -> None:
    assert billed_tier("default", "flex") == "standard"
    assert billed_tier("flex", "flex") == "flex"
    assert billed_tier("priority", "standard") == "priority"
    assert billed_tier("batch", "batch") == "batch"
    assert billed_tier(None, "flex") == "flex"
    assert billed_tier("something-new", "flex") == "flex"


def test_replayed_answers_count_in_their_run_but_not_in_the_report() -> None:
    ledger = CostLedger(PRICES)
    ledger.add("m", "flex", Usage(1000, 0, 0), run="r", replayed=True)
    ledger.add("m", "flex", Usage(1000, 0, 0), run="r")
    report = ledger.report()
    assert report.tiers["flex"].requests == 1
    assert report.cost == pytest.approx(1000 * 1e-6)
    assert report.replayed_requests == 1
    assert report.replayed_cost == pytest.approx(1000 * 1e-6)
    taken = ledger.take_run("r")
    assert taken is not None
    assert taken.usd == pytest.approx(2000 * 1e-6)  # the agent's whole cost


def test_a_model_missing_from_the_prices_is_named_in_a_warning() -> None:
    ledger = CostLedger(PRICES)
    assert check_priced(ledger, "m", ("flex", "standard")) is None
    warning = check_priced(ledger, "other", ("batch", "standard"))
    assert warning is not None and "other (batch), other (standard)" in warning
    assert check_priced(CostLedger(), "gpt-4o-mini", ("batch",)) is None


def test_the_default_table_names_when_it_was_read() -> None:
    assert PRICES_READ == "2026-11-28"
    assert {"claude-sonnet-4-5", "claude-haiku-4-5", "gpt-5", "gpt-5-mini"} <= set(DEFAULT_PRICES)
