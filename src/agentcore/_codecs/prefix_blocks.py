"""The wire of prefix-cache block alignment: an engine's block size, and its tokenization of a
chat request. Pure: builds requests and reads replies.

A prefix cache that keeps whole blocks of ``B`` tokens (vLLM's paged KV cache: 128 tokens on
CPUs, 16 by default on GPUs) reuses a shared prefix only up to its last block boundary, so the
tokens between that boundary and the end of what the batch's requests share are computed again
by every request. A batch pads its shared prefix to the next boundary
(:mod:`agentcore._tasks.align`); this module is what it asks the engine for, per the dialect
record's ``prefix_blocks``:

- ``vllm``: the block size from ``GET /metrics``, the labels of the
  ``vllm:cache_config_info`` gauge (``cache_hit_alignment_tokens`` where the engine says it, the
  granularity at which hits land, else ``block_size``; nothing when ``enable_prefix_caching``
  is ``False``), and a request's prompt tokens from ``POST /tokenize`` with the request's
  ``messages`` and ``tools`` (and ``chat_template_kwargs`` when the request carries them), which
  vLLM renders with the chat template of its chat endpoint. Both routes sit outside ``/v1``.
"""

from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import urlsplit

import attrs
import orjson

from .http import HttpRequest

__all__ = [
    "BlockSize",
    "PrefixBlocks",
    "block_size_request",
    "read_block_size",
    "read_tokens",
    "tokenize_request",
]

PrefixBlocks = Literal["vllm"]
"""How an engine reports its prefix cache's block size and tokenizes a chat request."""

_INFO = re.compile(r"^vllm:cache_config_info\{(?P<labels>[^}]*)\}\s", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_CHAT_FIELDS = ("model", "messages", "tools", "chat_template_kwargs")
"""The fields of a chat request that decide how vLLM renders its prompt."""


@attrs.frozen
class BlockSize:
    """What an engine said about its prefix cache's blocks."""

    tokens: int | None
    """Tokens per block at which cache hits land; ``None`` when unknown or caching is off."""
    problem: str = ""
    """Why ``tokens`` is ``None``."""


def _root(base_url: str) -> str:
    parts = urlsplit(base_url)
    return f"{parts.scheme}://{parts.netloc}"


def block_size_request(base_url: str) -> HttpRequest:
    """``GET /metrics`` of the server at ``base_url`` (its ``/v1`` base or its root)."""
    return HttpRequest("GET", f"{_root(base_url)}/metrics", (("accept", "text/plain"),))


def read_block_size(text: str) -> BlockSize:
    """The block size in a ``/metrics`` page (see the module docstring)."""
    found = _INFO.search(text)
    if found is None:
        return BlockSize(None, "/metrics has no vllm:cache_config_info")
    labels = dict(_LABEL.findall(found.group("labels")))
    if labels.get("enable_prefix_caching") == "False":
        return BlockSize(None, "the server's prefix caching is off")
    for name in ("cache_hit_alignment_tokens", "block_size"):
        value = labels.get(name, "")
        if value.isdigit() and int(value) > 0:
            return BlockSize(int(value))
    return BlockSize(None, "vllm:cache_config_info names no block size")


def tokenize_request(base_url: str, chat: HttpRequest) -> HttpRequest:
    """``POST /tokenize`` for the prompt of ``chat``, a chat-completions request as the codec
    wrote it (so its messages and tools are the bytes the engine will render)."""
    body: dict[str, Any] = orjson.loads(chat.body)
    fields = {name: body[name] for name in _CHAT_FIELDS if name in body}
    fields["add_generation_prompt"] = True
    headers = tuple((n, v) for n, v in chat.headers if n in ("authorization", "content-type"))
    return HttpRequest("POST", f"{_root(base_url)}/tokenize", headers, orjson.dumps(fields))


def read_tokens(body: bytes) -> list[int] | None:
    """The token ids of a ``/tokenize`` reply, ``None`` when it holds none."""
    try:
        reply = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    tokens = reply.get("tokens") if isinstance(reply, dict) else None
    if not isinstance(tokens, list) or not all(type(t) is int for t in tokens):
        return None
    return tokens
