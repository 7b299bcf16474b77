"""Classification of failed model requests: statuses, error bodies, headers, in-stream errors."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore import ErrorKind
from agentcore._codecs.classify import (
    MAX_MESSAGE_CHARS,
    classify_http_error,
    classify_status,
    classify_stream_error,
    connection_error,
    retry_after_seconds,
    truncated_stream,
)

DYNAMO = Path(__file__).parent / "fixtures" / "dynamo-1.6.1"

# status -> (kind, retryable)
STATUS_TABLE = [
    (400, ErrorKind.BAD_REQUEST, False),
    (401, ErrorKind.AUTH, False),
    (402, ErrorKind.QUOTA, False),
    (403, ErrorKind.AUTH, False),
    (404, ErrorKind.NOT_FOUND, False),
    (408, ErrorKind.TIMEOUT, True),
    (409, ErrorKind.CONFLICT, True),
    (413, ErrorKind.TOO_LARGE, False),
    (418, ErrorKind.BAD_REQUEST, False),
    (422, ErrorKind.BAD_REQUEST, False),
    (429, ErrorKind.RATE_LIMITED, True),
    (500, ErrorKind.SERVER, True),
    (502, ErrorKind.SERVER, True),
    (503, ErrorKind.OVERLOADED, True),
    (504, ErrorKind.SERVER, True),
    (529, ErrorKind.OVERLOADED, True),
    (302, ErrorKind.PROTOCOL, False),
]


@pytest.mark.parametrize(("status", "kind", "retryable"), STATUS_TABLE)
def test_status_alone_decides_kind_and_retryability(
    status: int, kind: ErrorKind, retryable: bool
) -> None:
    error = classify_status(status, ())
    assert (error.kind, error.retryable, error.status) == (kind, retryable, status)
    assert error.message == f"HTTP {status}"


@pytest.mark.parametrize(
    "code",
    [
        "insufficient_quota",
        "billing_error",
        "credit_balance_exhausted",
        "project_spend_limit_exceeded",
    ],
)
def test_quota_codes_on_429_are_final(code: str) -> None:
    error = classify_status(429, (("retry-after", "3"),), code=code, message="out of credit")
    assert error.kind is ErrorKind.QUOTA
    assert not error.retryable
    assert error.code == code


def test_rate_limit_429_is_retryable_with_its_code() -> None:
    error = classify_status(429, (), error_type="requests", code="rate_limit_exceeded")
    assert (error.kind, error.retryable, error.code) == (
        ErrorKind.RATE_LIMITED,
        True,
        "rate_limit_exceeded",
    )


def test_context_length_code_is_too_large() -> None:
    error = classify_status(
        400, (), error_type="invalid_request_error", code="context_length_exceeded"
    )
    assert (error.kind, error.retryable) == (ErrorKind.TOO_LARGE, False)


def test_context_length_message_from_vllm_is_too_large() -> None:
    body = orjson.dumps(
        {
            "error": {
                "message": "This model's maximum context length is 4096 tokens. However, you "
                "requested 5000 tokens.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        }
    )
    error = classify_http_error(400, (), body)
    assert error.kind is ErrorKind.TOO_LARGE
    assert error.code == "BadRequestError"


def test_overloaded_type_on_a_500_is_overloaded() -> None:
    error = classify_status(500, (), error_type="overloaded_error")
    assert (error.kind, error.retryable) == (ErrorKind.OVERLOADED, True)


@pytest.mark.parametrize(("flag", "status", "retryable"), [
    ("true", 400, True), ("false", 503, False), ("TRUE", 404, True), ("maybe", 503, True),
])  # fmt: skip
def test_x_should_retry_overrides_retryability(flag: str, status: int, retryable: bool) -> None:
    error = classify_status(status, (("x-should-retry", flag),))
    assert error.retryable is retryable


# ----------------------------------------------------------------------------- retry-after


@pytest.mark.parametrize(("headers", "expected"), [
    ((("retry-after", "7"),), 7.0),
    ((("retry-after", "1.5"),), 1.5),
    ((("retry-after-ms", "250"),), 0.25),
    ((("retry-after", "7"), ("retry-after-ms", "250")), 0.25),
    ((("retry-after-ms", "soon"), ("retry-after", "2")), 2.0),
    ((("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"),), None),
    ((("retry-after", "-3"),), None),
    ((("retry-after", "nan"),), None),
    ((("retry-after", "inf"),), None),
    ((), None),
])  # fmt: skip
def test_retry_after_seconds(headers: tuple[tuple[str, str], ...], expected: float | None) -> None:
    assert retry_after_seconds(headers) == expected


def test_classified_error_carries_retry_after() -> None:
    assert classify_status(429, (("retry-after", "12"),)).retry_after == 12.0
    assert classify_http_error(503, (("retry-after-ms", "1500"),), b"busy").retry_after == 1.5


# ----------------------------------------------------------------------------- body shapes


def test_nested_openai_error_body() -> None:
    body = (
        b'{"error":{"message":"Invalid key","type":"invalid_request_error",'
        b'"code":"invalid_api_key","param":null}}'
    )
    error = classify_http_error(401, (), body)
    assert (error.kind, error.message, error.code) == (
        ErrorKind.AUTH,
        "Invalid key",
        "invalid_api_key",
    )


def test_openai_insufficient_quota_body() -> None:
    body = (
        b'{"error":{"message":"You exceeded your current quota","type":"insufficient_quota",'
        b'"code":"insufficient_quota"}}'
    )
    error = classify_http_error(429, (), body)
    assert (error.kind, error.retryable) == (ErrorKind.QUOTA, False)


def test_flat_sglang_error_body() -> None:
    body = (
        b'{"object":"error","message":"The request queue is full.",'
        b'"type":"InternalServerError","param":null,"code":503}'
    )
    error = classify_http_error(503, (), body)
    assert (error.kind, error.retryable) == (ErrorKind.OVERLOADED, True)
    assert error.message == "The request queue is full."
    assert error.code == "InternalServerError"


def test_fastapi_detail_string_body() -> None:
    error = classify_http_error(404, (), b'{"detail":"Not Found"}')
    assert (error.kind, error.message) == (ErrorKind.NOT_FOUND, "Not Found")


def test_fastapi_validation_detail_list_is_kept_as_json_text() -> None:
    body = b'{"detail":[{"loc":["body","messages"],"msg":"field required"}]}'
    error = classify_http_error(422, (), body)
    assert error.kind is ErrorKind.BAD_REQUEST
    assert "field required" in error.message


def test_anthropic_error_body() -> None:
    body = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    error = classify_http_error(529, (("retry-after", "1"),), body)
    assert (error.kind, error.retryable, error.code, error.message) == (
        ErrorKind.OVERLOADED,
        True,
        "overloaded_error",
        "Overloaded",
    )
    assert error.retry_after == 1.0


def test_error_as_plain_string_field() -> None:
    error = classify_http_error(500, (), b'{"error":"engine crashed"}')
    assert (error.kind, error.message) == (ErrorKind.SERVER, "engine crashed")


def test_non_json_body_is_tolerated_and_truncated() -> None:
    page = b"<html>" + b"x" * 10_000 + b"</html>"
    error = classify_http_error(502, (), page)
    assert error.kind is ErrorKind.SERVER
    assert error.message.startswith("<html>")
    assert len(error.message) == MAX_MESSAGE_CHARS


def test_empty_and_invalid_utf8_bodies() -> None:
    assert classify_http_error(500, (), b"").message == "HTTP 500"
    assert classify_http_error(500, (), b"\xff\xfe").message == "\ufffd\ufffd"


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("error-unknown-nvext.json", ErrorKind.BAD_REQUEST),
        ("error-unknown-hint.json", ErrorKind.BAD_REQUEST),
        ("error-agent-context.json", ErrorKind.BAD_REQUEST),
        ("error-top-level-priority.json", ErrorKind.BAD_REQUEST),
        ("error-model-not-found.json", ErrorKind.NOT_FOUND),
    ],
)
def test_dynamo_error_bodies(name: str, kind: ErrorKind) -> None:
    status = int((DYNAMO / f"{name}.status").read_text())
    body = (DYNAMO / name).read_bytes()
    error = classify_http_error(status, (("content-type", "application/json"),), body)
    assert (error.kind, error.retryable, error.status) == (kind, False, status)
    assert error.message == orjson.loads(body)["message"]


def test_dynamo_unknown_nvext_message_names_the_field() -> None:
    body = (DYNAMO / "error-unknown-nvext.json").read_bytes()
    assert "unknown field `session_control`" in classify_http_error(400, (), body).message


# ----------------------------------------------------------------------------- in-stream


def test_stream_overload_is_retryable() -> None:
    error = classify_stream_error(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
    assert (error.kind, error.retryable, error.status) == (ErrorKind.OVERLOADED, True, None)


def test_stream_error_with_status_code_uses_the_status() -> None:
    error = classify_stream_error(
        {"error": {"message": "bad", "type": "BadRequestError", "code": 400}}
    )
    assert (error.kind, error.retryable, error.status) == (ErrorKind.BAD_REQUEST, False, 400)


def test_stream_error_of_unknown_type_is_a_retryable_server_error() -> None:
    error = classify_stream_error({"error": {"message": "worker died"}})
    assert (error.kind, error.retryable, error.message) == (ErrorKind.SERVER, True, "worker died")


def test_stream_rate_limit_type() -> None:
    error = classify_stream_error({"error": {"type": "rate_limit_error", "message": "slow down"}})
    assert (error.kind, error.retryable) == (ErrorKind.RATE_LIMITED, True)


def test_stream_error_without_message() -> None:
    assert classify_stream_error({"error": {}}).message == "error event in the response stream"


def test_connection_and_truncation_errors_are_retryable() -> None:
    for error in (connection_error("reset by peer"), truncated_stream("no [DONE]")):
        assert (error.kind, error.retryable, error.status) == (ErrorKind.CONNECTION, True, None)


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_error_keys = st.sampled_from(["error", "message", "type", "code", "detail", "object", "param"])


@settings(max_examples=100)
@given(
    status=st.integers(100, 599),
    payload=st.dictionaries(_error_keys, _json, max_size=5),
    headers=st.lists(
        st.tuples(
            st.sampled_from(["retry-after", "retry-after-ms", "x-should-retry"]),
            st.text(max_size=8),
        ),
        max_size=3,
    ),
)
def test_classification_never_raises(
    status: int, payload: dict[str, object], headers: list[tuple[str, str]]
) -> None:
    body = orjson.dumps(payload)
    error = classify_http_error(status, tuple(headers), body)
    assert error.status == status
    assert classify_http_error(status, tuple(headers), body[: len(body) // 2]).status == status
    assert classify_stream_error(payload).message
