"""The percentile helper and distribution summaries."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore import Summary
from agentcore._stats import percentile


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
