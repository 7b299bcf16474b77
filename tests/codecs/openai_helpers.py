"""Shared builders for the OpenAI-compatible codec tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentcore import ModelParams
from agentcore._codecs.codec import Delta
from agentcore._codecs.openai import OpenAICodec
from agentcore.core import (
    AgentHints,
    AssistantMessage,
    CallModel,
    ModelFailed,
    ModelResponded,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from agentcore.wire import TextDelta, ToolCallDelta

FIXTURES = Path(__file__).parent / "fixtures"
DYNAMO = FIXTURES / "dynamo-1.6.1"

WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
        "required": ["city"],
    },
)
CLOCK = ToolSpec(
    name="get_time",
    description="Current time in a time zone",
    parameters={"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
)
SYSTEM = SystemMessage("You are terse.")


def dynamo_fixture(name: str) -> bytes:
    return (DYNAMO / name).read_bytes()


def dynamo_request(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DYNAMO / "requests" / name).read_text())
    return loaded


def codec(dialect: str = "openai", **options: Any) -> OpenAICodec:
    return OpenAICodec(base_url="http://127.0.0.1:8000/v1", model="m", dialect=dialect, **options)


def tool_turn_call(
    request_id: str = "req-1",
    *,
    hints: AgentHints | None = None,
    params: ModelParams | None = None,
) -> CallModel:
    """A second-turn call: the model asked for a tool and got its result."""
    return CallModel(
        request_id=request_id,
        messages=(
            SYSTEM,
            UserMessage("Weather in Paris?"),
            AssistantMessage(None, (ToolCall("call_1", "get_weather", '{"city": "Paris"}'),)),
            ToolMessage("call_1", "get_weather", "18 C, clear"),
        ),
        tools=(WEATHER, CLOCK),
        params=params or ModelParams(max_tokens=64, temperature=0.2),
        hints=hints or AgentHints(session_id="run-1", turn=1, priority=3),
    )


def run_stream(
    c: OpenAICodec, pieces: list[bytes], request_id: str = "req-1"
) -> tuple[list[Delta], ModelResponded | ModelFailed]:
    decoder = c.stream_decoder(request_id)
    deltas: list[Delta] = []
    for piece in pieces:
        deltas += decoder.feed(piece)
    return deltas, decoder.finish()


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(max(c, 0), len(data)) for c in cuts})
    pieces, start = [], 0
    for point in points:
        pieces.append(data[start:point])
        start = point
    pieces.append(data[start:])
    return pieces


def delta_text(deltas: list[Delta]) -> str:
    return "".join(d.text for d in deltas if isinstance(d, TextDelta))


def delta_arguments(deltas: list[Delta]) -> dict[int, str]:
    joined: dict[int, str] = {}
    for d in deltas:
        if isinstance(d, ToolCallDelta):
            joined[d.index] = joined.get(d.index, "") + d.arguments
    return joined


def sse(*chunks: dict[str, Any] | str, done: bool = True) -> bytes:
    """An OpenAI-style event stream: one ``data:`` line per chunk, then ``[DONE]``."""
    out = b""
    for chunk in chunks:
        text = chunk if isinstance(chunk, str) else json.dumps(chunk)
        out += b"data: " + text.encode() + b"\n\n"
    if done:
        out += b"data: [DONE]\n\n"
    return out


def chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": choices,
        **extra,
    }
