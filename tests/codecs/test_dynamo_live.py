"""The Dynamo dialect against a running Dynamo frontend + mocker (``-m dynamo``).

Start the stack with the scripted replies of ``fixtures/dynamo-1.6.1/script.json`` (see that
folder's README) and point ``AGENTCORE_DYNAMO_URL`` at it, e.g. ``http://127.0.0.1:18000``.
Dynamo answers unknown ``nvext`` / ``agent_hints`` keys and unknown top-level fields with
HTTP 400, so a 200 for every option combination shows the key table matches the server.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
from typing import Any
from urllib.parse import urlsplit

import pytest

from agentcore import ErrorKind, ModelParams
from agentcore._codecs.openai import OpenAICodec
from agentcore.core import (
    AgentHints,
    CallModel,
    ModelFailed,
    ModelResponded,
    OutputSpec,
    UserMessage,
)
from agentcore.wire import HttpRequest
from tests.codecs.openai_helpers import CLOCK, SYSTEM, WEATHER

pytestmark = pytest.mark.dynamo

MODEL = "tiny-mock"


@pytest.fixture(scope="module")
def base_url() -> str:
    url = os.environ.get("AGENTCORE_DYNAMO_URL")
    if not url:
        pytest.skip("AGENTCORE_DYNAMO_URL is not set (no Dynamo frontend to talk to)")
    return url.rstrip("/") + "/v1"


def send(request: HttpRequest) -> tuple[int, tuple[tuple[str, str], ...], bytes]:
    parts = urlsplit(request.url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        connection.request(request.method, parts.path, request.body, dict(request.headers))
        response = connection.getresponse()
        headers = tuple((k.lower(), v) for k, v in response.getheaders())
        return response.status, headers, response.read()
    finally:
        connection.close()


def call(key: str, *, hints: AgentHints | None = None, tools: bool = False) -> CallModel:
    return CallModel(
        request_id=f"live-{key}",
        messages=(SYSTEM, UserMessage("Weather and time in Paris?")),
        tools=(WEATHER, CLOCK) if tools else (),
        params=ModelParams(max_tokens=64),
        hints=hints or AgentHints(session_id="live-run", priority=2, expected_output_tokens=16),
        output=OutputSpec("Answer", {"type": "object"}),
    )


def replay(key: str) -> Any:
    return lambda c: [f"output_replay_id:{key}"]


def roundtrip(codec: OpenAICodec, c: CallModel, *, stream: bool) -> ModelResponded | ModelFailed:
    status, headers, body = send(codec.encode(c, stream=stream))
    if stream and status == 200:
        decoder = codec.stream_decoder(c.request_id)
        decoder.feed(body)
        return decoder.finish()
    return codec.decode(c.request_id, status, headers, body)


def test_every_option_combination_is_accepted(base_url: str) -> None:
    combos = itertools.product(
        (True, False), (True, False), ((), ("timing", "worker_id")), (None, 1), (True, False)
    )
    for priority, speculative, fields, strict, response_format in combos:
        codec = OpenAICodec(
            base_url=base_url,
            model=MODEL,
            dialect="dynamo",
            priority=priority,
            speculative_prefill=speculative,
            extra_fields=list(fields),
            strict_priority=strict,
            response_format=response_format,
            annotations=replay("greet"),
            cache_salt="tenant-a",
        )
        hints = AgentHints(
            session_id="live-run", parent_session_id="live-parent", priority=3,
            expected_output_tokens=16, final=True,
        )  # fmt: skip
        for stream in (False, True):
            event = roundtrip(codec, call("combo", hints=hints, tools=True), stream=stream)
            assert isinstance(event, ModelResponded), (priority, speculative, fields, event)
            assert event.message.content == "The answer is 42."
            assert (event.timing is not None) is bool(fields)


def test_latency_sensitivity_is_accepted(base_url: str) -> None:
    codec = OpenAICodec(
        base_url=base_url, model=MODEL, dialect="dynamo", priority=False, latency_sensitivity=1.2
    )
    assert isinstance(roundtrip(codec, call("latency"), stream=False), ModelResponded)


def test_scripted_tool_call_streams_back_as_a_tool_call(base_url: str) -> None:
    codec = OpenAICodec(base_url=base_url, model=MODEL, dialect="dynamo", annotations=replay("two"))
    event = roundtrip(codec, call("tools", tools=True), stream=True)
    assert isinstance(event, ModelResponded)
    assert [(t.name, json.loads(t.arguments)) for t in event.message.tool_calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {"tz": "CET"}),
    ]
    assert event.finish_reason == "tool_calls"
    assert event.usage.prompt_tokens > 0


def test_server_timing_is_read_back(base_url: str) -> None:
    codec = OpenAICodec(
        base_url=base_url,
        model=MODEL,
        dialect="dynamo",
        extra_fields=["timing", "worker_id"],
        annotations=replay("greet"),
    )
    for stream in (False, True):
        event = roundtrip(codec, call("timing"), stream=stream)
        assert isinstance(event, ModelResponded)
        assert event.timing is not None
        assert event.timing.worker_id is not None
        assert event.timing.ttft_ms is not None and event.timing.ttft_ms > 0
        assert event.usage.cached_tokens is not None


def test_the_server_really_refuses_unknown_nvext_keys(base_url: str) -> None:
    # Control for the test above: the frontend is strict, so a 200 there means something.
    codec = OpenAICodec(base_url=base_url, model=MODEL, dialect="dynamo")
    request = codec.encode(call("strict"))
    body = json.loads(request.body)
    body["nvext"]["agent_hints"]["deadline_ms"] = 5
    status, headers, raw = send(
        HttpRequest(request.method, request.url, request.headers, json.dumps(body).encode())
    )
    event = codec.decode("live-strict", status, headers, raw)
    assert isinstance(event, ModelFailed)
    assert (event.error.kind, event.error.status) == (ErrorKind.BAD_REQUEST, 400)
