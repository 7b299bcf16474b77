"""Shared pieces of the driver tests: loops, scripted policies and a task census."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import trio

from agentcore import Tool
from agentcore.core import (
    AgentLoop,
    AssistantMessage,
    CallModel,
    LoopConfig,
    ToolCall,
    ToolMessage,
    UserMessage,
)


def make_loop(
    index: int,
    tools: Sequence[Tool[..., Any]] = (),
    *,
    max_turns: int = 4,
    base_priority: int = 0,
    priority_step: int = 1,
) -> AgentLoop:
    config = LoopConfig(
        run_id=f"agent-{index}",
        tools=tuple(t.spec for t in tools),
        max_turns=max_turns,
        base_priority=base_priority,
        priority_step=priority_step,
    )
    return AgentLoop(config, [UserMessage(f"task {index}")])


def agent_of(call: CallModel) -> int:
    """The index of the agent that made ``call`` (from its session id ``agent-N``)."""
    return int(call.hints.session_id.rsplit("-", 1)[1])


def tool_results(call: CallModel) -> list[ToolMessage]:
    return [m for m in call.messages if isinstance(m, ToolMessage)]


def tool_then_answer(
    name: str,
    arguments: Callable[[CallModel], dict[str, Any]],
    *,
    calls_per_turn: int = 1,
) -> Callable[[CallModel], str | AssistantMessage]:
    """A policy: first request asks for tool ``name``; once results are in, answer with them."""

    def policy(call: CallModel) -> str | AssistantMessage:
        results = tool_results(call)
        if results:
            return "answer: " + " | ".join(m.content for m in results)
        calls = tuple(
            ToolCall(f"call_{i}", name, json.dumps(arguments(call))) for i in range(calls_per_turn)
        )
        return AssistantMessage(tool_calls=calls)

    return policy


def task_census() -> int:
    """How many agentcore tasks exist right now, anywhere in the task tree.

    Tasks of test servers and of the test itself are not counted.
    """
    stack = [trio.lowlevel.current_root_task()]
    count = 0
    while stack:
        task = stack.pop()
        count += task.name.startswith("agentcore")
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return count
