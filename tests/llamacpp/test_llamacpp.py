"""agentcore against a real llama.cpp llama-server: real forward passes, per-slot KV caches,
continuous batching, and llama-server's own tool-call and JSON-schema grammars.

Each defect found by running agentcore against llama-server has a test here (``make
test-llamacpp``); the unit tests next to the code pin the same behaviour without a server.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import attrs
import orjson
import pytest
import trio

import agentcore
from agentcore import AbortKind, ErrorKind, ModelParams, Result, RetryPolicy, open_driver
from agentcore._transports.factory import make_transport
from agentcore._transports.lean import LeanTransport
from agentcore.core import (
    AssistantMessage,
    CallModel,
    ModelFailed,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from tests.llamacpp.llama_server import LlamaServer

pytestmark = pytest.mark.llamacpp

REPLY = "Hello! I am a tiny test model."
# Greedy decoding everywhere: the scripted model's answers hold at any temperature by design,
# but a sampled deviation (rare, not impossible) would make a test flaky.
SYSTEM = "You are a careful research assistant. " + " ".join(
    f"Rule {n}: cite the source of every claim and keep the answer short." for n in range(40)
)


@attrs.frozen
class Summary:
    text: str


@agentcore.tool
async def search(q: str) -> str:
    """Search the notes.

    Args:
        q: what to look for.
    """
    await trio.sleep(0.05)
    return f"notes about {q[:20]}"


def research(**changes: Any) -> agentcore.Task:
    values: dict[str, Any] = {
        "system": SYSTEM,
        "prompt": "Summarise what the notes say about {topic}.",
        "tools": [search],
        "output": Summary,
        "max_turns": 1,
        "params": ModelParams(temperature=0.0, tool_choice="required", max_tokens=200),
    }
    values.update(changes)
    return agentcore.Task(**values)


TOPICS = [{"topic": t} for t in ("tides", "comets", "glaciers", "volcanoes", "moss", "owls")]


async def run(
    server: LlamaServer, task: agentcore.Task, inputs: Sequence[Any], **options: Any
) -> tuple[list[Result], agentcore.BatchStream, Any, Any]:
    """Run a batch; return the results, the stream, the driver's statistics and its transport."""
    backend = options.pop("backend", server.url)
    warm = options.pop("warm", True)  # True: the backend's own strategy
    results: list[Result] = []
    async with open_driver(
        backend, model="tiny", max_inflight=server.slots, tools=task.tools, **options
    ) as driver:
        async with agentcore.open_batch(task, inputs, driver=driver, warm=warm) as stream:
            async for result in stream:
                results.append(result)
        stats = driver.statistics()
        transport = driver._client.transport  # type: ignore[attr-defined]
    results.sort(key=lambda r: r.index)
    return results, stream, stats, transport


def first_requests(stats: Any) -> list[Any]:
    return [r for r in stats.recent_requests if r.index is not None and r.request_id.endswith("/0")]


# ----------------------------------------------------------------------------- the public API


@pytest.mark.parametrize(
    ("backend", "options"),
    [
        ("llamacpp://127.0.0.1:{port}", {}),
        ("vllm://127.0.0.1:{port}", {}),
        ("http://127.0.0.1:{port}/v1", {"stream": True}),
    ],
    ids=["llamacpp", "vllm-url", "http-streamed"],
)
async def test_a_batch_with_a_tool_and_typed_output(
    llama: LlamaServer, backend: str, options: dict[str, Any]
) -> None:
    url = backend.format(port=llama.port)
    results, _, stats, _ = await run(llama, research(), TOPICS, backend=url, **options)
    assert [r.status for r in results] == ["ok"] * len(TOPICS), [r.error for r in results]
    for result in results:
        assert result.output == Summary(REPLY)
        tool_results = [m for m in result.transcript if isinstance(m, ToolMessage)]
        assert [m.content for m in tool_results] == [f"notes about {REPLY[:20]}"]
    assert stats.failed_requests == 0
    assert stats.attempts == stats.requests


async def test_the_engine_reports_the_warm_prefix_cached_for_every_first_request(
    private_llama: LlamaServer,
) -> None:
    # Twice the slots, so the first burst fills every slot and the second reuses them.
    inputs = TOPICS + TOPICS[:2]
    results, stream, stats, _ = await run(private_llama, research(), inputs)
    assert all(r.status == "ok" for r in results)
    report = stream.warm_up
    assert report is not None
    assert (report.strategy, report.done, report.slots_filled) == ("slots", "slots", 4), report
    warm_prompt = report.usage.prompt_tokens
    firsts = first_requests(stats)
    assert len(firsts) == len(inputs)
    assert all((r.cached_tokens or 0) >= 0.9 * warm_prompt for r in firsts), [
        (r.request_id, r.cached_tokens, warm_prompt) for r in firsts
    ]
    # Every request the batch sent is counted, the warm-up included.
    assert stats.requests == sum(r.turns for r in results) + 1
    assert stats.prompt_tokens == sum(r.usage.prompt_tokens for r in results) + warm_prompt


async def test_a_one_request_warm_up_fills_one_slot_only(private_llama: LlamaServer) -> None:
    # What the slot copy fixes: with the plain warm-up, most of the first burst misses.
    results, stream, stats, _ = await run(
        private_llama,
        research(),
        TOPICS[:4],
        backend=agentcore.wire.backend(private_llama.url, model="tiny", warm_up="request"),
    )
    assert all(r.status == "ok" for r in results)
    assert stream.warm_up is not None and stream.warm_up.done == "request"
    warm_prompt = stream.warm_up.usage.prompt_tokens
    hits = [r for r in first_requests(stats) if (r.cached_tokens or 0) >= 0.9 * warm_prompt]
    assert len(hits) < 4


# ----------------------------------------------------------------------------- failures survived


async def test_a_connection_cut_mid_stream_is_survived(llama: LlamaServer) -> None:
    cuts = 0

    async def proxy(client: trio.SocketStream) -> None:
        nonlocal cuts
        upstream = await trio.open_tcp_stream("127.0.0.1", llama.port)
        cut_this = cuts == 0
        cuts += 1

        async def pump(source: trio.SocketStream, sink: trio.SocketStream, limit: int) -> None:
            sent = 0
            try:
                while data := await source.receive_some(65536):
                    if sent + len(data) > limit:
                        await sink.send_all(data[: limit - sent])
                        raise trio.BrokenResourceError  # cut here
                    await sink.send_all(data)
                    sent += len(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            finally:
                nursery.cancel_scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(pump, client, upstream, 1 << 40)
            nursery.start_soon(pump, upstream, client, 600 if cut_this else 1 << 40)
        await trio.aclose_forcefully(upstream)
        await trio.aclose_forcefully(client)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, proxy, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        task = research(output=None, tools=[], params=ModelParams(temperature=0.0, max_tokens=40))
        results, _, _, _ = await run(
            llama, task, TOPICS[:1], backend=f"http://127.0.0.1:{port}/v1", stream=True,
            retry=RetryPolicy(base_delay=0.05), warm=False,
        )  # fmt: skip
        nursery.cancel_scope.cancel()
    assert results[0].status == "ok" and results[0].output == REPLY
    assert cuts >= 2
    assert results[0].timings.attempts == 2


async def test_a_server_restart_is_survived(private_llama: LlamaServer) -> None:
    restarted = trio.Event()

    @agentcore.tool
    async def slow_search(q: str) -> str:
        """Search slowly.

        Args:
            q: what to look for.
        """
        await restarted.wait()
        return "found"

    async def restart() -> None:
        await trio.sleep(0.5)  # every agent is waiting in its tool by now
        await trio.to_thread.run_sync(private_llama.stop)
        await trio.to_thread.run_sync(private_llama.start)
        restarted.set()

    task = research(tools=[slow_search])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(restart)
        results, _, _, _ = await run(
            private_llama, task, TOPICS[:4], retry=RetryPolicy(max_attempts=10, base_delay=0.2)
        )
    assert [r.status for r in results] == ["ok"] * 4, [r.error for r in results]


# ----------------------------------------------------------------------------- the defects


async def test_defect_1_a_reply_cut_by_max_tokens_is_truncated_and_counted(
    llama: LlamaServer,
) -> None:
    task = research(
        tools=[],
        output=None,
        params=ModelParams(temperature=0.0, max_tokens=3),
        on_truncated="fail",
    )
    results, _, stats, _ = await run(llama, task, TOPICS[:3], warm=False)
    assert [r.status for r in results] == ["failed"] * 3
    assert all(r.error is not None and r.error.kind is AbortKind.TRUNCATED for r in results)
    assert stats.truncated_replies == 3


async def test_defect_1_a_required_tool_call_that_never_came_is_reported(
    llama: LlamaServer,
) -> None:
    # 20 tokens: the reply text and the marker fit, the tool call does not.
    task = research(
        params=ModelParams(temperature=0.0, tool_choice="required", max_tokens=20),
        max_tool_errors=1,
    )
    results, _, _, _ = await run(llama, task, TOPICS[:2])
    assert all(r.error is not None for r in results)
    assert {r.error.kind for r in results if r.error} == {AbortKind.TOOL_CALL_MISSING}


async def test_defect_2_a_cut_tool_call_is_not_echoed_and_nothing_is_retried(
    llama: LlamaServer,
) -> None:
    # 26 tokens cut the tool call inside its arguments: llama-server returns '{'.
    task = research(params=ModelParams(temperature=0.0, tool_choice="required", max_tokens=26))
    results, _, stats, _ = await run(llama, task, TOPICS[:2])
    for result in results:
        # The cut call is answered with an error quoting it; the next request (the final one,
        # max_turns=1) carries "{}" in its history and is accepted: the run ends well.
        assert (result.status, result.output, result.turns) == ("ok", Summary(REPLY), 2)
        errors = [m for m in result.transcript if isinstance(m, ToolMessage) and m.is_error]
        assert len(errors) == 1 and 'You sent: "{"' in errors[0].content
        calls = [c for m in result.transcript if isinstance(m, AssistantMessage)
                 for c in m.tool_calls]  # fmt: skip
        assert [c.arguments for c in calls] == ["{}"]
    assert stats.failed_requests == 0
    assert stats.attempts == stats.requests


async def test_defect_2_the_servers_rejection_of_invalid_history_is_final_after_one_retry(
    llama: LlamaServer,
) -> None:
    tool = ToolSpec("search", "", {"type": "object", "properties": {"q": {"type": "string"}}})
    history = (
        UserMessage("hi"),
        AssistantMessage(None, (ToolCall("c1", "search", '{"q'),)),
        ToolMessage("c1", "search", "Error", True),
    )
    async with open_driver(llama.url, model="tiny") as driver:
        reply = await driver.call_model(CallModel("raw/0", history, (tool,)))
        stats = driver.statistics()
    assert isinstance(reply, ModelFailed)
    assert (reply.error.kind, reply.error.status) == (ErrorKind.SERVER, 500)
    assert "parse tool call arguments" in reply.error.message
    assert stats.recent_requests[-1].attempts == 2


async def test_defect_3_context_overflow_is_too_large_and_not_retried(llama: LlamaServer) -> None:
    task = research(tools=[], output=None, system="hello " * (llama.ctx + 500))
    results, _, _, _ = await run(llama, task, TOPICS[:1], warm=False)
    error = results[0].error
    assert error is not None and error.error is not None
    assert error.error.kind is ErrorKind.TOO_LARGE
    assert error.error.code == "exceed_context_size_error"
    assert results[0].timings.attempts == 1


async def test_defect_4_streamed_requests_are_written_once(llama: LlamaServer) -> None:
    # llamacpp://: the transport closes a connection after a streamed reply itself (the server
    # would, right after), so no request is ever written to a closing connection.
    results, _, stats, transport = await run(llama, research(), TOPICS, stream=True)
    assert all(r.status == "ok" for r in results)
    assert isinstance(transport, LeanTransport)
    counters = transport.statistics()
    assert counters.retries == 0
    # Besides the model requests: GET /slots, one save and a restore per other slot.
    assert counters.requests == stats.attempts + 2 + (llama.slots - 1)


async def test_defect_4_a_generic_url_checks_for_the_close_before_reuse(
    llama: LlamaServer,
) -> None:
    # http://: the transport does not know this server, so it keeps connections after
    # streamed replies until it sees llama-server close one: either by the check before
    # reuse, or, when the close is still in flight at that moment, by the one retry it
    # causes. From then on it keeps no connection after a streamed reply. Before the check
    # nearly every reused connection was written to twice; now at most the one that taught
    # the transport is.
    url = f"http://127.0.0.1:{llama.port}/v1"
    results, _, _, transport = await run(llama, research(), TOPICS, backend=url, stream=True)
    assert all(r.status == "ok" for r in results)
    counters = transport.statistics()
    assert counters.closed_by_peer + counters.retries > 0  # the close was seen, one way
    assert counters.retries <= 1


async def test_defect_6_a_reply_over_the_cap_fails_typed(llama: LlamaServer) -> None:
    task = research(tools=[], output=None)
    results, _, _, _ = await run(llama, task, TOPICS[:1], warm=False, max_reply_bytes=200)
    error = results[0].error
    assert error is not None and error.error is not None
    assert (error.error.kind, error.error.retryable) == (ErrorKind.REPLY_TOO_LARGE, False)
    assert results[0].timings.attempts == 1


async def test_unknown_fields_and_headers_are_ignored_by_llama_server(llama: LlamaServer) -> None:
    # What the vllm/sglang/dynamo dialects add is ignored, not rejected: the llamacpp dialect
    # does not send it (it would promise a priority or a cache salt that does not happen).
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 5,
        "priority": -3,
        "cache_salt": "s",
        "rid": "r",
        "nvext": {"agent_hints": {}},
    }
    headers = (("content-type", "application/json"), ("x-request-id", "r1"))
    moved = make_transport(llama.http + "/v1", kind="lean", max_connections=1)
    try:
        reply = await moved.send(
            agentcore.wire.HttpRequest(
                "POST", llama.http + "/v1/chat/completions", headers, orjson.dumps(body)
            ),
            agentcore.Timeouts(),
        )
    finally:
        await moved.aclose()
    assert reply.status == 200


async def test_a_schema_on_a_tool_turn_forbids_the_tool_call(llama: LlamaServer) -> None:
    # Why the llamacpp dialect sends response_format only on calls without tools: the schema's
    # grammar wins over tool_choice="required", and no tool call comes back.
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "search", "parameters": {
            "type": "object", "properties": {"q": {"type": "string"}}}}}],
        "tool_choice": "required",
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}},
    }  # fmt: skip
    moved = make_transport(llama.http + "/v1", kind="lean", max_connections=1)
    try:
        reply = await moved.send(
            agentcore.wire.HttpRequest(
                "POST",
                llama.http + "/v1/chat/completions",
                (("content-type", "application/json"),),
                orjson.dumps(body),
            ),
            agentcore.Timeouts(),
        )
    finally:
        await moved.aclose()
    message = orjson.loads(reply.body)["choices"][0]["message"]
    assert not message.get("tool_calls")
    assert orjson.loads(message["content"]) == {"a": REPLY}
