"""The AWS Bedrock Converse / ConverseStream dialect (sans-IO; botocore for framing and signing).

Requests (``POST /model/{modelId}/converse`` or ``/converse-stream``):

- ``system`` messages become ``system`` text blocks; user and tool-result messages become
  ``user`` turns (a ``toolResult`` block per result, ``status: error`` for failures), assistant
  messages ``assistant`` turns (``text`` and ``toolUse`` blocks, ``input`` as a JSON object).
  Consecutive messages of one role share a turn: Converse requires the roles to alternate.
- Tools go in ``toolConfig.tools`` as ``toolSpec`` (``inputSchema.json``); ``tool_choice``
  ``auto`` / ``required`` become ``{"auto": {}}`` / ``{"any": {}}`` (Converse has no ``none``:
  it is left out). ``max_tokens``, ``temperature``, ``top_p`` and ``stop`` go in
  ``inferenceConfig``. ``CallModel.output`` is not sent: the loop states the schema in its
  instructions, as for the Anthropic dialect.
- ``cache_prompt=True`` appends a ``cachePoint`` block after the system prompt and after the
  tools, so the shared prefix of every agent is cached (on models that support it).
- Every request is signed by the codec's :class:`RequestSigner` (SigV4 by
  :class:`~agentcore._transports.sigv4.BedrockSigner`, which holds the credentials).

Replies: ``output.message.content`` (``text`` and ``toolUse`` blocks), ``stopReason``
(``end_turn`` -> ``stop``, ``tool_use`` -> ``tool_calls``, ``max_tokens`` -> ``length``, others
as they are) and ``usage`` (``inputTokens`` + ``cacheReadInputTokens`` +
``cacheWriteInputTokens`` as prompt tokens, the cache reads as cached tokens). Errors are
classified like the other codecs' (:mod:`agentcore._codecs.classify`): a 429
``ThrottlingException`` is rate limiting, retried with back-off.

Streams are AWS event-stream frames (``application/vnd.amazon.eventstream``), decoded
incrementally by botocore's ``EventStreamBuffer`` (prelude, headers, payload, both CRCs):
``messageStart``, ``contentBlockStart`` (a tool use's id and name), ``contentBlockDelta``
(``text``, or a fragment of a tool use's JSON ``input``), ``contentBlockStop``,
``messageStop`` (the stop reason) and ``metadata`` (usage). A frame with ``:message-type``
``exception`` is an error inside the stream, classified by its ``:exception-type``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

import orjson

from .._core.errors import ConfigError
from .._core.events import ModelError, ModelFailed, ModelResponded
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
from .common import no_service_tier, plain_json, tool_input, wire_count
from .http import HttpRequest

if TYPE_CHECKING:
    from .._core.events import CallModel
    from .._core.messages import Message, ToolSpec
    from .codec import Delta
    from .http import Headers

__all__ = ["BedrockCodec", "BedrockStreamDecoder"]

_STOP_REASONS = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
_TOOL_CHOICES: Mapping[str, dict[str, Any]] = {"auto": {"auto": {}}, "required": {"any": {}}}
_CACHE_POINT = {"cachePoint": {"type": "default"}}
_MAX_STREAM_BUFFER = 16 * 1024 * 1024


def _tool_choice(choice: str | None) -> dict[str, Any] | None:
    """Converse's ``toolChoice``: ``auto``, ``any`` for ``"required"``, one tool by name; none
    for ``"none"`` (Converse has no such mode: the final request's instruction says it)."""
    if choice is None or choice == "none":
        return None
    known = _TOOL_CHOICES.get(choice)
    return dict(known) if known is not None else {"tool": {"name": choice}}


def _usage(counts: object) -> Usage:
    if not isinstance(counts, Mapping):
        return Usage()
    read = wire_count(counts.get("cacheReadInputTokens"))
    write = wire_count(counts.get("cacheWriteInputTokens")) or 0
    prompt = (wire_count(counts.get("inputTokens")) or 0) + (read or 0) + write
    return Usage(prompt, wire_count(counts.get("outputTokens")) or 0, read)


def _finish_reason(value: object) -> str | None:
    return _STOP_REASONS.get(value, value) if isinstance(value, str) else None


def _blocks(message: Message) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(message, UserMessage):
        return "user", [{"text": message.content}]
    if isinstance(message, ToolMessage):
        result = {
            "toolUseId": message.call_id,
            "content": [{"text": message.content}],
            "status": "error" if message.is_error else "success",
        }
        return "user", [{"toolResult": result}]
    assert isinstance(message, AssistantMessage)
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"text": message.content})
    for call in message.tool_calls:
        use = {"toolUseId": call.id, "name": call.name, "input": tool_input(call.arguments)}
        blocks.append({"toolUse": use})
    return "assistant", blocks


def _turns(messages: Iterable[Message]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            system.append({"text": message.content})
            continue
        role, blocks = _blocks(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return system, turns


def _exception(kind_name: str, payload: bytes) -> ModelError:
    """An exception frame of a stream, classified by its type like any in-stream error."""
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError:
        data = None
    message = data.get("message") if isinstance(data, dict) else None
    fields = {"type": kind_name, "message": str(message or kind_name)}
    return classify_stream_error(fields)


class RequestSigner(Protocol):
    """Signs one request: the headers to send for exactly this method, URL and body."""

    def sign(
        self, method: str, url: str, headers: list[tuple[str, str]], body: bytes
    ) -> list[tuple[str, str]]: ...


def load_botocore() -> Any:
    """Import botocore, or explain how to install it."""
    try:
        botocore = importlib.import_module("botocore")
        for part in ("auth", "awsrequest", "credentials", "eventstream", "session"):
            importlib.import_module(f"botocore.{part}")
    except ImportError:
        raise ConfigError(
            "bedrock:// needs botocore: pip install 'trio-agentcore[bedrock]'"
        ) from None
    return botocore


class BedrockCodec:
    """The Converse dialect for one model in one region.

    Args:
        region: the AWS region (``us-east-1``...).
        model: the model id or inference profile id/ARN (``anthropic.claude-3-5-haiku-...``).
        signer: signs each request (holds the credentials).
        endpoint_url: the runtime endpoint (``None``: ``https://bedrock-runtime.REGION.amazonaws.com``).
        cache_prompt: add ``cachePoint`` blocks after the system prompt and the tools.
        max_tokens: ``maxTokens`` when the call does not set one (``None``: the model's default).
    """

    def __init__(
        self,
        region: str,
        model: str,
        signer: RequestSigner,
        *,
        endpoint_url: str | None = None,
        cache_prompt: bool = False,
        max_tokens: int | None = None,
    ) -> None:
        if not model:
            raise ConfigError("bedrock:// needs a model id (model=...)")
        self.region = region
        self.model = model
        self.signer = signer
        self.endpoint_url = (
            endpoint_url or f"https://bedrock-runtime.{region}.amazonaws.com"
        ).rstrip("/")
        self.cache_prompt = cache_prompt
        self.max_tokens = max_tokens

    def __repr__(self) -> str:
        return (
            f"BedrockCodec(region={self.region!r}, model={self.model!r}, "
            f"endpoint_url={self.endpoint_url!r}, cache_prompt={self.cache_prompt!r})"
        )

    def url(self, *, stream: bool) -> str:
        """The Converse (or ConverseStream) URL of the model."""
        operation = "converse-stream" if stream else "converse"
        return f"{self.endpoint_url}/model/{quote(self.model, safe='')}/{operation}"

    def request_body(self, call: CallModel) -> dict[str, Any]:
        """The Converse request body for ``call`` (unsigned, as a dict)."""
        no_service_tier(call, "Bedrock Converse")
        system, turns = _turns(call.messages)
        body: dict[str, Any] = {"messages": turns}
        if system:
            body["system"] = [*system, _CACHE_POINT] if self.cache_prompt else system
        params = call.params
        inference: dict[str, Any] = {}
        max_tokens = params.max_tokens if params.max_tokens is not None else self.max_tokens
        if max_tokens is not None:
            inference["maxTokens"] = max_tokens
        if params.temperature is not None:
            inference["temperature"] = params.temperature
        if params.top_p is not None:
            inference["topP"] = params.top_p
        if params.stop:
            inference["stopSequences"] = list(params.stop)
        if inference:
            body["inferenceConfig"] = inference
        if call.tools:
            config: dict[str, Any] = {"tools": self._tools(call.tools)}
            choice = _tool_choice(params.tool_choice)
            if choice is not None:
                config["toolChoice"] = choice
            body["toolConfig"] = config
        return body

    def _tools(self, specs: Sequence[ToolSpec]) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        for spec in specs:
            tool: dict[str, Any] = {
                "name": spec.name,
                "inputSchema": {"json": plain_json(spec.parameters)},
            }
            if spec.description:
                tool["description"] = spec.description
            tools.append({"toolSpec": tool})
        if self.cache_prompt:
            tools.append(_CACHE_POINT)
        return tools

    def encode(self, call: CallModel, *, stream: bool = False) -> HttpRequest:
        """The signed HTTP request for ``call``."""
        url = self.url(stream=stream)
        body = orjson.dumps(self.request_body(call))
        accept = "application/vnd.amazon.eventstream" if stream else "application/json"
        headers = [("content-type", "application/json"), ("accept", accept)]
        signed = self.signer.sign("POST", url, headers, body)
        return HttpRequest("POST", url, tuple(signed), body, stream)

    def decode(
        self, request_id: str, status: int, headers: Headers, body: bytes
    ) -> ModelResponded | ModelFailed:
        """The event for a complete Converse response. Never raises."""
        payload = reply_payload(request_id, status, headers, body)
        if isinstance(payload, ModelFailed):
            return payload
        output = payload.get("output")
        message = output.get("message") if isinstance(output, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            return ModelFailed(request_id, protocol_error("reply has no output message", status))
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in content:
            if not isinstance(block, dict):
                return ModelFailed(request_id, protocol_error("content block is not an object"))
            if isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif isinstance(block.get("toolUse"), dict):
                use = block["toolUse"]
                call_id, name = use.get("toolUseId"), use.get("name")
                if not isinstance(call_id, str) or not isinstance(name, str):
                    return ModelFailed(request_id, protocol_error("toolUse without id or name"))
                arguments = orjson.dumps(use.get("input") if use.get("input") is not None else {})
                calls.append(ToolCall(call_id, name, arguments.decode()))
            # other blocks (reasoningContent, citations, images) carry nothing we keep
        return ModelResponded(
            request_id,
            AssistantMessage("".join(texts) or None, tuple(calls)),
            _usage(payload.get("usage")),
            _finish_reason(payload.get("stopReason")),
        )

    def stream_decoder(self, request_id: str) -> BedrockStreamDecoder:
        """A decoder for the event stream of a 2xx ConverseStream response."""
        return BedrockStreamDecoder(request_id)


class _Block:
    __slots__ = ("call_id", "kind", "name", "parts")

    def __init__(self, kind: str, call_id: str = "", name: str = "") -> None:
        self.kind, self.call_id, self.name = kind, call_id, name
        self.parts: list[str] = []


class BedrockStreamDecoder:
    """Decodes one ConverseStream body, fed in any split. Theory of operation: frames are
    cut by botocore's ``EventStreamBuffer``; each ``contentBlockIndex`` owns one block (text,
    or a tool use whose JSON input arrives in fragments); ``messageStop`` ends the message
    and ``metadata`` (after it) carries the usage. An exception frame or a malformed frame
    fails the reply; a body that ends before ``messageStop`` is a truncated stream."""

    def __init__(self, request_id: str) -> None:
        self._buffer = load_botocore().eventstream.EventStreamBuffer()
        self._parser_error: type[Exception] = load_botocore().eventstream.ParserError
        self._request_id = request_id
        self._blocks: dict[int, _Block] = {}
        self._stop_reason: object = None
        self._stopped = False
        self._usage = Usage()
        self._failure: ModelError | None = None
        self._buffered = 0
        """Bytes received and not yet part of a whole frame."""

    def feed(self, chunk: bytes) -> list[Delta]:
        """Consume one body piece; return the text and tool-call progress it carried."""
        deltas: list[Delta] = []
        if self._failure is not None or not chunk:
            return deltas
        self._buffered += len(chunk)
        try:
            self._buffer.add_data(chunk)
            for message in self._buffer:
                self._buffered -= message.prelude.total_length
                self._frame(message.headers, message.payload, deltas)
                if self._failure is not None:
                    break
        except self._parser_error as exc:
            self._failure = protocol_error(f"malformed event stream: {exc}", 200)
        if self._failure is None and self._buffered > _MAX_STREAM_BUFFER:
            self._failure = protocol_error("event-stream frame larger than 16 MiB", 200)
        return deltas

    def finish(self) -> ModelResponded | ModelFailed:
        """The final event (never raises)."""
        if self._failure is not None:
            return ModelFailed(self._request_id, self._failure)
        if not self._stopped:
            return ModelFailed(
                self._request_id, truncated_stream("stream ended before messageStop")
            )
        if self._buffered:
            return ModelFailed(self._request_id, truncated_stream("stream ended inside a frame"))
        blocks = [self._blocks[i] for i in sorted(self._blocks)]
        text = "".join("".join(b.parts) for b in blocks if b.kind == "text")
        calls = tuple(
            ToolCall(b.call_id, b.name, orjson.dumps(tool_input("".join(b.parts))).decode())
            for b in blocks
            if b.kind == "tool"
        )
        return ModelResponded(
            self._request_id,
            AssistantMessage(text or None, calls),
            self._usage,
            _finish_reason(self._stop_reason),
        )

    def _fail(self, message: str) -> None:
        self._failure = protocol_error(f"malformed event stream: {message}", 200)

    def _frame(self, headers: Mapping[str, Any], payload: bytes, deltas: list[Delta]) -> None:
        kind = headers.get(":message-type")
        if kind in ("exception", "error"):
            name = headers.get(":exception-type") or headers.get(":error-code") or ""
            self._failure = _exception(str(name), payload)
            return
        try:
            data = orjson.loads(payload) if payload else {}
        except orjson.JSONDecodeError:
            data = None
        if not isinstance(data, dict):
            self._fail("event payload is not a JSON object")
            return
        event = headers.get(":event-type")
        if event == "contentBlockStart":
            self._start(data, deltas)
        elif event == "contentBlockDelta":
            self._delta(data, deltas)
        elif event == "messageStop":
            self._stopped = True
            self._stop_reason = data.get("stopReason")
        elif event == "metadata":
            self._usage = _usage(data.get("usage"))
        # messageStart, contentBlockStop and unknown events change nothing here

    def _index(self, data: Mapping[str, Any]) -> int | None:
        index = wire_count(data.get("contentBlockIndex"))
        if index is None:
            self._fail("contentBlockIndex missing")
        return index

    def _start(self, data: Mapping[str, Any], deltas: list[Delta]) -> None:
        index = self._index(data)
        start = data.get("start")
        use = start.get("toolUse") if isinstance(start, dict) else None
        if index is None or not isinstance(use, dict):
            return
        call_id, name = use.get("toolUseId"), use.get("name")
        if not isinstance(call_id, str) or not isinstance(name, str):
            self._fail("toolUse start without id or name")
            return
        self._blocks[index] = _Block("tool", call_id, name)
        deltas.append(ToolCallDelta(index, call_id, name))

    def _delta(self, data: Mapping[str, Any], deltas: list[Delta]) -> None:
        index = self._index(data)
        delta = data.get("delta")
        if index is None or not isinstance(delta, dict):
            return
        text = delta.get("text")
        if isinstance(text, str):
            block = self._blocks.setdefault(index, _Block("text"))
            if block.kind != "text":
                self._fail("text delta in a toolUse block")
                return
            block.parts.append(text)
            deltas.append(TextDelta(text))
            return
        use = delta.get("toolUse")
        if isinstance(use, dict) and isinstance(use.get("input"), str):
            found = self._blocks.get(index)
            if found is None or found.kind != "tool":
                self._fail("toolUse delta without its contentBlockStart")
                return
            found.parts.append(use["input"])
            deltas.append(ToolCallDelta(index, arguments=use["input"]))
