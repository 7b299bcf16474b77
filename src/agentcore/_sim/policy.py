"""What the simulated model answers, and which requests fail on purpose.

The model follows the request, deterministically (every choice comes from a random generator
seeded with ``SimConfig.seed`` and a hash of the prompt text):

- It calls tools when tools are offered, ``tool_choice`` is not ``"none"`` and the
  conversation has fewer assistant tool-call turns than ``SimConfig.tool_rounds`` (or when
  ``tool_choice`` is ``"required"`` or names a tool). A turn makes 1 to
  ``max_parallel_calls`` calls (one if ``parallel_tool_calls`` is false) with arguments valid
  for the tool's parameter schema. With probability ``repeat_share`` a call's arguments are
  one of ``pool_size`` argument sets per tool that depend only on the seed and the tool name,
  so different conversations make identical calls; otherwise strings are made of words from
  the conversation's last user message.
- Otherwise it answers: JSON valid against the ``response_format`` schema; else, when the
  system prompt (or the last user message) carries a JSON schema (a fenced ```json block, or a
  JSON object following the words "JSON schema"), JSON valid against that; else, in
  ``json_object`` mode, a small JSON object; else ``answer_tokens`` tokens of plain text:
  short sentences about the content words of the last user message and of the tool results
  after it (see ``prose``).
- A reply longer than ``max_tokens`` (hidden reasoning tokens included) is cut: the visible
  text is cut to what fits, tool calls are dropped (their cut text is the content), and the
  finish reason is ``"length"``.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import orjson

from .config import SimConfig
from .prose import answer_text, content_words
from .request import ChatRequest, RequestedCall, ToolDefinition
from .schema_values import generate_value
from .template import render_body, render_reply
from .tokens import split_tokens

__all__ = ["FaultInjector", "Reply", "find_schema", "plan_reply", "prompt_digest"]

VOCABULARY = (
    "alpha", "archive", "batch", "bridge", "cache", "channel", "cluster", "commit", "config",
    "delta", "driver", "engine", "event", "filter", "garden", "gateway", "harbor", "index",
    "kernel", "lambda", "ledger", "matrix", "meadow", "module", "nebula", "orbit", "packet",
    "parser", "prefix", "quartz", "queue", "report", "river", "router", "schema", "signal",
    "socket", "stream", "summit", "tensor", "thread", "token", "vector", "window", "yield",
)  # fmt: skip
"""Words for strings when the conversation offers none, and for the shared argument pool."""

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_\-]{2,}")
_FENCED = re.compile(r"```(?:json)?[ \t]*\r?\n(.*?)```", re.DOTALL)
_SCHEMA_PHRASE = re.compile(r"json schema", re.IGNORECASE)
_DECODER = json.JSONDecoder()  # raw_decode: one JSON value at an offset of a longer text
_SCHEMA_KEYS = frozenset(
    {"type", "properties", "$ref", "anyOf", "oneOf", "allOf", "enum", "const", "items"}
)


@attrs.frozen
class Reply:
    """One planned assistant reply."""

    content: str | None
    """The text (``None`` on a tool-call turn)."""
    tool_calls: tuple[RequestedCall, ...]
    call_ids: tuple[str, ...]
    finish_reason: str
    """``"stop"``, ``"tool_calls"`` or ``"length"``."""
    visible_tokens: int
    """Tokens of the text the reply shows (content, or the rendered tool calls)."""
    reasoning_tokens: int

    @property
    def completion_tokens(self) -> int:
        """Every token decoded for the reply."""
        return self.visible_tokens + self.reasoning_tokens

    def rendered(self) -> str:
        """The reply as the chat template shows it in the conversation's next prompt."""
        return render_reply(self.content or "", self.tool_calls)


def prompt_digest(prompt: str, seed: int) -> bytes:
    """A 16-byte digest of a prompt text and the seed: the identity of a request's content."""
    hasher = hashlib.blake2b(f"{seed}\0".encode(), digest_size=16)
    hasher.update(prompt.encode())
    return hasher.digest()


def _looks_like_schema(value: Any) -> bool:
    return isinstance(value, dict) and not _SCHEMA_KEYS.isdisjoint(value)


def find_schema(text: str) -> Mapping[str, Any] | None:
    """The JSON schema a prompt text announces, if any.

    Looks at fenced ```json blocks first, then at the first JSON object after each mention
    of "JSON schema" (the last mention first).
    """
    for match in _FENCED.finditer(text):
        try:
            value = orjson.loads(match.group(1))
        except orjson.JSONDecodeError:
            continue
        if _looks_like_schema(value):
            return dict(value)
    for match in reversed(list(_SCHEMA_PHRASE.finditer(text))):
        start = text.find("{", match.end())
        if start < 0:
            continue
        try:
            value = _DECODER.raw_decode(text, start)[0]
        except json.JSONDecodeError:
            continue
        if _looks_like_schema(value):
            return dict(value)
    return None


def _answer_schema(request: ChatRequest) -> Mapping[str, Any] | None:
    if request.output_schema is not None:
        return request.output_schema
    texts = [m.content for m in request.messages if m.role in ("system", "developer")]
    users = [m.content for m in request.messages if m.role == "user"]
    for text in [*texts, *users[-1:]]:
        if "```" in text or "schema" in text.lower():
            schema = find_schema(text)
            if schema is not None:
                return schema
    return None


def _words(request: ChatRequest) -> Sequence[str]:
    for message in reversed(request.messages):
        if message.role == "user":
            words = list(dict.fromkeys(_WORD.findall(message.content[:4000])))[:64]
            return words or VOCABULARY
    return VOCABULARY


def _arguments(
    tool: ToolDefinition, rng: random.Random, words: Sequence[str], config: SimConfig
) -> str:
    if rng.random() < config.repeat_share:
        entry = rng.randrange(config.pool_size)
        pool_rng = random.Random(f"{config.seed}/pool/{tool.name}/{entry}")
        value = generate_value(tool.parameters, pool_rng, VOCABULARY)
    else:
        value = generate_value(tool.parameters, rng, words)
    return orjson.dumps(value).decode()


def _prose_words(request: ChatRequest) -> list[str]:
    """Content words of the last user message, then of the tool results that followed it."""
    texts: list[str] = []
    for message in reversed(request.messages):
        if message.role == "user":
            texts.append(message.content)
            break
        if message.role == "tool":
            texts.append(message.content)
    return content_words(*reversed(texts))


def _tool_turns(request: ChatRequest) -> int:
    return sum(1 for m in request.messages if m.role == "assistant" and m.tool_calls)


def plan_reply(request: ChatRequest, config: SimConfig, digest: bytes, number: int) -> Reply:
    """Decide the reply to ``request``.

    Args:
        request: the checked request.
        config: the simulator's configuration.
        digest: :func:`prompt_digest` of the rendered prompt (seeds every choice).
        number: the request's sequence number at the server (makes tool-call ids unique).

    Returns:
        The planned reply.
    """
    rng = random.Random(digest)
    words = _words(request)
    tools = request.tools
    wants_tools = bool(tools) and (
        request.tool_choice == "required"
        or (request.tool_choice == "auto" and _tool_turns(request) < config.tool_rounds)
    )
    content: str | None
    calls: tuple[RequestedCall, ...] = ()
    if wants_tools:
        if request.forced_tool is not None:
            chosen = [t for t in tools if t.name == request.forced_tool][:1]
        else:
            most = config.max_parallel_calls if request.parallel_tool_calls else 1
            chosen = [rng.choice(tools) for _ in range(rng.randint(1, most))]
        calls = tuple(RequestedCall(t.name, _arguments(t, rng, words, config)) for t in chosen)
        content, finish = None, "tool_calls"
    else:
        schema = _answer_schema(request)
        if schema is not None:
            content = orjson.dumps(generate_value(schema, rng, words)).decode()
        elif request.json_mode:
            text = answer_text(rng, _prose_words(request), 12)
            content = orjson.dumps({"answer": text}).decode()
        else:
            content = answer_text(rng, _prose_words(request), config.answer_tokens)
        finish = "stop"
    visible = split_tokens(render_body(content or "", calls))
    reasoning = config.reasoning_tokens
    limit = request.max_tokens
    if limit is not None and len(visible) + reasoning > limit:
        reasoning = min(reasoning, limit)
        visible = visible[: limit - reasoning]
        content, calls, finish = "".join(visible), (), "length"
    prefix = digest.hex()[:8]
    ids = tuple(f"call_{prefix}{number:x}_{i}" for i in range(len(calls)))
    return Reply(content, calls, ids, finish, len(visible), reasoning)


@attrs.define(eq=False)
class FaultInjector:
    """Decides which requests get an injected error.

    A request fails when a hash of its content digest and the number of times that content
    already failed falls below ``fail_rate``: the decision is deterministic, yet a retried
    request gets a fresh draw, so retries eventually pass. Two failures in three are 429s.
    """

    fail_rate: float
    seed: int
    _failures: dict[bytes, int] = attrs.field(factory=dict)

    def decide(self, digest: bytes) -> int | None:
        """The status to fail a request with (429 or 500), or ``None`` to serve it."""
        if not self.fail_rate:
            return None
        attempt = self._failures.get(digest, 0)
        draw = hashlib.blake2b(digest + f"/{attempt}/{self.seed}".encode(), digest_size=16).digest()
        if int.from_bytes(draw[:8], "big") >= self.fail_rate * 2**64:
            self._failures.pop(digest, None)
            return None
        if len(self._failures) > 100_000:
            self._failures.clear()
        self._failures[digest] = attempt + 1
        return 429 if int.from_bytes(draw[8:], "big") % 3 else 500
