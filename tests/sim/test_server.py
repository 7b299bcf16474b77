"""The simulated backend over HTTP: replies, streams, the prefix cache, faults, robustness."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
import trio
import trio.testing

from agentcore._sim.engine import Engine
from agentcore.sim import SimConfig, SimServer, open_sim_server
from agentcore.wire import SSEDecoder
from tests.sim.helpers import (
    REPORT_SCHEMA,
    SYSTEM,
    TOOL_SCHEMAS,
    TOOLS,
    conversation,
    tool_results,
    violations,
)

REPORT_FORMAT = {"type": "json_schema", "json_schema": {"name": "report", "schema": REPORT_SCHEMA}}


def _client(server: SimServer) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, timeout=None)


async def _chat(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await client.post("/chat/completions", json={"model": "sim", **body})
    assert response.status_code == 200, response.text
    reply: dict[str, Any] = response.json()
    return reply


async def _stream(client: httpx.AsyncClient, **body: Any) -> list[str]:
    decoder = SSEDecoder()
    events: list[str] = []
    request = {"model": "sim", "stream": True, **body}
    async with client.stream("POST", "/chat/completions", json=request) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        async for piece in response.aiter_bytes():
            events.extend(e.data for e in decoder.feed(piece))
    events.extend(e.data for e in decoder.finish())
    return events


def _valid_calls(message: dict[str, Any]) -> None:
    assert message["content"] is None
    assert 1 <= len(message["tool_calls"]) <= 2
    for call in message["tool_calls"]:
        assert call["type"] == "function"
        arguments = orjson.loads(call["function"]["arguments"])
        assert violations(arguments, TOOL_SCHEMAS[call["function"]["name"]]) == []


async def test_a_conversation_calls_tools_then_answers_valid_json(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_sim_server() as server, _client(server) as client:
        messages = conversation("Review parser.py for off-by-one errors")
        first = await _chat(client, messages=messages, tools=TOOLS, response_format=REPORT_FORMAT)
        choice = first["choices"][0]
        assert choice["finish_reason"] == "tool_calls"
        _valid_calls(choice["message"])
        messages += tool_results(choice["message"])
        final = await _chat(client, messages=messages, tools=TOOLS, response_format=REPORT_FORMAT)
        choice = final["choices"][0]
        assert choice["finish_reason"] == "stop"
        assert "tool_calls" not in choice["message"]
        assert violations(orjson.loads(choice["message"]["content"]), REPORT_SCHEMA) == []
        usage = final["usage"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        assert server.statistics().requests == 2


async def test_streamed_tool_calls_have_the_openai_chunk_shape(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_sim_server() as server, _client(server) as client:
        events = await _stream(
            client,
            messages=conversation("find unused imports"),
            tools=TOOLS,
            stream_options={"include_usage": True},
        )
    assert events[-1] == "[DONE]"
    chunks = [orjson.loads(e) for e in events[:-1]]
    assert len({c["id"] for c in chunks}) == 1
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks[1:-2]:
        assert chunk["choices"][0]["finish_reason"] is None
        for delta in chunk["choices"][0]["delta"]["tool_calls"]:
            if "id" in delta:
                assert delta["index"] not in calls
                assert delta["type"] == "function"
                calls[delta["index"]] = {"name": delta["function"]["name"], "arguments": ""}
            calls[delta["index"]]["arguments"] += delta["function"]["arguments"]
    assert calls
    for call in calls.values():
        assert violations(orjson.loads(call["arguments"]), TOOL_SCHEMAS[call["name"]]) == []


async def test_streamed_text_arrives_in_pieces_without_usage_unless_asked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = SimConfig(answer_tokens=40, stream_chunk_tokens=4)
    async with open_sim_server(config=config) as server, _client(server) as client:
        events = await _stream(client, messages=conversation("hello"))
        whole = await _chat(client, messages=conversation("hello"))
    chunks = [orjson.loads(e) for e in events[:-1]]
    assert all(c["choices"] for c in chunks)
    pieces = [c["choices"][0]["delta"].get("content") for c in chunks[1:-1]]
    assert len(pieces) == 10
    assert "".join(pieces) == whole["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


async def test_a_shared_prefix_is_prefilled_once(autojump_clock: trio.testing.MockClock) -> None:
    async with open_sim_server() as server, _client(server) as client:
        first = await _chat(client, messages=conversation("agent one"), tools=TOOLS)
        second = await _chat(client, messages=conversation("agent two"), tools=TOOLS)
        stats = server.statistics()
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached > 0.8 * second["usage"]["prompt_tokens"]
    assert cached % 16 == 0
    assert stats.cached_tokens == cached
    assert stats.prefill_tokens == stats.prompt_tokens - cached


async def test_the_next_turn_hits_the_whole_previous_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_sim_server() as server, _client(server) as client:
        messages = conversation("look at cache.py")
        first = await _chat(client, messages=messages, tools=TOOLS)
        messages += tool_results(first["choices"][0]["message"])
        second = await _chat(client, messages=messages, tools=TOOLS)
    previous = first["usage"]["prompt_tokens"] + first["usage"]["completion_tokens"]
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] >= previous - 16


async def test_cache_salt_isolates_tenants(autojump_clock: trio.testing.MockClock) -> None:
    async with open_sim_server() as server, _client(server) as client:
        await _chat(client, messages=conversation("x"), cache_salt="a")
        other = await _chat(client, messages=conversation("y"), cache_salt="b")
    assert other["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


async def test_least_recently_used_blocks_are_evicted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = SimConfig(cache_blocks=20)
    a = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "a"}]
    b = [{"role": "system", "content": SYSTEM.upper()}, {"role": "user", "content": "b"}]
    async with open_sim_server(config=config) as server, _client(server) as client:
        cached = []
        for messages in (a, a, b, a):
            reply = await _chat(client, messages=messages)
            cached.append(reply["usage"]["prompt_tokens_details"]["cached_tokens"])
        stats = server.statistics()
    assert cached == [0, 20 * 16, 0, 0]
    assert stats.cache_blocks == 20
    assert stats.cache_evictions > 0


async def test_repeat_share_one_makes_agents_issue_identical_calls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = SimConfig(repeat_share=1.0, pool_size=1, max_parallel_calls=1)
    calls: list[tuple[str, str]] = []

    async def agent(client: httpx.AsyncClient, i: int) -> None:
        reply = await _chat(
            client, messages=conversation(f"agent {i}: check mod{i}.py"), tools=TOOLS
        )
        call = reply["choices"][0]["message"]["tool_calls"][0]["function"]
        calls.append((call["name"], call["arguments"]))

    async with (
        open_sim_server(config=config) as server,
        _client(server) as client,
        trio.open_nursery() as nursery,
    ):
        for i in range(12):
            nursery.start_soon(agent, client, i)
    by_tool: dict[str, set[str]] = {}
    for name, arguments in calls:
        by_tool.setdefault(name, set()).add(arguments)
    assert len(calls) == 12
    assert all(len(arguments) == 1 for arguments in by_tool.values())


async def test_injected_failures_are_rate_limits_with_retry_after_or_server_errors(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = SimConfig(fail_rate=1.0, speedup=4)
    statuses: set[int] = set()
    async with open_sim_server(config=config) as server, _client(server) as client:
        for i in range(12):
            body = {"model": "sim", "messages": conversation(f"q{i}")}
            response = await client.post("/chat/completions", json=body)
            statuses.add(response.status_code)
            error = response.json()["error"]
            assert set(error) == {"message", "type", "param", "code"}
            if response.status_code == 429:
                assert response.headers["retry-after"] == "1"
                assert response.headers["retry-after-ms"] == "250"
                assert error["type"] == "rate_limit_error"
            else:
                assert response.status_code == 500
                assert error["type"] == "server_error"
        stats = server.statistics()
    assert statuses == {429, 500}
    assert stats.rate_limited + stats.server_errors == 12
    assert stats.requests == 0


async def test_retrying_a_failed_request_eventually_succeeds(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = SimConfig(fail_rate=0.5)
    async with open_sim_server(config=config) as server, _client(server) as client:
        failures = 0
        for i in range(20):
            body = {"model": "sim", "messages": conversation(f"task {i}")}
            for _ in range(30):
                response = await client.post("/chat/completions", json=body)
                if response.status_code == 200:
                    break
                failures += 1
            assert response.status_code == 200
        stats = server.statistics()
    assert failures > 0
    assert stats.requests == 20
    assert stats.rate_limited + stats.server_errors == failures


@pytest.mark.parametrize(
    ("content", "status", "param"),
    [
        (b"{not json", 400, None),
        (b'"a string"', 400, None),
        (b'{"messages": []}', 400, "messages"),
        (b'{"messages": [{"role": "user", "content": 3}]}', 400, "messages[0].content"),
        (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": -1}', 400, "max_tokens"),
    ],
)
async def test_bad_requests_get_400_and_the_connection_survives(
    content: bytes, status: int, param: str | None, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_sim_server() as server, _client(server) as client:
        response = await client.post("/chat/completions", content=content)
        assert response.status_code == status
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert error["param"] == param
        await _chat(client, messages=conversation("still there?"))
        stats = server.statistics()
    assert stats.connections == 1
    assert stats.rejected == 1
    assert stats.internal_errors == 0


async def test_unknown_paths_and_wrong_methods_are_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_sim_server() as server, _client(server) as client:
        assert (await client.get("/nothing")).status_code == 404
        assert (await client.get("/chat/completions")).status_code == 405
        listing = (await client.get("/models")).json()
        assert listing["data"][0]["id"] == "agentcore-sim"
        assert (await client.get(server.url.removesuffix("/v1") + "/health")).status_code == 200
        assert server.statistics().rejected == 2


async def _raw_exchange(port: int, data: bytes) -> bytes:
    """Send ``data``, half-close, and read until the server closes (a hang fails the test)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    with trio.fail_after(30):
        async with stream:
            await stream.send_all(data)
            await stream.send_eof()
            received = b""
            while piece := await stream.receive_some(65536):
                received += piece
    return received


async def test_malformed_http_gets_400_and_the_server_keeps_serving(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_sim_server() as server, _client(server) as client:
        answer = await _raw_exchange(server.port, b"NOT HTTP AT ALL\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 400 ")
        partial = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 50\r\n\r\n{"
        answer = await _raw_exchange(server.port, partial)
        assert answer.startswith(b"HTTP/1.1 400 ")
        await _chat(client, messages=conversation("ok"))
        stats = server.statistics()
    assert stats.internal_errors == 0
    assert stats.rejected == 2


async def test_keep_alive_serves_many_requests_on_one_connection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_sim_server() as server, _client(server) as client:
        for i in range(5):
            await _chat(client, messages=conversation(f"n{i}"))
        assert server.statistics().connections == 1


async def _request_stream(port: int, user: str) -> trio.SocketStream:
    """Open a raw connection and send a request for a streamed reply."""
    body = orjson.dumps({"model": "sim", "stream": True, "messages": conversation(user)})
    head = f"POST /v1/chat/completions HTTP/1.1\r\nhost: sim\r\ncontent-length: {len(body)}"
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    await stream.send_all(head.encode() + b"\r\n\r\n" + body)
    return stream


async def _start_stream(port: int, user: str) -> trio.SocketStream:
    """Request a streamed reply and read up to its first event."""
    stream = await _request_stream(port, user)
    received = b""
    while b"data: " not in received:
        piece = await stream.receive_some(65536)
        assert piece, "the server closed the stream early"
        received += piece
    assert received.startswith(b"HTTP/1.1 200 ")
    return stream


async def test_a_client_leaving_mid_stream_frees_its_slot(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # 400 tokens at 10 s each: the reply would run for 4000 s; the client leaves at once.
    config = SimConfig(slots=1, answer_tokens=400, decode_ms_per_token=10_000)
    async with open_sim_server(config=config) as server, _client(server) as client:
        stream = await _start_stream(server.port, "long")
        assert server.statistics().running == 1
        await stream.aclose()
        await trio.sleep(200)
        stats = server.statistics()
        assert (stats.running, stats.open_connections) == (0, 0)
        await _chat(client, messages=conversation("next"))
    assert server.statistics().internal_errors == 0


def _task_count() -> int:
    def walk(task: trio.lowlevel.Task) -> int:
        return 1 + sum(walk(t) for n in task.child_nurseries for t in n.child_tasks)

    return walk(trio.lowlevel.current_root_task())


async def test_closing_the_server_stops_every_connection_task(
    autojump_clock: trio.testing.MockClock,
) -> None:
    before = _task_count()
    config = SimConfig(slots=1, answer_tokens=200, decode_ms_per_token=10_000)
    async with open_sim_server(config=config) as server:
        port = server.port
        idle = await trio.open_tcp_stream("127.0.0.1", port)
        streaming = await _start_stream(port, "x")
        waiting = await _request_stream(port, "y")
        await trio.testing.wait_all_tasks_blocked()
        stats = server.statistics()
        assert (stats.open_connections, stats.running, stats.waiting) == (3, 1, 1)
    assert _task_count() == before
    for stream in (idle, streaming, waiting):
        with trio.fail_after(30):
            while await stream.receive_some(65536):
                pass
        await stream.aclose()
    with pytest.raises(OSError):
        await trio.open_tcp_stream("127.0.0.1", port)


async def test_slots_bound_the_requests_running_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = SimConfig(slots=2)
    async with open_sim_server(config=config) as server, _client(server) as client:
        async with trio.open_nursery() as nursery:
            for i in range(8):
                nursery.start_soon(lambda i=i: _chat(client, messages=conversation(f"c{i}")))
        stats = server.statistics()
    assert stats.requests == 8
    assert stats.max_running == 2
    assert stats.max_waiting >= 1
    assert (stats.running, stats.waiting) == (0, 0)


# -- the engine's slot queue --------------------------------------------------------------------


async def _admission_order(scheduling: str, priorities: list[int], cancel: int | None) -> list[int]:
    engine = Engine(SimConfig(slots=1, scheduling=scheduling))  # type: ignore[arg-type]
    order: list[int] = []
    scopes: list[trio.CancelScope] = []

    async def wait(i: int, priority: int) -> None:
        with trio.CancelScope() as scope:
            scopes.append(scope)
            async with engine.slot(priority):
                order.append(i)
                await trio.sleep(1)

    async with trio.open_nursery() as nursery, engine.slot():
        for i, priority in enumerate(priorities):
            nursery.start_soon(wait, i, priority)
            await trio.testing.wait_all_tasks_blocked()
        if cancel is not None:
            scopes[cancel].cancel()
            await trio.testing.wait_all_tasks_blocked()
    assert (engine.counters.running, engine.counters.waiting) == (0, 0)
    return order


async def test_slots_go_to_waiters_in_arrival_order(autojump_clock: trio.testing.MockClock) -> None:
    assert await _admission_order("fifo", [5, 1, 3], None) == [0, 1, 2]


async def test_priority_scheduling_serves_lower_priority_values_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    assert await _admission_order("priority", [5, 1, 3, 1], None) == [1, 3, 2, 0]


async def test_a_cancelled_waiter_is_skipped(autojump_clock: trio.testing.MockClock) -> None:
    assert await _admission_order("fifo", [0, 0, 0], 1) == [0, 2]
