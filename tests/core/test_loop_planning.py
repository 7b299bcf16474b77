"""Planning turns: when the loop asks for a plan, what the plan request is, where the plan goes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentcore
from agentcore import ConfigError, ErrorKind, ModelError, Usage
from agentcore._core.config import DEFAULT_PLANNING_FOLLOWUP, DEFAULT_PLANNING_INSTRUCTION
from agentcore.core import (
    AgentLoop,
    AssistantMessage,
    CallModel,
    CallTool,
    Effect,
    Finish,
    LoopSnapshot,
    ModelFailed,
    ModelResponded,
    ToolCall,
    ToolReturned,
    UserMessage,
)
from tests.core.helpers import MESSAGES, add_call, make_config, make_loop, text_reply, tool_reply

PLAN = UserMessage(DEFAULT_PLANNING_INSTRUCTION)
GO = UserMessage(DEFAULT_PLANNING_FOLLOWUP)


def is_plan(call: CallModel) -> bool:
    return call.messages[-1] == PLAN


def drive(loop: AgentLoop, replies: Sequence[str]) -> list[str]:
    """Answer each model request from ``replies`` ("tool", "text"; a plan request always gets
    a text plan) and return what each request was: "plan", "act" or "final"."""
    kinds: list[str] = []
    effects: tuple[Effect, ...] = loop.start()
    script = iter(replies)
    while True:
        (first, *rest) = effects
        if isinstance(first, Finish | agentcore.core.Abort):
            return kinds
        if isinstance(first, CallTool):
            for call in (first, *rest):
                assert isinstance(call, CallTool)
                effects = loop.handle(ToolReturned(call.call_id, "5"))
            continue
        assert isinstance(first, CallModel)
        if is_plan(first):
            kinds.append("plan")
            effects = loop.handle(text_reply(first.request_id, f"plan {len(kinds)}"))
            continue
        kinds.append("final" if first.hints.final else "act")
        reply = next(script, "text")
        if reply == "tool":
            effects = loop.handle(tool_reply(first.request_id, add_call(f"c{len(kinds)}")))
        else:
            effects = loop.handle(text_reply(first.request_id, "the answer"))


# interval, max_turns, the model's replies to ordinary requests -> the request kinds
TABLE = [
    (None, 3, ["tool", "tool", "text"], ["act", "act", "act"]),
    (1, 3, ["text"], ["plan", "act"]),
    (1, 3, ["tool", "text"], ["plan", "act", "plan", "act"]),
    (1, 3, ["tool", "tool", "text"], ["plan", "act", "plan", "act", "plan", "act"]),
    (2, 5, ["tool", "tool", "tool", "text"], ["plan", "act", "act", "plan", "act", "act"]),
    (3, 5, ["tool", "tool", "text"], ["plan", "act", "act", "act"]),
    # never a plan before the forced final request
    (1, 1, ["tool", "text"], ["plan", "act", "final"]),
    (2, 2, ["tool", "tool", "text"], ["plan", "act", "act", "final"]),
]


@pytest.mark.parametrize(("interval", "max_turns", "replies", "expected"), TABLE)
def test_plans_come_first_and_after_every_nth_tool_turn(
    interval: int | None, max_turns: int, replies: list[str], expected: list[str]
) -> None:
    loop = make_loop(planning_interval=interval, max_turns=max_turns)
    assert drive(loop, replies) == expected
    assert loop.statistics().plans == expected.count("plan")
    assert loop.statistics().model_calls == len(expected)


def test_a_plan_request_keeps_the_shared_prefix_and_switches_tools_off() -> None:
    plain = make_loop().start()[0]
    loop = make_loop(planning_interval=2)
    plan = loop.start()[0]
    assert isinstance(plain, CallModel) and isinstance(plan, CallModel)
    # the shared prefix (system prompt, tools, the user's message) is byte-identical
    dumps = agentcore.core.dumps
    assert dumps(plan.messages[: len(MESSAGES)]) == dumps(plain.messages)
    assert dumps(plan.tools) == dumps(plain.tools)
    assert plan.messages[len(MESSAGES) :] == (PLAN,)
    assert plan.params.tool_choice == "none"
    assert plan.output is None
    assert not plan.hints.final
    assert plan.request_id == "run-1/0"
    act = loop.handle(text_reply("run-1/0", "1. add 2 and 3"))[0]
    assert isinstance(act, CallModel)
    assert act.request_id == "run-1/1"
    assert act.params == plain.params
    assert act.tools == plain.tools
    assert dumps(act.messages[: len(plan.messages)]) == dumps(plan.messages)


def test_the_plan_enters_the_transcript_and_counts_in_usage() -> None:
    loop = make_loop(planning_interval=1)
    loop.start()
    loop.handle(ModelResponded("run-1/0", AssistantMessage("my plan"), Usage(7, 3)))
    finish = loop.handle(text_reply("run-1/1", "the answer", Usage(9, 1)))[0]
    assert isinstance(finish, Finish)
    assert finish.transcript[len(MESSAGES) :] == (
        PLAN,
        AssistantMessage("my plan"),
        GO,
        AssistantMessage("the answer"),
    )
    assert finish.usage == Usage(16, 4)
    assert loop.statistics().plans == 1


def test_tool_calls_in_a_plan_are_dropped_and_an_empty_plan_is_kept_as_such() -> None:
    loop = make_loop(planning_interval=1)
    loop.start()
    sneaky = AssistantMessage(None, (ToolCall("x", "add", '{"x": 1, "y": 1}'),))
    effects = loop.handle(ModelResponded("run-1/0", sneaky))
    (act,) = effects
    assert isinstance(act, CallModel)  # no CallTool: tools were not offered
    assert act.messages[-2:] == (AssistantMessage("(no plan)"), GO)
    assert loop.statistics().tool_turns == 0


def test_a_failed_plan_request_aborts_like_any_model_failure() -> None:
    loop = make_loop(planning_interval=1)
    loop.start()
    (abort,) = loop.handle(ModelFailed("run-1/0", ModelError(ErrorKind.AUTH, "no key")))
    assert isinstance(abort, agentcore.core.Abort)
    assert abort.reason.error is not None


def test_a_snapshot_taken_while_a_plan_is_outstanding_restores_to_the_same_request() -> None:
    config = make_config(planning_interval=1)
    loop = AgentLoop(config, MESSAGES)
    (plan,) = loop.start()
    data = agentcore.core.dumps(loop.snapshot())
    restored = AgentLoop.restore(config, agentcore.core.loads(data, LoopSnapshot))
    assert restored.outstanding() == (plan,)
    assert restored.statistics().plans == 1


def test_a_snapshot_written_before_planning_existed_still_loads() -> None:
    loop = make_loop()
    loop.start()
    data = agentcore.core.dumps(loop.snapshot())
    old = data.replace(b',"planning":false,"plans":0', b"")
    assert old != data
    assert agentcore.core.loads(old, LoopSnapshot) == loop.snapshot()


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_a_bad_planning_interval_is_a_config_error(bad: Any) -> None:
    with pytest.raises(ConfigError):
        make_config(planning_interval=bad)


@settings(max_examples=80, deadline=None)
@given(
    interval=st.integers(1, 4),
    max_turns=st.integers(1, 6),
    tool_turns=st.integers(0, 8),
)
def test_plans_happen_exactly_at_the_start_and_every_interval_before_the_final_request(
    interval: int, max_turns: int, tool_turns: int
) -> None:
    loop = make_loop(planning_interval=interval, max_turns=max_turns)
    kinds = drive(loop, ["tool"] * tool_turns + ["text"])
    done = min(tool_turns, max_turns)  # tool turns that actually ran
    # a plan first, then one after every interval-th tool turn that is not followed by the
    # final request
    expected_plans = 1 + sum(1 for k in range(1, done + 1) if k % interval == 0 and k < max_turns)
    assert kinds.count("plan") == expected_plans == loop.statistics().plans
    assert kinds[0] == "plan"
    if "final" in kinds:
        assert "plan" not in kinds[kinds.index("final") :]
    assert kinds.count("act") + kinds.count("final") == done + 1
