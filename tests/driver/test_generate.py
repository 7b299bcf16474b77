"""One-shot generation on the driver: generate and generate_stream with ScriptedModel."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore import (
    ConfigError,
    ErrorKind,
    Generation,
    GenerationError,
    ModelError,
    RetryPolicy,
    open_driver,
    tool,
)
from agentcore.core import AssistantMessage, SystemMessage, ToolCall, UserMessage
from agentcore.testing import ScriptedModel, StreamCut, run_in_virtual_time
from agentcore.wire import TextDelta, ToolCallDelta
from tests.driver.helpers import task_census

RETRY = RetryPolicy(max_attempts=3, base_delay=0.5, max_delay=1.0)
BUSY = ModelError(kind=ErrorKind.OVERLOADED, message="busy", retryable=True)


@attrs.frozen
class City:
    name: str
    population: int


@tool
def weather(city: str) -> str:
    """Weather of a city.

    Args:
        city: the city.
    """
    return "sunny"


async def test_generate_returns_the_reply_and_counts_in_statistics(autojump_clock: Any) -> None:
    model = ScriptedModel(["Paris is the capital."], latency=1.0)
    async with open_driver(model, max_inflight=2) as driver:
        reply = await driver.generate(
            [SystemMessage("Be brief."), UserMessage("Capital of France?")]
        )
        stats = driver.statistics()
    assert isinstance(reply, Generation)
    assert reply.text == "Paris is the capital."
    assert reply.finish_reason == "stop"
    assert reply.usage.completion_tokens > 0
    assert model.calls[0].messages == (
        SystemMessage("Be brief."),
        UserMessage("Capital of France?"),
    )
    assert stats.runs == 0
    assert stats.requests == 1
    assert stats.recent_requests[0].request_id == reply.request_id
    assert stats.slots.in_use == 0


async def test_generate_structures_the_reply_into_the_output_type(autojump_clock: Any) -> None:
    model = ScriptedModel(['{"name": "Lyon", "population": 522000}'])
    async with open_driver(model) as driver:
        reply = await driver.generate("Biggest city after Paris?", output=City)
    assert reply.output == City("Lyon", 522000)
    first = model.calls[0].messages[0]
    assert isinstance(first, SystemMessage)
    assert '"population"' in first.content  # the schema was announced
    assert model.calls[0].output is not None


async def test_generate_reply_that_does_not_fit_the_output_type_is_a_typed_error(
    autojump_clock: Any,
) -> None:
    model = ScriptedModel(["not json at all"])
    async with open_driver(model) as driver:
        with pytest.raises(GenerationError) as caught:
            await driver.generate("city?", output=City)
    assert caught.value.error.kind is ErrorKind.PROTOCOL


async def test_generate_passes_tools_and_returns_their_calls_unrun(autojump_clock: Any) -> None:
    call = ToolCall("c1", "weather", '{"city": "Oslo"}')
    model = ScriptedModel([AssistantMessage(tool_calls=[call])])
    async with open_driver(model) as driver:
        reply = await driver.generate("Weather in Oslo?", tools=[weather])
    assert reply.tool_calls == (call,)
    assert [t.name for t in model.calls[0].tools] == ["weather"]


async def test_generate_retries_then_raises_a_typed_error(autojump_clock: Any) -> None:
    model = ScriptedModel([BUSY, BUSY, BUSY])
    async with open_driver(model, retry=RETRY) as driver:
        with pytest.raises(GenerationError) as caught:
            await driver.generate("hi")
        stats = driver.statistics()
    assert caught.value.error.kind is ErrorKind.OVERLOADED
    assert stats.attempts == 3
    assert stats.failed_requests == 1


async def test_generate_deadline_fails_with_deadline_error(autojump_clock: Any) -> None:
    model = ScriptedModel(["late"], latency=10.0)
    async with open_driver(model) as driver:
        with pytest.raises(GenerationError) as caught:
            await driver.generate("hi", deadline=trio.current_time() + 1.0)
        assert driver.limiter.statistics().in_use == 0
    assert caught.value.error.kind is ErrorKind.DEADLINE


async def test_generate_rejects_bad_input_with_config_errors() -> None:
    async with open_driver(ScriptedModel(["x"])) as driver:
        with pytest.raises(ConfigError):
            await driver.generate([])
        with pytest.raises(ConfigError):
            await driver.generate(["not a message"])  # type: ignore[list-item]
        with pytest.raises(ConfigError):
            await driver.generate("hi", tools=["weather"])  # type: ignore[list-item]
        with pytest.raises(ConfigError):
            async with driver.generate_stream("hi", buffer=-1):
                pass


async def test_stream_yields_text_deltas_then_the_assembled_reply(autojump_clock: Any) -> None:
    model = ScriptedModel(["Hello there, world"], latency=2.0, ttft=0.5, chunk=5)
    async with open_driver(model) as driver:
        seen: list[tuple[float, Any]] = []
        start = trio.current_time()
        async with driver.generate_stream("greet") as deltas:
            async for item in deltas:
                seen.append((trio.current_time() - start, item))
        stats = driver.statistics()
    pieces = [d.text for _, d in seen if isinstance(d, TextDelta)]
    assert pieces == ["Hello", " ther", "e, wo", "rld"]
    assert seen[0][0] == pytest.approx(0.5)  # the first delta came at the first token
    assert seen[-2][0] < 2.0  # deltas arrived while the reply was still being generated
    last = seen[-1][1]
    assert isinstance(last, Generation)
    assert last.text == "Hello there, world"
    assert deltas.reply == last
    assert stats.ttft.count == 1
    assert stats.slots.in_use == 0


async def test_stream_tool_call_fragments_carry_their_index(autojump_clock: Any) -> None:
    calls = [ToolCall("a", "weather", '{"city": "Oslo"}'), ToolCall("b", "weather", "{}")]
    model = ScriptedModel([AssistantMessage("Checking.", calls)], chunk=6)
    async with open_driver(model) as driver, driver.generate_stream("?", tools=[weather]) as d:
        items = [x async for x in d]
    fragments = [d for d in items if isinstance(d, ToolCallDelta)]
    by_index: dict[int, str] = {}
    for fragment in fragments:
        by_index[fragment.index] = by_index.get(fragment.index, "") + fragment.arguments
    assert by_index == {0: '{"city": "Oslo"}', 1: "{}"}
    assert [(f.id, f.name) for f in fragments if f.id] == [("a", "weather"), ("b", "weather")]
    reply = items[-1]
    assert isinstance(reply, Generation)
    assert reply.tool_calls == tuple(calls)


async def test_stream_is_retried_before_its_first_delta(autojump_clock: Any) -> None:
    model = ScriptedModel([BUSY, StreamCut(""), "fine"], latency=1.0)
    async with open_driver(model, retry=RETRY) as driver:
        async with driver.generate_stream("go") as deltas:
            text = await deltas.text()
        stats = driver.statistics()
    assert text == "fine"
    assert stats.attempts == 3
    assert len(model.calls) == 3


async def test_stream_cut_after_a_delta_ends_with_a_typed_error_and_no_retry(
    autojump_clock: Any,
) -> None:
    model = ScriptedModel([StreamCut("Once upon a"), "never asked"], latency=1.0, chunk=4)
    async with open_driver(model, retry=RETRY) as driver:
        received: list[str] = []
        with pytest.raises(GenerationError) as caught:
            async with driver.generate_stream("story") as deltas:
                async for delta in deltas:
                    assert isinstance(delta, TextDelta)
                    received.append(delta.text)
        stats = driver.statistics()
    assert "".join(received) == "Once upon a"
    assert caught.value.error.kind is ErrorKind.CONNECTION
    assert len(model.calls) == 1
    assert stats.failed_requests == 1
    assert stats.slots.in_use == 0


async def test_stream_slot_is_released_when_the_stream_ends(autojump_clock: Any) -> None:
    model = ScriptedModel(["a b c d e f", "a b c d e f"], latency=3.0, chunk=2)
    async with open_driver(model, max_inflight=1) as driver:
        async with driver.generate_stream("x") as deltas:
            await deltas.text()
        assert driver.limiter.statistics().in_use == 0
        assert task_census() == 0
        reply = await driver.generate("again")  # the one slot is free again
    assert reply.text == "a b c d e f"


async def test_stream_slot_is_released_when_closed_early(autojump_clock: Any) -> None:
    model = ScriptedModel(["a long, long reply"], latency=30.0, chunk=2)
    async with open_driver(model, max_inflight=1) as driver:
        async with driver.generate_stream("x") as deltas:
            async for _ in deltas:
                assert driver.limiter.statistics().in_use == 1
                break
        assert driver.limiter.statistics().in_use == 0
        assert model.in_flight == 0
        assert task_census() == 0
        assert trio.current_time() < 30.0


async def test_stream_slot_is_released_when_cancelled(autojump_clock: Any) -> None:
    model = ScriptedModel(["a long, long reply"], latency=30.0, chunk=2)
    got: list[Any] = []
    async with open_driver(model, max_inflight=1) as driver:
        with trio.move_on_after(5.0) as scope:
            async with driver.generate_stream("x") as deltas:
                async for delta in deltas:
                    got.append(delta)
        assert scope.cancelled_caught
        assert got  # it was cancelled mid-stream
        assert driver.limiter.statistics().in_use == 0
        assert model.in_flight == 0
        assert task_census() == 0


async def test_stream_error_in_the_callers_block_propagates_unwrapped(
    autojump_clock: Any,
) -> None:
    model = ScriptedModel(["abcdef"], latency=1.0, chunk=1)
    async with open_driver(model) as driver:
        with pytest.raises(KeyError):
            async with driver.generate_stream("x") as deltas:
                async for _ in deltas:
                    raise KeyError("mine")
        assert driver.limiter.statistics().in_use == 0


async def test_stream_works_with_a_client_that_cannot_stream(autojump_clock: Any) -> None:
    class Plain:
        """A model client with only ``exchange``: its reply comes as deltas at the end."""

        def __init__(self) -> None:
            self._inner = ScriptedModel(["whole reply"])

        async def exchange(self, call: Any) -> Any:
            return await self._inner.exchange(call)

        async def aclose(self) -> None:
            await self._inner.aclose()

    async with open_driver(Plain()) as driver, driver.generate_stream("x") as deltas:
        items = [d async for d in deltas]
    assert items[0] == TextDelta("whole reply")
    assert isinstance(items[1], Generation)


@settings(max_examples=40, deadline=None)
@given(
    text=st.text(min_size=1, max_size=40),
    chunk=st.integers(1, 8),
    cut=st.one_of(st.none(), st.integers(0, 40)),
    buffer=st.integers(0, 4),
)
def test_a_stream_is_the_reply_in_pieces_or_a_typed_error_never_a_shorter_reply(
    text: str, chunk: int, cut: int | None, buffer: int
) -> None:
    """Whatever the reply, the piece size and where the stream breaks: the deltas add up to
    the reply, or the stream is retried (nothing was delivered yet), or it ends with
    ``GenerationError``; the slot is free afterwards."""
    first: Any = text if cut is None else StreamCut(text[:cut])
    model = ScriptedModel([first, text], latency=1.0, chunk=chunk)

    async def main() -> tuple[str, Generation | None, bool, int]:
        async with open_driver(model, retry=RETRY) as driver:
            seen: list[str] = []
            failed = False
            try:
                async with driver.generate_stream("x", buffer=buffer) as deltas:
                    async for delta in deltas:
                        if isinstance(delta, TextDelta):
                            seen.append(delta.text)
            except GenerationError:
                failed = True
            assert driver.limiter.statistics().in_use == 0
            return "".join(seen), deltas.reply, failed, len(model.calls)

    joined, reply, failed, calls = run_in_virtual_time(main).value
    if cut is not None and text[:cut]:
        assert failed  # a delta had been delivered: no retry, a typed error
        assert joined == text[:cut]
        assert calls == 1
    else:
        assert not failed
        assert reply is not None
        assert joined == reply.text == text
        assert calls == (1 if cut is None else 2)
