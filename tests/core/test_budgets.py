"""Usage budgets in the loop: which request or tool turn each limit stops, and why."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore import AbortKind, Budget, BudgetExceeded, ConfigError, Usage, UsageLimits
from agentcore._core.budgets import BatchLedger, UsageTally, exhausted
from agentcore.core import (
    Abort,
    AgentLoop,
    AssistantMessage,
    CallModel,
    CallTool,
    Effect,
    Finish,
    LoopSnapshot,
    ToolReturned,
    dumps,
    loads,
)
from tests.core.helpers import MESSAGES, add_call, make_config, text_reply, tool_reply


def only_abort(effects: tuple[Effect, ...]) -> Abort:
    assert len(effects) == 1 and isinstance(effects[0], Abort), effects
    return effects[0]


def finish_tool_turn(loop: AgentLoop, effects: tuple[Effect, ...]) -> tuple[Effect, ...]:
    out: tuple[Effect, ...] = ()
    for effect in effects:
        assert isinstance(effect, CallTool)
        out = loop.handle(ToolReturned(effect.call_id, "5"))
    return out


def test_a_request_budget_of_zero_ends_the_run_before_its_first_request() -> None:
    loop = AgentLoop(make_config(limits=UsageLimits(requests=0)), MESSAGES)
    abort = only_abort(loop.start())
    assert abort.reason.kind is AbortKind.BUDGET_EXHAUSTED
    assert abort.reason.budget == BudgetExceeded(Budget.REQUESTS, "run", 0, 0)
    assert "requests" in abort.reason.message
    assert abort.transcript == MESSAGES


@pytest.mark.parametrize(
    ("limits", "budget", "limit", "used"),
    [
        (UsageLimits(requests=1), Budget.REQUESTS, 1, 1),
        (UsageLimits(input_tokens=5), Budget.INPUT_TOKENS, 5, 5),
        (UsageLimits(output_tokens=1), Budget.OUTPUT_TOKENS, 1, 1),
        (UsageLimits(total_tokens=6), Budget.TOTAL_TOKENS, 6, 6),
        (UsageLimits(total_tokens=7, input_tokens=5), Budget.INPUT_TOKENS, 5, 5),
    ],
    ids=["requests", "input", "output", "total", "first-in-order"],
)
def test_a_spent_budget_stops_the_request_after_a_tool_turn(
    limits: UsageLimits, budget: Budget, limit: int, used: int
) -> None:
    loop = AgentLoop(make_config(limits=limits), MESSAGES)
    (call,) = loop.start()
    assert isinstance(call, CallModel)
    # The reply costs Usage(5, 1): it exhausts each budget above.
    effects = loop.handle(tool_reply(call.request_id, add_call("c1")))
    abort = only_abort(finish_tool_turn(loop, effects))
    assert abort.reason.budget == BudgetExceeded(budget, "run", limit, used)
    # The tool turn's result is kept in the transcript of the aborted run.
    assert abort.transcript[-1].content == "5"  # type: ignore[union-attr]
    assert abort.usage == Usage(5, 1)


@pytest.mark.parametrize(
    "limits",
    [
        UsageLimits(requests=2),
        UsageLimits(input_tokens=6),
        UsageLimits(output_tokens=2),
        UsageLimits(total_tokens=7),
        UsageLimits(tool_calls=1),
    ],
)
def test_a_budget_with_room_left_lets_the_run_finish(limits: UsageLimits) -> None:
    loop = AgentLoop(make_config(limits=limits), MESSAGES)
    (call,) = loop.start()
    effects = loop.handle(tool_reply(call.request_id, add_call("c1")))
    (call,) = finish_tool_turn(loop, effects)
    assert isinstance(call, CallModel)
    (end,) = loop.handle(text_reply(call.request_id, "5"))
    assert isinstance(end, Finish)


def test_a_tool_turn_that_does_not_fit_the_tool_call_budget_starts_none_of_its_calls() -> None:
    loop = AgentLoop(make_config(limits=UsageLimits(tool_calls=3)), MESSAGES)
    (call,) = loop.start()
    effects = loop.handle(tool_reply(call.request_id, add_call("a"), add_call("b")))
    assert len(effects) == 2
    (call,) = finish_tool_turn(loop, effects)
    assert isinstance(call, CallModel)
    abort = only_abort(loop.handle(tool_reply(call.request_id, add_call("c"), add_call("d"))))
    assert abort.reason.budget == BudgetExceeded(Budget.TOOL_CALLS, "run", 3, 4)
    assert isinstance(abort.transcript[-1], AssistantMessage)
    assert loop.statistics().tool_calls == 2


def test_invalid_calls_do_not_count_toward_the_tool_call_budget() -> None:
    loop = AgentLoop(make_config(limits=UsageLimits(tool_calls=1)), MESSAGES)
    (call,) = loop.start()
    bad = add_call("x")
    bad = type(bad)("x", "no_such_tool", "{}")
    effects = loop.handle(tool_reply(call.request_id, bad, add_call("ok")))
    assert [type(e) for e in effects] == [CallTool]


def test_a_repair_turn_is_a_request_and_is_checked_too() -> None:
    loop = AgentLoop(make_config(limits=UsageLimits(requests=1)), MESSAGES)
    (call,) = loop.start()
    abort = only_abort(loop.handle(text_reply(call.request_id, "   ")))
    assert abort.reason.budget is not None
    assert abort.reason.budget.budget is Budget.REQUESTS


def test_the_tool_call_count_survives_a_snapshot() -> None:
    config = make_config(limits=UsageLimits(tool_calls=2))
    loop = AgentLoop(config, MESSAGES)
    (call,) = loop.start()
    effects = loop.handle(tool_reply(call.request_id, add_call("a"), add_call("b")))
    snapshot = loads(dumps(loop.snapshot()), LoopSnapshot)
    assert snapshot.tool_calls == 2
    restored = AgentLoop.restore(config, snapshot)
    (call,) = finish_tool_turn(restored, effects)
    assert isinstance(call, CallModel)
    abort = only_abort(restored.handle(tool_reply(call.request_id, add_call("c"))))
    assert abort.reason.budget == BudgetExceeded(Budget.TOOL_CALLS, "run", 2, 3)


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_a_limit_must_be_a_non_negative_integer(bad: Any) -> None:
    with pytest.raises(ConfigError):
        UsageLimits(requests=bad)


def test_limits_must_be_usage_limits() -> None:
    with pytest.raises(ConfigError, match="UsageLimits"):
        make_config(limits={"requests": 3})


# ----------------------------------------------------------------------------- properties

limits_strategy = st.builds(
    UsageLimits,
    requests=st.none() | st.integers(0, 6),
    input_tokens=st.none() | st.integers(0, 60),
    output_tokens=st.none() | st.integers(0, 30),
    total_tokens=st.none() | st.integers(0, 80),
    tool_calls=st.none() | st.integers(0, 8),
)

# One reply: how many valid tool calls it asks for (0: the final answer) and what it costs.
reply_strategy = st.tuples(st.integers(0, 3), st.integers(0, 12), st.integers(0, 6))


@settings(max_examples=300, deadline=None)
@given(limits=limits_strategy, replies=st.lists(reply_strategy, min_size=1, max_size=8))
def test_no_request_or_tool_call_starts_without_room_in_every_budget(
    limits: UsageLimits, replies: list[tuple[int, int, int]]
) -> None:
    loop = AgentLoop(make_config(limits=limits, max_turns=20), MESSAGES)
    effects = loop.start()
    requests = tool_calls = prompt = completion = 0
    for n_calls, p, c in replies:
        (effect,) = effects
        if not isinstance(effect, CallModel):
            break
        # A request is sent only while every budget had room.
        assert (
            exhausted(limits, UsageTally(requests, prompt, completion, tool_calls), "run") is None
        )
        requests += 1
        prompt, completion = prompt + p, completion + c
        if n_calls == 0:  # the final answer
            effects = loop.handle(text_reply(effect.request_id, "5", Usage(p, c)))
            continue
        calls = [add_call(f"c{i}") for i in range(n_calls)]
        effects = loop.handle(tool_reply(effect.request_id, *calls, usage=Usage(p, c)))
        if isinstance(effects[0], Abort):
            continue
        tool_calls += len(effects)
        assert limits.tool_calls is None or tool_calls <= limits.tool_calls
        effects = finish_tool_turn(loop, effects)
    (last,) = effects
    if isinstance(last, CallModel):  # the script ran out with a request outstanding
        assert (
            exhausted(limits, UsageTally(requests, prompt, completion, tool_calls), "run") is None
        )
        requests += 1
    if isinstance(last, Abort):
        assert last.reason.kind is AbortKind.BUDGET_EXHAUSTED
        exceeded = last.reason.budget
        assert exceeded is not None
        assert exceeded.used >= exceeded.limit
        if exceeded.budget is Budget.TOOL_CALLS:
            assert exceeded.used > exceeded.limit
    assert limits.requests is None or requests <= limits.requests
    stats = loop.statistics()
    assert stats.model_calls == requests
    assert stats.tool_calls == tool_calls


# One step of a batch: start a request (and end it with these tokens), or start a tool call.
ledger_steps = st.lists(
    st.one_of(st.tuples(st.integers(0, 20), st.integers(0, 20)), st.none()), max_size=30
)


@settings(max_examples=300, deadline=None)
@given(limits=limits_strategy, steps=ledger_steps)
def test_a_ledger_that_reserves_before_each_start_never_starts_past_a_count_limit(
    limits: UsageLimits, steps: list[tuple[int, int] | None]
) -> None:
    ledger = BatchLedger(limits)
    for step in steps:
        if step is None:
            if ledger.check_tool_call() is None:
                ledger.start_tool_call()
        elif ledger.reserve(0, 0) is None:
            ledger.settle(0, 0, Usage(*step))
    tally = ledger.tally()
    assert limits.requests is None or tally.requests <= limits.requests
    assert limits.tool_calls is None or tally.tool_calls <= limits.tool_calls
    # Reserving nothing, tokens pass a limit by at most the last request's use (20 here).
    for limit, used in (
        (limits.input_tokens, tally.input_tokens),
        (limits.output_tokens, tally.output_tokens),
        (limits.total_tokens, tally.input_tokens + tally.output_tokens),
    ):
        assert limit is None or used < limit + 40


# Requests side by side: start one with a reservation (input, output) and the tokens it will
# really use, or end the one in flight at a given position.
_start = st.tuples(
    st.just("start"), st.integers(0, 30), st.integers(0, 30), st.integers(0, 40), st.integers(0, 40)
)
_end = st.tuples(st.just("end"), st.integers(0, 10))
concurrent_steps = st.lists(st.one_of(_start, _end), max_size=60)


@settings(max_examples=400, deadline=None)
@given(limits=limits_strategy, steps=concurrent_steps)
def test_a_batch_passes_a_token_limit_only_by_what_requests_use_beyond_their_reservations(
    limits: UsageLimits, steps: list[tuple[Any, ...]]
) -> None:
    ledger = BatchLedger(limits)
    flying: list[tuple[int, int, int, int]] = []
    beyond_in = beyond_out = 0  # tokens used past the reservations, over settled requests
    for step in steps:
        if step[0] == "start":
            _, held_in, held_out, used_in, used_out = step
            if ledger.reserve(held_in, held_out) is None:
                flying.append((held_in, held_out, used_in, used_out))
        elif flying:
            held_in, held_out, used_in, used_out = flying.pop(step[1] % len(flying))
            ledger.settle(held_in, held_out, Usage(used_in, used_out))
            beyond_in += max(0, used_in - held_in)
            beyond_out += max(0, used_out - held_out)
        tally = ledger.tally()
        held_in_all, held_out_all = ledger.held
        assert (held_in_all, held_out_all) == (
            sum(f[0] for f in flying),
            sum(f[1] for f in flying),
        )
        for limit, committed, beyond in (
            (limits.input_tokens, tally.input_tokens + held_in_all, beyond_in),
            (limits.output_tokens, tally.output_tokens + held_out_all, beyond_out),
            (
                limits.total_tokens,
                tally.input_tokens + tally.output_tokens + held_in_all + held_out_all,
                beyond_in + beyond_out,
            ),
        ):
            assert limit is None or committed <= limit + beyond
    assert limits.requests is None or ledger.tally().requests <= limits.requests


def test_a_request_that_does_not_fit_beside_those_in_flight_is_refused_and_reserves_nothing() -> (
    None
):
    ledger = BatchLedger(UsageLimits(total_tokens=1_000))
    assert ledger.reserve(300, 300) is None
    assert ledger.reserve(200, 100) is None  # 900 committed
    over = ledger.reserve(50, 60)
    assert over == BudgetExceeded(Budget.TOTAL_TOKENS, "batch", 1_000, 1_010)
    assert ledger.held == (500, 400)
    assert ledger.tally().requests == 2
    ledger.settle(300, 300, Usage(100, 20))  # the first used far less than it reserved
    assert ledger.reserve(50, 60) is None
    assert ledger.held == (250, 160)


@settings(max_examples=200, deadline=None)
@given(limits=limits_strategy, steps=ledger_steps)
def test_the_ledger_keeps_the_first_budget_found_without_room(
    limits: UsageLimits, steps: list[tuple[int, int] | None]
) -> None:
    ledger = BatchLedger(limits)
    first: BudgetExceeded | None = None
    for step in steps:
        if step is None:
            ledger.start_tool_call()
        elif ledger.reserve(0, 0) is None:
            ledger.settle(0, 0, Usage(*step))
        found = ledger.check_run()
        first = first or found
        assert ledger.exceeded == first
        if found is not None:
            assert found.scope == "batch"
            assert found.used >= found.limit
    tally = ledger.tally()
    room = exhausted(limits, tally, "batch") is None and (
        limits.tool_calls is None or tally.tool_calls < limits.tool_calls
    )
    assert (ledger.check_run() is None) == room
