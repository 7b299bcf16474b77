"""A run restored from its step journal is the original run at its last journaled step.

The journal holds the replies (by request id) and tool outcomes (by idempotency key) the loop
accepted, optionally after a base snapshot; :func:`replay` feeds them to a fresh loop. Checked
at every point of random runs (tool turns with valid and invalid calls, failures, repairs,
planning), with and without a base snapshot taken at any earlier point.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore import ConfigError
from agentcore._core.journal import EMPTY, Journaled, ToolOutcome, replay
from agentcore.core import (
    Abort,
    AgentLoop,
    CallTool,
    Effect,
    Finish,
    ModelResponded,
    RunState,
    ToolFailed,
    ToolReturned,
)
from tests.core.helpers import MESSAGES, Answer, add_call, make_config, make_loop, tool_reply
from tests.core.test_loop_snapshot import Environment, scripts


def _journal(
    events: Sequence[tuple[ModelResponded | ToolOutcome, str]], base: Any = None
) -> Journaled:
    replies = {e.request_id: e for e, _ in events if isinstance(e, ModelResponded)}
    tools = {key: e for e, key in events if isinstance(e, ToolReturned | ToolFailed)}
    return Journaled(snapshot=base, replies=replies, tools=tools)


@settings(max_examples=60, deadline=None)
@given(
    script=scripts,
    structured=st.booleans(),
    max_turns=st.integers(1, 4),
    planning_interval=st.one_of(st.none(), st.integers(1, 3)),
    max_tool_failures=st.one_of(st.none(), st.integers(0, 3)),
    data=st.data(),
)
def test_a_run_replayed_from_its_journal_at_any_point_is_the_original_at_that_point(  # noqa: PLR0917
    script: tuple[Sequence[tuple[str, Any]], Sequence[int]],
    structured: bool,
    max_turns: int,
    planning_interval: int | None,
    max_tool_failures: int | None,
    data: st.DataObject,
) -> None:
    config = make_config(
        output=Answer if structured else None,
        max_turns=max_turns,
        planning_interval=planning_interval,
        max_tool_failures=max_tool_failures,
    )
    env = Environment(structured, *script)
    loop = AgentLoop(config, MESSAGES)
    effects: tuple[Effect, ...] = loop.start()
    env.observe(effects)
    keys: dict[str, str] = {}
    journaled: list[tuple[ModelResponded | ToolOutcome, str]] = []
    snapshots = [(0, loop.snapshot())]
    while True:
        keys.update((e.call_id, e.idempotency_key) for e in effects if isinstance(e, CallTool))
        # At this point the journal holds ``journaled``: a fresh loop fed it is this loop.
        cut = data.draw(st.integers(0, len(snapshots) - 1), label="base")
        at, base = snapshots[cut]
        restored = replay(AgentLoop(config, MESSAGES), _journal(journaled[at:], base))
        if loop.state in (RunState.FINISHED, RunState.ABORTED):
            assert restored.end == next(e for e in effects if isinstance(e, Finish | Abort))
            break
        assert restored.loop.snapshot() == loop.snapshot()
        assert restored.effects == loop.outstanding()
        assert restored.replies + restored.tools == len(journaled) - at
        event = env.next_event()
        if not isinstance(event, ModelResponded | ToolReturned | ToolFailed):
            break  # a failed request or a cancellation ends the run; neither is journaled
        effects = loop.handle(event)
        env.observe(effects)
        key = keys[event.call_id] if isinstance(event, ToolReturned | ToolFailed) else ""
        journaled.append((event, key))
        if loop.state in (RunState.AWAITING_MODEL, RunState.AWAITING_TOOLS):
            snapshots.append((len(journaled), loop.snapshot()))


def test_an_empty_journal_gives_the_fresh_loop_and_its_first_request() -> None:
    loop = make_loop()
    restored = replay(loop, EMPTY)
    assert restored.loop is loop
    assert restored.effects == make_loop().start()
    assert (restored.replies, restored.tools) == (0, 0)


def test_tools_not_journaled_are_owed_again_with_their_idempotency_keys() -> None:
    original = make_loop()
    original.start()
    calls = original.handle(tool_reply("run-1/0", add_call("a", 1), add_call("b", 2)))
    first, second = calls
    assert isinstance(first, CallTool) and isinstance(second, CallTool)
    original.handle(ToolReturned("b", "4"))
    journal = Journaled(
        replies={"run-1/0": tool_reply("run-1/0", add_call("a", 1), add_call("b", 2))},
        tools={second.idempotency_key: ToolReturned("b", "4")},
    )
    restored = replay(make_loop(), journal)
    assert restored.effects == (first,)  # the same call id and idempotency key
    assert restored.loop.snapshot() == original.snapshot()


def test_a_journal_of_another_run_does_not_fit() -> None:
    other = Journaled(snapshot=make_loop(run_id="run-2").snapshot())
    with pytest.raises(ConfigError):
        replay(make_loop(), other)
    # A reply whose calls the loop cannot have made (an outcome of an unknown call) is
    # simply not owed: nothing is fed that the loop did not ask for.
    stray = Journaled(tools={"run-1/0/0": ToolReturned("x", "1")})
    assert replay(make_loop(), stray).tools == 0
