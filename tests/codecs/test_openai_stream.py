"""Streamed replies decoded by the OpenAI-compatible stream decoder."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore import ErrorKind, Usage
from agentcore.core import AssistantMessage, ModelFailed, ModelResponded, ServerTiming, ToolCall
from agentcore.wire import TextDelta, ToolCallDelta
from tests.codecs.openai_helpers import (
    bytewise,
    chunk,
    codec,
    delta_arguments,
    delta_text,
    dynamo_fixture,
    run_stream,
    split_at,
    sse,
)

STREAM_FIXTURES = [
    "text-stream.sse",
    "tool-stream.sse",
    "two-tools-stream.sse",
    "timing-stream.sse",
    "annotations-stream.sse",
]


# ----------------------------------------------------------------------------- real Dynamo streams


def test_dynamo_text_stream() -> None:
    deltas, event = run_stream(codec("dynamo"), [dynamo_fixture("text-stream.sse")])
    assert delta_text(deltas) == "The answer is 42."
    assert [d.text for d in deltas if isinstance(d, TextDelta)][:3] == ["The", " ans", "w"]
    assert event == ModelResponded(
        request_id="req-1",
        message=AssistantMessage("The answer is 42."),
        usage=Usage(prompt_tokens=31, completion_tokens=9, cached_tokens=0),
        finish_reason="stop",
    )


def test_dynamo_stream_matches_the_non_streamed_reply() -> None:
    c = codec("dynamo")
    _, streamed = run_stream(c, [dynamo_fixture("two-tools-stream.sse")])
    whole = c.decode("req-1", 200, (), dynamo_fixture("two-tools.json"))
    assert isinstance(streamed, ModelResponded)
    assert isinstance(whole, ModelResponded)
    strip_ids = lambda e: [(t.name, t.arguments) for t in e.message.tool_calls]  # noqa: E731
    assert strip_ids(streamed) == strip_ids(whole)
    assert (streamed.usage, streamed.finish_reason) == (whole.usage, whole.finish_reason)


def test_dynamo_tool_stream_deltas() -> None:
    deltas, event = run_stream(codec("dynamo"), [dynamo_fixture("tool-stream.sse")])
    assert deltas == [
        ToolCallDelta(
            index=0,
            id="call-bdfeec82-0392-445c-8441-e0cc2805b79c",
            name="get_weather",
            arguments='{"city": "Paris", "unit": "celsius"}',
        )
    ]
    assert isinstance(event, ModelResponded)
    assert event.message == AssistantMessage(
        None,
        (
            ToolCall(
                "call-bdfeec82-0392-445c-8441-e0cc2805b79c",
                "get_weather",
                '{"city": "Paris", "unit": "celsius"}',
            ),
        ),
    )
    assert event.finish_reason == "tool_calls"


def test_dynamo_stream_timing_from_the_finishing_chunk() -> None:
    _, event = run_stream(codec("dynamo"), [dynamo_fixture("timing-stream.sse")])
    assert isinstance(event, ModelResponded)
    assert event.timing == ServerTiming(
        ttft_ms=3.426751,
        prefill_time_ms=2.8801270000000003,
        prefill_wait_time_ms=0.546624,
        total_time_ms=7.837914,
        kv_hit_rate=0.0,
        router_queue_depth=0,
        worker_id=10630185764002524564,
    )


def test_dynamo_annotation_events_are_skipped() -> None:
    annotated = run_stream(codec("dynamo"), [dynamo_fixture("annotations-stream.sse")])
    plain = run_stream(codec("dynamo"), [dynamo_fixture("text-stream.sse")])
    assert delta_text(annotated[0]) == delta_text(plain[0]) == "The answer is 42."
    assert isinstance(annotated[1], ModelResponded)
    assert annotated[1].message == plain[1].message


@pytest.mark.parametrize("name", STREAM_FIXTURES)
def test_fixture_streams_decode_the_same_whole_and_byte_by_byte(name: str) -> None:
    data = dynamo_fixture(name)
    whole = run_stream(codec("dynamo"), [data])
    assert run_stream(codec("dynamo"), bytewise(data)) == whole
    assert isinstance(whole[1], ModelResponded)


@settings(max_examples=60)
@given(name=st.sampled_from(STREAM_FIXTURES), cuts=st.lists(st.integers(0, 4000), max_size=20))
def test_fixture_streams_decode_the_same_in_random_pieces(name: str, cuts: list[int]) -> None:
    data = dynamo_fixture(name)
    whole_deltas, whole_event = run_stream(codec("dynamo"), [data])
    deltas, event = run_stream(codec("dynamo"), split_at(data, cuts))
    assert delta_text(deltas) == delta_text(whole_deltas)
    assert delta_arguments(deltas) == delta_arguments(whole_deltas)
    assert event == whole_event


# ----------------------------------------------------------------------------- tool-call assembly


def test_tool_call_fragments_are_concatenated_per_index() -> None:
    body = sse(
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                               "function": {"name": "grep", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                               "function": {"name": "read", "arguments": '{"pa'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"pat":'}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": 'th": "a.py"}'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "TODO"}'}}]}),
        chunk({}, finish="tool_calls"),
        chunk(None, usage={"prompt_tokens": 900, "completion_tokens": 14,
                           "prompt_tokens_details": {"cached_tokens": 768}}),
    )  # fmt: skip
    deltas, event = run_stream(codec(), [body])
    assert deltas[0] == ToolCallDelta(0, "call_a", "grep", "")
    assert deltas[2] == ToolCallDelta(0, None, None, '{"pat":')
    assert delta_arguments(deltas) == {0: '{"pat": "TODO"}', 1: '{"path": "a.py"}'}
    assert event == ModelResponded(
        request_id="req-1",
        message=AssistantMessage(
            None,
            (
                ToolCall("call_a", "grep", '{"pat": "TODO"}'),
                ToolCall("call_b", "read", '{"path": "a.py"}'),
            ),
        ),
        usage=Usage(900, 14, 768),
        finish_reason="tool_calls",
    )


def test_invalid_argument_json_is_kept_raw() -> None:
    body = sse(
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "c", "function": {"name": "f", "arguments": "{oops"}}
                ]
            }
        ),
        chunk({}, finish="tool_calls"),
    )
    _, event = run_stream(codec(), [body])
    assert event.message.tool_calls == (ToolCall("c", "f", "{oops"),)


def test_tool_call_without_arguments_means_empty_object() -> None:
    body = sse(
        chunk(
            {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "now"}}]},
            finish="tool_calls",
        )
    )
    _, event = run_stream(codec(), [body])
    assert event.message.tool_calls == (ToolCall("c", "now", "{}"),)


def test_tool_calls_without_index_are_told_apart_by_id() -> None:
    body = sse(
        chunk({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{"}}]}),
        chunk({"tool_calls": [{"function": {"arguments": "}"}}]}),
        chunk({"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": "[]"}}]}),
        chunk({}, finish="tool_calls"),
    )
    _, event = run_stream(codec(), [body])
    assert event.message.tool_calls == (ToolCall("a", "f", "{}"), ToolCall("b", "g", "[]"))


def test_text_then_tool_call_in_one_reply() -> None:
    body = sse(
        chunk({"content": "Checking"}),
        chunk({"content": "..."}),
        chunk(
            {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}]}
        ),
        chunk({}, finish="tool_calls"),
    )
    _, event = run_stream(codec(), [body])
    assert event.message == AssistantMessage("Checking...", (ToolCall("c", "f", "{}"),))


def test_other_choices_are_ignored() -> None:
    other = {
        "id": "c1",
        "choices": [{"index": 1, "delta": {"content": "B"}, "finish_reason": None}],
    }
    body = sse(chunk({"content": "A"}), other, chunk({}, finish="stop"))
    deltas, event = run_stream(codec(), [body])
    assert delta_text(deltas) == "A"
    assert event.message.content == "A"


# ----------------------------------------------------------------------------- endings and errors


def test_stream_cut_before_finish_is_a_retryable_connection_error() -> None:
    body = sse(chunk({"content": "partial"}), done=False)
    deltas, event = run_stream(codec(), [body])
    assert delta_text(deltas) == "partial"
    assert isinstance(event, ModelFailed)
    assert (event.error.kind, event.error.retryable) == (ErrorKind.CONNECTION, True)


def test_stream_cut_mid_event_is_a_connection_error() -> None:
    body = sse(chunk({"content": "a"}), chunk({}, finish="stop"))
    cut = body[: body.index(b'"finish_reason": "stop"')]
    _, event = run_stream(codec(), [cut])
    assert isinstance(event, ModelFailed)
    assert event.error.kind is ErrorKind.CONNECTION


def test_finish_reason_without_done_is_accepted_and_usage_stays_unknown() -> None:
    body = sse(chunk({"content": "ok"}), chunk({}, finish="length"), done=False)
    _, event = run_stream(codec(), [body])
    assert event == ModelResponded("req-1", AssistantMessage("ok"), Usage(), "length")
    assert event.usage.cached_tokens is None


def test_done_without_finish_reason_is_accepted() -> None:
    _, event = run_stream(codec(), [sse(chunk({"content": "ok"}))])
    assert event == ModelResponded("req-1", AssistantMessage("ok"), Usage(), None)


def test_empty_body_is_a_connection_error() -> None:
    _, event = run_stream(codec(), [])
    assert isinstance(event, ModelFailed)
    assert event.error.kind is ErrorKind.CONNECTION


def test_in_stream_error_data_is_classified_and_ends_the_reply() -> None:
    error = {"error": {"message": "engine overloaded", "type": "overloaded_error"}}
    body = sse(
        chunk({"content": "par"}), error, chunk({"content": "tial"}), chunk({}, finish="stop")
    )
    deltas, event = run_stream(codec(), [body])
    assert delta_text(deltas) == "par"
    assert isinstance(event, ModelFailed)
    assert (event.error.kind, event.error.retryable, event.error.message) == (
        ErrorKind.OVERLOADED,
        True,
        "engine overloaded",
    )


def test_vllm_style_in_stream_error_with_status_code() -> None:
    error = {"error": {"message": "bad", "type": "BadRequestError", "code": 400}}
    _, event = run_stream(codec("vllm"), [sse(error)])
    assert isinstance(event, ModelFailed)
    assert (event.error.kind, event.error.status, event.error.retryable) == (
        ErrorKind.BAD_REQUEST,
        400,
        False,
    )


def test_error_event_is_classified() -> None:
    body = (
        sse(chunk({"content": "a"}), done=False)
        + b"event: error\n"
        + b'data: {"type":"error","error":{"type":"overloaded_error","message":"busy"}}\n\n'
    )
    _, event = run_stream(codec(), [body])
    assert isinstance(event, ModelFailed)
    assert (event.error.kind, event.error.message) == (ErrorKind.OVERLOADED, "busy")


def test_error_event_with_plain_text_data() -> None:
    _, event = run_stream(codec(), [b"event: error\ndata: worker lost\n\n"])
    assert isinstance(event, ModelFailed)
    assert (event.error.kind, event.error.message, event.error.retryable) == (
        ErrorKind.SERVER,
        "worker lost",
        True,
    )


def test_unknown_named_events_are_ignored() -> None:
    body = b'event: llm_metrics\ndata: {"x": 1}\n\n' + sse(
        chunk({"content": "a"}), chunk({}, finish="stop")
    )
    _, event = run_stream(codec(), [body])
    assert event == ModelResponded("req-1", AssistantMessage("a"), Usage(), "stop")


def test_events_after_done_are_ignored() -> None:
    body = sse(chunk({"content": "a"}), chunk({}, finish="stop")) + sse(chunk({"content": "zzz"}))
    deltas, event = run_stream(codec(), [body])
    assert delta_text(deltas) == "a"
    assert event.message.content == "a"


@pytest.mark.parametrize("bad", ["{not json", "[1,2]", '"text"'])
def test_undecodable_chunk_is_a_protocol_error(bad: str) -> None:
    _, event = run_stream(codec(), [sse(chunk({"content": "a"}), bad)])
    assert isinstance(event, ModelFailed)
    assert (event.error.kind, event.error.retryable) == (ErrorKind.PROTOCOL, True)


def test_keepalive_comments_and_crlf_framing() -> None:
    body = sse(chunk({"content": "a"}), chunk({}, finish="stop")).replace(b"\n", b"\r\n")
    _, event = run_stream(codec(), [b": keep-alive\r\n\r\n" + body])
    assert event == ModelResponded("req-1", AssistantMessage("a"), Usage(), "stop")


# ----------------------------------------------------------------------------- properties

_pieces = st.sampled_from(
    [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "hé"}),
        chunk({"content": "☃ x"}),
        chunk(
            {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}}]}
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"k": '}}]}),
        chunk(
            {"tool_calls": [{"index": 1, "id": "b", "function": {"name": "g", "arguments": "[1"}}]}
        ),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": "]"}}]}),
        chunk({}, finish="stop"),
        chunk(None, usage={"prompt_tokens": 5, "completion_tokens": 1}),
        chunk(None, nvext={"timing": {"ttft_ms": 1.5}}),
        ": ping",
    ]
)


@st.composite
def openai_streams(draw: st.DrawFn) -> bytes:
    pieces = draw(st.lists(_pieces, max_size=12))
    body = b""
    for piece in pieces:
        body += b": ping\n\n" if piece == ": ping" else sse(piece, done=False)
    if draw(st.booleans()):
        body += b"data: [DONE]\n\n"
    return body


@settings(max_examples=150)
@given(body=openai_streams(), cuts=st.lists(st.integers(0, 3000), max_size=15))
def test_whole_bytewise_and_random_pieces_agree(body: bytes, cuts: list[int]) -> None:
    whole_deltas, whole = run_stream(codec(), [body])
    for pieces in (split_at(body, cuts), bytewise(body)):
        deltas, event = run_stream(codec(), pieces)
        assert delta_text(deltas) == delta_text(whole_deltas)
        assert delta_arguments(deltas) == delta_arguments(whole_deltas)
        assert event == whole
    if isinstance(whole, ModelResponded):
        assert (whole.message.content or "") == delta_text(whole_deltas)


@settings(max_examples=150)
@given(body=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300), max_size=8))
def test_garbage_never_raises(body: bytes, cuts: list[int]) -> None:
    _, whole = run_stream(codec(), [body])
    _, split = run_stream(codec(), split_at(body, cuts))
    assert whole == split
    assert isinstance(whole, ModelResponded | ModelFailed)


@settings(max_examples=100)
@given(data=st.lists(st.text(max_size=40), max_size=6))
def test_arbitrary_data_lines_never_raise(data: list[str]) -> None:
    body = b"".join(
        b"data: " + d.replace("\n", " ").replace("\r", " ").encode() + b"\n\n" for d in data
    )
    _, event = run_stream(codec(), [body])
    assert isinstance(event, ModelResponded | ModelFailed)
