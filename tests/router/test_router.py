"""agentcore behind a real vllm-router in front of two real vLLM replicas (``make test-router``).

The router's ``consistent_hash`` and ``sticky_least_loaded`` policies keep a session on one
replica when they find its key in a header they read (``x-session-id`` first); agentcore sends
each agent's session id there (the dialect's ``session_key_header``). Which replica served
which agent is read from the replicas' own logs (a line per request id; agentcore's request
ids are ``RUN/N``), and what each replica found cached from its ``/metrics``.
"""

from __future__ import annotations

import re
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

import agentcore
from agentcore import ModelParams, Result, open_driver
from tests.router.router_server import RouterServer
from tests.server_scripts import free_port
from tests.vllm.test_vllm import REPLY, search
from tests.vllm.vllm_server import BLOCK, VllmServer

pytestmark = pytest.mark.router

AGENTS = 16
REQUESTS = 3
"""Per agent: two forced tool turns and the final answer."""
RECEIVED = re.compile(r"Received request chatcmpl-(\S+)/(\d+): params")

Replicas = tuple[VllmServer, VllmServer]
StartRouter = Callable[[str], RouterServer]


def make_task() -> agentcore.Task:
    """A ~1,900-token shared system prompt nobody sent before (each replica's prefix cache is
    global and lives for the module), and a ~700-token note per agent in its prompt: an agent
    whose turn lands on the replica that does not hold its history recomputes the note, well
    over the two blocks any turn adds."""
    rules = " ".join(
        f"Rule {n}: cite the source of every claim and keep the answer short." for n in range(60)
    )
    return agentcore.Task(
        system=f"Session {uuid.uuid4().hex}. You are a careful research assistant. {rules}",
        prompt="Notes: {notes}\nSummarise what the notes say about {topic}.",
        tools=[search],
        max_turns=REQUESTS - 1,
        params=ModelParams(temperature=0.0, tool_choice="required", max_tokens=200),
    )


def inputs() -> list[dict[str, str]]:
    return [
        {"topic": f"topic {i}", "notes": " ".join(f"item {i}.{k} was seen." for k in range(80))}
        for i in range(AGENTS)
    ]


@pytest.fixture
def start_router(replicas: Replicas) -> Iterator[StartRouter]:
    """Start a router with a policy in front of both replicas (stopped at the end)."""
    started: list[RouterServer] = []

    def start(policy: str) -> RouterServer:
        router = RouterServer(free_port(), policy, tuple(r.http for r in replicas))
        router.start()
        started.append(router)
        return router

    try:
        yield start
    finally:
        for router in started:
            router.stop()


class Observed:
    """What the replicas saw of a batch: their log lines and counters from now on."""

    def __init__(self, replicas: Replicas) -> None:
        self.replicas = replicas
        self.offsets = [r.log.stat().st_size for r in replicas]
        self.before = [r.metrics() for r in replicas]

    def replicas_of(self) -> dict[str, set[int]]:
        """Run id -> the ports of the replicas that received a request of it."""
        served: dict[str, set[int]] = defaultdict(set)
        for replica, offset in zip(self.replicas, self.offsets, strict=True):
            with replica.log.open("rb") as log:
                log.seek(offset)
                text = log.read().decode(errors="replace")
            for run_id, _ in RECEIVED.findall(text):
                served[run_id].add(replica.port)
        return dict(served)

    def delta(self, name: str) -> float:
        """A counter's growth, summed over the replicas."""
        after = [r.metrics() for r in self.replicas]
        pairs = zip(after, self.before, strict=True)
        return sum(a.get(name, 0.0) - b.get(name, 0.0) for a, b in pairs)


@asynccontextmanager
async def batch(
    router: RouterServer, **options: Any
) -> AsyncIterator[tuple[list[Result], agentcore.DriverStatistics]]:
    task = make_task()
    async with open_driver(
        f"vllm://127.0.0.1:{router.port}", model="tiny", max_inflight=8, tools=task.tools,
        **options,
    ) as driver:  # fmt: skip
        results = await agentcore.run_batch(task, inputs(), driver=driver)
        yield sorted(results, key=lambda r: r.index), driver.statistics()


def agents_of(served: dict[str, set[int]]) -> dict[str, set[int]]:
    """The batch's agents (the warm-up's run, ``...-warm`` or vLLM's ``...-check``, left out)."""
    return {run: ports for run, ports in served.items() if not run.endswith(("-warm", "-check"))}


def later_requests(stats: agentcore.DriverStatistics) -> list[agentcore.RequestStats]:
    return [
        r for r in stats.recent_requests
        if r.index is not None and not r.request_id.endswith("/0")
    ]  # fmt: skip


@pytest.mark.parametrize("policy", ["consistent_hash", "sticky_least_loaded"])
async def test_the_router_keeps_each_agent_on_one_replica_and_its_history_cached(
    replicas: Replicas, start_router: StartRouter, policy: str
) -> None:
    router = start_router(policy)
    seen = Observed(replicas)
    async with batch(router) as (results, stats):
        pass
    assert [(r.status, r.output) for r in results] == [("ok", REPLY)] * AGENTS, [
        r.error for r in results
    ]
    served = agents_of(seen.replicas_of())
    assert len(served) == AGENTS
    assert all(len(ports) == 1 for ports in served.values()), served
    per_replica = [sum(r.port in ports for ports in served.values()) for r in replicas]
    assert min(per_replica) >= 2, per_replica  # the agents are spread over both replicas

    # From the second turn on, each request finds its whole history but the last partial
    # block and what the turn added (the final one: the tool result and the final
    # instruction), well under the ~7 blocks of its note it would recompute elsewhere.
    later = later_requests(stats)
    assert len(later) == AGENTS * (REQUESTS - 1)
    for request in later:
        assert request.cached_tokens is not None
        assert request.prompt_tokens - request.cached_tokens < 3 * BLOCK, request
    turns = stats.cache_by_turn
    assert [t.turn for t in turns] == list(range(REQUESTS))
    assert all(t.ratio is not None and t.ratio > 0.85 for t in turns[1:]), turns

    # The per-turn counters agree with the replicas' own counters (the warm request included).
    assert seen.delta("vllm:prompt_tokens_total") == stats.prompt_tokens
    cached = seen.delta('vllm:prompt_tokens_by_source_total{source="local_cache_hit"}')
    assert cached == stats.cached_tokens == sum(t.cached_tokens for t in turns)
    assert sum(t.prompt_tokens for t in turns) == stats.prompt_tokens


async def test_without_the_session_key_consistent_hash_scatters_an_agents_turns(
    replicas: Replicas, start_router: StartRouter
) -> None:
    # The control: vllm-router then hashes the next header it reads, agentcore's per-request
    # x-request-id, so an agent's turns go to either replica and miss their history there.
    router = start_router("consistent_hash")
    seen = Observed(replicas)
    async with batch(router, session_key_header=None) as (results, stats):
        pass
    assert all(r.status == "ok" for r in results)
    served = agents_of(seen.replicas_of())
    assert len(served) == AGENTS
    assert sum(len(ports) == 2 for ports in served.values()) >= 4, served
    later = later_requests(stats)
    missed = [r for r in later if r.prompt_tokens - (r.cached_tokens or 0) > 4 * BLOCK]
    assert len(missed) >= 4, later
