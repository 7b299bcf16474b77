"""The public Hypothesis strategies keep the promises their docstrings make."""

from __future__ import annotations

import math
import subprocess
import sys
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import agentcore
from agentcore import Usage
from agentcore._core.error_policy import policy_of
from agentcore.core import AssistantMessage
from agentcore.testing import strategies as acst


@settings(max_examples=80, deadline=None)
@given(
    acst.assistant_replies(
        ["search", "read"], invalid_arguments=True, unknown_tools=True, max_calls=4
    )
)
def test_assistant_replies_have_text_or_calls_and_distinct_ids(reply: AssistantMessage) -> None:
    assert reply.content is not None or reply.tool_calls
    ids = [call.id for call in reply.tool_calls]
    assert len(ids) == len(set(ids))
    assert len(ids) <= 4


@settings(max_examples=60, deadline=None)
@given(acst.assistant_replies(["search", "read"], text=False))
def test_assistant_replies_by_default_call_offered_tools_with_json_objects(
    reply: AssistantMessage,
) -> None:
    for call in reply.tool_calls:
        assert call.name in {"search", "read"}
        assert isinstance(agentcore.core.loads(call.arguments, dict[str, Any]), dict)
    if reply.tool_calls:
        assert reply.content is None


@settings(max_examples=40, deadline=None)
@given(
    acst.assistant_replies(
        ["add"], arguments={"add": st.fixed_dictionaries({"a": st.integers(0, 9)})}
    )
)
def test_assistant_replies_use_per_tool_argument_strategies(reply: AssistantMessage) -> None:
    for call in reply.tool_calls:
        arguments = agentcore.core.loads(call.arguments, dict[str, int])
        assert set(arguments) == {"a"}
        assert 0 <= arguments["a"] <= 9


@settings(max_examples=40, deadline=None)
@given(acst.assistant_replies())
def test_assistant_replies_without_tools_are_text(reply: AssistantMessage) -> None:
    assert reply.tool_calls == ()
    assert reply.content is not None


def test_assistant_replies_can_break_arguments_and_names() -> None:
    """The options produce what they promise, at least sometimes, and never otherwise."""
    seen_invalid: list[bool] = []
    seen_unknown: list[bool] = []

    @settings(max_examples=150, deadline=None, database=None)
    @given(acst.assistant_replies(["t"], invalid_arguments=True, unknown_tools=True))
    def collect(reply: AssistantMessage) -> None:
        for call in reply.tool_calls:
            seen_unknown.append(call.name != "t")
            try:
                parsed = agentcore.core.loads(call.arguments, dict[str, Any])
            except agentcore.DecodeError:
                seen_invalid.append(True)
            else:
                seen_invalid.append(not isinstance(parsed, dict))

    collect()
    assert any(seen_invalid)
    assert any(seen_unknown)


@settings(max_examples=60, deadline=None)
@given(acst.usages())
def test_usages_keep_cached_tokens_within_prompt_tokens(usage: Usage) -> None:
    assert usage.cached_tokens is None or 0 <= usage.cached_tokens <= usage.prompt_tokens


@settings(max_examples=40, deadline=None)
@given(acst.usages(cached=False), acst.usages(cached=True))
def test_usages_can_pin_whether_cached_tokens_are_known(unknown: Usage, known: Usage) -> None:
    assert unknown.cached_tokens is None
    assert known.cached_tokens is not None


@settings(max_examples=60, deadline=None)
@given(acst.model_errors())
def test_model_errors_are_retryable_exactly_for_the_kinds_the_error_table_retries(
    error: agentcore.ModelError,
) -> None:
    # Transient failures, and 2xx replies garbled on their way (PROTOCOL), as the classifier.
    assert error.retryable is policy_of(error.kind).retryable
    if not error.retryable:
        assert error.retry_after is None


@settings(max_examples=60, deadline=None)
@given(acst.events(request_ids=st.just("run/3"), call_ids=st.sampled_from(["a", "b"])))
def test_events_use_the_given_ids(event: Any) -> None:
    if hasattr(event, "request_id"):
        assert event.request_id == "run/3"
    if hasattr(event, "call_id"):
        assert event.call_id in {"a", "b"}


@settings(max_examples=60, deadline=None)
@given(acst.json_values())
def test_json_values_are_finite_and_64_bit(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            assert math.isfinite(item)
        elif isinstance(item, int) and not isinstance(item, bool):
            assert -(2**63) <= item < 2**64
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            assert all(isinstance(key, str) for key in item)
            stack.extend(item.values())


def test_testing_package_imports_without_hypothesis() -> None:
    code = (
        "import sys, agentcore.testing\n"
        "assert 'hypothesis' not in sys.modules, 'agentcore.testing imported hypothesis'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
