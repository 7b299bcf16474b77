"""Streamed replies decoded by the Anthropic stream decoder."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore import ErrorKind, Usage
from agentcore.core import AssistantMessage, ModelFailed, ModelResponded, ToolCall
from agentcore.wire import TextDelta, ToolCallDelta
from tests.codecs.anthropic.helpers import (
    codec,
    fixture,
    run_bytewise,
    run_stream,
    sse,
    stream_body,
)

START = (
    "message_start",
    {
        "type": "message_start",
        "message": {
            "id": "msg_x",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "claude-test",
            "stop_reason": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        },
    },
)
STOP = ("message_stop", {"type": "message_stop"})
FIXTURES = [
    "text_reply.sse",
    "parallel_tools.sse",
    "overloaded_midway.sse",
    "cut_short.sse",
    "arguments_cut_by_max_tokens.sse",
]


def text_block(index: int, *pieces: str) -> list[tuple[str, Any]]:
    events: list[tuple[str, Any]] = [
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            },
        )
    ]
    for piece in pieces:
        delta = {"type": "text_delta", "text": piece}
        events.append(
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        )
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def tool_block(index: int, call_id: str, name: str, *pieces: str) -> list[tuple[str, Any]]:
    start = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
    events: list[tuple[str, Any]] = [
        (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
    ]
    for piece in pieces:
        delta = {"type": "input_json_delta", "partial_json": piece}
        events.append(
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        )
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def message_delta(stop_reason: str | None, **usage: int) -> tuple[str, Any]:
    return (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": usage,
        },
    )


# ----------------------------------------------------------------------------- fixtures


def test_text_stream_reports_each_piece_and_the_final_reply() -> None:
    deltas, event = run_stream(fixture("text_reply.sse"))
    assert deltas == [TextDelta("Hello"), TextDelta(", wörld ✓")]
    assert event == ModelResponded(
        "req-1",
        AssistantMessage("Hello, wörld ✓"),
        Usage(prompt_tokens=12 + 2048, completion_tokens=6, cached_tokens=2048),
        "stop",
    )


def test_parallel_tool_stream_numbers_calls_and_skips_thinking() -> None:
    deltas, event = run_stream(fixture("parallel_tools.sse"))
    assert deltas == [
        TextDelta("Checking both."),
        ToolCallDelta(0, "toolu_01", "grep"),
        ToolCallDelta(0, arguments='{"pat": "TO'),
        ToolCallDelta(0, arguments='DO"}'),
        ToolCallDelta(1, "toolu_02", "read_file"),
        ToolCallDelta(1, arguments='{"path":'),
        ToolCallDelta(1, arguments=' "src/ä.py", "lines": [1, 20]}'),
    ]
    assert event == ModelResponded(
        "req-1",
        AssistantMessage(
            "Checking both.",
            (
                ToolCall("toolu_01", "grep", '{"pat":"TODO"}'),
                ToolCall("toolu_02", "read_file", '{"path":"src/ä.py","lines":[1,20]}'),
            ),
        ),
        Usage(prompt_tokens=1540, completion_tokens=58, cached_tokens=0),
        "tool_calls",
        cache_write_tokens=1500,  # of the prompt tokens, written to the cache (billed above)
    )


def test_streamed_and_complete_replies_decode_alike() -> None:
    _, streamed = run_stream(fixture("parallel_tools.sse"))
    complete = codec().decode("req-1", 200, (), fixture("parallel_tools.json"))
    assert streamed == complete


def test_invalid_arguments_are_kept_raw_for_the_loop() -> None:
    deltas, event = run_stream(fixture("arguments_cut_by_max_tokens.sse"))
    assert isinstance(event, ModelResponded)
    assert event.finish_reason == "length"
    assert event.message.tool_calls == (
        ToolCall("toolu_03", "write_file", '{"path": "notes.md", "text": "Line one'),
    )
    assert deltas[0] == ToolCallDelta(0, "toolu_03", "write_file")


def test_in_stream_overload_fails_retryably() -> None:
    deltas, event = run_stream(fixture("overloaded_midway.sse"))
    assert deltas == [TextDelta("Partial")]
    assert isinstance(event, ModelFailed)
    assert event.request_id == "req-1"
    assert event.error.kind is ErrorKind.OVERLOADED
    assert event.error.retryable is True
    assert event.error.message == "Overloaded"


def test_in_stream_invalid_request_error_is_final() -> None:
    error = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}
    _, event = run_stream(stream_body([START, ("error", error)]))
    assert isinstance(event, ModelFailed)
    assert event.error.kind is ErrorKind.BAD_REQUEST
    assert event.error.retryable is False


def test_stream_ending_without_message_stop_is_truncated_and_retryable() -> None:
    deltas, event = run_stream(fixture("cut_short.sse"))
    assert deltas == [TextDelta("The answer is")]
    assert isinstance(event, ModelFailed)
    assert event.error.kind is ErrorKind.CONNECTION
    assert event.error.retryable is True


def test_empty_body_is_truncated() -> None:
    _, event = run_stream(b"")
    assert isinstance(event, ModelFailed)
    assert event.error.kind is ErrorKind.CONNECTION


def test_unterminated_message_stop_event_counts_as_truncated() -> None:
    body = stream_body([START, *text_block(0, "hi"), message_delta("end_turn", output_tokens=2)])
    _, event = run_stream(body + b'event: message_stop\ndata: {"type":"message_stop"}\n')
    assert isinstance(event, ModelFailed)
    assert event.error.kind is ErrorKind.CONNECTION


# ----------------------------------------------------------------------------- usage


def test_message_delta_usage_is_cumulative_and_overwrites() -> None:
    body = stream_body(
        [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "usage": {
                            "input_tokens": 50,
                            "cache_creation_input_tokens": 0,
                            "cache_read_input_tokens": 900,
                            "output_tokens": 1,
                        }
                    },
                },
            ),
            *text_block(0, "a", "b"),
            message_delta(None, output_tokens=10),
            message_delta("end_turn", output_tokens=31, input_tokens=52),
            STOP,
        ]
    )
    _, event = run_stream(body)
    assert isinstance(event, ModelResponded)
    assert event.usage == Usage(prompt_tokens=52 + 900, completion_tokens=31, cached_tokens=900)
    assert event.finish_reason == "stop"


def test_stream_without_cache_counts_reports_cached_tokens_unknown() -> None:
    _, event = run_stream(stream_body([START, *text_block(0, "x"), STOP]))
    assert isinstance(event, ModelResponded)
    assert event.usage == Usage(prompt_tokens=10, completion_tokens=1, cached_tokens=None)
    assert event.finish_reason is None


# ----------------------------------------------------------------------------- tolerance


def test_pings_comments_and_unknown_events_are_ignored() -> None:
    noise = (
        b": keep-alive\n\n"
        + sse("ping", {"type": "ping"})
        + sse("future_event", {"type": "future_event", "x": 1})
        + b"event: future_event\ndata: not json\n\n"
        + b"data: plain message event\n\n"
    )
    body = (
        stream_body([START])
        + noise
        + stream_body(text_block(0, "hi"))
        + noise
        + stream_body([STOP])
    )
    deltas, event = run_stream(body)
    assert deltas == [TextDelta("hi")]
    assert isinstance(event, ModelResponded)
    assert event.message == AssistantMessage("hi")


def test_unknown_block_and_delta_types_are_ignored() -> None:
    citation = {"type": "citations_delta", "citation": {"type": "char_location"}}
    events = [
        START,
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "server_tool_use", "id": "srv", "name": "web"},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": "{}"},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        *text_block(1, "cited"),
        STOP,
    ]
    events.insert(
        -2, ("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": citation})
    )
    deltas, event = run_stream(stream_body(events))
    assert deltas == [TextDelta("cited")]
    assert isinstance(event, ModelResponded)
    assert event.message == AssistantMessage("cited")


def test_events_after_message_stop_are_ignored() -> None:
    late = stream_body([*text_block(5, "late"), ("error", {"type": "error", "error": {}})])
    deltas, event = run_stream(stream_body([START, *text_block(0, "on time"), STOP]) + late)
    assert deltas == [TextDelta("on time")]
    assert isinstance(event, ModelResponded)
    assert event.message == AssistantMessage("on time")


def test_tool_block_without_json_pieces_uses_its_start_input() -> None:
    start = {"type": "tool_use", "id": "t1", "name": "now", "input": {"tz": "UTC"}}
    events = [
        START,
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": start},
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        STOP,
    ]
    _, event = run_stream(stream_body(events))
    assert isinstance(event, ModelResponded)
    assert event.message.tool_calls == (ToolCall("t1", "now", '{"tz":"UTC"}'),)


def test_tool_block_never_closed_is_still_reported() -> None:
    events = [START, *tool_block(0, "t1", "grep", '{"pat"', ': "x"}')[:-1], STOP]
    _, event = run_stream(stream_body(events))
    assert isinstance(event, ModelResponded)
    assert event.message.tool_calls == (ToolCall("t1", "grep", '{"pat":"x"}'),)


@pytest.mark.parametrize(
    "bad_event",
    [
        b"event: content_block_delta\ndata: {not json\n\n",
        b"event: message_start\ndata: [1]\n\n",
        sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 7,
                "delta": {"type": "text_delta", "text": "x"},
            },
        ),
        sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": 3},
            },
        ),
        sse("content_block_start", {"type": "content_block_start", "index": 0}),
        sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        sse("content_block_stop", {"type": "content_block_stop", "index": "0"}),
    ],
)
def test_malformed_known_event_is_a_protocol_failure(bad_event: bytes) -> None:
    body = stream_body([START, text_block(0, "a")[0]]) + bad_event + stream_body([STOP])
    _, event = run_stream(body)
    assert isinstance(event, ModelFailed)
    assert event.error.kind is ErrorKind.PROTOCOL
    assert event.error.retryable is True


def test_delta_after_block_stop_is_a_protocol_failure() -> None:
    late = (
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "z"}},
    )
    _, event = run_stream(stream_body([START, *text_block(0, "a"), late, STOP]))
    assert isinstance(event, ModelFailed)
    assert event.error.kind is ErrorKind.PROTOCOL


def test_finish_is_repeatable_and_feed_after_it_is_inert() -> None:
    decoder = codec().stream_decoder("req-2")
    assert decoder.feed(fixture("text_reply.sse")) != []
    first = decoder.finish()
    assert decoder.feed(stream_body(text_block(3, "more"))) == []
    assert decoder.finish() == first
    assert isinstance(first, ModelResponded)
    assert first.request_id == "req-2"


# ----------------------------------------------------------------------------- splitting


def crlf(body: bytes) -> bytes:
    return body.replace(b"\n", b"\r\n")


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("line_ends", [bytes, crlf])
def test_whole_and_bytewise_feeding_agree(name: str, line_ends: Any) -> None:
    body = line_ends(fixture(name))
    assert run_bytewise(body) == run_stream(body)


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(FIXTURES),
    cuts=st.lists(st.integers(0, 4000), max_size=40),
    use_crlf=st.booleans(),
)
def test_any_split_of_a_stream_gives_the_same_result(
    name: str, cuts: list[int], use_crlf: bool
) -> None:
    body = fixture(name)
    if use_crlf:
        body = crlf(body)
    cuts = [c % (len(body) + 1) for c in cuts]
    assert run_stream(body, cuts) == run_stream(body)


# ----------------------------------------------------------------------------- properties

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_inputs = st.dictionaries(
    st.text(max_size=6),
    st.recursive(
        json_scalars,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
        ),
        max_leaves=8,
    ),
    max_size=4,
)
tool_names = st.text(alphabet="abcdefghij_", min_size=1, max_size=8)


@st.composite
def replies(draw: st.DrawFn) -> tuple[bytes, bytes, list[int]]:
    """A reply rendered both ways: a complete JSON message and an SSE stream with random
    piece boundaries, plus random chunk cuts for the stream."""
    content: list[dict[str, Any]] = []
    events: list[tuple[str, Any]] = []
    n_blocks = draw(st.integers(0, 4))
    for index in range(n_blocks):
        kind = draw(st.sampled_from(["text", "tool_use", "thinking"]))
        if kind == "text":
            pieces = draw(st.lists(st.text(max_size=10), max_size=4))
            content.append({"type": "text", "text": "".join(pieces)})
            events.extend(text_block(index, *pieces))
        elif kind == "tool_use":
            tool_input = draw(json_inputs)
            name = draw(tool_names)
            call_id = f"toolu_{index}"
            raw = json.dumps(tool_input, ensure_ascii=draw(st.booleans()))
            cuts = sorted(draw(st.lists(st.integers(0, len(raw)), max_size=4)))
            pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
            content.append({"type": "tool_use", "id": call_id, "name": name, "input": tool_input})
            events.extend(tool_block(index, call_id, name, *pieces))
        else:
            thinking = draw(st.text(max_size=10))
            content.append({"type": "thinking", "thinking": thinking, "signature": "sig"})
            start = {"type": "thinking", "thinking": ""}
            delta = {"type": "thinking_delta", "thinking": thinking}
            events.extend(
                [
                    (
                        "content_block_start",
                        {"type": "content_block_start", "index": index, "content_block": start},
                    ),
                    (
                        "content_block_delta",
                        {"type": "content_block_delta", "index": index, "delta": delta},
                    ),
                    ("content_block_stop", {"type": "content_block_stop", "index": index}),
                ]
            )
    stop_reason = draw(st.sampled_from(["end_turn", "tool_use", "max_tokens", "refusal"]))
    counts = draw(st.lists(st.integers(0, 10**6), min_size=4, max_size=4))
    start_usage = {
        "input_tokens": counts[0],
        "cache_creation_input_tokens": counts[1],
        "cache_read_input_tokens": counts[2],
        "output_tokens": 1,
    }
    complete = {
        "id": "msg_p",
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": stop_reason,
        "usage": {**start_usage, "output_tokens": counts[3]},
    }
    start_event = {"type": "message_start", "message": {"usage": start_usage, "content": []}}
    stream = stream_body(
        [
            ("message_start", start_event),
            *events,
            message_delta(stop_reason, output_tokens=counts[3]),
            STOP,
        ]
    )
    chunk_cuts = draw(st.lists(st.integers(0, len(stream)), max_size=12))
    return json.dumps(complete).encode(), stream, chunk_cuts


@settings(max_examples=80, deadline=None)
@given(replies())
def test_stream_and_complete_reply_agree_for_any_reply(
    reply: tuple[bytes, bytes, list[int]],
) -> None:
    complete, stream, cuts = reply
    whole_deltas, streamed = run_stream(stream)
    split_deltas, split = run_stream(stream, cuts)
    assert streamed == codec().decode("req-1", 200, (), complete)
    assert (split_deltas, split) == (whole_deltas, streamed)
    assert isinstance(streamed, ModelResponded)
    text = "".join(d.text for d in whole_deltas if isinstance(d, TextDelta))
    assert text == (streamed.message.content or "")
    for position, call in enumerate(streamed.message.tool_calls):
        pieces = [d for d in whole_deltas if isinstance(d, ToolCallDelta) and d.index == position]
        assert pieces[0] == ToolCallDelta(position, call.id, call.name)
        assert json.loads("".join(d.arguments for d in pieces)) == json.loads(call.arguments)
