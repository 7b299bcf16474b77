"""The incremental SSE decoder against the WHATWG "Interpreting an event stream" rules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore.wire import SSEDecoder, SSEEvent
from tests.codecs.openai_helpers import bytewise, split_at


def decode_whole(data: bytes) -> list[SSEEvent]:
    decoder = SSEDecoder()
    return decoder.feed(data) + decoder.finish()


def decode_pieces(pieces: list[bytes]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for piece in pieces:
        events += decoder.feed(piece)
    return events + decoder.finish()


# ----------------------------------------------------------------------------- line endings


@pytest.mark.parametrize("eol", [b"\n", b"\r", b"\r\n"], ids=["lf", "cr", "crlf"])
def test_every_line_ending_terminates_lines_and_events(eol: bytes) -> None:
    data = b"data: one" + eol + eol + b"data: two" + eol + eol
    assert [e.data for e in decode_whole(data)] == ["one", "two"]


def test_mixed_line_endings_in_one_stream() -> None:
    data = b"data: a\r\ndata: b\rdata: c\n\r\n"
    assert decode_whole(data) == [SSEEvent(data="a\nb\nc")]


def test_crlf_split_across_pieces_is_one_line_ending() -> None:
    # If the CR ending piece one and the LF starting piece two were two line endings, the
    # LF would be an empty line and dispatch the event early, splitting it in two.
    pieces = [b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]
    assert decode_pieces(pieces) == [SSEEvent(data="a\nb")]


def test_lone_cr_at_piece_end_followed_by_data_is_a_line_ending() -> None:
    pieces = [b"data: a\r", b"data: b\r", b"\r"]
    assert decode_pieces(pieces) == [SSEEvent(data="a\nb")]


def test_cr_then_empty_piece_then_lf_is_still_one_line_ending() -> None:
    pieces = [b"data: a\r", b"", b"\n", b"\n"]
    assert decode_pieces(pieces) == [SSEEvent(data="a")]


# ----------------------------------------------------------------------------- fields


def test_comments_are_ignored() -> None:
    data = b": keep-alive\n\n:ping\ndata: x\n: in the middle\n\n"
    assert decode_whole(data) == [SSEEvent(data="x")]


def test_multiline_data_joins_with_lf() -> None:
    data = b'data: {"a":\ndata:  1}\ndata\ndata:\n\n'
    # second line keeps one of its two leading spaces; bare `data` and `data:` add empty lines
    assert decode_whole(data) == [SSEEvent(data='{"a":\n 1}\n\n')]


def test_only_one_leading_space_of_a_value_is_removed() -> None:
    assert decode_whole(b"data:   spaced\n\n") == [SSEEvent(data="  spaced")]
    assert decode_whole(b"data:tight\n\n") == [SSEEvent(data="tight")]


def test_value_is_split_at_the_first_colon_only() -> None:
    assert decode_whole(b"data: a: b: c\n\n") == [SSEEvent(data="a: b: c")]


def test_event_type_applies_to_one_event_only() -> None:
    data = b"event: content_block_delta\ndata: 1\n\ndata: 2\n\n"
    assert decode_whole(data) == [
        SSEEvent(event="content_block_delta", data="1"),
        SSEEvent(event="message", data="2"),
    ]


def test_empty_event_field_means_message() -> None:
    assert decode_whole(b"event:\ndata: x\n\n") == [SSEEvent(event="message", data="x")]


def test_last_event_id_persists_across_events() -> None:
    data = b"id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n"
    assert decode_whole(data) == [
        SSEEvent(data="a", id="7"),
        SSEEvent(data="b", id="7"),
        SSEEvent(data="c", id=""),
    ]


def test_id_containing_nul_is_ignored() -> None:
    data = b"id: good\ndata: a\n\nid: ba\x00d\ndata: b\n\n"
    assert [e.id for e in decode_whole(data)] == ["good", "good"]


def test_retry_with_digits_only_sets_reconnection_time() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"retry: 1500\n\nretry: 2x\n\nretry: \xc2\xb2\n\n")
    assert decoder.retry == 1500


def test_unknown_fields_are_ignored() -> None:
    assert decode_whole(b"foo: bar\ndata: x\nbaz\n\n") == [SSEEvent(data="x")]


def test_event_without_data_is_not_dispatched_and_resets_the_type() -> None:
    # Dynamo's annotation events look like this: a name and a comment, no data.
    data = b'event: formatted_prompt\n: "<|im_start|>"\n\ndata: {"x":1}\n\n'
    assert decode_whole(data) == [SSEEvent(event="message", data='{"x":1}')]


def test_id_only_and_retry_only_blocks_dispatch_nothing() -> None:
    assert decode_whole(b"id: 1\n\nretry: 10\n\n") == []


# ----------------------------------------------------------------------------- stream edges


def test_bom_is_stripped_at_the_start_only() -> None:
    data = b"\xef\xbb\xbfdata: a\n\ndata: \xef\xbb\xbfb\n\n"
    assert [e.data for e in decode_whole(data)] == ["a", "\ufeffb"]


def test_bom_split_across_pieces_is_stripped() -> None:
    pieces = [b"\xef", b"\xbb", b"\xbfdata: a\n\n"]
    assert decode_pieces(pieces) == [SSEEvent(data="a")]


def test_a_bom_after_a_leading_event_is_data() -> None:
    # A second BOM at the start of a later piece is content, not a stream start.
    pieces = [b"data: a\n\n", b"\xef\xbb\xbfdata: b\n\n"]
    assert decode_pieces(pieces) == [SSEEvent(data="a")]


def test_pending_event_is_discarded_at_end_of_stream() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: complete\n\ndata: cut off\n") == [SSEEvent(data="complete")]
    assert decoder.pending
    assert decoder.finish() == []
    assert not decoder.pending


def test_unterminated_last_line_is_discarded() -> None:
    assert decode_whole(b"data: a\n\ndata: [DONE]") == [SSEEvent(data="a")]


def test_invalid_utf8_becomes_replacement_character() -> None:
    assert decode_whole(b"data: \xff\xfe ok\n\n") == [SSEEvent(data="\ufffd\ufffd ok")]


def test_utf8_sequence_split_across_pieces_is_reassembled() -> None:
    encoded = "data: caf\u00e9 \u2603\n\n".encode()
    assert decode_pieces(bytewise(encoded)) == [SSEEvent(data="caf\u00e9 \u2603")]


def test_truncated_utf8_at_end_of_stream_does_not_raise() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"data: \xe2\x98")
    assert decoder.finish() == []


def test_protocols_example_stream() -> None:
    data = (
        b": keep-alive\r\n"
        b"event: content_block_delta\r\n"
        b'data: {"type":"content_block_delta",\n'
        b'data: "index":0}\r\n'
        b"\r\n"
        b"data: [DONE]\n\n"
    )
    assert decode_whole(data) == [
        SSEEvent(event="content_block_delta", data='{"type":"content_block_delta",\n"index":0}'),
        SSEEvent(event="message", data="[DONE]"),
    ]


# ----------------------------------------------------------------------------- split invariance

_LINES = st.sampled_from(
    [
        b"data: hello",
        b'data: {"a": 1}',
        b"data:",
        b"data",
        b"event: ping",
        b"event: error",
        b"id: 42",
        b"id: a\x00b",
        b"retry: 300",
        b": comment",
        b"",
        b"data: caf\xc3\xa9 \xe2\x98\x83",
        b"data: \xff broken",
        b"\xef\xbb\xbfdata: bom",
        b"field without colon",
    ]
)
_EOLS = st.sampled_from([b"\n", b"\r", b"\r\n"])


@st.composite
def sse_streams(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(st.tuples(_LINES, _EOLS), max_size=25))
    return b"".join(line + eol for line, eol in lines) + draw(st.sampled_from([b"", b"\n", b"da"]))


@settings(max_examples=200)
@given(data=sse_streams(), cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_any_split_gives_the_same_events(data: bytes, cuts: list[int]) -> None:
    whole = decode_whole(data)
    assert decode_pieces(split_at(data, cuts)) == whole
    assert decode_pieces(bytewise(data)) == whole


@settings(max_examples=200)
@given(data=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300), max_size=8))
def test_arbitrary_bytes_never_raise_and_split_does_not_matter(
    data: bytes, cuts: list[int]
) -> None:
    assert decode_pieces(split_at(data, cuts)) == decode_whole(data)
