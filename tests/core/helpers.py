"""Shared pieces of the core tests: tools, an output type, reply builders and a script driver."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from agentcore import Usage
from agentcore._core.schema import json_schema, structure
from agentcore.core import (
    AgentLoop,
    AssistantMessage,
    CallModel,
    CallTool,
    Effect,
    Event,
    LoopConfig,
    ModelResponded,
    SystemMessage,
    ToolCall,
    ToolSpec,
    UserMessage,
)


@attrs.frozen
class AddArgs:
    x: int
    y: int


@attrs.frozen
class Answer:
    value: int
    note: str = ""


ADD = ToolSpec(
    "add",
    "Add two integers.",
    json_schema(AddArgs),
    validator=lambda arguments: structure(arguments, AddArgs),
)
ECHO = ToolSpec("echo", "Echo the arguments.")
TOOLS = (ADD, ECHO)

MESSAGES = (SystemMessage("You are terse."), UserMessage("What is 2 + 3?"))


def make_config(**overrides: Any) -> LoopConfig:
    values: dict[str, Any] = {"run_id": "run-1", "tools": TOOLS}
    values.update(overrides)
    return LoopConfig(**values)


def make_loop(**overrides: Any) -> AgentLoop:
    return AgentLoop(make_config(**overrides), MESSAGES)


REPLY_USAGE = Usage(5, 1)


def tool_reply(request_id: str, *calls: ToolCall, usage: Usage = REPLY_USAGE) -> ModelResponded:
    return ModelResponded(request_id, AssistantMessage(None, calls), usage)


def text_reply(request_id: str, content: str | None, usage: Usage = REPLY_USAGE) -> ModelResponded:
    return ModelResponded(request_id, AssistantMessage(content), usage)


def add_call(call_id: str, x: int = 2, y: int = 3) -> ToolCall:
    return ToolCall(call_id, "add", f'{{"x": {x}, "y": {y}}}')


def only_call_model(effects: Sequence[Effect]) -> CallModel:
    assert len(effects) == 1, effects
    (effect,) = effects
    assert isinstance(effect, CallModel), effect
    return effect


def call_tools(effects: Sequence[Effect]) -> list[CallTool]:
    assert effects, "expected CallTool effects"
    assert all(isinstance(e, CallTool) for e in effects), effects
    return [e for e in effects if isinstance(e, CallTool)]


def feed(loop: AgentLoop, events: Sequence[Event]) -> list[Effect]:
    """Feed events in order; return every effect emitted."""
    out: list[Effect] = []
    for event in events:
        out.extend(loop.handle(event))
    return out
