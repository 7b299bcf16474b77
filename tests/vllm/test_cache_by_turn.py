"""From the second turn on, vLLM reports (nearly) every prompt token of an agent's request as
cached: its history is the previous request's prompt and reply, replayed byte for byte
(``make test-vllm``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import agentcore
from agentcore import ModelParams, open_driver
from tests.server_scripts import free_port
from tests.vllm.conftest import REQUIRED
from tests.vllm.test_vllm import TOPICS, search
from tests.vllm.vllm_server import BLOCK, MAX_NUM_SEQS, VllmServer

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def long_vllm() -> Iterator[VllmServer]:
    """The agentcore-ready server with an 8,192-token context (the tiny model's own limit)."""
    if not REQUIRED:
        pytest.skip("needs a real vLLM server: run `make test-vllm` (AGENTCORE_VLLM=1)")
    server = VllmServer(free_port(), ("--max-model-len", "8192"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def long_system() -> str:
    """About 5,800 tokens nobody sent before. vLLM caches whole 128-token blocks, so a
    request's last partial block is never reported cached: with what the last turn adds (a
    tool result and the final instruction, ~100 tokens) up to ~220 tokens of a request are
    new, and a 95 % share needs prompts over ~4,500 tokens."""
    rules = " ".join(
        f"Rule {n}: cite the source of every claim and keep the answer short." for n in range(150)
    )
    return f"Session {uuid.uuid4().hex}. You are a careful research assistant. {rules}"


async def test_from_the_second_turn_on_each_agents_prompt_is_at_least_95_percent_cached(
    long_vllm: VllmServer,
) -> None:
    task = agentcore.Task(
        system=long_system(),
        prompt="Summarise what the notes say about {topic}.",
        tools=[search],
        max_turns=3,
        params=ModelParams(temperature=0.0, tool_choice="required", max_tokens=200),
    )
    inputs = TOPICS[:MAX_NUM_SEQS]
    async with open_driver(
        long_vllm.url, model="tiny", max_inflight=MAX_NUM_SEQS, tools=task.tools
    ) as driver:
        results = await agentcore.run_batch(task, inputs, driver=driver)
        stats = driver.statistics()
    assert [r.status for r in results] == ["ok"] * len(inputs), [r.error for r in results]
    later = [
        r for r in stats.recent_requests
        if r.index is not None and not r.request_id.endswith("/0")
    ]  # fmt: skip
    assert len(later) == 3 * len(inputs)  # three tool turns and the final answer each
    for request in later:
        assert request.cached_tokens is not None
        assert request.cached_tokens >= 0.95 * request.prompt_tokens, (
            request.request_id, request.cached_tokens, request.prompt_tokens,
        )  # fmt: skip
        assert request.prompt_tokens - request.cached_tokens < 2 * BLOCK
    # The per-turn ratios of statistics() say the same.
    assert [t.turn for t in stats.cache_by_turn] == [0, 1, 2, 3]
    assert all(t.ratio is not None and t.ratio >= 0.95 for t in stats.cache_by_turn[1:])
