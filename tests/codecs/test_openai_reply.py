"""Complete (non-streamed) replies decoded by the OpenAI-compatible codec."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore import ErrorKind, Usage
from agentcore.core import AssistantMessage, ModelFailed, ModelResponded, ServerTiming, ToolCall
from tests.codecs.openai_helpers import codec, dynamo_fixture

JSON = (("content-type", "application/json"),)


def decode(body: bytes | dict[str, Any], status: int = 200, dialect: str = "openai") -> Any:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return codec(dialect).decode("req-1", status, JSON, data)


def completion(message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        **extra,
    }


# ----------------------------------------------------------------------------- real Dynamo replies


def test_dynamo_text_reply() -> None:
    assert decode(dynamo_fixture("text.json"), dialect="dynamo") == ModelResponded(
        request_id="req-1",
        message=AssistantMessage("The answer is 42."),
        usage=Usage(prompt_tokens=31, completion_tokens=9, cached_tokens=0),
        finish_reason="stop",
        timing=None,
    )


def test_dynamo_tool_call_reply_keeps_raw_arguments() -> None:
    assert decode(dynamo_fixture("tool.json"), dialect="dynamo") == ModelResponded(
        request_id="req-1",
        message=AssistantMessage(
            None,
            (
                ToolCall(
                    "call-8111d1a0-4c7d-44e3-bb8c-4ce9f72dac20",
                    "get_weather",
                    '{"city": "Paris", "unit": "celsius"}',
                ),
            ),
        ),
        usage=Usage(prompt_tokens=253, completion_tokens=39, cached_tokens=192),
        finish_reason="tool_calls",
    )


def test_dynamo_parallel_tool_calls_keep_their_order() -> None:
    event = decode(dynamo_fixture("two-tools.json"), dialect="dynamo")
    assert isinstance(event, ModelResponded)
    assert event.message.tool_calls == (
        ToolCall("call-fbf2c6f3-6b4d-4fd3-bc54-718220ab64b7", "get_weather", '{"city": "Paris"}'),
        ToolCall("call-6abe9c76-be58-4a5a-b77f-43f284c7eef1", "get_time", '{"tz": "CET"}'),
    )
    assert event.usage == Usage(253, 55, 192)


def test_dynamo_timing_and_worker_id() -> None:
    event = decode(dynamo_fixture("timing.json"), dialect="dynamo")
    assert isinstance(event, ModelResponded)
    assert event.timing == ServerTiming(
        ttft_ms=3.636917,
        prefill_time_ms=2.940845,
        prefill_wait_time_ms=0.696072,
        total_time_ms=8.131103000000001,
        kv_hit_rate=0.0,
        router_queue_depth=0,
        worker_id=10630185764002524564,
    )
    assert event.message == AssistantMessage("The answer is 42.")


def test_dynamo_hints_reply_decodes() -> None:
    event = decode(dynamo_fixture("hints.json"), dialect="dynamo")
    assert isinstance(event, ModelResponded)
    assert event.message.content == "The answer is 42."


def test_dynamo_error_reply_is_a_final_bad_request() -> None:
    event = decode(dynamo_fixture("error-unknown-hint.json"), status=400, dialect="dynamo")
    assert isinstance(event, ModelFailed)
    assert (event.error.kind, event.error.retryable) == (ErrorKind.BAD_REQUEST, False)
    assert "unknown field `deadline_ms`" in event.error.message


# ----------------------------------------------------------------------------- usage


def test_cached_tokens_missing_is_unknown_not_zero() -> None:
    # SGLang omits prompt_tokens_details unless --enable-cache-report; vLLM may send null.
    for usage in (
        {"prompt_tokens": 10, "completion_tokens": 2},
        {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": None},
        {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {}},
    ):
        event = decode(completion({"role": "assistant", "content": "hi"}, usage=usage))
        assert event.usage == Usage(10, 2, None)


def test_cached_tokens_reported_as_zero_stay_zero() -> None:
    usage = {
        "prompt_tokens": 10,
        "completion_tokens": 2,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    event = decode(completion({"role": "assistant", "content": "hi"}, usage=usage))
    assert event.usage.cached_tokens == 0


def test_reply_without_usage_has_empty_usage() -> None:
    assert decode(completion({"role": "assistant", "content": "hi"})).usage == Usage()


def test_ill_typed_usage_values_are_ignored() -> None:
    usage = {
        "prompt_tokens": "10",
        "completion_tokens": -2,
        "prompt_tokens_details": {"cached_tokens": True},
    }
    assert decode(completion({"role": "assistant", "content": "x"}, usage=usage)).usage == Usage()


# ----------------------------------------------------------------------------- message shapes


def test_text_and_tool_calls_together() -> None:
    message = {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{bad json"}},
        ],
    }
    event = decode(completion(message))
    assert event.message == AssistantMessage(
        "Let me check.", (ToolCall("a", "f", "{}"), ToolCall("b", "g", "{bad json"))
    )


def test_arguments_given_as_an_object_are_reserialized() -> None:
    message = {
        "role": "assistant",
        "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": {"x": 1}}}],
    }
    assert decode(completion(message)).message.tool_calls == (ToolCall("a", "f", '{"x":1}'),)


def test_missing_or_empty_arguments_mean_no_arguments() -> None:
    message = {
        "role": "assistant",
        "tool_calls": [
            {"function": {"name": "f"}},
            {"id": "b", "function": {"name": "g", "arguments": ""}},
        ],
    }
    assert decode(completion(message)).message.tool_calls == (
        ToolCall("", "f", "{}"),
        ToolCall("b", "g", "{}"),
    )


def test_content_parts_are_joined() -> None:
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
    }
    assert decode(completion(message)).message.content == "ab"


def test_empty_content_is_none() -> None:
    assert decode(completion({"role": "assistant", "content": ""})).message.content is None


def test_choice_zero_is_used_when_several_are_returned() -> None:
    body = {
        "choices": [
            {"index": 1, "message": {"content": "second"}, "finish_reason": "length"},
            {"index": 0, "message": {"content": "first"}, "finish_reason": "stop"},
        ]
    }
    event = decode(body)
    assert (event.message.content, event.finish_reason) == ("first", "stop")


# ----------------------------------------------------------------------------- failures


def test_http_error_is_classified() -> None:
    body = {"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}}
    event = codec().decode("req-1", 429, (("retry-after", "2"),), json.dumps(body).encode())
    assert isinstance(event, ModelFailed)
    assert event.request_id == "req-1"
    assert (event.error.kind, event.error.retryable, event.error.retry_after) == (
        ErrorKind.RATE_LIMITED,
        True,
        2.0,
    )


def test_error_object_in_a_200_reply_is_classified() -> None:
    event = decode(
        {"object": "error", "message": "engine died", "type": "InternalServerError", "code": 500}
    )
    assert isinstance(event, ModelFailed)
    assert (event.error.kind, event.error.retryable) == (ErrorKind.SERVER, True)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"choices": []}', "no choices"),
        (b'{"id": "x"}', "no choices"),
        (b'{"choices": [{"index": 0}]}', "no message"),
        (b'{"choices": ["x"]}', "no message"),
        (b'{"choices": [{"message": {"tool_calls": {"id": 1}}}]}', "tool_calls is not a list"),
        (b'{"choices": [{"message": {"tool_calls": [{"id": "a"}]}}]}', "malformed tool call"),
        (b'{"choices": [{"message": {"tool_calls": [3]}}]}', "malformed tool call"),
    ],
)
def test_2xx_body_that_is_not_a_completion_is_a_protocol_error(body: bytes, message: str) -> None:
    event = decode(body)
    assert isinstance(event, ModelFailed)
    assert (event.error.kind, event.error.retryable, event.error.status) == (
        ErrorKind.PROTOCOL,
        True,
        200,
    )
    assert message in event.error.message


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(
        st.sampled_from(
            ["choices", "message", "content", "tool_calls", "function", "name", "arguments", "id",
             "index", "usage", "prompt_tokens", "prompt_tokens_details", "cached_tokens", "nvext",
             "timing", "worker_id", "error", "object", "finish_reason"]
        ),
        inner,
        max_size=4,
    ),
    max_leaves=20,
)  # fmt: skip


@settings(max_examples=150)
@given(payload=_json, status=st.sampled_from([200, 201, 400, 429, 500]))
def test_decode_never_raises_on_any_json(payload: Any, status: int) -> None:
    event = decode(json.dumps(payload).encode(), status=status)
    assert isinstance(event, ModelResponded | ModelFailed)


@settings(max_examples=100)
@given(body=st.binary(max_size=200))
def test_decode_never_raises_on_any_bytes(body: bytes) -> None:
    assert isinstance(decode(body), ModelResponded | ModelFailed)
