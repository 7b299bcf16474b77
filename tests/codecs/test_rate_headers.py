"""Rate-limit headers of hosted APIs read into a RateObservation (OpenAI and Anthropic)."""

from __future__ import annotations

import calendar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentcore._codecs.ratelimits import read_rate_headers
from agentcore._core.ratebudget import RateObservation


def test_openai_headers_give_limits_remaining_and_reset_durations() -> None:
    headers = (
        ("x-ratelimit-limit-requests", "500"),
        ("x-ratelimit-limit-tokens", "30000"),
        ("x-ratelimit-remaining-requests", "499"),
        ("x-ratelimit-remaining-tokens", "29100"),
        ("x-ratelimit-reset-requests", "120ms"),
        ("x-ratelimit-reset-tokens", "1m30.5s"),
        ("content-type", "application/json"),
    )
    assert read_rate_headers(headers) == RateObservation(
        limit_requests=500,
        limit_tokens=30_000,
        remaining_requests=499,
        remaining_tokens=29_100,
        reset_requests=pytest.approx(0.12),  # type: ignore[arg-type]
        reset_tokens=pytest.approx(90.5),  # type: ignore[arg-type]
    )


def test_anthropic_headers_give_resets_as_seconds_from_now() -> None:
    now = float(calendar.timegm((2026, 11, 24, 14, 0, 0, 0, 0, 0)))
    headers = (
        ("anthropic-ratelimit-requests-limit", "50"),
        ("anthropic-ratelimit-requests-remaining", "49"),
        ("anthropic-ratelimit-requests-reset", "2026-11-24T14:00:01Z"),
        ("anthropic-ratelimit-tokens-limit", "40000"),
        ("anthropic-ratelimit-tokens-remaining", "39000"),
        ("anthropic-ratelimit-tokens-reset", "2026-11-24T15:00:30.5+01:00"),
    )
    observed = read_rate_headers(headers, wall_now=now)
    assert observed is not None
    assert (observed.limit_requests, observed.remaining_requests) == (50, 49)
    assert (observed.limit_tokens, observed.remaining_tokens) == (40_000, 39_000)
    assert observed.reset_requests == pytest.approx(1.0)
    assert observed.reset_tokens == pytest.approx(30.5)


def test_no_rate_headers_say_nothing_and_malformed_values_are_ignored() -> None:
    assert read_rate_headers((("content-type", "text/plain"),)) is None
    junk = (
        ("x-ratelimit-limit-tokens", "lots"),
        ("x-ratelimit-remaining-tokens", "-5"),
        ("x-ratelimit-reset-tokens", "soon"),
        ("anthropic-ratelimit-tokens-reset", "2026-13-45T99:00:00Z"),
        ("x-ratelimit-limit-requests", "60"),
    )
    assert read_rate_headers(junk, wall_now=0.0) == RateObservation(limit_requests=60)


names = st.sampled_from(
    [
        "x-ratelimit-limit-requests",
        "x-ratelimit-remaining-tokens",
        "x-ratelimit-reset-tokens",
        "anthropic-ratelimit-tokens-reset",
        "anthropic-ratelimit-requests-remaining",
        "retry-after",
    ]
)


@given(st.lists(st.tuples(names, st.text(max_size=40))), st.none() | st.floats(0, 4e9))
def test_any_header_values_are_read_without_raising(
    headers: list[tuple[str, str]], now: float | None
) -> None:
    observed = read_rate_headers(tuple(headers), wall_now=now)
    if observed is not None:
        for value in (observed.reset_requests, observed.reset_tokens):
            assert value is None or value >= 0
