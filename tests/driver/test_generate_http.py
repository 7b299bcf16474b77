"""Streamed generation over real HTTP on loopback: OpenAI-compatible, Anthropic and sim://."""

from __future__ import annotations

import json
import re
from typing import Any

import attrs
import pytest
import trio

from agentcore import (
    ErrorKind,
    Generation,
    GenerationError,
    ModelDelta,
    RequestStarted,
    RetryPolicy,
    open_driver,
)
from agentcore.wire import TextDelta, ToolCallDelta
from tests.codecs.anthropic.helpers import fixture
from tests.driver.helpers import make_loop, task_census
from tests.driver.openai_server import Reply, error, open_openai_server, streamed_text

FAST_RETRY = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.02)

transports = pytest.mark.parametrize("transport", ["lean", "httpx"])


@transports
async def test_stream_over_http_delivers_each_piece_then_the_reply(transport: str) -> None:
    pieces = ["The ", "quick ", "brown ", "fox"]
    async with (
        open_openai_server(lambda body, n: streamed_text(pieces)) as server,
        open_driver(server.url, model="m", transport=transport) as driver,
    ):
        async with driver.generate_stream("go") as deltas:
            items = [d async for d in deltas]
        stats = driver.statistics()
    assert [d.text for d in items if isinstance(d, TextDelta) and d.text] == pieces
    reply = items[-1]
    assert isinstance(reply, Generation)
    assert reply.text == "The quick brown fox"
    assert reply.usage.prompt_tokens == 9
    assert reply.finish_reason == "stop"
    assert server.requests[0]["stream"] is True  # streamed although the backend default is not
    assert stats.ttft.count == 1


@transports
async def test_stream_over_http_cut_after_a_delta_is_a_typed_error(transport: str) -> None:
    def respond(body: dict[str, Any], n: int) -> Reply:
        return attrs.evolve(streamed_text(["Once ", "upon ", "a time"]), cut_after=3)

    async with (
        open_openai_server(respond) as server,
        open_driver(server.url, model="m", transport=transport, retry=FAST_RETRY) as driver,
    ):
        texts: list[str] = []
        with pytest.raises(GenerationError) as caught:
            async with driver.generate_stream("story") as deltas:
                async for delta in deltas:
                    if isinstance(delta, TextDelta):
                        texts.append(delta.text)
        slots = driver.limiter.statistics()
    assert "".join(texts) == "Once upon "
    assert caught.value.error.kind is ErrorKind.CONNECTION
    assert len(server.requests) == 1  # not retried: deltas had reached the caller
    assert slots.in_use == 0


@transports
async def test_stream_over_http_failing_before_any_delta_is_retried(transport: str) -> None:
    def respond(body: dict[str, Any], n: int) -> Reply:
        return error(503, "warming up") if n == 0 else streamed_text(["ok"])

    async with (
        open_openai_server(respond) as server,
        open_driver(server.url, model="m", transport=transport, retry=FAST_RETRY) as driver,
        driver.generate_stream("go") as deltas,
    ):
        text = await deltas.text()
    assert text == "ok"
    assert len(server.requests) == 2


@transports
async def test_stream_cancelled_mid_reply_leaves_no_slot_task_or_connection(
    transport: str,
) -> None:
    slow = streamed_text([f"w{i} " for i in range(200)], frame_delay=0.01)
    async with (
        open_openai_server(lambda body, n: slow) as server,
        open_driver(server.url, model="m", transport=transport) as driver,
    ):
        got = 0
        with trio.CancelScope() as scope:
            async with driver.generate_stream("go") as deltas:
                async for _ in deltas:
                    got += 1
                    if got == 5:  # mid-reply, whatever the machine's speed
                        scope.cancel()
                        await trio.sleep(0)
        assert scope.cancelled_caught
        assert got == 5
        assert driver.limiter.statistics().in_use == 0
        assert task_census() == 0
        with trio.fail_after(5):
            while server.open_connections:  # the server sees the hang-up at its next frame
                await trio.sleep(0.01)


@transports
async def test_stream_closed_early_over_http_releases_the_slot_and_the_connection(
    transport: str,
) -> None:
    slow = streamed_text([f"w{i} " for i in range(200)], frame_delay=0.01)
    async with (
        open_openai_server(lambda body, n: slow) as server,
        open_driver(server.url, model="m", transport=transport, max_inflight=1) as driver,
    ):
        async with driver.generate_stream("go") as deltas:
            async for delta in deltas:
                if isinstance(delta, TextDelta) and delta.text:
                    break
        assert driver.limiter.statistics().in_use == 0
        with trio.fail_after(5):
            while server.open_connections:
                await trio.sleep(0.01)


def _anthropic_frames(name: str) -> Reply:
    # The captured stream, one SSE event per frame, as the API sends it.
    frames = [f + b"\n\n" for f in re.split(rb"\n\n", fixture(name)) if f.strip()]
    return Reply(headers=(("content-type", "text/event-stream"),), frames=frames)


@transports
async def test_stream_from_an_anthropic_server_gives_text_and_tool_deltas(transport: str) -> None:
    replies = {0: "text_reply.sse", 1: "parallel_tools.sse"}
    async with (
        open_openai_server(lambda body, n: _anthropic_frames(replies[n])) as server,
        open_driver(
            server.url.removesuffix("/v1"),
            model="claude-test",
            dialect="anthropic",
            api_key="test-key",
            transport=transport,
        ) as driver,
    ):
        async with driver.generate_stream("hi") as deltas:
            text_items = [d async for d in deltas]
        async with driver.generate_stream("tools?") as deltas:
            tool_items = [d async for d in deltas]
    text = "".join(d.text for d in text_items if isinstance(d, TextDelta))
    text_reply = text_items[-1]
    assert isinstance(text_reply, Generation)
    assert text and text == text_reply.text
    assert text_reply.usage.cached_tokens == 2048
    fragments = [d for d in tool_items if isinstance(d, ToolCallDelta)]
    tool_reply = tool_items[-1]
    assert isinstance(tool_reply, Generation)
    assert {f.index for f in fragments} == set(range(len(tool_reply.tool_calls)))
    for index, call in enumerate(tool_reply.tool_calls):
        joined = "".join(f.arguments for f in fragments if f.index == index)
        assert json.loads(joined) == json.loads(call.arguments)  # the codec re-encodes it


async def test_a_watched_run_over_http_streams_deltas_and_retries_a_cut_attempt() -> None:
    def respond(body: dict[str, Any], n: int) -> Reply:
        reply = streamed_text(["The ", "answer ", "is 5"])
        return attrs.evolve(reply, cut_after=3) if n == 0 else reply

    async with (
        open_openai_server(respond) as server,
        open_driver(server.url, model="m", retry=FAST_RETRY) as driver,
        driver.watch(make_loop(0), deltas=True) as steps,
    ):
        events = [e async for e in steps]
    kinds = [e.name for e in events]
    first_retry = kinds.index("retry_scheduled")
    assert kinds[:3] == ["run_started", "request_queued", "request_started"]
    assert "model_delta" in kinds[:first_retry]  # the cut attempt had streamed some text
    assert kinds[first_retry + 1] == "request_queued"  # the retry waits for a slot again
    again = events[first_retry + 2]
    assert isinstance(again, RequestStarted)
    assert again.attempt == 2
    text = "".join(e.text for e in events[first_retry:] if isinstance(e, ModelDelta))
    assert text == "The answer is 5"
    assert kinds[-2:] == ["model_replied", "run_finished"]
    assert steps.result is not None
    assert steps.result.output == "The answer is 5"
    assert len(server.requests) == 2


@pytest.mark.parametrize("dialect", ["vllm", "sglang", "dynamo"])
async def test_stream_through_each_openai_compatible_dialect(dialect: str) -> None:
    pieces = ["one ", "two ", "three"]
    async with (
        open_openai_server(lambda body, n: streamed_text(pieces)) as server,
        open_driver(server.url, model="m", dialect=dialect) as driver,
        driver.generate_stream("count") as deltas,
    ):
        items = [d async for d in deltas]
    assert [d.text for d in items if isinstance(d, TextDelta) and d.text] == pieces
    reply = items[-1]
    assert isinstance(reply, Generation)
    assert reply.text == "one two three"
    assert server.requests[0]["stream"] is True


async def test_generate_and_stream_on_the_simulator() -> None:
    async with open_driver("sim://", model="sim") as driver:
        reply = await driver.generate("Say something.")
        async with driver.generate_stream("Say something.") as deltas:
            items = [d async for d in deltas]
        stats = driver.statistics()
    streamed = items[-1]
    assert isinstance(streamed, Generation)
    assert reply.text
    assert "".join(d.text for d in items if isinstance(d, TextDelta)) == streamed.text
    assert len(items) > 2  # the simulator streams token by token
    assert stats.attempts == 2
