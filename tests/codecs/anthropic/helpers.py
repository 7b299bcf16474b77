"""Shared pieces of the Anthropic codec tests: fixture files, stream feeding, a codec."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

from agentcore._codecs.anthropic import AnthropicCodec
from agentcore._codecs.codec import Delta
from agentcore.core import ModelFailed, ModelResponded

HERE = Path(__file__).parent

SECRET = "sk-ant-test-0123456789-secret"


def codec(**options: Any) -> AnthropicCodec:
    return AnthropicCodec("https://api.anthropic.test", "claude-test", SECRET, **options)


def fixture(name: str) -> bytes:
    return (HERE / "fixtures" / name).read_bytes()


def golden(name: str) -> bytes:
    """A golden request body, re-encoded compactly with its key order kept."""
    return orjson.dumps(orjson.loads((HERE / "golden" / name).read_bytes()))


def sse(event: str, payload: Any) -> bytes:
    return f"event: {event}\ndata: ".encode() + orjson.dumps(payload) + b"\n\n"


def stream_body(events: Iterable[tuple[str, Any]]) -> bytes:
    return b"".join(sse(name, payload) for name, payload in events)


def run_stream(
    body: bytes, cuts: Sequence[int] = (), request_id: str = "req-1"
) -> tuple[list[Delta], ModelResponded | ModelFailed]:
    """Feed ``body`` split at the positions ``cuts``; return all deltas and the final event."""
    decoder = codec().stream_decoder(request_id)
    deltas: list[Delta] = []
    start = 0
    for cut in [*sorted(cuts), len(body)]:
        deltas.extend(decoder.feed(body[start:cut]))
        start = max(start, cut)
    return deltas, decoder.finish()


def run_bytewise(body: bytes) -> tuple[list[Delta], ModelResponded | ModelFailed]:
    return run_stream(body, range(1, len(body)))
