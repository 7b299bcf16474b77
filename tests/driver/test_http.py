"""The driver over real HTTP on loopback, through both transports and the OpenAI codec."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from agentcore import AbortKind, ErrorKind, RetryPolicy, open_driver, tool
from agentcore.core import AgentLoop, LoopConfig, ToolMessage, UserMessage
from tests.driver.helpers import make_loop, task_census
from tests.driver.openai_server import (
    Reply,
    completion,
    error,
    open_openai_server,
    streamed_text,
)

pytestmark = pytest.mark.parametrize("transport", ["lean", "httpx"])

FAST_RETRY = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.02)


@tool
async def add(a: int, b: int) -> str:
    """Add two numbers.

    Args:
        a: first.
        b: second.
    """
    await trio.sleep(0)
    return str(a + b)


async def test_two_turn_agent_with_a_tool_over_http(transport: str) -> None:
    def respond(body: dict[str, Any], n: int) -> Any:
        tool_replies = [m for m in body["messages"] if m["role"] == "tool"]
        if not tool_replies:
            return completion(tool_calls=[("call_1", "add", '{"a": 2, "b": 3}')], cached=0)
        return completion(f"the sum is {tool_replies[0]['content']}", cached=16)

    async with (
        open_openai_server(respond) as server,
        open_driver(
            server.url, model="m", tools=[add], transport=transport, max_inflight=2
        ) as driver,
    ):
        result = await driver.run(make_loop(0, [add]))
        stats = driver.statistics()
    assert result.status == "ok"
    assert result.output == "the sum is 5"
    assert result.turns == 2
    assert result.usage.prompt_tokens == 40
    assert result.usage.cached_tokens == 16
    assert len(server.requests) == 2
    assert [t["function"]["name"] for t in server.requests[0]["tools"]] == ["add"]
    tool_message = result.transcript[2]
    assert isinstance(tool_message, ToolMessage)
    assert tool_message.content == "5"
    assert stats.cached_ratio == pytest.approx(16 / 40)
    assert server.connections == 1  # the connection was kept alive between turns


async def test_rate_limit_then_success_retries_after_the_servers_delay(transport: str) -> None:
    def respond(body: dict[str, Any], n: int) -> Any:
        if n == 0:
            return error(429, "slow down", (("retry-after-ms", "30"),))
        return completion("done")

    async with (
        open_openai_server(respond) as server,
        open_driver(server.url, model="m", transport=transport) as driver,
    ):
        start = trio.current_time()
        result = await driver.run(make_loop(0))
        elapsed = trio.current_time() - start
        slots = driver.limiter.statistics()
    assert result.status == "ok"
    assert result.timings.attempts == 2
    assert elapsed >= 0.03
    assert slots.overloads == 1
    assert slots.in_use == 0


async def test_streamed_reply_measures_time_to_first_token(transport: str) -> None:
    def respond(body: dict[str, Any], n: int) -> Any:
        assert body["stream"] is True
        return streamed_text(["Hel", "lo", "!"], frame_delay=0.005)

    async with (
        open_openai_server(respond) as server,
        open_driver(server.url, model="m", transport=transport, stream=True) as driver,
    ):
        result = await driver.run(make_loop(0))
        stats = driver.statistics()
    assert result.status == "ok"
    assert result.output == "Hello!"
    [ttft] = result.timings.ttft
    assert ttft is not None
    assert 0 < ttft <= stats.recent_requests[0].latency
    assert stats.ttft.count == 1


async def test_truncated_stream_is_retried(transport: str) -> None:
    def respond(body: dict[str, Any], n: int) -> Any:
        reply = streamed_text(["never", "finished"])
        if n == 0:
            return type(reply)(reply.status, reply.headers, frames=reply.frames, cut_after=2)
        return streamed_text(["whole"])

    async with (
        open_openai_server(respond) as server,
        open_driver(
            server.url, model="m", transport=transport, stream=True, retry=FAST_RETRY
        ) as driver,
    ):
        result = await driver.run(make_loop(0))
    assert result.status == "ok"
    assert result.output == "whole"
    assert result.timings.attempts == 2


async def test_unreachable_server_fails_the_run_as_data(transport: str) -> None:
    # Find a port with nothing listening on it.
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with open_driver(
        f"http://127.0.0.1:{port}/v1", model="m", transport=transport, retry=FAST_RETRY
    ) as driver:
        baseline = task_census()
        result = await driver.run(make_loop(0))
        assert task_census() == baseline
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.kind is AbortKind.MODEL_FAILED
    assert result.error.error is not None
    assert result.error.error.kind is ErrorKind.CONNECTION
    assert result.timings.attempts == 3


async def test_final_http_error_is_not_retried(transport: str) -> None:
    async with (
        open_openai_server(lambda body, n: error(400, "bad field")) as server,
        open_driver(server.url, model="m", transport=transport) as driver,
    ):
        result = await driver.run(make_loop(0))
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.error is not None
    assert result.error.error.kind is ErrorKind.BAD_REQUEST
    assert len(server.requests) == 1
    # A readable line for logs: what failed, the HTTP status and the server's message.
    text = str(result.error)
    assert text.startswith("model_failed: bad_request (HTTP 400): ")
    assert "bad field" in text
    assert "\n" not in text and "AbortReason" not in text


async def test_cancelling_a_batch_over_http_leaves_no_task_or_connection(transport: str) -> None:
    def respond(body: dict[str, Any], n: int) -> Any:
        return streamed_text(["x"] * 50, frame_delay=0.05)

    async with open_openai_server(respond) as server:
        async with open_driver(
            server.url, model="m", transport=transport, stream=True, max_inflight=3
        ) as driver:
            baseline = task_census()
            async with driver.stream(make_loop(i) for i in range(6)) as results:
                await trio.sleep(0.1)
                results.cancel()
                statuses = [r.status async for r in results]
            assert task_census() == baseline
            assert driver.limiter.statistics().in_use == 0
        # The driver closed its transport: the server sees every connection end.
        with trio.fail_after(5):
            while server.open_connections:
                await trio.sleep(0.01)
        assert server.connections >= 1
    assert statuses == ["cancelled"] * 6


async def test_streamed_request_answered_with_429_is_retried(transport: str) -> None:
    def respond(body: dict[str, Any], n: int) -> Any:
        if n == 0:
            return error(429, "slow down", (("retry-after-ms", "10"),))
        return streamed_text(["ok"])

    async with (
        open_openai_server(respond) as server,
        open_driver(server.url, model="m", transport=transport, stream=True) as driver,
    ):
        result = await driver.run(make_loop(0))
    assert result.status == "ok"
    assert result.output == "ok"
    assert result.timings.attempts == 2
    assert driver.limiter.statistics().overloads == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_sim_backend_is_started_by_the_driver_and_stopped_with_it(
    transport: str, stream: bool
) -> None:
    @tool
    async def search(query: str) -> str:
        """Search.

        Args:
            query: terms.
        """
        await trio.sleep(0)
        return f"results for {query}"

    async with open_driver(
        "sim://", tools=[search], transport=transport, stream=stream, max_inflight=4
    ) as driver:
        async with driver.stream(make_loop(i, [search]) for i in range(3)) as results:
            done = [r async for r in results]
        stats = driver.statistics()
    assert [r.status for r in done] == ["ok"] * 3
    assert stats.tool_calls >= 3
    assert stats.cached_ratio is not None  # the simulator reports cached tokens
    assert (stats.ttft.count > 0) is stream
    assert task_census() == 0  # the simulator's tasks ended with the driver


async def test_a_request_the_transport_refuses_is_final_and_never_sent(transport: str) -> None:
    # The run id travels in the x-request-id header; a control character in it makes a
    # request no transport may write. Retrying it could never succeed.
    def respond(body: dict[str, Any], n: int) -> Any:
        return completion("unreachable")

    retry = RetryPolicy(max_attempts=5, base_delay=0.01, max_delay=0.02)
    async with (
        open_openai_server(respond) as server,
        open_driver(
            server.url, model="m", transport=transport, dialect="vllm", retry=retry
        ) as driver,
    ):
        loop = AgentLoop(LoopConfig(run_id="agent\x01zero"), [UserMessage("hi")])
        result = await driver.run(loop)
    assert result.status == "failed"
    assert result.error is not None and result.error.error is not None
    assert result.error.error.kind is ErrorKind.BAD_REQUEST
    assert result.error.error.retryable is False
    assert result.timings.attempts == 1
    assert server.requests == []


async def test_a_200_reply_whose_json_body_is_cut_short_is_retried(transport: str) -> None:
    whole = completion("done").body

    def respond(body: dict[str, Any], n: int) -> Any:
        if n == 0:  # a clean end of the HTTP message halfway through the document
            return Reply(headers=(("content-type", "application/json"),), body=whole[:40])
        return completion("done")

    async with (
        open_openai_server(respond) as server,
        open_driver(
            server.url, model="m", transport=transport, stream=False, retry=FAST_RETRY
        ) as driver,
    ):
        result = await driver.run(make_loop(0))
    assert result.status == "ok"
    assert result.output == "done"
    assert result.timings.attempts == 2
    assert len(server.requests) == 2
