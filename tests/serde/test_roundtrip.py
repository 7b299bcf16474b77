"""Round trips: every value the strategies draw survives ``dumps``/``loads`` unchanged, as its
own class and through its union; snapshots of real runs survive too."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentcore
from agentcore import Usage
from agentcore.core import (
    AgentLoop,
    AssistantMessage,
    CallTool,
    CancelRequested,
    Finish,
    LoopConfig,
    LoopSnapshot,
    ModelResponded,
    RunState,
    ToolCall,
    ToolMessage,
    ToolReturned,
    ToolSpec,
    UserMessage,
)
from agentcore.testing import strategies as acst

ROUND_TRIP = settings(max_examples=60, deadline=None)


def assert_round_trips(value: Any, tp: Any) -> None:
    data = agentcore.core.dumps(value)
    decoded = agentcore.core.loads(data, tp)
    assert decoded == value
    assert type(decoded) is type(value)
    # Byte-stable: covers fields that take no part in equality (JSON schemas).
    assert agentcore.core.dumps(decoded) == data


@ROUND_TRIP
@given(acst.messages())
def test_messages_round_trip_as_their_class_and_as_Message(message: Any) -> None:
    assert_round_trips(message, type(message))
    assert_round_trips(message, agentcore.core.Message)


@ROUND_TRIP
@given(acst.events())
def test_events_round_trip_as_their_class_and_as_Event(event: Any) -> None:
    assert_round_trips(event, type(event))
    assert_round_trips(event, agentcore.core.Event)


@ROUND_TRIP
@given(acst.effects())
def test_effects_round_trip_as_their_class_and_as_Effect(effect: Any) -> None:
    assert_round_trips(effect, type(effect))
    assert_round_trips(effect, agentcore.core.Effect)


@ROUND_TRIP
@given(st.lists(acst.messages(), max_size=5).map(tuple))
def test_transcripts_round_trip(transcript: tuple[Any, ...]) -> None:
    assert_round_trips(transcript, tuple[agentcore.core.Message, ...])


@ROUND_TRIP
@given(acst.json_values())
def test_finish_output_of_json_values_round_trips_exactly(output: Any) -> None:
    finish = Finish(output=output, transcript=(), usage=Usage())
    assert_round_trips(finish, Finish)


@ROUND_TRIP
@given(
    st.one_of(
        acst.tool_specs(),
        acst.output_specs(),
        acst.model_params(),
        acst.hints(),
        acst.server_timings(),
        acst.model_errors(),
        acst.tool_errors(),
        acst.abort_reasons(),
        acst.usages(),
        acst.tool_calls(),
    )
)
def test_parts_round_trip(part: Any) -> None:
    assert_round_trips(part, type(part))


# ----------------------------------------------------------------------------- snapshots

TOOLS = (ToolSpec("lookup", "Looks a word up.", {"type": "object"}),)


def snapshots_of_a_run() -> list[LoopSnapshot]:
    """Snapshots of one run at every step: start, a tool turn with two calls answered out of
    order (one unknown tool), a repair-free final answer."""
    loop = AgentLoop(LoopConfig(run_id="run-7", tools=TOOLS), [UserMessage("define serde")])
    taken = [loop.snapshot()]
    (call,) = loop.start()
    taken.append(loop.snapshot())
    reply = AssistantMessage(
        "Looking it up.",
        (
            ToolCall("a", "lookup", '{"word": "serde"}'),
            ToolCall("b", "lookup", '{"word": "codec"}'),
            ToolCall("c", "missing", "{}"),
        ),
    )
    effects = loop.handle(ModelResponded(call.request_id, reply, Usage(30, 9, None)))
    taken.append(loop.snapshot())
    tool_calls = [e for e in effects if isinstance(e, CallTool)]
    for tool_call in reversed(tool_calls):
        effects = loop.handle(ToolReturned(tool_call.call_id, f"meaning of {tool_call.call_id}"))
        taken.append(loop.snapshot())
    (call,) = effects
    loop.handle(ModelResponded(call.request_id, AssistantMessage("Done."), Usage(50, 2, 32)))
    taken.append(loop.snapshot())
    return taken


def test_snapshots_of_a_run_round_trip() -> None:
    snapshots = snapshots_of_a_run()
    states = [s.state for s in snapshots]
    assert RunState.AWAITING_TOOLS in states
    assert states[-1] is RunState.FINISHED
    assert any(None in s.results for s in snapshots)
    for snapshot in snapshots:
        assert_round_trips(snapshot, LoopSnapshot)


def test_loop_restored_from_decoded_snapshot_continues_like_the_original() -> None:
    config = LoopConfig(run_id="run-8", tools=TOOLS)
    original = AgentLoop(config, [UserMessage("q")])
    (call,) = original.start()
    reply = AssistantMessage(None, (ToolCall("x", "lookup", "{}"), ToolCall("y", "lookup", "{}")))
    original.handle(ModelResponded(call.request_id, reply))
    original.handle(ToolReturned("y", "second"))

    decoded = agentcore.core.loads(agentcore.core.dumps(original.snapshot()), LoopSnapshot)
    restored = AgentLoop.restore(config, decoded)

    last = ToolReturned("x", "first")
    assert restored.handle(last) == original.handle(last)
    assert restored.snapshot() == original.snapshot()


# ----------------------------------------------------------------------------- other attrs values


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mode(enum.StrEnum):
    FAST = "fast"


@attrs.frozen
class Composite:
    """An attrs value built from agentcore types with every container shape the converter
    supports, standing in for state objects other modules define."""

    by_int: dict[int, ToolMessage]
    by_color: Mapping[Color, int]
    pending: frozenset[str]
    seen: set[int]
    pair: tuple[int, str]
    colors: tuple[Color, ...]
    level: Level
    mode: Mode
    last: agentcore.core.Event | None
    history: list[agentcore.core.Message]
    reply: AssistantMessage | None = None


COMPOSITE = Composite(
    by_int={3: ToolMessage("c", "n", "x"), -1: ToolMessage("d", "n", "y", is_error=True)},
    by_color={Color.RED: 1},
    pending=frozenset({"q", "b", "k"}),
    seen={3, 1, 2},
    pair=(1, "a"),
    colors=(Color.BLUE, Color.RED),
    level=Level.HIGH,
    mode=Mode.FAST,
    last=CancelRequested(),
    history=[UserMessage("u")],
    reply=AssistantMessage("a"),
)


def test_attrs_values_built_from_agentcore_types_round_trip() -> None:
    data = agentcore.core.dumps(COMPOSITE)
    assert b'"by_int":{"3":{"type":"tool",' in data
    assert b'"pending":["b","k","q"],"seen":[1,2,3]' in data
    assert b'"level":2,"mode":"fast","last":{"type":"cancel_requested"' in data
    assert_round_trips(COMPOSITE, Composite)


@pytest.mark.parametrize(
    ("old", "new", "fragment"),
    [
        (b'"3":', b'"03":', "expected an integer key, got '03' @ $.by_int['03']"),
        (b'{"red":1}', b'{"green":1}', "got 'green' @ $.by_color['green']"),
        (b'"level":2', b'"level":true', "expected one of 1, 2 (Level), got True @ $.level"),
        (b'"mode":"fast"', b'"mode":"slow"', "got 'slow' @ $.mode"),
        (b'"pair":[1,"a"]', b'"pair":[1,"a",2]', "expected an array of 2 items, got 3 @ $.pair"),
        (b'"seen":[1,2,3]', b'"seen":{"1":1}', "expected an array, got an object @ $.seen"),
        (b'"last":{"type":"cancel_requested"', b'"last":{"type":"user"', "unknown type tag"),
    ],
)
def test_attrs_values_built_from_agentcore_types_decode_strictly(
    old: bytes, new: bytes, fragment: str
) -> None:
    data = agentcore.core.dumps(COMPOSITE)
    assert old in data
    with pytest.raises(agentcore.DecodeError) as info:
        agentcore.core.loads(data.replace(old, new, 1), Composite)
    assert fragment in str(info.value)


def test_optional_union_field_accepts_null() -> None:
    data = agentcore.core.dumps(attrs.evolve(COMPOSITE, last=None, reply=None))
    assert agentcore.core.loads(data, Composite).last is None
