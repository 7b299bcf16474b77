"""Snapshot/restore: a run resumed from a snapshot taken at any point behaves exactly the same.

Snapshots travel through ``agentcore.core.dumps``/``loads`` (JSON bytes), as a durable
runtime would store them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentcore
from agentcore import ConfigError, ErrorKind, ModelError, ToolError, Usage
from agentcore.core import (
    AgentLoop,
    AssistantMessage,
    CallModel,
    CallTool,
    CancelRequested,
    Effect,
    Event,
    LocalProtocolError,
    LoopConfig,
    LoopSnapshot,
    ModelFailed,
    ModelResponded,
    RunState,
    ToolCall,
    ToolFailed,
    ToolMessage,
    ToolReturned,
)
from tests.core.helpers import MESSAGES, Answer, add_call, make_config, make_loop, tool_reply

CALL_KINDS = ("valid", "echo", "unknown", "bad_json", "bad_args", "noid")


def tool_call(kind: str, index: int, turn: int) -> ToolCall:
    call_id = f"t{turn}c{index}"
    return {
        "valid": ToolCall(call_id, "add", f'{{"x": {index}, "y": {turn}}}'),
        "echo": ToolCall(call_id, "echo", '{"k": "v"}'),
        "unknown": ToolCall(call_id, "nope"),
        "bad_json": ToolCall(call_id, "add", "{"),
        "bad_args": ToolCall(call_id, "add", '{"x": true, "y": 1}'),
        "noid": ToolCall("", "echo"),
    }[kind]


replies = st.one_of(
    st.tuples(st.just("tools"), st.lists(st.sampled_from(CALL_KINDS), min_size=1, max_size=3)),
    st.tuples(st.just("answer"), st.sampled_from(["good", "bad", "prose"])),
    st.tuples(st.just("fail"), st.none()),
    st.tuples(st.just("cancel"), st.none()),
)


@attrs.define
class Environment:
    """Answers a loop's effects from a script: deterministic given the effects it has seen."""

    structured: bool
    replies: Sequence[tuple[str, Any]]
    order: Sequence[int]
    owed_model: CallModel | None = None
    owed_tools: list[CallTool] = attrs.Factory(list)
    model_turn: int = 0
    tool_step: int = 0
    ended: bool = False

    def observe(self, effects: Sequence[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, CallModel):
                assert self.owed_model is None and not self.owed_tools
                self.owed_model = effect
            elif isinstance(effect, CallTool):
                self.owed_tools.append(effect)
            else:
                self.ended = True

    def owed(self) -> tuple[Effect, ...]:
        return (self.owed_model,) if self.owed_model is not None else tuple(self.owed_tools)

    def next_event(self) -> Event | None:
        if self.ended:
            return None
        if self.owed_tools:
            pick = self.order[self.tool_step % len(self.order)] % len(self.owed_tools)
            self.tool_step += 1
            call = self.owed_tools.pop(pick)
            if self.tool_step % 3 == 0:
                return ToolFailed(call.call_id, ToolError("OSError", f"{call.name} down"))
            return ToolReturned(call.call_id, f"{call.name}:{sorted(call.arguments.items())}")
        assert self.owed_model is not None
        request_id = self.owed_model.request_id
        self.owed_model = None
        turn = self.model_turn
        self.model_turn += 1
        kind, detail = self.replies[turn] if turn < len(self.replies) else ("answer", "good")
        usage = Usage(10 + turn, 2, turn if turn % 2 else None)
        if kind == "tools":
            calls = tuple(tool_call(k, i, turn) for i, k in enumerate(detail))
            return ModelResponded(request_id, AssistantMessage(f"turn {turn}", calls), usage)
        if kind == "fail":
            return ModelFailed(request_id, ModelError(ErrorKind.SERVER, "500", status=500))
        if kind == "cancel":
            return CancelRequested("stop")
        content = {
            "good": '{"value": 7}' if self.structured else "seven",
            "bad": '{"value": "7"}' if self.structured else "",
            "prose": "It is seven." if self.structured else "   ",
        }[detail]
        return ModelResponded(request_id, AssistantMessage(content), usage)


def roundtrip(loop: AgentLoop, config: LoopConfig) -> AgentLoop:
    data = agentcore.core.dumps(loop.snapshot())
    return AgentLoop.restore(config, agentcore.core.loads(data, LoopSnapshot))


def play(
    config: LoopConfig,
    script: tuple[Sequence[tuple[str, Any]], Sequence[int]],
    restore_at: int | None,
) -> list[tuple[Effect, ...]]:
    """Run to the end; restore from a serialised snapshot before input number ``restore_at``."""
    env = Environment(config.output is not None, *script)
    loop = AgentLoop(config, MESSAGES)
    if restore_at == 0:
        loop = roundtrip(loop, config)
    emitted = [loop.start()]
    env.observe(emitted[-1])
    step = 1
    while not env.ended:
        if step == restore_at:
            loop = roundtrip(loop, config)
            assert loop.outstanding() == env.owed()
        event = env.next_event()
        assert event is not None
        emitted.append(loop.handle(event))
        env.observe(emitted[-1])
        step += 1
        assert step < 200
    if step == restore_at:
        assert roundtrip(loop, config).state is loop.state
    return emitted


scripts = st.tuples(
    st.lists(replies, max_size=8),
    st.lists(st.integers(0, 5), min_size=1, max_size=5),
)


@settings(max_examples=60, deadline=None)
@given(
    script=scripts,
    structured=st.booleans(),
    max_turns=st.integers(1, 4),
    max_tool_errors=st.integers(0, 3),
    max_output_retries=st.integers(0, 2),
    planning_interval=st.one_of(st.none(), st.integers(1, 3)),
)
def test_a_run_restored_at_any_point_emits_the_same_remaining_effects(  # noqa: PLR0917
    script: tuple[Sequence[tuple[str, Any]], Sequence[int]],
    structured: bool,
    max_turns: int,
    max_tool_errors: int,
    max_output_retries: int,
    planning_interval: int | None,
) -> None:
    config = make_config(
        output=Answer if structured else None,
        max_turns=max_turns,
        max_tool_errors=max_tool_errors,
        max_output_retries=max_output_retries,
        planning_interval=planning_interval,
    )
    reference = play(config, script, None)
    for restore_at in range(len(reference) + 1):
        assert play(config, script, restore_at) == reference


@settings(max_examples=40, deadline=None)
@given(script=scripts, structured=st.booleans())
def test_a_snapshot_round_trips_exactly_through_json(
    script: tuple[Sequence[tuple[str, Any]], Sequence[int]], structured: bool
) -> None:
    config = make_config(output=Answer if structured else None, max_turns=2)
    env = Environment(structured, *script)
    loop = AgentLoop(config, MESSAGES)
    env.observe(loop.start())
    while (event := env.next_event()) is not None:
        snapshot = loop.snapshot()
        assert agentcore.core.loads(agentcore.core.dumps(snapshot), LoopSnapshot) == snapshot
        env.observe(loop.handle(event))
    snapshot = loop.snapshot()
    assert agentcore.core.loads(agentcore.core.dumps(snapshot), LoopSnapshot) == snapshot


# ----------------------------------------------------------------------------- examples


def test_outstanding_after_restore_repeats_the_calls_with_the_same_keys() -> None:
    config = make_config()
    loop = AgentLoop(config, MESSAGES)
    loop.start()
    issued = loop.handle(tool_reply("run-1/0", add_call("a"), ToolCall("", "echo", "{}")))
    loop.handle(ToolReturned("a", "5"))
    restored = roundtrip(loop, config)
    assert restored.state is RunState.AWAITING_TOOLS
    assert restored.outstanding() == issued[1:]
    (call,) = restored.handle(ToolReturned("call_0_1", "{}"))
    assert isinstance(call, CallModel)
    assert call.messages[-2:] == (
        ToolMessage("a", "add", "5"),
        ToolMessage("call_0_1", "echo", "{}"),
    )


def test_a_restored_idle_loop_can_start() -> None:
    config = make_config()
    restored = roundtrip(AgentLoop(config, MESSAGES), config)
    assert restored.start() == AgentLoop(config, MESSAGES).start()


def test_a_restored_loop_in_error_stays_in_error() -> None:
    config = make_config()
    loop = AgentLoop(config, MESSAGES)
    with pytest.raises(LocalProtocolError):
        loop.handle(CancelRequested())
    restored = roundtrip(loop, config)
    assert restored.state is RunState.ERROR
    with pytest.raises(LocalProtocolError):
        restored.start()


def test_restore_refuses_the_config_of_another_run() -> None:
    snapshot = make_loop().snapshot()
    with pytest.raises(ConfigError, match="run-2"):
        AgentLoop.restore(make_config(run_id="run-2"), snapshot)


@pytest.mark.parametrize(
    "broken",
    [
        {"state": RunState.AWAITING_TOOLS, "results": (None,)},
        {"state": RunState.AWAITING_MODEL, "results": (None,)},
        {"state": RunState.AWAITING_TOOLS, "results": ()},
    ],
)
def test_restore_refuses_an_inconsistent_snapshot(broken: dict[str, Any]) -> None:
    loop = make_loop()
    loop.start()
    snapshot = attrs.evolve(loop.snapshot(), **broken)
    with pytest.raises(ConfigError, match="inconsistent snapshot"):
        AgentLoop.restore(make_config(), snapshot)


def test_a_tool_turn_with_every_result_in_is_not_a_valid_snapshot_state() -> None:
    loop = make_loop()
    loop.start()
    loop.handle(tool_reply("run-1/0", add_call("a")))
    snapshot = loop.snapshot()
    done = attrs.evolve(snapshot, results=(ToolMessage("a", "add", "5"),))
    with pytest.raises(ConfigError):
        AgentLoop.restore(make_config(), done)
