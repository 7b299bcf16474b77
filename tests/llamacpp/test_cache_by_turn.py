"""From the second turn on, llama-server reports (nearly) every prompt token of an agent's
request as cached: its history is the previous request's prompt and reply, replayed byte for
byte, and the server keeps it in the agent's slot (``make test-llamacpp``)."""

from __future__ import annotations

import pytest

import agentcore
from agentcore import ModelParams, open_driver
from tests.llamacpp.llama_server import LlamaServer
from tests.llamacpp.test_llamacpp import SYSTEM, TOPICS, search

pytestmark = pytest.mark.llamacpp


async def test_from_the_second_turn_on_each_agents_prompt_is_at_least_95_percent_cached(
    private_llama: LlamaServer,
) -> None:
    task = agentcore.Task(
        # About 3,600 tokens: a turn leaves 80-130 tokens uncached (under 5 %), and the final
        # prompt (~4,000) still fits the slot's 4,096-token context.
        system=" ".join([SYSTEM] * 3),
        prompt="Summarise what the notes say about {topic}.",
        tools=[search],
        max_turns=3,
        params=ModelParams(temperature=0.0, tool_choice="required", max_tokens=200),
    )
    # One agent per slot: each agent's history stays in the slot that computed it.
    inputs = TOPICS[: private_llama.slots]
    async with open_driver(
        private_llama.url, model="tiny", max_inflight=private_llama.slots, tools=task.tools
    ) as driver:
        results = await agentcore.run_batch(task, inputs, driver=driver)
        stats = driver.statistics()
    assert [r.status for r in results] == ["ok"] * len(inputs), [r.error for r in results]
    later = [
        r for r in stats.recent_requests
        if r.index is not None and not r.request_id.endswith("/0")
    ]  # fmt: skip
    assert len(later) == 3 * len(inputs)
    for request in later:
        assert request.cached_tokens is not None
        assert request.cached_tokens >= 0.95 * request.prompt_tokens, (
            request.request_id, request.cached_tokens, request.prompt_tokens,
        )  # fmt: skip
    assert all(t.ratio is not None and t.ratio >= 0.95 for t in stats.cache_by_turn[1:])
