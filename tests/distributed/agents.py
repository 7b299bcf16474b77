"""A deterministic agent for the distributed tests and the chaos runs.

Agent ``n`` calls the tool ``bump(agent=n, turn=t)`` for ``t = 0 .. turns-1``, one call per
turn, then answers ``{"total": <sum of the tool results it saw>}``. The tool's values are a
fixed function of its arguments, so every agent's correct answer is known in advance, and a
result built from a lost, repeated or mixed-up step shows up as a wrong total.

When ``AGENTCORE_DIST_LOG`` names a folder, every tool execution and every model request
appends one line to a per-process file there (``O_APPEND`` writes of one short line are
atomic), so a checker can count repeated side effects and repeated model decisions even
across SIGKILLs.
"""

from __future__ import annotations

import os
import re

import attrs
import orjson
import trio

import agentcore
from agentcore import Usage
from agentcore.core import (
    AssistantMessage,
    CallModel,
    ModelResponded,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from agentcore.wire import Exchange

_AGENT = re.compile(r"agent (\d+)")


def tool_value(agent: int, turn: int) -> int:
    """The value ``bump`` returns."""
    return (agent * 7919 + turn * 104729) % 1000


def expected_total(agent: int, turns: int) -> int:
    """The correct final answer of agent ``agent``."""
    return sum(tool_value(agent, t) for t in range(turns))


def _log(kind: str, text: str) -> None:
    folder = os.environ.get("AGENTCORE_DIST_LOG")
    if not folder:
        return
    fd = os.open(
        os.path.join(folder, f"{kind}-{os.getpid()}.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT
    )
    try:
        os.write(fd, text.encode() + b"\n")
    finally:
        os.close(fd)


@agentcore.tool
def bump(agent: int, turn: int) -> int:
    """Return the value of an agent's turn (a stand-in for a side-effecting service).

    Args:
        agent: the agent's number.
        turn: the turn number.
    """
    _log("tool", f"{agent}:{turn}")
    return tool_value(agent, turn)


@attrs.frozen
class Total:
    total: int


def make_task(turns: int) -> agentcore.Task:
    return agentcore.Task(
        prompt="Add up the values of agent {n}.",
        tools=[bump],
        output=Total,
        max_turns=turns + 1,
        name="bump",
    )


TASK = make_task(2)


class CountingModel:
    """A model that makes agent ``n`` call ``bump`` ``turns`` times, then add up the results."""

    def __init__(self, turns: int = 2, latency: float = 0.0) -> None:
        self.turns = turns
        self.latency = latency
        self.calls = 0

    async def exchange(self, call: CallModel) -> Exchange:
        self.calls += 1
        _log("model", call.request_id)
        if self.latency:
            await trio.sleep(self.latency)
        else:
            await trio.lowlevel.checkpoint()
        user = next(m for m in call.messages if isinstance(m, UserMessage))
        found = _AGENT.search(user.content)
        assert found is not None
        agent = int(found.group(1))
        results = [int(m.content) for m in call.messages if isinstance(m, ToolMessage)]
        if len(results) < self.turns:
            turn = len(results)
            arguments = orjson.dumps({"agent": agent, "turn": turn}).decode()
            reply = AssistantMessage(tool_calls=(ToolCall(f"c{turn}", "bump", arguments),))
            finish = "tool_calls"
        else:
            reply = AssistantMessage(content=orjson.dumps({"total": sum(results)}).decode())
            finish = "stop"
        return Exchange(ModelResponded(call.request_id, reply, Usage(10, 5), finish))

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()
