"""Failed tool calls: counted per run by tool and error type, and ``max_tool_failures``."""

from __future__ import annotations

import pytest

from agentcore import AbortKind, Budget, BudgetExceeded, ConfigError, ToolError
from agentcore._core.results import ToolFailures
from agentcore.core import (
    Abort,
    AgentLoop,
    LocalProtocolError,
    LoopSnapshot,
    RunState,
    ToolFailed,
    ToolMessage,
    ToolReturned,
    UserMessage,
    dumps,
    loads,
)
from tests.core.helpers import add_call, make_config, make_loop, only_call_model, tool_reply


def _fail_turn(loop: AgentLoop, turn: int, error: ToolError) -> None:
    loop.handle(tool_reply(f"run-1/{turn}", add_call(f"c{turn}")))
    only_call_model(loop.handle(ToolFailed(f"c{turn}", error)))


def test_failed_tool_calls_are_counted_by_tool_and_error_type() -> None:
    loop = make_loop()
    loop.start()
    _fail_turn(loop, 0, ToolError("FileNotFoundError", "no such file: 'lambda tensor'"))
    _fail_turn(loop, 1, ToolError("FileNotFoundError", "no such file: 'b'"))
    _fail_turn(loop, 2, ToolError("timeout", "tool 'add' did not finish within 1 s"))
    loop.handle(tool_reply("run-1/3", add_call("ok")))
    only_call_model(loop.handle(ToolReturned("ok", "5")))
    failures = loop.tool_failures
    assert failures.counts == {"add": {"FileNotFoundError": 2, "timeout": 1}}
    assert failures.total == 3
    assert failures.first == {"add": "FileNotFoundError: no such file: 'lambda tensor'"}
    assert loop.statistics().tool_failures == 3
    assert loop.statistics().tool_errors == 0  # failures are not invalid calls


def test_without_a_limit_a_run_whose_tools_always_fail_goes_on() -> None:
    loop = make_loop()
    loop.start()
    for turn in range(5):
        _fail_turn(loop, turn, ToolError("OSError", "down"))
    assert loop.state is RunState.AWAITING_MODEL


def test_the_failure_past_max_tool_failures_aborts_the_run() -> None:
    loop = make_loop(max_tool_failures=2)
    loop.start()
    _fail_turn(loop, 0, ToolError("OSError", "down"))
    _fail_turn(loop, 1, ToolError("OSError", "down"))
    loop.handle(tool_reply("run-1/2", add_call("c2"), add_call("c3")))
    effects = loop.handle(ToolFailed("c3", ToolError("OSError", "still down")))
    assert len(effects) == 1
    abort = effects[0]
    assert isinstance(abort, Abort)
    assert abort.reason.kind is AbortKind.TOOL_FAILURES
    assert "3 tool calls failed, more than max_tool_failures=2" in abort.reason.message
    assert "add 3 (OSError: down)" in abort.reason.message
    last = abort.transcript[-1]  # the failure that arrived is in the transcript
    assert isinstance(last, ToolMessage) and last.call_id == "c3" and last.is_error
    assert loop.state is RunState.ABORTED
    assert loop.tool_failures.total == 3


def test_max_tool_failures_zero_aborts_on_the_first_failure() -> None:
    loop = make_loop(max_tool_failures=0)
    loop.start()
    loop.handle(tool_reply("run-1/0", add_call("c0")))
    (abort,) = loop.handle(ToolFailed("c0", ToolError("ValueError", "bad")))
    assert isinstance(abort, Abort) and abort.reason.kind is AbortKind.TOOL_FAILURES


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_max_tool_failures_must_be_a_non_negative_integer(bad: object) -> None:
    with pytest.raises(ConfigError, match="max_tool_failures"):
        make_config(max_tool_failures=bad)


def test_a_failure_for_a_call_not_outstanding_is_still_illegal() -> None:
    loop = make_loop(max_tool_failures=0)
    loop.start()
    loop.handle(tool_reply("run-1/0", add_call("c0")))
    with pytest.raises(LocalProtocolError):
        loop.handle(ToolFailed("other", ToolError("OSError", "down")))
    assert loop.tool_failures.total == 0


def test_tool_failures_survive_a_snapshot_round_trip() -> None:
    config = make_config(max_tool_failures=1)
    loop = AgentLoop(config, ())
    loop.start()
    _fail_turn(loop, 0, ToolError("OSError", "down"))
    snapshot = loads(dumps(loop.snapshot()), LoopSnapshot)
    restored = AgentLoop.restore(config, snapshot)
    assert restored.tool_failures == loop.tool_failures
    restored.handle(tool_reply("run-1/1", add_call("c1")))
    (abort,) = restored.handle(ToolFailed("c1", ToolError("OSError", "down")))
    assert isinstance(abort, Abort) and abort.reason.kind is AbortKind.TOOL_FAILURES


def test_a_snapshot_without_tool_failures_restores_with_none() -> None:
    loop = make_loop()
    loop.start()
    data = dumps(loop.snapshot()).replace(b',"tool_failures":{"counts":{},"first":{}}', b"")
    assert b"tool_failures" not in data
    assert loads(data, LoopSnapshot).tool_failures.total == 0


def test_tool_failures_keep_a_bounded_number_of_error_types_and_a_short_first_error() -> None:
    failures = ToolFailures()
    for n in range(40):
        failures = failures.added("t", ToolError(f"Error{n}", "x" * 1000))
    assert failures.total == 40
    assert len(failures.counts["t"]) == 17  # 16 types and "other"
    assert failures.counts["t"]["other"] == 24
    assert len(failures.first["t"]) == 200


def test_tool_failures_merge_and_describe_the_worst_tools_first() -> None:
    a = ToolFailures().added("read", ToolError("OSError", "gone"))
    b = (
        ToolFailures()
        .added("read", ToolError("OSError", "later"))
        .added("fetch", ToolError("timeout", "slow"))
    )
    b = b.added("read", ToolError("KeyError", "k"))
    merged = a.merged(b)
    assert merged.counts == {"read": {"OSError": 2, "KeyError": 1}, "fetch": {"timeout": 1}}
    assert merged.first["read"] == "OSError: gone"
    assert merged.describe() == "read 3 (OSError: gone); fetch 1 (timeout: slow)"
    assert ToolFailures().describe() == ""


def _refused(call_id: str) -> ToolFailed:
    exceeded = BudgetExceeded(Budget.TOOL_CALLS, "batch", 4, 4)
    return ToolFailed(call_id, ToolError("budget_exhausted", exceeded.describe()), exceeded)


def test_a_call_refused_by_a_spent_batch_budget_is_told_and_the_next_request_is_final() -> None:
    loop = make_loop(max_tool_failures=0, final_instruction="Answer now.")
    loop.start()
    loop.handle(tool_reply("run-1/0", add_call("c0"), add_call("c1")))
    assert loop.handle(ToolReturned("c0", "5")) == ()
    call = only_call_model(loop.handle(_refused("c1")))
    # Not a tool failure (max_tool_failures=0 would end the run), not a call started; the
    # model sees why, and the request withholds the tools with the final instruction.
    assert loop.tool_failures.total == 0
    assert loop.statistics().tool_calls == 1
    refused = call.messages[-2]
    assert isinstance(refused, ToolMessage) and refused.is_error
    assert "was not run: the batch budget for tool_calls ran out (4 used, limit 4)" in (
        refused.content
    )
    assert call.messages[-1] == UserMessage("Answer now.")
    assert call.hints.final and call.params.tool_choice == "none"


def test_a_refusal_before_the_last_result_of_its_turn_survives_a_snapshot() -> None:
    config = make_config(final_instruction="Answer now.")
    loop = AgentLoop(config, [UserMessage("go")])
    loop.start()
    loop.handle(tool_reply("run-1/0", add_call("c0"), add_call("c1")))
    loop.handle(_refused("c0"))
    restored = AgentLoop.restore(config, loads(dumps(loop.snapshot()), LoopSnapshot))
    assert loads(dumps(_refused("c0")), ToolFailed) == _refused("c0")
    call = only_call_model(restored.handle(ToolReturned("c1", "5")))
    assert call.hints.final
