"""Conversation values: messages, tool calls, usage, hints and tool specifications.

All of these are frozen attrs classes: plain values that compare by content, serialise through
:mod:`agentcore._codecs.serde` and never perform I/O. They are the vocabulary shared by the core
loop, the codecs and the driver.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from .errors import ConfigError
from .validators import (
    is_int,
    optional_int_at_least,
    optional_nonempty_str,
    optional_number_at_least,
)

__all__ = [
    "AgentHints",
    "AssistantMessage",
    "Image",
    "Message",
    "ModelParams",
    "OutputSpec",
    "ServerTiming",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
]


@attrs.frozen
class ToolCall:
    """One tool call requested by the model.

    ``arguments`` is the raw JSON text exactly as the model produced it: it may be invalid JSON,
    which the loop reports back to the model rather than raising.
    """

    id: str
    """The call id the model (or the loop, when the model gave none) assigned."""
    name: str
    """The tool's name as the model spelled it (it may name no known tool)."""
    arguments: str = "{}"
    """The arguments as raw JSON text."""


def _calls_tuple(calls: Iterable[ToolCall]) -> tuple[ToolCall, ...]:
    return tuple(calls)


def _str_tuple(values: Iterable[str]) -> tuple[str, ...]:
    if isinstance(values, str):
        raise ConfigError(f"ModelParams.stop must be a collection of str, got {values!r}")
    return tuple(values)


def _all_str(_: Any, attribute: attrs.Attribute[Any], value: tuple[Any, ...]) -> None:
    for item in value:
        if not isinstance(item, str):
            raise ConfigError(f"ModelParams.{attribute.name} must hold str values, got {item!r}")


@attrs.frozen
class SystemMessage:
    """A system prompt."""

    content: str


_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def _check_image(instance: Image, _: attrs.Attribute[Any], __: Any) -> None:
    data, url, media_type = instance.data, instance.url, instance.media_type
    if (data is None) == (url is None):
        raise ConfigError("an Image needs exactly one of data= (bytes) or url=")
    if data is not None:
        if not isinstance(data, bytes) or not data:
            raise ConfigError(f"Image.data must be non-empty bytes, got {type(data).__name__}")
        if media_type is None:
            raise ConfigError("an Image given as bytes needs its media_type")
    elif not isinstance(url, str) or not url.startswith(("https://", "http://", "data:")):
        raise ConfigError(f"Image.url must be an http(s) or data: URL, got {url!r}")
    if media_type is not None and media_type not in _IMAGE_TYPES:
        raise ConfigError(
            f"Image.media_type must be one of {sorted(_IMAGE_TYPES)}, got {media_type!r}"
        )
    at = instance.at
    if at is not None and (isinstance(at, bool) or not isinstance(at, int) or at < 0):
        raise ConfigError(f"Image.at must be a non-negative integer or None, got {at!r}")


@attrs.frozen(kw_only=True)
class Image:
    """An image in a user message: its bytes or a URL, and its media type.

    Give ``data`` (bytes; ``media_type`` required) or ``url`` (``https://``, ``http://`` or a
    ``data:`` URL; ``media_type`` optional). Codecs send bytes inline (base64) and URLs as
    URLs.

    Raises:
        ConfigError: both or neither of ``data`` and ``url``, an unknown media type, a bad
            offset.
    """

    data: bytes | None = attrs.field(default=None, validator=_check_image, repr=False)
    url: str | None = None
    media_type: str | None = None
    """``image/png``, ``image/jpeg``, ``image/gif`` or ``image/webp``."""
    at: int | None = None
    """Where the image goes in its message's text: a character offset into
    ``UserMessage.content`` (the text before it, the image, the text after it); ``None``:
    after the text. Task templates set it where an image placeholder stands."""


def _images_tuple(images: Iterable[Image]) -> tuple[Image, ...]:
    result = tuple(images)
    for image in result:
        if not isinstance(image, Image):
            raise ConfigError(f"UserMessage.images must hold Image values, got {image!r}")
    return result


def _check_offsets(
    instance: UserMessage, _: attrs.Attribute[Any], images: tuple[Image, ...]
) -> None:
    for image in images:
        if image.at is not None and image.at > len(instance.content):
            raise ConfigError(
                f"Image.at={image.at} is past the end of the message's text "
                f"({len(instance.content)} characters)"
            )


@attrs.frozen
class UserMessage:
    """A user turn: text, and images next to it."""

    content: str
    images: tuple[Image, ...] = attrs.field(
        default=(), converter=_images_tuple, validator=_check_offsets
    )
    """Images of the turn (see :attr:`Image.at` for where each goes in the text)."""

    def parts(self) -> list[str | Image]:
        """The text and images in order: text pieces (never empty) and images, as placed by
        :attr:`Image.at` (images without an offset last, in order)."""
        text = self.content
        if not self.images:
            return [text] if text else []
        end = len(text)
        placed = sorted(self.images, key=lambda image: end if image.at is None else image.at)
        parts: list[str | Image] = []
        position = 0
        for image in placed:
            at = end if image.at is None else image.at
            if at > position:
                parts.append(text[position:at])
                position = at
            parts.append(image)
        if position < end:
            parts.append(text[position:])
        return parts


@attrs.frozen
class AssistantMessage:
    """A model turn: text, tool calls, or both."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_calls_tuple)


@attrs.frozen
class ToolMessage:
    """The result of one tool call, as shown to the model."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    """``True`` when ``content`` describes a failure (tool raised, bad arguments, ...)."""


Message = SystemMessage | UserMessage | AssistantMessage | ToolMessage
"""Any message of a transcript."""


@attrs.frozen
class Usage:
    """Token accounting of one model reply, or a sum of several.

    ``cached_tokens`` is ``None`` when the server did not report it: *unknown* is kept distinct
    from *zero*. When usages are added, the sum is ``None`` only if every part was ``None``.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int | None = None

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        if self.cached_tokens is None and other.cached_tokens is None:
            cached = None
        else:
            cached = (self.cached_tokens or 0) + (other.cached_tokens or 0)
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            cached,
        )


@attrs.frozen
class ServerTiming:
    """Timing and placement a server reported for one reply (e.g. Dynamo ``nvext.timing``).

    Every field is optional: servers report what they know. Times are in milliseconds.
    """

    ttft_ms: float | None = None
    prefill_time_ms: float | None = None
    prefill_wait_time_ms: float | None = None
    total_time_ms: float | None = None
    kv_hit_rate: float | None = None
    router_queue_depth: int | None = None
    worker_id: int | None = None


@attrs.frozen
class AgentHints:
    """What a serving stack may use to schedule one model request.

    ``session_id``, ``parent_session_id`` and ``final`` are the *session contract*: which
    requests belong to one agent, which agent spawned it, and which request is its last. Each
    dialect writes them only where its engine reads them (Dynamo's ``x-dynamo-session-*``
    headers, OpenAI's ``prompt_cache_key``), and the session id also where a router in front
    of several replicas reads it (``x-session-id``, ``x-smg-routing-key``: docs/backends.md).
    Backends translate the rest into their own wire format too (Dynamo ``nvext.agent_hints``,
    vLLM/SGLang ``priority``...). The core knows nothing about wire formats.
    """

    session_id: str
    """One id per agent run (a sub-agent gets its own)."""
    parent_session_id: str | None = None
    """The session id of the agent that spawned this one, if any (a ``map_reduce``'s map
    agents carry the plan agent's)."""
    turn: int = 0
    """0-based index of this model request within the run."""
    priority: int = 0
    """Higher means more urgent. By default it grows with the turn, so nearly-done agents go
    first and free their KV cache."""
    expected_output_tokens: int | None = None
    """Expected length of the reply, if known."""
    final: bool = False
    """``True`` once the loop has decided the run must end: the forced final answer (after
    which the run ends unless the answer fails validation and is asked for again, the retry
    marked too). A run whose model answers on its own ends without one, since no reply is
    known to be the answer before it arrives."""


@attrs.frozen
class ModelParams:
    """Sampling and request parameters of a model call."""

    max_tokens: int | None = attrs.field(default=None, validator=optional_int_at_least(1))
    temperature: float | None = attrs.field(default=None, validator=optional_number_at_least(0))
    top_p: float | None = attrs.field(default=None, validator=optional_number_at_least(0))
    tool_choice: str | None = attrs.field(default=None, validator=optional_nonempty_str)
    """``"auto"``, ``"none"`` or ``"required"`` (or, for dialects that can force one tool, its
    name); ``None`` leaves it to the server."""
    stop: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple, validator=_all_str)
    seed: int | None = attrs.field(default=None, validator=attrs.validators.optional(is_int))


@attrs.frozen
class OutputSpec:
    """The structured output a run must end with: a name and a JSON schema."""

    name: str
    schema: Mapping[str, Any] = attrs.field(eq=False, hash=False)


def _no_validator(arguments: Any) -> Any:
    return arguments


@attrs.frozen
class ToolSpec:
    """A tool as the model sees it, plus the validator for model-supplied arguments.

    ``validator`` receives the parsed JSON arguments and returns them in the form the tool
    expects (for ``@agentcore.tool`` functions: an attrs instance structured by cattrs). It
    raises any ``Exception`` whose message explains what is wrong; the loop sends that message
    back to the model. It is not part of equality or serialisation.
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = attrs.field(
        factory=lambda: {"type": "object", "properties": {}}, eq=False, hash=False
    )
    """JSON schema (``type: object``) of the arguments."""
    validator: Callable[[Any], Any] = attrs.field(
        default=_no_validator, eq=False, hash=False, repr=False
    )
