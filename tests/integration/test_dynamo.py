"""agentcore against the real NVIDIA Dynamo stack: frontend (KV router) + mocker engine.

Replies are scripted (see ``dynamo_helpers.SCRIPT``); each request picks its reply through
``nvext.annotations``, set by the dynamo backend's per-call ``annotations`` hook. Run with
``make test-dynamo``.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

import attrs
import httpx
import orjson
import pytest
import trio

import agentcore
from agentcore import AbortKind, ErrorKind, ModelParams, RetryPolicy
from agentcore.core import (
    AgentHints,
    AssistantMessage,
    CallModel,
    ModelResponded,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from tests.integration.dynamo_helpers import MODEL, SCRIPT, STACK, replay_annotations

pytestmark = pytest.mark.dynamo

# What Dynamo 1.6 accepts inside nvext and nvext.agent_hints (it answers anything else with 400).
NVEXT_KEYS_1_6 = {"agent_hints", "annotations", "extra_fields", "cache_salt"}
HINT_KEYS_1_6 = {"priority", "strict_priority", "osl", "speculative_prefill", "latency_sensitivity"}

LONG_SYSTEM = " ".join(
    f"Rule {n}: check every figure against its source before you repeat it." for n in range(60)
)


def weather_task(tool: agentcore.Tool[..., Any], **options: Any) -> agentcore.Task:
    return agentcore.Task(
        prompt="Scenario: weather. Report the weather for {who}.",
        system="You report the weather.",
        tools=[tool],
        max_turns=3,
        params=ModelParams(max_tokens=64),
        **options,
    )


def make_weather_tool(calls: list[str]) -> agentcore.Tool[..., Any]:
    @agentcore.tool
    async def get_weather(city: str) -> str:
        """Current weather of a city.

        Args:
            city: the city name.
        """
        calls.append(city)
        await trio.sleep(0)
        return f"{city}: sunny"

    return get_weather


def encoded_body(backend: agentcore.wire.Backend, call: CallModel, stream: bool = False) -> Any:
    return orjson.loads(backend.codec.encode(call, stream=stream).body)


# ------------------------------------------------------------------ agents with tool calls


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "streamed"])
async def test_agents_with_tool_calls_finish_with_the_scripted_answer(
    dynamo: Any, stream: bool
) -> None:
    executed: list[str] = []
    tool = make_weather_tool(executed)
    inputs = [{"who": "Ann"}, {"who": "Bob"}, {"who": "Cyd"}]
    with trio.fail_after(60):
        results = await agentcore.run_batch(
            weather_task(tool),
            inputs,
            backend=dynamo.url,
            model=MODEL,
            max_inflight=2,
            stream=stream,
            annotations=replay_annotations,
        )
    assert [r.index for r in results] == [0, 1, 2]
    for result in results:
        assert result.status == "ok", result.error
        assert result.output == SCRIPT["weather-2"]
        assert result.turns == 3
        replies = [m for m in result.transcript if isinstance(m, AssistantMessage)]
        first, second = replies[0].tool_calls, replies[1].tool_calls
        # Real OpenAI tool calls, parsed by the frontend's hermes parser from the model text.
        assert [(c.name, orjson.loads(c.arguments)) for c in first] == [
            ("get_weather", {"city": "Paris"})
        ]
        assert [(c.name, orjson.loads(c.arguments)) for c in second] == [
            ("get_weather", {"city": "Lyon"}),
            ("get_weather", {"city": "Nice"}),
        ]
        ids = [c.id for c in (*first, *second)]
        assert all(i.startswith("call-") for i in ids) and len(set(ids)) == 3
        answers = {m.call_id: m.content for m in result.transcript if isinstance(m, ToolMessage)}
        assert answers == {
            first[0].id: "Paris: sunny",
            second[0].id: "Lyon: sunny",
            second[1].id: "Nice: sunny",
        }
    assert set(executed) == {"Paris", "Lyon", "Nice"}


# ------------------------------------------------------------------ hints and strictness


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"priority": True, "osl": False}, {"priority": 7}),
        ({"priority": False, "osl": True}, {"osl": 24}),
        (
            {"priority": False, "osl": False, "speculative_prefill": True},
            {"speculative_prefill": True},
        ),
        (
            {"priority": False, "osl": False, "latency_sensitivity": 1.5},
            {"latency_sensitivity": 1.5},
        ),
        ({"priority": False, "osl": False, "strict_priority": 3}, {"strict_priority": 3}),
    ],
    ids=["priority", "osl", "speculative_prefill", "latency_sensitivity", "strict_priority"],
)
async def test_every_agent_hint_of_the_release_is_accepted(
    dynamo: Any, options: dict[str, Any], expected: dict[str, Any]
) -> None:
    backend = agentcore.wire.backend(
        dynamo.url, model=MODEL, dynamo_version="1.6", annotations=replay_annotations, **options
    )
    call = CallModel(
        request_id=f"hint-{secrets.token_hex(4)}/0",
        messages=(UserMessage("Scenario: plain. Say something."),),
        params=ModelParams(max_tokens=16),
        hints=AgentHints(session_id="hint-test", priority=7, expected_output_tokens=24),
    )
    assert encoded_body(backend, call)["nvext"]["agent_hints"] == expected
    with trio.fail_after(30):
        async with agentcore.open_driver(backend, model=MODEL, max_inflight=1) as driver:
            reply = await driver.call_model(call)
    assert isinstance(reply, ModelResponded), reply
    assert reply.message.content == SCRIPT["plain-0"]


def test_unknown_nvext_keys_are_never_sent_and_dynamo_rejects_them(dynamo: Any) -> None:
    with pytest.raises(agentcore.ConfigError):
        agentcore.wire.backend(dynamo.url, model=MODEL, extra_body={"nvext": {"agent_context": {}}})
    with pytest.raises(agentcore.ConfigError):
        agentcore.wire.backend(dynamo.url, model=MODEL, extra_body={"session_control": {}})
    backend = agentcore.wire.backend(
        dynamo.url,
        model=MODEL,
        dynamo_version="1.6",
        priority=True,
        speculative_prefill=True,
        strict_priority=1,
        extra_fields=["timing", "worker_id"],
        annotations=replay_annotations,
        cache_salt="tenant-a",
    )
    call = CallModel(
        request_id="strict/0",
        messages=(UserMessage("Scenario: plain. Say something."),),
        params=ModelParams(max_tokens=16),
        hints=AgentHints(session_id="strict", priority=2, expected_output_tokens=16, final=True),
    )
    body = encoded_body(backend, call)
    assert set(body["nvext"]) <= NVEXT_KEYS_1_6
    assert set(body["nvext"]["agent_hints"]) <= HINT_KEYS_1_6
    url = f"{dynamo.http_url}/v1/chat/completions"
    with httpx.Client(timeout=30) as client:
        # The body agentcore encodes is accepted as is...
        assert client.post(url, json=body).status_code == 200
        # ...and the same body with one unknown key is refused: strictness is live.
        for unknown in ({"agent_context": {"session_id": "x"}}, {"agent_hints": {"bogus": 1}}):
            raw = {**body, "nvext": {**body["nvext"], **unknown}}
            if "agent_hints" in unknown:
                raw["nvext"]["agent_hints"] = {**body["nvext"]["agent_hints"], "bogus": 1}
            answer = client.post(url, json=raw)
            assert answer.status_code == 400, answer.text
            assert "unknown field" in answer.text


# ------------------------------------------------------------------ session identity


async def test_session_headers_reach_the_request_trace(dynamo: Any) -> None:
    batch_id = f"sess{secrets.token_hex(3)}"
    executed: list[str] = []
    task = agentcore.Task(
        prompt="Scenario: session. Weather for {who}.",
        tools=[make_weather_tool(executed)],
        max_turns=1,  # one tool turn, then the forced final request
        params=ModelParams(max_tokens=64),
    )
    with trio.fail_after(60):
        results = await agentcore.run_batch(
            task,
            [{"who": "Ann"}, {"who": "Bob"}],
            backend=dynamo.url,
            model=MODEL,
            batch_id=batch_id,
            annotations=replay_annotations,
        )
    assert [r.status for r in results] == ["ok", "ok"]
    assert [r.output for r in results] == [SCRIPT["session-1"]] * 2

    ours: list[dict[str, Any]] = []
    with trio.fail_after(30):
        while len(ours) < 5:  # the warm-up request and two turns of each agent
            await trio.sleep(0.1)
            ends = [e for e in dynamo.stack.trace_records() if e.get("event_type") == "request_end"]
            ours = [
                e
                for e in ends
                if (e.get("agent_context") or {}).get("session_id", "").startswith(batch_id)
            ]
    by_request = {e["request"]["x_request_id"]: e["agent_context"] for e in ours}
    assert set(by_request) == {f"{batch_id}-warm/0"} | {
        f"{batch_id}-{i}/{turn}" for i in (0, 1) for turn in (0, 1)
    }
    for request_id, context in by_request.items():
        session = request_id.split("/")[0]
        assert context["session_id"] == session
        final = request_id.endswith("/1")
        assert bool(context.get("session_final", False)) is final, (request_id, context)


# ------------------------------------------------------------------ shared prefixes, timing


async def test_later_agents_and_turns_read_the_shared_prefix_from_cache(dynamo: Any) -> None:
    executed: list[str] = []
    tool = make_weather_tool(executed)
    task = weather_task(tool, name="prefix")
    task = attrs.evolve(task, system=f"Prefix test {secrets.token_hex(4)}. {LONG_SYSTEM}")
    with trio.fail_after(60):
        async with agentcore.open_driver(
            dynamo.url, model=MODEL, max_inflight=1, tools=[tool], annotations=replay_annotations
        ) as driver:
            results = await agentcore.run_batch(
                task, [{"who": "Ann"}, {"who": "Bob"}, {"who": "Cyd"}], driver=driver, warm=True
            )
            requests = driver.statistics().recent_requests
    assert all(r.status == "ok" for r in results)
    warm = [r for r in requests if r.index is None]
    agents = [r for r in requests if r.index is not None]
    assert len(warm) == 1 and len(agents) == 9
    assert all(r.cached_tokens is not None for r in requests)
    # Every agent request, the first turn of the first agent included, finds the warmed
    # prefix (whole 64-token blocks) in the engine's cache; later turns find more.
    for r in agents:
        assert r.cached_tokens is not None and r.cached_tokens > 0, r
    by_agent: dict[int | None, list[int]] = {}
    for r in agents:
        by_agent.setdefault(r.index, []).append(r.cached_tokens or 0)
    for cached in by_agent.values():
        assert cached[-1] > cached[0]
    assert all((r.usage.cached_tokens or 0) > 0 for r in results)


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "streamed"])
async def test_server_timing_is_read_from_nvext(dynamo: Any, stream: bool) -> None:
    system = SystemMessage(f"Timing test {secrets.token_hex(4)}. {LONG_SYSTEM}")
    first = CallModel(
        request_id="timing/0",
        messages=(system, UserMessage("Scenario: plain. First question.")),
        params=ModelParams(max_tokens=16),
        hints=AgentHints(session_id=f"timing-{stream}"),
    )
    second = attrs.evolve(
        first,
        request_id="timing/1",
        messages=(system, UserMessage("Scenario: plain. Second question.")),
    )
    with trio.fail_after(30):
        async with agentcore.open_driver(
            dynamo.url,
            model=MODEL,
            stream=stream,
            extra_fields=["timing", "worker_id"],
            annotations=replay_annotations,
        ) as driver:
            one = await driver.call_model(first)
            two = await driver.call_model(second)
    assert isinstance(one, ModelResponded) and isinstance(two, ModelResponded)
    for reply in (one, two):
        assert reply.timing is not None
        assert reply.timing.ttft_ms is not None and reply.timing.ttft_ms > 0
        assert reply.timing.total_time_ms is not None
        assert reply.timing.kv_hit_rate is not None
        assert reply.timing.worker_id is not None
    assert two.timing is not None and two.timing.kv_hit_rate is not None
    assert two.timing.kv_hit_rate > 0
    assert two.usage.cached_tokens is not None and two.usage.cached_tokens > 0


# ------------------------------------------------------------------ the server goes away


async def test_server_going_away_mid_batch_ends_every_agent_with_a_typed_failure(
    private_dynamo: Any,
) -> None:
    agents = 3
    waiting = 0
    everyone_waits = trio.Event()
    server_gone = trio.Event()

    @agentcore.tool(coalesce=False)
    async def get_weather(city: str) -> str:
        """Current weather of a city.

        Args:
            city: the city name.
        """
        nonlocal waiting
        waiting += 1
        if waiting == agents:
            everyone_waits.set()
        await server_gone.wait()
        return f"{city}: sunny"

    async def take_the_server_away() -> None:
        await everyone_waits.wait()
        await trio.to_thread.run_sync(private_dynamo.stack.stop_frontend)
        server_gone.set()

    retry = RetryPolicy(max_attempts=3, base_delay=0.05, max_delay=0.2)
    with trio.fail_after(90):
        async with agentcore.open_driver(
            private_dynamo.url,
            model=MODEL,
            max_inflight=agents,
            tools=[get_weather],
            retry=retry,
            annotations=replay_annotations,
        ) as driver:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(take_the_server_away)
                results = await agentcore.run_batch(
                    weather_task(get_weather),
                    [{"who": str(i)} for i in range(agents)],
                    driver=driver,
                )
            stats = driver.statistics()

    assert [r.index for r in results] == list(range(agents))
    for result in results:
        assert result.status == "failed"
        assert result.error is not None
        assert result.error.kind is AbortKind.MODEL_FAILED
        assert result.error.error is not None
        assert result.error.error.kind is ErrorKind.CONNECTION
        assert result.turns == 2  # the first turn worked; the second could not
    failed = [r for r in stats.recent_requests if r.error is not None]
    assert len(failed) == agents
    assert all(r.attempts == retry.max_attempts for r in failed)
    assert stats.runs_failed == agents


def test_harness_reports_a_stack_that_cannot_start(tmp_path: Any, dynamo_replay: Any) -> None:
    found = STACK.Install.find()
    assert found is not None
    broken = STACK.DynamoStack(found, run_dir=tmp_path / "run", mocker_args=["--no-such-flag"])
    with pytest.raises(STACK.StackError, match="mocker exited"):
        broken.start(timeout=60)
    # Both processes were stopped by their pids when the start failed.
    for pid in (broken.frontend_pid, broken.mocker_pid):
        assert pid is not None
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
