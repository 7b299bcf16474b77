"""Every (state, input) pair of AgentLoop: legal per TRANSITIONS, or LocalProtocolError + ERROR."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agentcore import ErrorKind, ModelError, ToolError
from agentcore._core.loop import START, TRANSITIONS
from agentcore.core import (
    AgentLoop,
    CancelRequested,
    Event,
    LocalProtocolError,
    ModelFailed,
    RunState,
    ToolCall,
    ToolFailed,
    ToolReturned,
)
from tests.core.helpers import add_call, make_loop, text_reply, tool_reply


def loop_in(state: RunState) -> AgentLoop:
    """A loop brought into ``state`` by a legal script (ERROR by one illegal event)."""
    loop = make_loop()
    if state is RunState.IDLE:
        return loop
    loop.start()
    if state is RunState.AWAITING_MODEL:
        return loop
    if state is RunState.AWAITING_TOOLS:
        loop.handle(tool_reply("run-1/0", add_call("c1"), add_call("c2")))
    elif state is RunState.FINISHED:
        loop.handle(text_reply("run-1/0", "done"))
    elif state is RunState.ABORTED:
        loop.handle(CancelRequested())
    else:
        with pytest.raises(LocalProtocolError):
            loop.handle(ToolReturned("nope", ""))
    assert loop.state is state
    return loop


EVENT_TYPES: dict[str, Callable[[], Event]] = {
    "ModelResponded": lambda: text_reply("run-1/0", "done"),
    "ModelFailed": lambda: ModelFailed("run-1/0", ModelError(ErrorKind.SERVER, "500")),
    "ToolReturned": lambda: ToolReturned("c1", "ok"),
    "ToolFailed": lambda: ToolFailed("c1", ToolError("OSError", "down")),
    "CancelRequested": CancelRequested,
}


def feed_input(loop: AgentLoop, name: str) -> object:
    if name == START:
        return loop.start()
    return loop.handle(EVENT_TYPES[name]())


def table_key(state: RunState, name: str) -> tuple[RunState, object]:
    if name == START:
        return (state, START)
    event_type = type(EVENT_TYPES[name]())
    return (state, event_type)


@pytest.mark.parametrize("name", [START, *EVENT_TYPES])
@pytest.mark.parametrize("state", list(RunState))
def test_every_input_in_every_state_follows_the_table(state: RunState, name: str) -> None:
    loop = loop_in(state)
    allowed = TRANSITIONS.get(table_key(state, name))
    if allowed is None:
        with pytest.raises(LocalProtocolError) as info:
            feed_input(loop, name)
        assert info.value.state is state
        assert loop.state is RunState.ERROR
    else:
        feed_input(loop, name)
        assert loop.state in allowed


def test_the_table_only_names_real_states_and_inputs() -> None:
    inputs = {START, *(type(make()) for make in EVENT_TYPES.values())}
    for (state, key), targets in TRANSITIONS.items():
        assert isinstance(state, RunState)
        assert key in inputs
        assert targets and targets <= set(RunState)
    terminal = {RunState.FINISHED, RunState.ABORTED, RunState.ERROR}
    assert not [key for key in TRANSITIONS if key[0] in terminal]


@pytest.mark.parametrize("name", [START, *EVENT_TYPES])
@pytest.mark.parametrize("state", list(RunState))
def test_error_is_sticky(state: RunState, name: str) -> None:
    loop = loop_in(state)
    with pytest.raises(LocalProtocolError):
        loop.handle(ToolReturned("never-issued", ""))
    assert loop.state is RunState.ERROR
    with pytest.raises(LocalProtocolError) as info:
        feed_input(loop, name)
    assert info.value.state is RunState.ERROR
    assert loop.state is RunState.ERROR


def test_the_offending_event_is_attached_to_the_error() -> None:
    loop = loop_in(RunState.AWAITING_MODEL)
    event = ToolReturned("c1", "ok")
    with pytest.raises(LocalProtocolError) as info:
        loop.handle(event)
    assert info.value.event is event
    assert info.value.state is RunState.AWAITING_MODEL


@pytest.mark.parametrize(
    ("state", "make_event"),
    [
        pytest.param(
            RunState.AWAITING_MODEL,
            lambda: text_reply("run-1/7", "done"),
            id="reply-to-another-request",
        ),
        pytest.param(
            RunState.AWAITING_MODEL,
            lambda: ModelFailed("other/0", ModelError(ErrorKind.SERVER, "x")),
            id="failure-of-another-request",
        ),
        pytest.param(
            RunState.AWAITING_TOOLS,
            lambda: ToolReturned("c9", "x"),
            id="result-for-unknown-call",
        ),
        pytest.param(
            RunState.AWAITING_TOOLS,
            lambda: ToolFailed("", ToolError("E", "x")),
            id="failure-for-unknown-call",
        ),
    ],
)
def test_events_with_ids_the_loop_does_not_expect_are_illegal(
    state: RunState, make_event: Callable[[], Event]
) -> None:
    loop = loop_in(state)
    with pytest.raises(LocalProtocolError):
        loop.handle(make_event())
    assert loop.state is RunState.ERROR


def test_a_second_result_for_a_call_is_illegal() -> None:
    loop = loop_in(RunState.AWAITING_TOOLS)
    loop.handle(ToolReturned("c1", "ok"))
    with pytest.raises(LocalProtocolError, match="'c1'"):
        loop.handle(ToolFailed("c1", ToolError("E", "late")))
    assert loop.state is RunState.ERROR


def test_a_result_for_a_call_that_was_rejected_as_invalid_is_illegal() -> None:
    loop = make_loop()
    loop.start()
    loop.handle(tool_reply("run-1/0", add_call("ok"), ToolCall("bad", "no")))
    with pytest.raises(LocalProtocolError):
        loop.handle(ToolReturned("bad", "x"))


def test_a_duplicate_reply_is_illegal() -> None:
    loop = make_loop()
    loop.start()
    reply = tool_reply("run-1/0", add_call("a"))
    loop.handle(reply)
    loop.handle(ToolReturned("a", "5"))
    with pytest.raises(LocalProtocolError):
        loop.handle(reply)


def test_a_late_tool_result_after_cancel_is_illegal() -> None:
    loop = loop_in(RunState.AWAITING_TOOLS)
    loop.handle(CancelRequested())
    with pytest.raises(LocalProtocolError):
        loop.handle(ToolReturned("c1", "late"))


def test_something_that_is_not_an_event_is_illegal() -> None:
    loop = loop_in(RunState.AWAITING_MODEL)
    with pytest.raises(LocalProtocolError):
        loop.handle("ModelResponded")  # type: ignore[arg-type]
    assert loop.state is RunState.ERROR
