"""The blocking, asyncio and durable loops of docs/embedding.md, run against a simulated backend.

The ``guide`` fixture (conftest.py) executes every Python block of the guide, which runs one
agent per runtime. The tests check those runs and then drive the guide's own functions through
the harder cases: misbehaving models, failing tools, unreachable or erroring backends,
concurrent tool calls, and a crash in the middle of a durable run.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import socket
from collections.abc import Mapping
from typing import Any

import attrs
import httpx
import pytest

import agentcore
from agentcore import AbortKind, ErrorKind
from agentcore.core import (
    Abort,
    AgentLoop,
    AssistantMessage,
    CallModel,
    CallTool,
    Event,
    Finish,
    LoopConfig,
    LoopSnapshot,
    ToolMessage,
    ToolReturned,
    ToolSpec,
)

# ----------------------------------------------------------------------------- helpers


def _expected_content(tool: agentcore.Tool[..., Any], arguments: Mapping[str, Any]) -> str:
    """What the tool shows the model for these arguments, computed independently."""
    value = tool.function(**arguments)
    if inspect.iscoroutine(value):
        value = asyncio.run(value)
    return value if isinstance(value, str) else json.dumps(value)


def _assert_tools_really_ran(finish: Finish, tools: Mapping[str, agentcore.Tool[..., Any]]) -> int:
    """Every tool result in the transcript is what the named tool returns for the call's
    arguments; returns how many there were."""
    calls = {
        call.id: call
        for message in finish.transcript
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
    }
    results = [m for m in finish.transcript if isinstance(m, ToolMessage)]
    for result in results:
        call = calls[result.call_id]
        assert not result.is_error, result.content
        assert result.content == _expected_content(tools[call.name], json.loads(call.arguments))
    return len(results)


def _assert_typed_finish(guide: Mapping[str, Any], effect: Any) -> Finish:
    assert isinstance(effect, Finish), effect
    assert isinstance(effect.output, guide["Verdict"])
    assert isinstance(effect.output.component, str)
    assert isinstance(effect.output.severity, int)
    assert effect.usage.prompt_tokens > 0
    return effect


def _run(guide: Mapping[str, Any], runtime: str, loop: Any, codec: Any, tools: Any) -> Any:
    """Run ``loop`` with the guide's blocking or asyncio loop."""
    if runtime == "blocking":
        return guide["run_blocking"](loop, codec, tools)

    async def main() -> Any:
        async with httpx.AsyncClient(timeout=60) as client:
            return await guide["run_asyncio"](loop, codec, tools, client)

    return asyncio.run(main())


def _config(run_id: str, tools: Mapping[str, agentcore.Tool[..., Any]], **options: Any) -> Any:
    return LoopConfig(run_id=run_id, tools=[t.spec for t in tools.values()], **options)


@attrs.frozen
class _OffersAnUnknownTool:
    """A codec that tells the model about a tool the agent does not have, so the model calls
    a tool that does not exist: the misbehaviour the loop must turn into a repair turn."""

    codec: Any

    def encode(self, call: CallModel, *, stream: bool = False) -> Any:
        if call.tools:
            ghost = ToolSpec(
                "purge_cache",
                "Delete every cache entry.",
                {"type": "object", "properties": {"scope": {"type": "string"}}},
            )
            call = attrs.evolve(call, tools=(ghost,))
        return self.codec.encode(call, stream=stream)

    def decode(self, request_id: str, status: int, headers: Any, body: bytes) -> Any:
        return self.codec.decode(request_id, status, headers, body)


@attrs.define
class _RecordingLoop:
    """Passes everything to the loop and remembers the events it was fed."""

    loop: AgentLoop
    fed: list[Event] = attrs.Factory(list)

    def start(self) -> Any:
        return self.loop.start()

    def handle(self, event: Event) -> Any:
        self.fed.append(event)
        return self.loop.handle(event)


class _Crash(Exception):
    """Stands for the process dying."""


class _StoreThatCrashesOnce(dict[str, bytes]):
    """A store whose next write fails once ``crash_next_write`` is set."""

    crash_next_write = False

    def __setitem__(self, key: str, value: bytes) -> None:
        if self.crash_next_write:
            self.crash_next_write = False
            raise _Crash
        super().__setitem__(key, value)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# ----------------------------------------------------------------------------- the guide's runs


def test_the_guide_has_a_block_per_runtime(guide_blocks: list[str]) -> None:
    text = "\n".join(guide_blocks)
    assert len(guide_blocks) >= 6
    for name in ("def run_blocking", "async def run_asyncio", "def step", "def begin"):
        assert name in text


def test_blocking_loop_finishes_with_a_typed_output(guide: dict[str, Any]) -> None:
    finish = _assert_typed_finish(guide, guide["result"])
    assert _assert_tools_really_ran(finish, guide["BLOCKING_TOOLS"]) >= 2  # two tool turns


def test_asyncio_loop_finishes_every_agent_with_a_typed_output(guide: dict[str, Any]) -> None:
    results = guide["results"]
    assert len(results) == 4
    for result in results:
        finish = _assert_typed_finish(guide, result)
        assert _assert_tools_really_ran(finish, guide["ASYNC_TOOLS"]) >= 2


def test_durable_steps_finish_and_record_the_typed_output(guide: dict[str, Any]) -> None:
    finish = _assert_typed_finish(guide, guide["end"])
    _assert_tools_really_ran(finish, guide["BLOCKING_TOOLS"])
    stored = guide["store"]["durable-1/end"]
    recorded = agentcore.core.loads(stored, Finish, output_type=guide["Verdict"])
    assert recorded == finish


# ----------------------------------------------------------------------------- misbehaviour


def test_blocking_loop_tells_the_model_about_an_unknown_tool_and_finishes(
    guide: dict[str, Any],
) -> None:
    tools = guide["BLOCKING_TOOLS"]
    config = _config("unknown-tool", tools, output=guide["Verdict"], max_tool_errors=6)
    codec = _OffersAnUnknownTool(guide["backend"].codec)
    finish = _assert_typed_finish(
        guide, guide["run_blocking"](AgentLoop(config, guide["MESSAGES"]), codec, tools)
    )
    called = [c.name for m in finish.transcript if isinstance(m, AssistantMessage)
              for c in m.tool_calls]  # fmt: skip
    assert called
    assert set(called) == {"purge_cache"}
    errors = [m for m in finish.transcript if isinstance(m, ToolMessage)]
    assert len(errors) == len(called)
    for message in errors:
        assert message.is_error
        assert "there is no tool named 'purge_cache'" in message.content
        assert "count_words" in message.content  # the model is told which tools exist


@pytest.mark.parametrize("runtime", ["blocking", "asyncio"])
def test_a_failing_tool_is_reported_to_the_model_and_the_run_finishes(
    guide: dict[str, Any], runtime: str
) -> None:
    @agentcore.tool
    def search_tickets(query: str) -> str:
        """Search the ticket tracker.

        Args:
            query: search terms.
        """
        raise LookupError(f"the tracker is offline (query {query!r})")

    tools = {"search_tickets": search_tickets}
    config = _config(f"failing-tool-{runtime}", tools, output=guide["Verdict"])
    loop = AgentLoop(config, guide["MESSAGES"])
    finish = _assert_typed_finish(guide, _run(guide, runtime, loop, guide["backend"].codec, tools))
    results = [m for m in finish.transcript if isinstance(m, ToolMessage)]
    assert results
    for message in results:
        assert message.is_error
        assert "LookupError" in message.content
        assert "the tracker is offline" in message.content


@pytest.mark.parametrize("runtime", ["blocking", "asyncio"])
def test_an_unreachable_backend_ends_the_run_with_a_connection_error(
    guide: dict[str, Any], runtime: str
) -> None:
    backend = agentcore.wire.backend(f"http://127.0.0.1:{_closed_port()}/v1", model="m")
    tools = guide["BLOCKING_TOOLS"]
    loop = AgentLoop(_config(f"unreachable-{runtime}", tools), guide["MESSAGES"])
    abort = _run(guide, runtime, loop, backend.codec, tools)
    assert isinstance(abort, Abort)
    assert abort.reason.kind is AbortKind.MODEL_FAILED
    assert abort.reason.error is not None
    assert abort.reason.error.kind is ErrorKind.CONNECTION
    assert abort.reason.error.retryable


@pytest.mark.parametrize("runtime", ["blocking", "asyncio"])
def test_an_error_status_is_classified_by_the_codec(
    guide: dict[str, Any], backend_url: str, runtime: str
) -> None:
    backend = agentcore.wire.backend(f"{backend_url}/no-such-api", model="agentcore-sim")
    tools = guide["BLOCKING_TOOLS"]
    loop = AgentLoop(_config(f"not-found-{runtime}", tools), guide["MESSAGES"])
    abort = _run(guide, runtime, loop, backend.codec, tools)
    assert isinstance(abort, Abort)
    assert abort.reason.error is not None
    assert abort.reason.error.kind is ErrorKind.NOT_FOUND
    assert abort.reason.error.status == 404
    assert not abort.reason.error.retryable


# ----------------------------------------------------------------------------- concurrency


def test_asyncio_loop_runs_a_turns_tool_calls_concurrently_and_keeps_the_model_order(
    guide: dict[str, Any],
) -> None:
    batches: list[int] = []  # calls started per batch of overlapping executions
    state = {"running": 0, "started": 0}

    @agentcore.tool(name="define")
    async def define(term: str) -> str:
        """Look a term up.

        Args:
            term: one word.
        """
        position = state["started"]
        state["started"] += 1
        state["running"] += 1
        # Later calls of a batch yield fewer times, so a turn's calls finish in reverse.
        for _ in range(3 * (10 - position)):
            await asyncio.sleep(0)
        state["running"] -= 1
        if state["running"] == 0:
            batches.append(state["started"])
            state["started"] = 0
        return f"{term}: a word"

    tools = {"define": define}
    runs = [
        _RecordingLoop(AgentLoop(_config(f"order-{i}", tools, output=guide["Verdict"]),
                                 guide["MESSAGES"]))
        for i in range(6)
    ]  # fmt: skip
    turns: list[list[str]] = []
    for run in runs:  # one agent at a time, so batches belong to one turn
        finish = _assert_typed_finish(
            guide, _run(guide, "asyncio", run, guide["backend"].codec, tools)
        )
        transcript = list(finish.transcript)
        run_turns: list[list[str]] = []
        for i, message in enumerate(transcript):
            if isinstance(message, AssistantMessage) and message.tool_calls:
                model_order = [c.id for c in message.tool_calls]
                following = transcript[i + 1 : i + 1 + len(model_order)]
                assert [m.call_id for m in following if isinstance(m, ToolMessage)] == model_order
                for call, result in zip(message.tool_calls, following, strict=True):
                    assert isinstance(result, ToolMessage)
                    assert result.content == f"{json.loads(call.arguments)['term']}: a word"
                run_turns.append(model_order)
        # results were fed in completion order (reversed), the transcript is in model order
        fed = [e.call_id for e in run.fed if isinstance(e, ToolReturned)]
        assert fed == [call_id for turn in run_turns for call_id in reversed(turn)]
        turns.extend(run_turns)

    # every call of a turn was running at once, and some turns had several calls
    assert batches == [len(turn) for turn in turns]
    assert max(batches) >= 2


# ----------------------------------------------------------------------------- durability


def test_a_crash_before_recording_repeats_only_the_owed_effect(guide: dict[str, Any]) -> None:
    executions: list[str] = []

    @agentcore.tool(name="count_words")
    def counting(text: str) -> int:
        """Count the words of a text.

        Args:
            text: the text to measure.
        """
        executions.append(text)
        return len(text.split())

    tools = {"count_words": counting}
    config = _config("durable-crash", tools, output=guide["Verdict"])
    store = _StoreThatCrashesOnce()
    guide["begin"](store, config, guide["MESSAGES"])

    def owed() -> CallModel | CallTool:
        snapshot = agentcore.core.loads(store["durable-crash"], LoopSnapshot)
        effect = AgentLoop.restore(config, snapshot).outstanding()[0]
        assert isinstance(effect, CallModel | CallTool)
        return effect

    crashed: CallTool | None = None
    steps = 0
    while True:
        steps += 1
        assert steps < 50
        effect = owed()
        if crashed is None and isinstance(effect, CallTool):
            store.crash_next_write = True
            with pytest.raises(_Crash):
                guide["step"](store, config, guide["backend"].codec, tools)
            crashed = effect
            assert owed() == crashed  # same call id, arguments and idempotency key
            continue
        end = guide["step"](store, config, guide["backend"].codec, tools)
        if end is not None:
            break
    finish = _assert_typed_finish(guide, end)
    assert crashed is not None
    assert crashed.idempotency_key == "durable-crash/0/0"
    text = crashed.arguments["text"]
    results = [m for m in finish.transcript if isinstance(m, ToolMessage)]
    assert executions.count(text) == 1 + sum(
        1 for m in finish.transcript if isinstance(m, AssistantMessage)
        for c in m.tool_calls if json.loads(c.arguments) == {"text": text}
    )  # fmt: skip
    assert len(executions) == len(results) + 1  # one execution repeated, none lost
