"""The percentile helper, distribution summaries and the bounded driver statistics."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore import Summary, open_driver
from agentcore._driver.stats import RECENT_REQUESTS, RELATIVE_ACCURACY, Distribution, percentile
from agentcore.core import CallModel, UserMessage
from agentcore.testing import ScriptedModel


def test_percentile_of_nothing_is_none() -> None:
    assert percentile([], 50) is None
    assert Summary.of([]) == Summary()


def test_percentile_interpolates_between_ranks() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile(values, 50) == 2.5
    assert percentile(values, 95) == pytest.approx(3.85)


@settings(max_examples=100)
@given(st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=50))
def test_percentile_agrees_with_the_standard_library(values: list[float]) -> None:
    cuts = statistics.quantiles(values, n=20, method="inclusive")
    assert percentile(values, 50) == pytest.approx(cuts[9], abs=1e-6)
    assert percentile(values, 95) == pytest.approx(cuts[18], abs=1e-6)
    assert percentile(values, 50) == pytest.approx(statistics.median(values), abs=1e-6)


def test_percentile_rejects_out_of_range_quantiles() -> None:
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_summary_reports_count_mean_and_tail() -> None:
    summary = Summary.of(float(i) for i in range(1, 101))
    assert summary.count == 100
    assert summary.mean == pytest.approx(50.5)
    assert summary.p50 == pytest.approx(50.5)
    assert summary.p95 == pytest.approx(95.05)
    assert summary.max == 100.0


def test_an_empty_distribution_summarises_to_nothing() -> None:
    assert Distribution().summary() == Summary()
    assert Distribution().quantile(0.5) is None


@settings(max_examples=200)
@given(
    st.lists(st.one_of(st.just(0.0), st.floats(1e-6, 1e4)), min_size=1, max_size=300),
    st.sampled_from([0.0, 0.5, 0.95, 0.99, 1.0]),
)
def test_distribution_percentiles_are_within_the_stated_relative_error(
    values: list[float], q: float
) -> None:
    distribution = Distribution()
    for value in values:
        distribution.add(value)
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low, high = ordered[math.floor(rank)], ordered[math.ceil(rank)]
    found = distribution.quantile(q)
    assert found is not None
    assert low * (1 - RELATIVE_ACCURACY) - 1e-12 <= found <= high * (1 + RELATIVE_ACCURACY)
    summary = distribution.summary()
    assert summary.count == len(values)
    assert summary.max == max(values)
    assert summary.mean == pytest.approx(sum(values) / len(values))


@settings(max_examples=50)
@given(st.lists(st.floats(1e-3, 1e3)), st.lists(st.floats(1e-3, 1e3)))
def test_merged_distributions_equal_one_fed_everything(a: list[float], b: list[float]) -> None:
    left, right, both = Distribution(), Distribution(), Distribution()
    for value in a:
        left.add(value)
        both.add(value)
    for value in b:
        right.add(value)
        both.add(value)
    left.merge(right)
    merged, whole = left.summary(), both.summary()
    assert (merged.count, merged.max, merged.p50, merged.p95, merged.p99) == (
        whole.count,
        whole.max,
        whole.p50,
        whole.p95,
        whole.p99,
    )
    assert merged.mean == pytest.approx(whole.mean)


def test_distribution_rejects_out_of_range_quantiles() -> None:
    with pytest.raises(ValueError, match="quantile"):
        Distribution().quantile(1.5)


async def test_driver_statistics_count_every_request_but_keep_only_the_latest_in_detail(
    autojump_clock: object,
) -> None:
    total = RECENT_REQUESTS + 150
    model = ScriptedModel(["ok"] * total, latency=1.0)
    async with open_driver(model) as driver:
        for i in range(total):
            await driver.call_model(CallModel(f"r{i}", (UserMessage("hi"),)))
        stats = driver.statistics()
    assert stats.requests == total
    assert stats.latency.count == stats.slot_wait.count == total
    assert stats.latency.p50 == pytest.approx(1.0, rel=RELATIVE_ACCURACY)
    assert len(stats.recent_requests) == RECENT_REQUESTS
    assert [r.request_id for r in stats.recent_requests] == [
        f"r{i}" for i in range(total - RECENT_REQUESTS, total)
    ]
