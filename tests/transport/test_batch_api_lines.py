"""A Batch-API line that its batch left unanswered is what the module says it is: a server
error (retried into a later batch, with the batch named), not a sign of load."""

from __future__ import annotations

from typing import Any

import pytest

from agentcore import ErrorKind
from agentcore._codecs.anthropic import AnthropicCodec
from agentcore._codecs.openai import OpenAICodec
from agentcore._core.error_policy import policy_of
from agentcore._core.events import ModelFailed
from agentcore._transports import batch_api
from agentcore._transports.batch_api import BatchState, LineResult

_EXPIRED = BatchState("expired", True, batch_id="batch_7")


def _missing_from_the_results() -> LineResult:
    # What the batch client answers a line its ended batch has no result for.
    return batch_api.unanswered("batch batch_7 expired: the line has no result")


def _openai_error_line() -> LineResult:
    line = {"custom_id": "c1", "error": {"code": "batch_expired", "message": "not run in time"}}
    return batch_api._openai_line(line, _EXPIRED)[1]


def _anthropic_expired_line() -> LineResult:
    line = {"custom_id": "c1", "result": {"type": "expired"}}
    return batch_api._anthropic_line(line, _EXPIRED)[1]


def _decode(line: LineResult, codec: Any) -> ModelFailed:
    status, body = line
    event = codec.decode("r", status, (), body)
    assert isinstance(event, ModelFailed)
    return event


@pytest.mark.parametrize(
    ("line", "codec"),
    [
        ("openai error line", OpenAICodec(base_url="http://batch.invalid/v1", model="m")),
        ("anthropic expired line", AnthropicCodec(base_url="http://batch.invalid", model="m")),
    ],
)
def test_an_unanswered_line_is_a_server_error_naming_its_batch(line: str, codec: Any) -> None:
    result = _openai_error_line() if line.startswith("openai") else _anthropic_expired_line()
    error = _decode(result, codec).error
    assert error.kind is ErrorKind.SERVER
    assert error.retryable
    assert "batch_7" in error.message
    row = policy_of(error.kind)
    assert not row.slows_down and not row.pauses_fleet  # an ended batch is no sign of load


def test_a_line_missing_from_the_results_is_a_server_error_too() -> None:
    codec = OpenAICodec(base_url="http://batch.invalid/v1", model="m")
    error = _decode(_missing_from_the_results(), codec).error
    assert (error.kind, error.code) == (ErrorKind.SERVER, "batch_line_unanswered")
    assert "batch_7 expired" in error.message
