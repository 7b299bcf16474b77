"""Response bodies in the OpenAI chat-completions wire format.

A complete reply is one ``chat.completion`` object. A streamed reply is a list of server-sent
event frames, each paired with the number of tokens the engine decodes before sending it:

1. a ``role`` chunk, right after the prefill (0 tokens);
2. content chunks of ``chunk_tokens`` tokens each, or per tool call one chunk with its
   ``index``, ``id``, ``type``, ``function.name`` and empty ``arguments``, then its arguments in
   pieces of ``chunk_tokens`` tokens (hidden reasoning tokens are decoded before the first);
3. a chunk with an empty delta and the ``finish_reason`` (any tokens not yet accounted for);
4. with ``stream_options.include_usage``, a chunk with ``choices: []`` and the usage;
5. ``data: [DONE]``.

The token counts of one stream add up to the reply's ``completion_tokens``, so a streamed
reply takes as long to decode as the same reply unstreamed.
"""

from __future__ import annotations

from typing import Any

import orjson

from .policy import Reply
from .template import render_body
from .tokens import split_tokens

__all__ = ["DONE_FRAME", "completion_body", "error_body", "stream_frames", "usage"]

DONE_FRAME = b"data: [DONE]\n\n"


def usage(prompt_tokens: int, cached_tokens: int, reply: Reply) -> dict[str, Any]:
    """The ``usage`` object of a reply."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": prompt_tokens + reply.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
    }


def _wire_calls(reply: Reply) -> list[dict[str, Any]]:
    return [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        for call_id, call in zip(reply.call_ids, reply.tool_calls, strict=True)
    ]


def completion_body(
    response_id: str,
    model: str,
    reply: Reply,
    usage: dict[str, Any],
    service_tier: str | None = None,
) -> bytes:
    """The JSON body of a complete (unstreamed) reply (``service_tier``: the tier it says it
    was served on, as OpenAI's replies do)."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = _wire_calls(reply)
    return orjson.dumps(
        {
            "id": response_id,
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": usage,
            **({} if service_tier is None else {"service_tier": service_tier}),
        }
    )


def error_body(message: str, kind: str, param: str | None = None, code: str | None = None) -> bytes:
    """An OpenAI-style error body: ``{"error": {message, type, param, code}}``."""
    return orjson.dumps({"error": {"message": message, "type": kind, "param": param, "code": code}})


def _groups(pieces: list[str], size: int) -> list[tuple[int, str]]:
    return [
        (len(pieces[i : i + size]), "".join(pieces[i : i + size]))
        for i in range(0, len(pieces), size)
    ]


def stream_frames(
    response_id: str,
    model: str,
    reply: Reply,
    usage: dict[str, Any] | None,
    chunk_tokens: int,
) -> list[tuple[int, bytes]]:
    """The frames of a streamed reply, each with the tokens decoded before it is sent.

    Args:
        response_id: the ``id`` shared by every chunk.
        model: the model name shared by every chunk.
        reply: the planned reply.
        usage: the usage object for a final usage chunk, or ``None`` for no usage chunk.
        chunk_tokens: tokens per content or arguments chunk.

    Returns:
        ``(tokens, frame)`` pairs in sending order, ending with ``data: [DONE]``.
    """
    head = b'{"id":' + orjson.dumps(response_id) + b',"object":"chat.completion.chunk"'
    head += b',"created":0,"model":' + orjson.dumps(model) + b',"choices":'

    def frame(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return b"data: " + head + orjson.dumps([choice]) + b"}\n\n"

    frames: list[tuple[int, bytes]] = [(0, frame({"role": "assistant", "content": None}))]
    owed = reply.reasoning_tokens
    if reply.tool_calls:
        for index, (call_id, call) in enumerate(zip(reply.call_ids, reply.tool_calls, strict=True)):
            pieces = split_tokens(call.arguments)
            call_tokens = len(split_tokens(render_body("", (call,))))
            delta = {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            frames.append(
                (owed + max(call_tokens - len(pieces), 0), frame({"tool_calls": [delta]}))
            )
            owed = 0
            for count, text in _groups(pieces, chunk_tokens):
                piece = {"index": index, "function": {"arguments": text}}
                frames.append((count, frame({"tool_calls": [piece]})))
    elif reply.content:
        for count, text in _groups(split_tokens(reply.content), chunk_tokens):
            frames.append((owed + count, frame({"content": text})))
            owed = 0
    spent = sum(tokens for tokens, _ in frames)
    frames.append((max(reply.completion_tokens - spent, 0), frame({}, reply.finish_reason)))
    if usage is not None:
        frames.append((0, b"data: " + head + b'[],"usage":' + orjson.dumps(usage) + b"}\n\n"))
    frames.append((0, DONE_FRAME))
    return frames
