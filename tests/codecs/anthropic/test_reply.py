"""Complete (not streamed) replies and error responses decoded by the Anthropic codec."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore import ErrorKind, Usage
from agentcore.core import AssistantMessage, ModelFailed, ModelResponded, ToolCall
from tests.codecs.anthropic.helpers import codec, fixture

JSON = (("content-type", "application/json"),)


def message(**fields: Any) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }
    reply.update(fields)
    return reply


def decode(status: int, body: bytes, headers: tuple[tuple[str, str], ...] = JSON) -> Any:
    return codec().decode("req-9", status, headers, body)


def test_text_and_parallel_tool_use_become_one_assistant_message() -> None:
    event = decode(200, fixture("parallel_tools.json"))
    assert event == ModelResponded(
        "req-9",
        AssistantMessage(
            "Checking both.",
            (
                ToolCall("toolu_01", "grep", '{"pat":"TODO"}'),
                ToolCall("toolu_02", "read_file", '{"path":"src/ä.py","lines":[1,20]}'),
            ),
        ),
        Usage(prompt_tokens=40 + 1500 + 0, completion_tokens=58, cached_tokens=0),
        "tool_calls",
        cache_write_tokens=1500,  # of the prompt tokens, written to the cache (billed above)
    )


def test_text_blocks_are_joined_in_order() -> None:
    content = [
        {"type": "text", "text": "The answer "},
        {"type": "text", "text": "is 42.", "citations": []},
    ]
    event = decode(200, orjson.dumps(message(content=content)))
    assert isinstance(event, ModelResponded)
    assert event.message == AssistantMessage("The answer is 42.")


def test_reply_without_text_has_no_content() -> None:
    content = [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]
    event = decode(200, orjson.dumps(message(content=content, stop_reason="tool_use")))
    assert isinstance(event, ModelResponded)
    assert event.message == AssistantMessage(None, (ToolCall("t1", "ls", "{}"),))


@pytest.mark.parametrize(
    ("stop_reason", "finish_reason"),
    [
        ("end_turn", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("stop_sequence", "stop_sequence"),
        ("refusal", "refusal"),
        ("pause_turn", "pause_turn"),
        (None, None),
    ],
)
def test_stop_reason_maps_to_finish_reason(
    stop_reason: str | None, finish_reason: str | None
) -> None:
    event = decode(200, orjson.dumps(message(stop_reason=stop_reason)))
    assert isinstance(event, ModelResponded)
    assert event.finish_reason == finish_reason


def test_prompt_tokens_count_cache_reads_and_writes() -> None:
    usage = {
        "input_tokens": 25,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 3000,
        "output_tokens": 12,
        "service_tier": "standard",
    }
    event = decode(200, orjson.dumps(message(usage=usage)))
    assert isinstance(event, ModelResponded)
    assert event.usage == Usage(prompt_tokens=3125, completion_tokens=12, cached_tokens=3000)


def test_missing_cache_read_count_means_unknown_not_zero() -> None:
    event = decode(200, orjson.dumps(message(usage={"input_tokens": 7, "output_tokens": 2})))
    assert isinstance(event, ModelResponded)
    assert event.usage == Usage(prompt_tokens=7, completion_tokens=2, cached_tokens=None)


def test_malformed_usage_counts_are_treated_as_absent() -> None:
    usage = {"input_tokens": "7", "output_tokens": -1, "cache_read_input_tokens": True}
    event = decode(200, orjson.dumps(message(usage=usage)))
    assert isinstance(event, ModelResponded)
    assert event.usage == Usage(0, 0, None)


def test_unknown_content_blocks_are_skipped() -> None:
    content = [
        {"type": "redacted_thinking", "data": "xx"},
        {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}},
        {"type": "text", "text": "done"},
    ]
    event = decode(200, orjson.dumps(message(content=content)))
    assert isinstance(event, ModelResponded)
    assert event.message == AssistantMessage("done")


def test_overloaded_529_is_retryable() -> None:
    event = decode(529, fixture("overloaded_529.json"), (("request-id", "req_011"),))
    assert isinstance(event, ModelFailed)
    assert event.request_id == "req-9"
    assert event.error.kind is ErrorKind.OVERLOADED
    assert event.error.retryable is True
    assert event.error.status == 529
    assert event.error.message == "Overloaded"


def test_rate_limited_429_carries_retry_after() -> None:
    event = decode(429, fixture("rate_limited_429.json"), (("retry-after", "17"),))
    assert isinstance(event, ModelFailed)
    assert event.error.kind is ErrorKind.RATE_LIMITED
    assert event.error.retryable is True
    assert event.error.retry_after == 17.0
    assert event.error.code == "rate_limit_error"


def test_invalid_request_400_is_final() -> None:
    event = decode(400, fixture("invalid_request_400.json"))
    assert isinstance(event, ModelFailed)
    assert event.error.kind is ErrorKind.BAD_REQUEST
    assert event.error.retryable is False
    assert "alternate" in event.error.message


def test_error_body_on_a_2xx_status_is_classified() -> None:
    event = decode(200, fixture("overloaded_529.json"))
    assert isinstance(event, ModelFailed)
    assert event.error.kind is ErrorKind.OVERLOADED
    assert event.error.retryable is True


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'"message"',
        b'{"type": "message"}',
        b'{"type": "message", "content": "text"}',
        b'{"type": "completion", "content": []}',
        b'{"type": "message", "content": [1]}',
        b'{"type": "message", "content": [{"type": "text", "text": 5}]}',
        b'{"type": "message", "content": [{"type": "tool_use", "id": 1, "name": "x"}]}',
        b"event: message_start\ndata: {}\n\n",
    ],
)
def test_2xx_body_that_is_not_a_message_is_a_protocol_failure(body: bytes) -> None:
    event = decode(200, body)
    assert isinstance(event, ModelFailed)
    assert event.error.kind is ErrorKind.PROTOCOL
    assert event.error.retryable is True  # damage in transit: retried within the policy


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["type", "content", "text", "id", "name", "input", "usage", "error"])
            | st.text(max_size=5),
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(status=st.integers(100, 999), body=st.binary(max_size=300))
def test_decode_never_raises_on_arbitrary_bytes(status: int, body: bytes) -> None:
    event = decode(status, body)
    assert isinstance(event, ModelResponded | ModelFailed)


@settings(max_examples=100, deadline=None)
@given(status=st.sampled_from([200, 201, 400, 429, 500, 529]), value=json_values)
def test_decode_never_raises_on_arbitrary_json(status: int, value: Any) -> None:
    event = decode(status, json.dumps(value).encode())
    assert isinstance(event, ModelResponded | ModelFailed)
    if status >= 300:
        assert isinstance(event, ModelFailed)
