"""Parsing and checking of a chat-completions request body.

:func:`parse_chat_request` turns the decoded JSON body into a :class:`ChatRequest` value or
raises :class:`InvalidRequest` naming the offending parameter; the server answers the latter
with a 400 and an OpenAI-style error body. Only what the simulated model and the engine use is
kept; unknown top-level fields are ignored, as vLLM and Dynamo do. An ``image_url`` content
part becomes a short marker naming a digest of its URL in the simulated prompt text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import attrs
import orjson

from .._core.errors import AgentcoreError

__all__ = [
    "ChatMessage",
    "ChatRequest",
    "InvalidRequest",
    "RequestedCall",
    "ToolDefinition",
    "parse_chat_request",
]

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


class InvalidRequest(AgentcoreError):
    """A request the server refuses with status 400.

    Attributes:
        message: what is wrong, for the error body.
        param: the offending request parameter, if one can be named.
    """

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


@attrs.frozen
class RequestedCall:
    """A tool call of an earlier assistant turn, as the client sent it back."""

    name: str
    arguments: str


@attrs.frozen
class ChatMessage:
    """One message of the conversation, reduced to what the chat template renders."""

    role: str
    content: str
    tool_calls: tuple[RequestedCall, ...] = ()


@attrs.frozen
class ToolDefinition:
    """One offered tool: its name, its parameter schema, and its JSON as the client sent it."""

    name: str
    parameters: Mapping[str, Any] = attrs.field(eq=False)
    rendered: str = attrs.field(eq=False)


@attrs.frozen
class ChatRequest:
    """A checked chat-completions request."""

    model: str
    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolDefinition, ...] = ()
    tool_choice: str = "auto"
    """``"auto"``, ``"none"`` or ``"required"`` (also ``"required"`` when a tool is named)."""
    forced_tool: str | None = None
    """The tool named by ``tool_choice``, if any."""
    parallel_tool_calls: bool = True
    output_schema: Mapping[str, Any] | None = attrs.field(default=None, eq=False)
    """The ``response_format`` JSON schema, if any."""
    json_mode: bool = False
    """``True`` when ``response_format`` asks for JSON (with or without a schema)."""
    max_tokens: int | None = None
    stream: bool = False
    include_usage: bool = False
    priority: int = 0
    """Scheduling priority, normalised so that lower runs sooner (vLLM's convention)."""
    cache_salt: str = ""


def _image_stand_in(image: Any, param: str) -> str:
    """The text an ``image_url`` part stands for in the simulated prompt: a marker naming a
    digest of its URL, so different images make different prompts (and cache entries)."""
    url = image.get("url") if isinstance(image, dict) else None
    if not isinstance(url, str) or not url.startswith(("https://", "http://", "data:image/")):
        raise InvalidRequest(f"{param}.image_url.url must be an http(s) or data:image URL", param)
    return f"[image {hashlib.sha256(url.encode()).hexdigest()[:12]}]"


def _text(content: Any, param: str, *, required: bool) -> str:
    if content is None:
        if required:
            raise InvalidRequest(f"{param} is required", param)
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for i, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise InvalidRequest(f"{param}[{i}] must be an object with a type", param)
            if part["type"] == "text":
                text = part.get("text")
                if not isinstance(text, str):
                    raise InvalidRequest(f"{param}[{i}].text must be a string", param)
                parts.append(text)
            elif part["type"] == "image_url":
                parts.append(_image_stand_in(part.get("image_url"), f"{param}[{i}]"))
            else:
                parts.append(f"[{part['type']}]")
        return "".join(parts)
    raise InvalidRequest(f"{param} must be a string or a list of content parts", param)


def _calls(raw: Any, param: str) -> tuple[RequestedCall, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidRequest(f"{param} must be a list", param)
    calls: list[RequestedCall] = []
    for i, call in enumerate(raw):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise InvalidRequest(f"{param}[{i}].function must be an object", param)
        name, arguments = function.get("name"), function.get("arguments", "")
        if not isinstance(name, str) or not isinstance(arguments, str):
            raise InvalidRequest(
                f"{param}[{i}].function needs a string name and string arguments", param
            )
        calls.append(RequestedCall(name, arguments))
    return tuple(calls)


def _messages(raw: Any) -> tuple[ChatMessage, ...]:
    if not isinstance(raw, list) or not raw:
        raise InvalidRequest("messages must be a non-empty list", "messages")
    messages: list[ChatMessage] = []
    for i, message in enumerate(raw):
        param = f"messages[{i}]"
        if not isinstance(message, dict):
            raise InvalidRequest(f"{param} must be an object", param)
        role = message.get("role")
        if role not in _ROLES:
            raise InvalidRequest(f"{param}.role must be one of {sorted(_ROLES)}", param)
        assistant = role == "assistant"
        content = _text(message.get("content"), f"{param}.content", required=not assistant)
        calls = _calls(message.get("tool_calls"), f"{param}.tool_calls") if assistant else ()
        if role == "tool" and not isinstance(message.get("tool_call_id"), str):
            raise InvalidRequest(f"{param}.tool_call_id must be a string", param)
        messages.append(ChatMessage(role, content, calls))
    return tuple(messages)


def _tools(raw: Any) -> tuple[ToolDefinition, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidRequest("tools must be a list", "tools")
    tools: list[ToolDefinition] = []
    for i, tool in enumerate(raw):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise InvalidRequest(f"tools[{i}].function must be an object with a name", "tools")
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(parameters, dict):
            raise InvalidRequest(f"tools[{i}].function.parameters must be an object", "tools")
        tools.append(ToolDefinition(function["name"], parameters, orjson.dumps(tool).decode()))
    return tuple(tools)


def _tool_choice(raw: Any, tools: tuple[ToolDefinition, ...]) -> tuple[str, str | None]:
    if raw is None:
        return "auto", None
    if raw in ("auto", "none", "required"):
        return str(raw), None
    function = raw.get("function") if isinstance(raw, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str):
        raise InvalidRequest(
            "tool_choice must be 'auto', 'none', 'required' or name a function", "tool_choice"
        )
    if all(tool.name != name for tool in tools):
        raise InvalidRequest(f"tool_choice names {name!r}, which is not offered", "tool_choice")
    return "required", name


def _response_format(raw: Any) -> tuple[bool, Mapping[str, Any] | None]:
    if raw is None:
        return False, None
    kind = raw.get("type") if isinstance(raw, dict) else None
    if kind == "text":
        return False, None
    if kind == "json_object":
        return True, None
    if kind == "json_schema":
        spec = raw.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise InvalidRequest(
                "response_format.json_schema.schema must be an object", "response_format"
            )
        return True, schema
    raise InvalidRequest(
        "response_format.type must be 'text', 'json_object' or 'json_schema'", "response_format"
    )


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _priority(body: Mapping[str, Any]) -> int:
    priority = body.get("priority", 0)
    if not _int(priority):
        raise InvalidRequest("priority must be an integer", "priority")
    nvext = body.get("nvext")
    hints = nvext.get("agent_hints") if isinstance(nvext, dict) else None
    if isinstance(hints, dict) and "priority" in hints:
        if not _int(hints["priority"]):
            raise InvalidRequest("nvext.agent_hints.priority must be an integer", "nvext")
        # Dynamo: higher = sooner; keep one convention (lower = sooner).
        priority -= hints["priority"]
    return int(priority)


def parse_chat_request(body: Any) -> ChatRequest:
    """Check a decoded request body and keep what the simulator needs.

    Args:
        body: the JSON-decoded request body.

    Returns:
        The checked request.

    Raises:
        InvalidRequest: the body is not a valid chat-completions request.
    """
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    model = body.get("model", "")
    if not isinstance(model, str):
        raise InvalidRequest("model must be a string", "model")
    tools = _tools(body.get("tools"))
    tool_choice, forced = _tool_choice(body.get("tool_choice"), tools)
    json_mode, schema = _response_format(body.get("response_format"))
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (not _int(max_tokens) or max_tokens < 1):
        raise InvalidRequest("max_tokens must be a positive integer", "max_tokens")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise InvalidRequest("stream must be a boolean", "stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise InvalidRequest("stream_options must be an object", "stream_options")
    parallel = body.get("parallel_tool_calls", True)
    salt = body.get("cache_salt", "")
    if not isinstance(salt, str):
        raise InvalidRequest("cache_salt must be a string", "cache_salt")
    return ChatRequest(
        model=model,
        messages=_messages(body.get("messages")),
        tools=tools,
        tool_choice=tool_choice,
        forced_tool=forced,
        parallel_tool_calls=parallel is not False,
        output_schema=schema,
        json_mode=json_mode,
        max_tokens=max_tokens,
        stream=stream,
        include_usage=bool(options and options.get("include_usage") is True),
        priority=_priority(body),
        cache_salt=salt,
    )
