"""The OpenAI chat-completions codec, shared by OpenAI, vLLM, SGLang, Dynamo and the simulator.

Encoding
--------
A ``CallModel`` becomes ``POST {base_url}/chat/completions`` with a JSON body written by
orjson in a fixed key order: ``model``, ``tools``, ``messages``, then the per-call fields
(``tool_choice``, token limit, sampling, ``response_format``, ``stream``), then the dialect's
own fields (see :mod:`agentcore._codecs.dialects`). Putting the tool list and the messages first
keeps the shared prefix of many agents' requests byte-identical: the same model, tools and
leading messages always serialize to the same leading bytes.

Decoding
--------
:meth:`OpenAICodec.decode` turns a complete response into ``ModelResponded`` (text, tool
calls with their raw argument strings, usage, finish reason, server timing) or
``ModelFailed`` (classified by :mod:`agentcore._codecs.classify`; a 2xx body that is not a chat
completion is a ``PROTOCOL`` error). It never raises.

:class:`OpenAIStreamDecoder` is the streaming counterpart; its theory of operation is in
its docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from .._core.errors import ConfigError
from .._core.events import ModelFailed, ModelResponded
from .._core.messages import (
    AssistantMessage,
    ServerTiming,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from .classify import classify_stream_error, protocol_error, reply_payload, truncated_stream
from .codec import TextDelta, ToolCallDelta
from .common import image_url, json_default, put_sampling, wire_count
from .dialects import dialect_body, dialect_headers, make_options
from .http import HttpRequest
from .jsonbody import loads
from .sse import SSEDecoder

if TYPE_CHECKING:
    from .._core.events import CallModel, ModelError
    from .._core.messages import Image, Message, ToolSpec
    from .codec import Delta
    from .dialects import OpenAIOptions
    from .http import Headers

__all__ = ["OpenAICodec", "OpenAIStreamDecoder"]


class OpenAICodec:
    """Encodes calls for, and decodes replies from, an OpenAI-compatible chat endpoint.

    Args:
        base_url: ``http(s)://host[:port]/base`` (typically ending in ``/v1``); requests go
            to ``{base_url}/chat/completions``.
        model: the model name sent in every request (a dialect whose record has a
            ``default_model``, such as ``sim``, fills in an empty name).
        api_key: sent as ``Authorization: Bearer``; never shown in reprs.
        dialect: a name in :data:`~agentcore._codecs.dialects.DIALECTS`.
        **options: dialect options, see ``docs/backends.md``.

    Raises:
        ConfigError: unknown dialect, or an option the dialect does not take.
    """

    __slots__ = ("_api_key", "_static_headers", "_url", "base_url", "model", "options")

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        dialect: str = "openai",
        **options: Any,
    ) -> None:
        self._setup(base_url, model, api_key, make_options(dialect, options))

    def _setup(self, base_url: str, model: str, api_key: str | None, opts: OpenAIOptions) -> None:
        if not model and opts.record.default_model:
            model = opts.record.default_model
        if not isinstance(model, str) or not model:
            raise ConfigError(f"model must be a non-empty string, got {model!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.options = opts
        self._api_key = api_key
        self._url = f"{self.base_url}/chat/completions"
        headers = [("content-type", "application/json")]
        if api_key:
            headers.append(("authorization", f"Bearer {api_key}"))
        headers.extend(opts.extra_headers)
        self._static_headers = tuple(headers)

    @property
    def dialect(self) -> str:
        """The dialect name."""
        return self.options.dialect

    @property
    def schema_on_final(self) -> bool:
        """Whether a typed run's final request (tools withheld with ``tool_choice="none"``)
        carries its output schema as ``response_format``: every ``response_format`` mode but
        ``never``."""
        return self.options.response_format != "never"

    def with_base_url(self, base_url: str) -> OpenAICodec:
        """The same codec aimed at another server (used to bind ``sim://`` to its port)."""
        codec = OpenAICodec.__new__(OpenAICodec)
        codec._setup(base_url, self.model, self._api_key, self.options)
        return codec

    def __repr__(self) -> str:
        return (
            f"OpenAICodec(dialect={self.dialect!r}, base_url={self.base_url!r}, "
            f"model={self.model!r})"
        )

    # ------------------------------------------------------------------------- encode

    def encode(self, call: CallModel, *, stream: bool = False) -> HttpRequest:
        """The ``POST /chat/completions`` request for ``call``.

        Raises:
            ConfigError: a tool schema or output schema is not JSON-serializable, or a
                session/request id cannot be sent in a header.
        """
        opts = self.options
        params = call.params
        body: dict[str, Any] = {"model": self.model}
        if call.tools:
            body["tools"] = [_tool_json(tool, opts.strict_tools) for tool in call.tools]
        body["messages"] = [_message_json(message) for message in call.messages]
        if call.tools and params.tool_choice is not None:
            body["tool_choice"] = _tool_choice_json(params.tool_choice)
        if params.max_tokens is not None:
            body[opts.max_tokens_field] = params.max_tokens
        put_sampling(body, params, stop_field="stop")
        if params.seed is not None:
            body["seed"] = params.seed
        if call.output is not None and _wants_response_format(opts, call):
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": call.output.name,
                    "schema": call.output.schema,
                    "strict": opts.strict_output,
                },
            }
        if stream:
            body["stream"] = True
            if opts.stream_usage:
                body["stream_options"] = {"include_usage": True}
        if call.service_tier is not None:
            body["service_tier"] = call.service_tier
        body.update(dialect_body(call, opts))
        body.update(opts.extra_body)
        try:
            data = orjson.dumps(body, default=json_default)
        except TypeError as exc:
            raise ConfigError(
                f"request for {call.request_id!r} is not JSON-serializable: {exc}"
            ) from exc
        headers = [
            *self._static_headers,
            ("accept", "text/event-stream" if stream else "application/json"),
            *dialect_headers(call, opts),
        ]
        return HttpRequest("POST", self._url, tuple(headers), data, stream)

    # ------------------------------------------------------------------------- decode

    def decode(
        self, request_id: str, status: int, headers: Headers, body: bytes | str
    ) -> ModelResponded | ModelFailed:
        """The event for a complete (non-streamed) response. Never raises."""
        payload = reply_payload(request_id, status, headers, body)
        if isinstance(payload, ModelFailed):
            return payload
        if _is_error(payload):
            return ModelFailed(request_id, classify_stream_error(payload))
        return _completion(request_id, status, payload)

    def decode_text(
        self, request_id: str, status: int, headers: Headers, text: str
    ) -> ModelResponded | ModelFailed:
        """:meth:`decode` for a body already decoded from UTF-8 (so that a caller can drop the
        bytes of a large reply before it is parsed). Never raises."""
        return self.decode(request_id, status, headers, text)

    def stream_decoder(self, request_id: str) -> OpenAIStreamDecoder:
        """A decoder for the streamed 2xx response to ``request_id``."""
        return OpenAIStreamDecoder(request_id)


class _CallBuffer:
    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []


class OpenAIStreamDecoder:
    """Decodes one streamed chat completion.

    Theory of operation
    -------------------
    Body pieces go through the incremental :class:`~agentcore.wire.SSEDecoder`, so the split of
    the bytes never matters. Each ``message`` event holds one ``chat.completion.chunk``:

    - ``choices[0].delta.content`` pieces are reported as :class:`TextDelta` and kept;
    - ``choices[0].delta.tool_calls[]`` pieces are keyed by their ``index`` (parallel calls
      interleave); the first piece of a call usually carries its ``id`` and name, later ones
      only argument text. Argument text is concatenated raw and never parsed here: the loop
      parses it and reports invalid JSON to the model;
    - ``finish_reason``, the final ``usage`` chunk (``choices: []``) and Dynamo's ``nvext``
      (``worker_id`` on every chunk, ``timing`` on the finishing one) are remembered.

    ``data: [DONE]`` ends the reply. An ``error`` event, or a chunk carrying an ``error``
    object, records a classified failure; an undecodable chunk records a ``PROTOCOL``
    failure. The first failure wins and everything after it (or after ``[DONE]``) is
    ignored. Events with any other name (Dynamo's annotation events) are skipped.

    :meth:`finish` returns the failure if there was one; ``ModelFailed(CONNECTION,
    retryable)`` if the body ended with neither ``[DONE]`` nor a finish reason (the
    connection was cut); otherwise the assembled ``ModelResponded``. Neither method raises.
    """

    __slots__ = (
        "_calls",
        "_done",
        "_failure",
        "_finish_reason",
        "_nvext",
        "_request_id",
        "_sse",
        "_text",
        "_tier",
        "_usage",
    )

    def __init__(self, request_id: str) -> None:
        self._request_id = request_id
        self._sse = SSEDecoder()
        self._text: list[str] = []
        self._calls: dict[int, _CallBuffer] = {}
        self._finish_reason: str | None = None
        self._usage: Usage | None = None
        self._nvext: dict[str, Any] = {}
        self._tier: str | None = None
        self._done = False
        self._failure: ModelError | None = None

    def feed(self, chunk: bytes) -> list[Delta]:
        """Consume one body piece; return the text and tool-call pieces it completed."""
        deltas: list[Delta] = []
        for event in self._sse.feed(chunk):
            if self._done or self._failure is not None:
                break
            if event.event == "message":
                self._on_data(event.data, deltas)
            elif event.event == "error":
                self._failure = _stream_error_from_text(event.data)
        return deltas

    def finish(self) -> ModelResponded | ModelFailed:
        """The final event for the reply (see the class docstring). Never raises."""
        self._sse.finish()
        if self._failure is not None:
            return ModelFailed(self._request_id, self._failure)
        if not self._done and self._finish_reason is None:
            return ModelFailed(
                self._request_id,
                truncated_stream("the stream ended before [DONE] and without a finish reason"),
            )
        text = "".join(self._text)
        calls = tuple(
            ToolCall(buf.id, buf.name, "".join(buf.arguments) or "{}")
            for _, buf in sorted(self._calls.items())
        )
        return ModelResponded(
            request_id=self._request_id,
            message=AssistantMessage(text or None, calls),
            usage=self._usage if self._usage is not None else Usage(),
            finish_reason=self._finish_reason,
            timing=_timing(self._nvext),
            service_tier=self._tier,
        )

    def _on_data(self, data: str, deltas: list[Delta]) -> None:
        if data == "[DONE]":
            self._done = True
            return
        try:
            chunk = loads(data)
        except orjson.JSONDecodeError:
            self._failure = protocol_error("a stream event is not JSON")
            return
        if not isinstance(chunk, dict):
            self._failure = protocol_error("a stream event is not a JSON object")
            return
        if _is_error(chunk):
            self._failure = classify_stream_error(chunk)
            return
        nvext = chunk.get("nvext")
        if isinstance(nvext, dict):
            self._nvext.update(nvext)
        tier = chunk.get("service_tier")
        if isinstance(tier, str):
            self._tier = tier
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage = _usage(usage)
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return
        for choice in choices:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._on_choice(choice, deltas)

    def _on_choice(self, choice: dict[str, Any], deltas: list[Delta]) -> None:
        delta = choice.get("delta")
        if isinstance(delta, dict):
            content = delta.get("content")
            if isinstance(content, str) and content:
                self._text.append(content)
                deltas.append(TextDelta(content))
            tool_calls = delta.get("tool_calls")
            if isinstance(tool_calls, list):
                for piece in tool_calls:
                    if isinstance(piece, dict):
                        deltas.append(self._on_tool_piece(piece))
        reason = choice.get("finish_reason")
        if isinstance(reason, str):
            self._finish_reason = reason

    def _on_tool_piece(self, piece: dict[str, Any]) -> ToolCallDelta:
        index = piece.get("index")
        call_id = piece.get("id")
        call_id = call_id if isinstance(call_id, str) and call_id else None
        if not isinstance(index, int) or isinstance(index, bool):
            # Servers that omit the index: a new id starts a new call, anything else
            # continues the latest one.
            latest = max(self._calls, default=-1)
            new_call = latest < 0 or (call_id is not None and self._calls[latest].id != call_id)
            index = latest + 1 if new_call else latest
        buf = self._calls.get(index)
        if buf is None:
            buf = self._calls[index] = _CallBuffer()
        if call_id is not None and not buf.id:
            buf.id = call_id
        function = piece.get("function")
        name = None
        arguments = ""
        if isinstance(function, dict):
            raw_name = function.get("name")
            if isinstance(raw_name, str) and raw_name:
                name = raw_name
                if not buf.name:
                    buf.name = raw_name
            arguments = _arguments_text(function.get("arguments"))
            if arguments:
                buf.arguments.append(arguments)
        return ToolCallDelta(index=index, id=call_id, name=name, arguments=arguments)


# ----------------------------------------------------------------------------- encoding


def _user_json(message: UserMessage) -> dict[str, Any]:
    if not message.images:
        return {"role": "user", "content": message.content}
    return {"role": "user", "content": [_part_json(part) for part in message.parts()]}


def _part_json(part: str | Image) -> dict[str, Any]:
    """One content part of a user message: text, or an ``image_url`` (inline bytes as a
    ``data:`` URL)."""
    if isinstance(part, str):
        return {"type": "text", "text": part}
    return {"type": "image_url", "image_url": {"url": image_url(part)}}


def _system_json(message: SystemMessage) -> dict[str, Any]:
    return {"role": "system", "content": message.content}


def _tool_result_json(message: ToolMessage) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": message.call_id, "content": message.content}


def _assistant_json(message: AssistantMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in message.tool_calls
        ]
    elif message.content is None:
        out["content"] = ""
    return out


_MESSAGE_JSON: dict[type, Callable[[Any], dict[str, Any]]] = {
    UserMessage: _user_json,
    SystemMessage: _system_json,
    ToolMessage: _tool_result_json,
    AssistantMessage: _assistant_json,
}


def _message_json(message: Message) -> dict[str, Any]:
    encode = _MESSAGE_JSON.get(type(message))
    if encode is None:
        raise ConfigError(f"not a message: {message!r}")
    return encode(message)


def _tool_json(tool: ToolSpec, strict: bool) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name}
    if tool.description:
        function["description"] = tool.description
    function["parameters"] = tool.parameters
    if strict:
        function["strict"] = True
    return {"type": "function", "function": function}


_TOOL_CHOICE_MODES = frozenset({"auto", "none", "required"})


def _tool_choice_json(choice: str) -> str | dict[str, Any]:
    """``tool_choice`` on the wire: a mode as its string, one tool forced by name as the
    object form the Chat Completions API takes (``{"type": "function", "function": {...}}``)."""
    if choice in _TOOL_CHOICE_MODES:
        return choice
    return {"type": "function", "function": {"name": choice}}


def _wants_response_format(opts: OpenAIOptions, call: CallModel) -> bool:
    mode = opts.response_format
    if mode == "always":
        return True
    return mode == "without_tools" and (not call.tools or call.params.tool_choice == "none")


# ----------------------------------------------------------------------------- decoding


def _is_error(payload: dict[str, Any]) -> bool:
    return payload.get("error") is not None or payload.get("object") == "error"


def _protocol_failure(request_id: str, status: int, message: str) -> ModelFailed:
    return ModelFailed(request_id, protocol_error(message, status))


def _stream_error_from_text(data: str) -> ModelError:
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError:
        payload = None
    if isinstance(payload, dict):
        return classify_stream_error(payload)
    return classify_stream_error({"message": data})


def _completion(
    request_id: str, status: int, payload: dict[str, Any]
) -> ModelResponded | ModelFailed:
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices:
        return _protocol_failure(request_id, status, "response has no choices")
    choice = next(
        (c for c in choices if isinstance(c, dict) and c.get("index", 0) == 0), choices[0]
    )
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        return _protocol_failure(request_id, status, "response choice has no message")
    content = _content_text(message.get("content"))
    raw_calls = message.get("tool_calls")
    calls: list[ToolCall] = []
    if raw_calls is not None:
        if not isinstance(raw_calls, list):
            return _protocol_failure(request_id, status, "tool_calls is not a list")
        for raw in raw_calls:
            call = _tool_call(raw)
            if call is None:
                return _protocol_failure(request_id, status, "malformed tool call in response")
            calls.append(call)
    reason = choice.get("finish_reason")
    usage = payload.get("usage")
    nvext = payload.get("nvext")
    tier = payload.get("service_tier")
    return ModelResponded(
        request_id=request_id,
        message=AssistantMessage(content or None, tuple(calls)),
        usage=_usage(usage) if isinstance(usage, dict) else Usage(),
        finish_reason=reason if isinstance(reason, str) else None,
        timing=_timing(nvext) if isinstance(nvext, dict) else None,
        service_tier=tier if isinstance(tier, str) else None,
    )


def _content_text(content: object) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        # Content given as parts: keep the text parts.
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return None


def _tool_call(raw: object) -> ToolCall | None:
    if not isinstance(raw, dict):
        return None
    function = raw.get("function")
    if not isinstance(function, dict):
        return None
    name = function.get("name")
    call_id = raw.get("id")
    return ToolCall(
        id=call_id if isinstance(call_id, str) else "",
        name=name if isinstance(name, str) else "",
        arguments=_arguments_text(function.get("arguments")) or "{}",
    )


def _arguments_text(arguments: object) -> str:
    """Raw argument text; a server that sends an object instead of a string gets it
    re-serialized so the loop sees JSON text either way."""
    if isinstance(arguments, str):
        return arguments
    if arguments is None:
        return ""
    return orjson.dumps(arguments).decode()


def _usage(usage: dict[str, Any]) -> Usage:
    details = usage.get("prompt_tokens_details")
    cached = wire_count(details.get("cached_tokens")) if isinstance(details, dict) else None
    return Usage(
        prompt_tokens=wire_count(usage.get("prompt_tokens")) or 0,
        completion_tokens=wire_count(usage.get("completion_tokens")) or 0,
        cached_tokens=cached,
    )


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _timing(nvext: dict[str, Any]) -> ServerTiming | None:
    timing = nvext.get("timing")
    worker = nvext.get("worker_id")
    if not isinstance(timing, dict) and not isinstance(worker, dict):
        return None
    timing = timing if isinstance(timing, dict) else {}
    worker_id = None
    if isinstance(worker, dict):
        worker_id = wire_count(worker.get("decode_worker_id"))
        if worker_id is None:
            worker_id = wire_count(worker.get("prefill_worker_id"))
    return ServerTiming(
        ttft_ms=_number(timing.get("ttft_ms")),
        prefill_time_ms=_number(timing.get("prefill_time_ms")),
        prefill_wait_time_ms=_number(timing.get("prefill_wait_time_ms")),
        total_time_ms=_number(timing.get("total_time_ms")),
        kv_hit_rate=_number(timing.get("kv_hit_rate")),
        router_queue_depth=wire_count(timing.get("router_queue_depth")),
        worker_id=worker_id,
    )
