"""Conversation values: messages, tool calls, usage, hints and tool specifications.

All of these are frozen attrs classes: plain values that compare by content, serialise through
:mod:`agentcore._serde` and never perform I/O. They are the vocabulary shared by the core loop,
the codecs and the driver.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

__all__ = [
    "AgentHints",
    "AssistantMessage",
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
    return tuple(values)


@attrs.frozen
class SystemMessage:
    """A system prompt."""

    content: str


@attrs.frozen
class UserMessage:
    """A user turn."""

    content: str


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

    Backends translate these into their own wire format (Dynamo ``nvext.agent_hints`` and
    session headers, vLLM/SGLang ``priority``...). The core knows nothing about wire formats.
    """

    session_id: str
    """One id per agent run (a sub-agent gets its own)."""
    parent_session_id: str | None = None
    """The session id of the agent that spawned this one, if any."""
    turn: int = 0
    """0-based index of this model request within the run."""
    priority: int = 0
    """Higher means more urgent. By default it grows with the turn, so nearly-done agents go
    first and free their KV cache."""
    expected_output_tokens: int | None = None
    """Expected length of the reply, if known."""
    final: bool = False
    """``True`` on the last request of the run (the forced final answer)."""


@attrs.frozen
class ModelParams:
    """Sampling and request parameters of a model call."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    tool_choice: str | None = None
    """``"auto"``, ``"none"`` or ``"required"``; ``None`` leaves it to the server."""
    stop: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    seed: int | None = None


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
