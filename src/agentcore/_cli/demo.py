"""The task behind ``agentcore demo``: research agents that look topics up and write a typed
summary, against the embedded simulated backend.

Many agents share a small set of topics, so identical tool calls happen at the same time and
are executed once; every agent shares one system prompt and tool list, so the simulated
server's prefix cache serves most prompt tokens.
"""

from __future__ import annotations

import attrs
import trio

from .._tasks.task import Task
from .._tools.spec import tool

__all__ = ["DEMO_TOPICS", "ResearchNote", "demo_inputs", "demo_task"]

DEMO_TOPICS = (
    "prefix caching",
    "speculative decoding",
    "continuous batching",
    "KV cache eviction",
    "tensor parallelism",
    "paged attention",
    "request scheduling",
    "quantisation",
    "structured output",
)

_SYSTEM = (
    "You are a research assistant. For the topic you are given, call the lookup tool to "
    "gather facts, then write a short, accurate note. Cite the sources the tool returned. "
    "Be concise: three sentences at most. "
) * 4  # a realistically long shared system prompt


@tool(coalesce=True, timeout=5)
async def lookup(topic: str, depth: int = 1) -> str:
    """Look a topic up in the reference library.

    Args:
        topic: the subject to look up.
        depth: how many levels of references to follow (1-3).
    """
    await trio.sleep(0.1)  # a remote service
    return f"{topic}: {depth} reference(s) found; see library entry '{topic.lower()}'."


@attrs.frozen
class ResearchNote:
    """The typed output of one demo agent."""

    topic: str
    summary: str
    confidence: float
    sources: list[str]


def demo_task() -> Task[ResearchNote]:
    """The demo's task: one lookup round, then a :class:`ResearchNote`."""
    return Task(
        name="research",
        system=_SYSTEM,
        prompt="Write a research note on the topic below.\n\nTopic: {topic}\nAngle: {angle}",
        tools=[lookup],
        output=ResearchNote,
        max_turns=3,
    )


def demo_inputs(count: int) -> list[dict[str, str]]:
    """``count`` inputs cycling over :data:`DEMO_TOPICS` with varying angles."""
    angles = ("history", "trade-offs", "when to use it", "pitfalls", "recent results")
    return [
        {"topic": DEMO_TOPICS[i % len(DEMO_TOPICS)], "angle": angles[(i // 9) % len(angles)]}
        for i in range(count)
    ]
