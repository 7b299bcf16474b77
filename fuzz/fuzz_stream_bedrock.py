"""Fuzz target for the Bedrock ConverseStream decoder (AWS event-stream frames, botocore).

Invariant checked on every input: the decoder never raises, and feeding a body whole, in the
pieces the input chooses, or byte by byte yields the same deltas and the same final event.

Input layout: the first byte ``k`` (mod 16) is the number of split bytes that follow; each of
those is the length of one piece; the rest of the input is the response body.

With atheris installed: ``python fuzz/fuzz_stream_bedrock.py -atheris_runs=100000 [corpus]``.
Without it the same command runs a bounded mutation loop over built-in seed streams.
``frame`` builds event-stream frames (the tests' loopback Converse server uses it too).
Needs botocore (``pip install 'agentcore[bedrock]'``).
"""

from __future__ import annotations

import binascii
import random
import struct
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from agentcore._codecs.bedrock import BedrockStreamDecoder
from agentcore._codecs.codec import Delta
from agentcore.core import ModelFailed, ModelResponded

if (_HERE := str(Path(__file__).resolve().parent)) not in sys.path:  # when loaded by path
    sys.path.insert(0, _HERE)  # for _harness.py
from _harness import Target, check_split_invariance, decoder_outcome, mutate_bytes, run_framed


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message: prelude (lengths and their CRC32), string headers,
    payload, and the CRC32 of everything before it."""
    encoded = b""
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        encoded += struct.pack("!B", len(raw_name)) + raw_name
        encoded += struct.pack("!BH", 7, len(raw_value)) + raw_value
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack("!II", total, len(encoded))
    prelude += struct.pack("!I", binascii.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + encoded + payload
    return message + struct.pack("!I", binascii.crc32(message) & 0xFFFFFFFF)


def event(name: str, payload: Any) -> bytes:
    """An ``event`` frame of ConverseStream with a JSON payload."""
    headers = {":event-type": name, ":content-type": "application/json", ":message-type": "event"}
    return frame(headers, orjson.dumps(payload))


def exception(name: str, message: str) -> bytes:
    """An ``exception`` frame (an error inside the stream)."""
    headers = {
        ":exception-type": name,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return frame(headers, orjson.dumps({"message": message}))


def reply(text: str = "", tool: tuple[str, str, list[str]] | None = None) -> bytes:
    """A whole ConverseStream reply: optional text, an optional tool use (id, name, input
    fragments), the stop and the usage."""
    parts = [event("messageStart", {"role": "assistant"})]
    index = 0
    if text:
        for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
            parts.append(
                event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}})
            )
        parts.append(event("contentBlockStop", {"contentBlockIndex": 0}))
        index = 1
    if tool is not None:
        call_id, name, fragments = tool
        start = {"toolUse": {"toolUseId": call_id, "name": name}}
        parts.append(event("contentBlockStart", {"contentBlockIndex": index, "start": start}))
        for fragment in fragments:
            delta = {"toolUse": {"input": fragment}}
            parts.append(event("contentBlockDelta", {"contentBlockIndex": index, "delta": delta}))
        parts.append(event("contentBlockStop", {"contentBlockIndex": index}))
    reason = "tool_use" if tool is not None else "end_turn"
    parts.append(event("messageStop", {"stopReason": reason}))
    usage = {"inputTokens": 12, "outputTokens": 7, "totalTokens": 19, "cacheReadInputTokens": 4}
    parts.append(event("metadata", {"usage": usage, "metrics": {"latencyMs": 120}}))
    return b"".join(parts)


def seeds() -> list[bytes]:
    """Small, valid and invalid, streams to start mutating from."""
    tool = ("tooluse_1", "grep", ['{"pat": "TO', 'DO"}'])
    both = reply("hello there", tool)
    return [
        reply("hello there"),
        both,
        reply(tool=tool),
        event("messageStart", {"role": "assistant"}) + exception("throttlingException", "slow"),
        both[: len(both) // 2],
        both[:40] + b"\x00" + both[41:],
    ]


def _run(body: bytes, pieces: Sequence[int]) -> tuple[list[Delta], ModelResponded | ModelFailed]:
    return decoder_outcome(BedrockStreamDecoder("fuzz"), body, pieces)


def check(body: bytes, pieces: Sequence[int]) -> None:
    """Raise ``AssertionError`` if any way of feeding ``body`` disagrees with feeding it whole."""
    check_split_invariance(_run, body, pieces)


def TestOneInput(data: bytes) -> None:
    """Fuzzer entry point (see the module docstring for the input layout)."""
    run_framed(check, data)


_TOKENS = [
    b"\x00",
    b"\xff",
    b"\x07",
    b":event-type",
    b":message-type",
    b"contentBlockDelta",
    b"contentBlockStart",
    b"messageStop",
    b"exception",
    b'{"contentBlockIndex":0',
    b"toolUse",
]


def mutate(rng: random.Random, data: bytes, corpus: Sequence[bytes]) -> bytes:
    """A random edit of ``data``: flip, insert a token, delete, duplicate, splice or cut."""
    return mutate_bytes(rng, data, corpus, _TOKENS)


TARGET = Target("bedrock", __doc__, TestOneInput, seeds, mutate)
fallback = TARGET.fallback

if __name__ == "__main__":  # pragma: no cover
    sys.exit(TARGET.main(sys.argv))
