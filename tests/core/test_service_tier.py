"""The service-tier policy: the first tier, and what a refusal on flex leads to."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentcore import ConfigError, ErrorKind, ModelError
from agentcore._core.service_tier import (
    SERVICE_TIERS,
    Refusal,
    TierPolicy,
    check_service_tier,
    flex_refusal,
)

OPENAI_CAPACITY = ModelError(
    ErrorKind.RATE_LIMITED,
    "Resource Unavailable: the flex tier has no capacity for this request now",
    status=429,
    retryable=True,
)
GROQ_CAPACITY = ModelError(
    ErrorKind.PROTOCOL, "Flex tier capacity exceeded.", status=498, code="capacity_exceeded"
)
RATE_LIMIT = ModelError(
    ErrorKind.RATE_LIMITED,
    "Rate limit reached for requests per minute",
    status=429,
    retryable=True,
    code="rate_limit_exceeded",
)
NO_FLEX_MODEL = ModelError(
    ErrorKind.BAD_REQUEST,
    "The model 'gpt-x' does not support the 'flex' service tier",
    status=400,
    code="invalid_request_error",
)
errors = st.builds(
    ModelError,
    kind=st.sampled_from(list(ErrorKind)),
    message=st.text(max_size=40),
    status=st.none() | st.sampled_from([400, 401, 404, 408, 429, 498, 500, 503]),
    retryable=st.booleans(),
    code=st.none() | st.sampled_from(["rate_limit_exceeded", "capacity_exceeded", "x"]),
)


def test_capacity_refusals_of_openai_and_groq_are_recognised() -> None:
    assert flex_refusal(OPENAI_CAPACITY) is Refusal.CAPACITY
    assert flex_refusal(GROQ_CAPACITY) is Refusal.CAPACITY


def test_a_rate_limit_on_flex_is_not_a_capacity_refusal() -> None:
    assert flex_refusal(RATE_LIMIT) is None
    quota = ModelError(ErrorKind.QUOTA, "no capacity left in your quota", status=429)
    assert flex_refusal(quota) is None


def test_a_model_without_flex_is_an_unsupported_refusal() -> None:
    assert flex_refusal(NO_FLEX_MODEL) is Refusal.UNSUPPORTED
    other = ModelError(ErrorKind.BAD_REQUEST, "messages must not be empty", status=400)
    assert flex_refusal(other) is None


def test_flex_then_standard_routes_a_capacity_refusal_to_standard() -> None:
    policy = TierPolicy("flex-then-standard")
    assert policy.first == "flex"
    assert policy.after("flex", OPENAI_CAPACITY) == "standard"
    assert policy.after("flex", GROQ_CAPACITY) == "standard"


def test_flex_alone_makes_a_capacity_refusal_a_retryable_overload() -> None:
    after = TierPolicy("flex").after("flex", GROQ_CAPACITY)
    assert isinstance(after, ModelError)
    assert after.kind is ErrorKind.OVERLOADED
    assert after.retryable
    assert after.status == 498


def test_an_unsupported_model_is_a_config_error_naming_the_model() -> None:
    for tier in ("flex", "flex-then-standard"):
        with pytest.raises(ConfigError, match="gpt-x"):
            TierPolicy(tier).after("flex", NO_FLEX_MODEL, "gpt-x")


@given(tier=st.sampled_from(SERVICE_TIERS), error=errors)
def test_a_failure_on_standard_is_never_rerouted_or_changed(tier: str, error: ModelError) -> None:
    assert TierPolicy(tier).after("standard", error) is error


@given(tier=st.sampled_from(SERVICE_TIERS), error=errors)
def test_a_failure_on_flex_that_is_no_refusal_stays_as_it_is(tier: str, error: ModelError) -> None:
    if flex_refusal(error) is None:
        assert TierPolicy(tier).after("flex", error) is error


@given(error=errors)
def test_only_flex_then_standard_moves_a_request_and_only_to_standard(error: ModelError) -> None:
    for tier in SERVICE_TIERS:
        try:
            after = TierPolicy(tier).after("flex", error)
        except ConfigError:
            assert flex_refusal(error) is Refusal.UNSUPPORTED
            continue
        if isinstance(after, str):
            assert tier == "flex-then-standard"
            assert after == "standard"
            assert flex_refusal(error) is Refusal.CAPACITY


def test_standard_sends_nothing_on_flex() -> None:
    assert TierPolicy().first == "standard"
    assert TierPolicy("standard").first == "standard"


@pytest.mark.parametrize("value", ["Flex", "batch", "", None, 1, ("flex",)])
def test_an_unknown_tier_is_a_config_error(value: object) -> None:
    with pytest.raises(ConfigError, match="service_tier"):
        check_service_tier(value)
    with pytest.raises(ConfigError):
        TierPolicy(value)  # type: ignore[arg-type]
