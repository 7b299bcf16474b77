"""The lean transport's sans-IO HTTP/1.1 framing: request bytes and the one response pump."""

from __future__ import annotations

import itertools

import h11
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentcore._transports.http11 import (
    END,
    NEED_DATA,
    Origin,
    RequestEncoder,
    ResponseReader,
    decode_headers,
)
from agentcore.wire import HttpRequest, TransportError

ORIGIN = Origin("http", "127.0.0.1", 8000)
CHUNKED = (
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-type: text/event-stream\r\n\r\n"
    b"5\r\nhello\r\n1;ext=1\r\n \r\n5\r\nworld\r\n0\r\nx-trailer: 1\r\n\r\n"
)
SIZED = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\nhello world"


def _reader(max_reply: int | None = None) -> ResponseReader:
    encoded = RequestEncoder(ORIGIN).encode(HttpRequest("POST", "http://127.0.0.1:8000/v1/x"))
    return ResponseReader(h11.Connection(h11.CLIENT), encoded.standin, max_reply)


def _drain(reader: ResponseReader, pieces: list[bytes]) -> tuple[list[int], bytes, bool]:
    """Feed ``pieces`` one by one, pumping events after each: (statuses, body, ended)."""
    statuses: list[int] = []
    body = b""
    ended = False
    for piece in pieces:
        reader.feed(piece)
        while (got := reader.next_event()) is not NEED_DATA:
            if got is END:
                ended = True
                break
            if isinstance(got, h11.Response):
                statuses.append(got.status_code)
            else:
                assert isinstance(got, bytes | bytearray)
                assert got, "body bytes are never empty"
                body += got
    return statuses, body, ended


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges) if b > a]


@pytest.mark.parametrize(("response", "body"), [(CHUNKED, b"hello world"), (SIZED, b"hello world")])
@given(cuts=st.lists(st.integers(min_value=0), max_size=12))
def test_any_split_of_a_response_gives_the_same_head_body_and_end(
    response: bytes, body: bytes, cuts: list[int]
) -> None:
    statuses, got, ended = _drain(_reader(), _split(response, cuts))
    assert statuses == [200]
    assert got == body
    assert ended


def test_the_head_is_returned_with_its_headers_before_any_body_byte() -> None:
    reader = _reader()
    reader.feed(CHUNKED)
    head = reader.next_event()
    assert isinstance(head, h11.Response)
    assert ("content-type", "text/event-stream") in decode_headers(head)
    assert reader.head is head


def test_a_peer_close_inside_a_chunked_body_is_a_closed_error() -> None:
    reader = _reader()
    with pytest.raises(TransportError) as caught:
        _drain(reader, [CHUNKED[:100], b""])
    assert caught.value.kind == "closed"
    assert caught.value.response_started


def test_a_peer_close_before_any_byte_says_the_server_did_not_respond() -> None:
    reader = _reader()
    with pytest.raises(TransportError, match="before responding") as caught:
        _drain(reader, [b""])
    assert caught.value.kind == "closed"
    assert not caught.value.response_started


def test_body_bytes_past_the_cap_fail_as_too_large_whichever_framing() -> None:
    for response in (CHUNKED, SIZED.replace(b"content-length: 11", b"connection: close")):
        with pytest.raises(TransportError) as caught:
            _drain(_reader(max_reply=8), [response, b""])
        assert caught.value.kind == "too_large"


def test_a_small_body_is_joined_to_the_head_and_a_large_one_is_not() -> None:
    encoder = RequestEncoder(ORIGIN)
    small = encoder.encode(HttpRequest("POST", "http://127.0.0.1:8000/v1/x", (), b"{}"))
    assert small.body is None
    assert small.head.endswith(b"content-length: 2\r\n\r\n{}")
    large = encoder.encode(HttpRequest("POST", "http://127.0.0.1:8000/v1/x", (), b"x" * 70000))
    assert large.body == b"x" * 70000
    assert large.head.startswith(b"POST /v1/x HTTP/1.1\r\nhost: 127.0.0.1:8000\r\n")
