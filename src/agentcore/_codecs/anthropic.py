"""Codec for the Anthropic Messages API (``POST /v1/messages``).

Requests
--------
The transcript is translated into the Messages API shape:

- the leading :class:`SystemMessage` values become the ``system`` list of text blocks; a system
  message met later in the transcript (the API has no system role inside ``messages``) becomes
  user text at its place;
- user text becomes a ``user`` turn, an :class:`AssistantMessage` an ``assistant`` turn with a
  text block followed by one ``tool_use`` block per call;
- tool results become ``tool_result`` blocks of a ``user`` turn, so the results of parallel
  calls travel together in one message, ahead of any user text that shares the turn;
- adjacent turns of the same role are merged (the API wants strictly alternating roles), and
  text that is empty or only whitespace is left out (the API refuses such blocks).

Tool-call arguments travel as JSON text in :class:`ToolCall`, but ``tool_use.input`` must be an
object. Arguments that are not a JSON object (invalid JSON, usually a reply cut short) are sent
as ``{"_raw_arguments": "<the text as produced>"}``: the model sees what it wrote next to the
error the loop already returned for that call; blank arguments are sent as ``{}``. Call ids are
restricted by the API to ``[A-Za-z0-9_-]``; other characters (ids minted by another backend) are
replaced by ``_`` in ``tool_use.id`` and ``tool_result.tool_use_id`` alike.

With ``cache_prefix`` (the default) the shared prefix of every run, tool definitions and system
prompt, ends in ``cache_control`` breakpoints (on the last tool and on the last system block).
Body keys are written in a fixed order (model, system, tools, messages, then the parameters) so
that consecutive requests of one run share a byte-identical prefix. The API has no structured
output setting; ``CallModel.output`` is ignored (the loop states the schema in its instructions).

Replies
-------
A complete reply is one ``message`` object: text blocks are joined, ``tool_use`` blocks become
:class:`ToolCall` values whose arguments are the compact JSON of ``input``; other blocks
(thinking, server tools) are skipped. ``input_tokens`` excludes cache reads and writes, so the
prompt size is ``input + cache_creation + cache_read`` tokens. Error statuses are classified by
:mod:`agentcore._codecs.classify`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import orjson

from .._core.errors import ConfigError
from .._core.events import ModelFailed, ModelResponded
from .._core.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from .classify import classify_stream_error, protocol_error, reply_payload, truncated_stream
from .codec import TextDelta, ToolCallDelta
from .common import (
    image_base64,
    no_service_tier,
    plain_json,
    put_sampling,
    tool_input,
    wire_count,
)
from .http import HttpRequest
from .jsonbody import loads
from .sse import SSEDecoder

if TYPE_CHECKING:
    from .._core.events import CallModel, ModelError
    from .._core.messages import Image, Message, ModelParams, ToolSpec
    from .codec import Delta
    from .http import Headers
    from .sse import SSEEvent

__all__ = ["AnthropicCodec", "AnthropicStreamDecoder"]

DEFAULT_VERSION = "2023-06-01"
"""The ``anthropic-version`` header; the Messages API has answered to it since its release."""

DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` is mandatory in this API. 4096 is the smallest output limit among current
models, so it is accepted everywhere and still leaves room for a long tool call."""

_STOP_REASONS = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
"""``stop_reason`` values with an OpenAI-style equivalent; the others are kept as they are."""

_TOOL_CHOICES: dict[str, dict[str, str]] = {
    "auto": {"type": "auto"},
    "none": {"type": "none"},
    "required": {"type": "any"},
}

_CACHE_TTLS = (None, "5m", "1h")
_BAD_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")

_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)

_STREAM_EVENTS = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "error",
    }
)
"""Event names whose payload must be a JSON object; any other event may carry anything."""

_DELTA_PIECES: dict[str, tuple[str, str]] = {
    "text_delta": ("text", "text"),
    "input_json_delta": ("tool_use", "partial_json"),
}
"""The delta types the stream decoder reads: the kind of block each grows, and the field of
the piece it adds (the other delta types are ignored)."""


# ----------------------------------------------------------------------------- small helpers


def _usage(counts: Mapping[str, int | None]) -> Usage:
    read = counts.get("cache_read_input_tokens")
    prompt = (
        (counts.get("input_tokens") or 0)
        + (counts.get("cache_creation_input_tokens") or 0)
        + (read or 0)
    )
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=counts.get("output_tokens") or 0,
        cached_tokens=read,
    )


def _merge_usage(counts: dict[str, int | None], usage: object) -> None:
    """Overwrite ``counts`` with the fields ``usage`` reports (the API's counts are cumulative),
    with the one-hour cache writes of ``cache_creation`` as ``cache_creation_1h``."""
    if not isinstance(usage, dict):
        return
    for name in _USAGE_FIELDS:
        value = wire_count(usage.get(name))
        if value is not None:
            counts[name] = value
    split = usage.get("cache_creation")
    if isinstance(split, dict):
        value = wire_count(split.get("ephemeral_1h_input_tokens"))
        if value is not None:
            counts["cache_creation_1h"] = value


def _service_tier(usage: object) -> str | None:
    tier = usage.get("service_tier") if isinstance(usage, dict) else None
    return tier if isinstance(tier, str) else None


def _responded(
    request_id: str,
    message: AssistantMessage,
    counts: Mapping[str, int | None],
    stop_reason: object,
    tier: str | None,
) -> ModelResponded:
    """The reply's event: its usage, and what bills it (cache writes, the served tier)."""
    written = counts.get("cache_creation_input_tokens") or 0
    return ModelResponded(
        request_id,
        message,
        _usage(counts),
        _finish_reason(stop_reason),
        service_tier=tier,
        cache_write_tokens=written,
        cache_write_1h_tokens=min(counts.get("cache_creation_1h") or 0, written),
    )


def _finish_reason(stop_reason: object) -> str | None:
    if not isinstance(stop_reason, str):
        return None
    return _STOP_REASONS.get(stop_reason, stop_reason)


def _compact(value: Any) -> str:
    """Compact JSON text of a value that came out of ``orjson.loads`` (so it always encodes)."""
    return orjson.dumps(value).decode()


def _arguments_of(tool_input: object) -> str:
    """ToolCall arguments for a ``tool_use.input`` value (absent or null input means none)."""
    return "{}" if tool_input is None else _compact(tool_input)


def _call_id(call_id: str) -> str:
    return _BAD_ID_CHARS.sub("_", call_id) or "_"


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _user_block(part: str | Image) -> dict[str, Any]:
    """One content block of a user turn with images: text, or an ``image`` block (bytes as a
    ``base64`` source, URLs as a ``url`` source; a ``data:`` URL is split into the two)."""
    if isinstance(part, str):
        return _text_block(part)
    source: dict[str, Any]
    if part.data is not None:
        source = {"type": "base64", "media_type": part.media_type, "data": image_base64(part)}
    else:
        assert part.url is not None
        media, sep, data = part.url.partition(";base64,")
        if part.url.startswith("data:") and sep:
            source = {"type": "base64", "media_type": media[len("data:") :], "data": data}
        else:
            source = {"type": "url", "url": part.url}
    return {"type": "image", "source": source}


# ----------------------------------------------------------------------------- request building


@attrs.define
class _Turn:
    role: str
    results: list[dict[str, Any]] = attrs.Factory(list)
    """``tool_result`` blocks; they lead the content of a user turn."""
    blocks: list[dict[str, Any]] = attrs.Factory(list)

    def wire(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.results + self.blocks}


def _blocks_of(message: Message) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """The role, ``tool_result`` blocks and other blocks one message contributes."""
    if isinstance(message, UserMessage) and message.images:
        parts = message.parts()
        return "user", [], [_user_block(p) for p in parts if not isinstance(p, str) or p.strip()]
    if isinstance(message, SystemMessage | UserMessage):
        text = message.content
        return "user", [], ([_text_block(text)] if text.strip() else [])
    if isinstance(message, ToolMessage):
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": _call_id(message.call_id)}
        if message.content:
            result["content"] = message.content
        if message.is_error:
            result["is_error"] = True
        return "user", [result], []
    blocks: list[dict[str, Any]] = []
    if message.content is not None and message.content.strip():
        blocks.append(_text_block(message.content))
    for call in message.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": _call_id(call.id),
                "name": call.name,
                "input": tool_input(call.arguments),
            }
        )
    return "assistant", [], blocks


def _split_system(
    messages: Sequence[Message],
) -> tuple[list[dict[str, Any]], Sequence[Message]]:
    start = 0
    system: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, SystemMessage):
            break
        start += 1
        if message.content.strip():
            system.append(_text_block(message.content))
    return system, messages[start:]


def _turns(messages: Iterable[Message]) -> list[dict[str, Any]]:
    turns: list[_Turn] = []
    for message in messages:
        role, results, blocks = _blocks_of(message)
        if not results and not blocks:
            continue
        if not turns or turns[-1].role != role:
            turns.append(_Turn(role))
        turns[-1].results.extend(results)
        turns[-1].blocks.extend(blocks)
    return [turn.wire() for turn in turns]


def _tool_choice(choice: str | None) -> dict[str, str] | None:
    if choice is None:
        return None
    known = _TOOL_CHOICES.get(choice)
    if known is not None:
        return dict(known)
    return {"type": "tool", "name": choice}


def _check_max_tokens(_: object, __: object, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"anthropic max_tokens must be a positive integer, not {value!r}")


def _check_cache_ttl(_: object, __: object, value: str | None) -> None:
    if value not in _CACHE_TTLS:
        raise ConfigError(f"anthropic cache_ttl must be None, '5m' or '1h', not {value!r}")


def _check_key(_: object, __: object, value: str | None) -> None:
    if value is not None and not isinstance(value, str):
        raise ConfigError("anthropic api_key must be a string or None")


def _check_flag(_: object, attribute: attrs.Attribute[bool], value: bool) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"anthropic {attribute.name} must be True or False, not {value!r}")


def _check_text(name: str) -> Any:
    def check(_: object, __: object, value: object) -> None:
        if not isinstance(value, str) or not value:
            raise ConfigError(f"anthropic {name} must be a non-empty string, not {value!r}")

    return check


@attrs.frozen(repr=False)
class AnthropicCodec:
    """Encodes calls for, and decodes replies of, the Anthropic Messages API.

    Args:
        base_url: ``http(s)://host[:port][/base path]``; ``/v1/messages`` is appended (only
            ``/messages`` when the base path already ends in ``/v1``).
        model: the model name sent in every request.
        api_key: sent as ``x-api-key`` when given. It never appears in a repr.
        version: the ``anthropic-version`` header.
        max_tokens: used when ``ModelParams.max_tokens`` is ``None`` (the API requires it).
        cache_prefix: mark tool definitions and system prompt as a cacheable prefix.
        cache_ttl: lifetime of the cache entries, ``"5m"`` or ``"1h"``; ``None`` leaves it
            to the server (five minutes).

    Raises:
        ConfigError: an option has an invalid value.
    """

    base_url: str = attrs.field(validator=_check_text("base_url"))
    model: str = attrs.field(validator=_check_text("model"))
    api_key: str | None = attrs.field(default=None, repr=False, validator=_check_key)
    version: str = attrs.field(
        default=DEFAULT_VERSION, kw_only=True, validator=_check_text("version")
    )
    max_tokens: int = attrs.field(
        default=DEFAULT_MAX_TOKENS, kw_only=True, validator=_check_max_tokens
    )
    cache_prefix: bool = attrs.field(default=True, kw_only=True, validator=_check_flag)
    cache_ttl: str | None = attrs.field(default=None, kw_only=True, validator=_check_cache_ttl)

    def __repr__(self) -> str:
        return (
            f"AnthropicCodec(base_url={self.base_url!r}, model={self.model!r}, "
            f"api_key={'<redacted>' if self.api_key is not None else None}, "
            f"version={self.version!r}, max_tokens={self.max_tokens!r}, "
            f"cache_prefix={self.cache_prefix!r}, cache_ttl={self.cache_ttl!r})"
        )

    @property
    def url(self) -> str:
        """Where requests are sent."""
        base = self.base_url.rstrip("/")
        return f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"

    # ------------------------------------------------------------------------- encode

    def encode(self, call: CallModel, *, stream: bool = False) -> HttpRequest:
        """The ``POST /v1/messages`` request for ``call``.

        Raises:
            ConfigError: a tool schema or a message cannot be written as JSON.
        """
        body = self.request_body(call, stream=stream)
        try:
            data = orjson.dumps(body)
        except TypeError as exc:
            raise ConfigError(f"request cannot be encoded as JSON: {exc}") from None
        headers: list[tuple[str, str]] = [
            ("content-type", "application/json"),
            ("accept", "text/event-stream" if stream else "application/json"),
            ("anthropic-version", self.version),
        ]
        if self.api_key is not None:
            headers.append(("x-api-key", self.api_key))
        return HttpRequest("POST", self.url, tuple(headers), data, stream)

    def request_body(self, call: CallModel, *, stream: bool = False) -> dict[str, Any]:
        """The JSON body of :meth:`encode`, as a dict whose key order is the wire order."""
        no_service_tier(call, "Anthropic Messages")
        system, rest = _split_system(call.messages)
        body: dict[str, Any] = {"model": self.model}
        if system:
            if self.cache_prefix:
                system[-1]["cache_control"] = self._cache_control()
            body["system"] = system
        tools = self._tools(call.tools)
        if tools:
            body["tools"] = tools
        body["messages"] = _turns(rest)
        self._parameters(body, call.params, has_tools=bool(tools))
        if stream:
            body["stream"] = True
        return body

    def _cache_control(self) -> dict[str, str]:
        control = {"type": "ephemeral"}
        if self.cache_ttl is not None:
            control["ttl"] = self.cache_ttl
        return control

    def _tools(self, specs: Sequence[ToolSpec]) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        for spec in specs:
            tool: dict[str, Any] = {"name": spec.name}
            if spec.description:
                tool["description"] = spec.description
            tool["input_schema"] = plain_json(spec.parameters)
            tools.append(tool)
        if tools and self.cache_prefix:
            tools[-1]["cache_control"] = self._cache_control()
        return tools

    def _parameters(self, body: dict[str, Any], params: ModelParams, *, has_tools: bool) -> None:
        body["max_tokens"] = params.max_tokens if params.max_tokens is not None else self.max_tokens
        if has_tools:
            choice = _tool_choice(params.tool_choice)
            if choice is not None:
                body["tool_choice"] = choice
        put_sampling(body, params, stop_field="stop_sequences")

    # ------------------------------------------------------------------------- decode

    def decode(
        self, request_id: str, status: int, headers: Headers, body: bytes | str
    ) -> ModelResponded | ModelFailed:
        """The event for a complete (not streamed) response. Never raises."""
        payload = reply_payload(request_id, status, headers, body)
        if isinstance(payload, ModelFailed):
            return payload
        kind = payload.get("type")
        if kind == "error":
            return ModelFailed(request_id, classify_stream_error(payload))
        content = payload.get("content")
        if kind not in (None, "message") or not isinstance(content, list):
            return ModelFailed(request_id, protocol_error("reply is not a message", status))
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in content:
            problem = _read_block(block, texts, calls)
            if problem is not None:
                return ModelFailed(request_id, protocol_error(problem, status))
        counts: dict[str, int | None] = {}
        usage = payload.get("usage")
        _merge_usage(counts, usage)
        message = AssistantMessage("".join(texts) or None, tuple(calls))
        return _responded(
            request_id, message, counts, payload.get("stop_reason"), _service_tier(usage)
        )

    def decode_text(
        self, request_id: str, status: int, headers: Headers, text: str
    ) -> ModelResponded | ModelFailed:
        """:meth:`decode` for a body already decoded from UTF-8 (so that a caller can drop the
        bytes of a large reply before it is parsed). Never raises."""
        return self.decode(request_id, status, headers, text)

    def stream_decoder(self, request_id: str) -> AnthropicStreamDecoder:
        """A decoder for the event stream of a 2xx response to ``request_id``."""
        return AnthropicStreamDecoder(request_id)


def _read_block(block: object, texts: list[str], calls: list[ToolCall]) -> str | None:
    """Add one content block of a complete reply; return what is wrong with it, if anything."""
    if not isinstance(block, dict):
        return "content block is not an object"
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str):
            return "text block without text"
        texts.append(text)
    elif kind == "tool_use":
        call_id, name = block.get("id"), block.get("name")
        if not isinstance(call_id, str) or not isinstance(name, str):
            return "tool_use block without id or name"
        calls.append(ToolCall(call_id, name, _arguments_of(block.get("input"))))
    return None


# ----------------------------------------------------------------------------- streaming

# Theory of operation
# -------------------
# The body is an SSE stream (see sse.py) whose events each carry a JSON object with a "type"
# equal to the event name. A reply is framed by message_start ... message_stop; between them
# every content block is opened by content_block_start (its "index" names it from then on),
# grows through content_block_delta events and is closed by content_block_stop. The decoder
# keeps one _Block per index, in opening order:
#
# - text blocks collect text_delta pieces; each piece is reported at once as a TextDelta;
# - tool_use blocks are numbered in opening order (that number is the ToolCallDelta index, the
#   call's position in the reply). Opening one reports its id and name; each input_json_delta
#   piece is reported as an arguments fragment. At content_block_stop (or at the end of the
#   message for a block never closed) the pieces are joined and parsed: valid JSON is re-written
#   compactly, so a streamed reply gives the same arguments as the complete one; invalid JSON is
#   kept as produced, for the loop to report to the model;
# - any other block (thinking, server tools) and any other delta type is ignored.
#
# message_delta carries stop_reason and usage; its usage counts are cumulative, so each one
# overwrites the counts from message_start instead of adding to them. ping and unknown events
# are ignored. An "error" event fails the reply (classified from its payload, overload being
# retryable). A malformed known event (not JSON, a delta for a block never opened...) fails it
# as a protocol error. Once the reply has stopped or failed, later events are ignored.
#
# finish() decides: a failure if one was recorded, a truncated stream (retryable) when
# message_stop never came, otherwise the reply. Decisions depend only on the sequence of SSE
# events, which the SSE decoder makes independent of how the body was split.


@attrs.define
class _Block:
    kind: str
    """``text``, ``tool_use`` or ``other``."""
    position: int = -1
    """For tool_use blocks: the call's position among the reply's calls."""
    call_id: str = ""
    name: str = ""
    start_input: object = None
    parts: list[str] = attrs.Factory(list)
    closed: bool = False
    arguments: str | None = None

    def final_arguments(self) -> str:
        if self.arguments is None:
            raw = "".join(self.parts)
            if not raw.strip():
                self.arguments = _arguments_of(self.start_input)
            else:
                try:
                    self.arguments = _compact(loads(raw))
                except orjson.JSONDecodeError:
                    self.arguments = raw
        return self.arguments


class AnthropicStreamDecoder:
    """Decodes one streamed Messages API reply (see the theory of operation above)."""

    __slots__ = (
        "_blocks",
        "_counts",
        "_failure",
        "_order",
        "_request_id",
        "_result",
        "_sse",
        "_stop_reason",
        "_stopped",
        "_tier",
        "_tool_count",
    )

    def __init__(self, request_id: str) -> None:
        self._request_id = request_id
        self._sse = SSEDecoder()
        self._blocks: dict[int, _Block] = {}
        self._order: list[_Block] = []
        self._tool_count = 0
        self._counts: dict[str, int | None] = {}
        self._stop_reason: object = None
        self._tier: str | None = None
        self._stopped = False
        self._failure: ModelError | None = None
        self._result: ModelResponded | ModelFailed | None = None

    @property
    def _done(self) -> bool:
        return self._stopped or self._failure is not None or self._result is not None

    def feed(self, chunk: bytes) -> list[Delta]:
        """Consume one body piece; return the text and tool-call pieces it completed."""
        if self._done:
            return []
        deltas: list[Delta] = []
        self._events(self._sse.feed(chunk), deltas)
        return deltas

    def finish(self) -> ModelResponded | ModelFailed:
        """The body ended: the reply, or why it failed. Never raises; repeated calls agree."""
        if self._result is None:
            if not self._done:
                self._events(self._sse.finish(), [])
            self._result = self._conclude()
        return self._result

    def _conclude(self) -> ModelResponded | ModelFailed:
        if self._failure is not None:
            return ModelFailed(self._request_id, self._failure)
        if not self._stopped:
            return ModelFailed(
                self._request_id, truncated_stream("stream ended before message_stop")
            )
        text = "".join("".join(b.parts) for b in self._order if b.kind == "text")
        calls = tuple(
            ToolCall(b.call_id, b.name, b.final_arguments())
            for b in self._order
            if b.kind == "tool_use"
        )
        message = AssistantMessage(text or None, calls)
        return _responded(self._request_id, message, self._counts, self._stop_reason, self._tier)

    def _events(self, events: list[SSEEvent], deltas: list[Delta]) -> None:
        for event in events:
            if self._done:
                return
            self._event(event, deltas)

    def _fail(self, message: str) -> None:
        self._failure = protocol_error(f"malformed event stream: {message}", 200)

    def _event(self, event: SSEEvent, deltas: list[Delta]) -> None:
        try:
            payload = loads(event.data)
        except orjson.JSONDecodeError:
            payload = None
        if not isinstance(payload, dict):
            if event.event in _STREAM_EVENTS:
                self._fail(f"{event.event} event does not carry a JSON object")
            return
        kind = payload.get("type")
        if not isinstance(kind, str):
            kind = event.event
        if kind == "content_block_delta":
            self._delta(payload, deltas)
        elif kind == "content_block_start":
            self._start(payload, deltas)
        elif kind == "content_block_stop":
            self._stop(payload)
        elif kind == "message_delta":
            delta = payload.get("delta")
            if isinstance(delta, dict) and "stop_reason" in delta:
                self._stop_reason = delta["stop_reason"]
            _merge_usage(self._counts, payload.get("usage"))
        elif kind == "message_start":
            message = payload.get("message")
            if isinstance(message, dict):
                _merge_usage(self._counts, message.get("usage"))
                self._tier = _service_tier(message.get("usage")) or self._tier
        elif kind == "message_stop":
            self._stopped = True
        elif kind == "error":
            self._failure = classify_stream_error(payload)

    def _start(self, payload: dict[str, Any], deltas: list[Delta]) -> None:
        index = wire_count(payload.get("index"))
        content = payload.get("content_block")
        if index is None or not isinstance(content, dict):
            self._fail("content_block_start without index or content_block")
            return
        if index in self._blocks:
            self._fail(f"content block {index} started twice")
            return
        kind = content.get("type")
        if kind == "text":
            text = content.get("text", "")
            if not isinstance(text, str):
                self._fail(f"text block {index} starts with non-text")
                return
            block = _Block("text")
            if text:
                block.parts.append(text)
                deltas.append(TextDelta(text))
        elif kind == "tool_use":
            call_id, name = content.get("id"), content.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str):
                self._fail(f"tool_use block {index} without id or name")
                return
            block = _Block("tool_use", self._tool_count, call_id, name, content.get("input"))
            self._tool_count += 1
            deltas.append(ToolCallDelta(block.position, call_id, name))
        else:
            block = _Block("other")
        self._blocks[index] = block
        self._order.append(block)

    def _delta(self, payload: dict[str, Any], deltas: list[Delta]) -> None:
        index = wire_count(payload.get("index"))
        delta = payload.get("delta")
        block = self._blocks.get(index) if index is not None else None
        if block is None or not isinstance(delta, dict):
            self._fail(f"content_block_delta for unknown block {payload.get('index')!r}")
            return
        if block.closed:
            self._fail(f"content_block_delta after content_block_stop for block {index}")
            return
        kind = delta.get("type")
        grows = _DELTA_PIECES.get(kind) if isinstance(kind, str) else None
        if grows is None or grows[0] != block.kind:
            return
        piece = delta.get(grows[1])
        if not isinstance(piece, str):
            self._fail(f"{kind} without {grows[1]} for block {index}")
            return
        if piece:
            block.parts.append(piece)
            if block.kind == "text":
                deltas.append(TextDelta(piece))
            else:
                deltas.append(ToolCallDelta(block.position, arguments=piece))

    def _stop(self, payload: dict[str, Any]) -> None:
        index = wire_count(payload.get("index"))
        block = self._blocks.get(index) if index is not None else None
        if block is None:
            self._fail(f"content_block_stop for unknown block {payload.get('index')!r}")
            return
        if block.kind == "tool_use":
            block.final_arguments()
        block.closed = True
