"""Errors read as one line of text (kind, status, message) for logs and JSONL."""

from __future__ import annotations

from agentcore import AbortKind, AbortReason, ErrorKind, ModelError, ToolError


def test_a_model_error_reads_kind_status_and_message() -> None:
    error = ModelError(ErrorKind.RATE_LIMITED, "slow down", 429, retryable=True)
    assert str(error) == "rate_limited (HTTP 429): slow down"


def test_a_model_error_without_a_response_has_no_status() -> None:
    assert str(ModelError(ErrorKind.CONNECTION, "refused")) == "connection: refused"


def test_line_breaks_in_messages_become_spaces() -> None:
    error = ModelError(ErrorKind.SERVER, "upstream\r\nfailed\nbadly", 502)
    assert str(error) == "server (HTTP 502): upstream failed badly"
    assert str(ToolError("ValueError", "bad\nvalue")) == "ValueError: bad value"


def test_an_abort_reason_names_its_kind_and_model_error_once() -> None:
    error = ModelError(ErrorKind.BAD_REQUEST, "bad field", 400)
    reason = AbortReason(AbortKind.MODEL_FAILED, error.message, error)
    assert str(reason) == "model_failed: bad_request (HTTP 400): bad field"
    other = AbortReason(AbortKind.MODEL_FAILED, "gave up", error)
    assert str(other) == "model_failed: gave up (bad_request (HTTP 400): bad field)"
    assert str(AbortReason(AbortKind.MAX_TURNS, "still calling")) == "max_turns: still calling"


def test_repr_stays_the_full_value() -> None:
    reason = AbortReason(AbortKind.CANCELLED, "cancelled")
    assert repr(reason).startswith("AbortReason(kind=<AbortKind.CANCELLED")
