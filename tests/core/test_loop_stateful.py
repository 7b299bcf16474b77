"""AgentLoop driven by random legal and illegal events, checked against a small reference model.

The reference model tracks only what the contract promises: which request and which tool
calls are outstanding, the budgets, and the phase of the run. Every effect the loop emits is
checked against it, and every illegal event must raise LocalProtocolError and leave the loop
in ERROR for good.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import agentcore
from agentcore import AbortKind, ErrorKind, ModelError, ToolError, Usage
from agentcore.core import (
    Abort,
    AgentLoop,
    AssistantMessage,
    CallModel,
    CallTool,
    CancelRequested,
    Effect,
    Event,
    Finish,
    LocalProtocolError,
    LoopSnapshot,
    ModelFailed,
    ModelResponded,
    RunState,
    ToolCall,
    ToolFailed,
    ToolMessage,
    ToolReturned,
    UserMessage,
)
from tests.core.helpers import MESSAGES, Answer, make_config

# Valid calls are drawn more often than invalid ones, so that runs reach max_turns and the final
# request instead of ending early on the tool-error budget.
CALL_KINDS = ("valid", "valid", "valid", "echo", "echo", "unknown", "bad_json", "bad_args")
INVALID_KINDS = frozenset({"unknown", "bad_json", "bad_args"})

PHASE_STATES = {
    "idle": RunState.IDLE,
    "model": RunState.AWAITING_MODEL,
    "tools": RunState.AWAITING_TOOLS,
    "finished": RunState.FINISHED,
    "aborted": RunState.ABORTED,
    "error": RunState.ERROR,
}


def make_tool_call(kind: str, call_id: str) -> ToolCall:
    if kind == "valid":
        return ToolCall(call_id, "add", '{"x": 1, "y": 2}')
    if kind == "echo":
        return ToolCall(call_id, "echo", '{"a": [1]}')
    if kind == "unknown":
        return ToolCall(call_id, "nope", "{}")
    if kind == "bad_json":
        return ToolCall(call_id, "add", "{")
    return ToolCall(call_id, "add", '{"x": "1", "y": 2}')


class LoopMachine(RuleBasedStateMachine):
    @initialize(
        max_turns=st.integers(1, 3),
        max_tool_errors=st.integers(0, 4),
        max_output_retries=st.integers(0, 2),
        structured=st.booleans(),
        patience=st.integers(0, 4),
        illegal=st.booleans(),
    )
    def setup(
        self,
        *,
        max_turns: int,
        max_tool_errors: int,
        max_output_retries: int,
        structured: bool,
        patience: int,
        illegal: bool,
    ) -> None:
        # ``patience``: tool turns before the run may end by an answer, a failure or a cancel,
        # so that long runs (max_turns, the final request) are explored too. ``illegal``: whether
        # this run may receive illegal inputs at all.
        self.patience = patience
        self.illegal = illegal
        self.config = make_config(
            max_turns=max_turns,
            max_tool_errors=max_tool_errors,
            max_output_retries=max_output_retries,
            output=Answer if structured else None,
        )
        self.structured = structured
        self.loop = AgentLoop(self.config, MESSAGES)
        self.phase = "idle"
        self.request_id = ""
        self.model_calls = 0
        self.tool_turns = 0
        self.tool_errors = 0
        self.retries = 0
        self.final = False
        self.outstanding: dict[str, str] = {}  # call id -> tool name
        self.answered: dict[str, tuple[str, bool]] = {}  # call id -> (content, is_error)
        self.answered_before: list[str] = []
        self.turn_size = 0
        self.next_id = 0

    # ------------------------------------------------------------------ checking effects

    def expect_call_model(self, effects: tuple[Effect, ...], *, after_tools: bool) -> None:
        assert len(effects) == 1, effects
        (call,) = effects
        assert isinstance(call, CallModel), call
        assert not self.outstanding, "CallModel while tool calls are unanswered"
        if after_tools:
            self.check_turn_results(call)
            if self.tool_turns >= self.config.max_turns:
                self.final = True
        assert call.request_id == f"run-1/{self.model_calls}"
        assert call.hints.turn == self.model_calls
        assert call.hints.priority == self.model_calls
        assert call.hints.final is self.final
        assert call.tools == self.config.tools
        if self.final:
            assert call.params.tool_choice == "none"
        self.model_calls += 1
        bound = self.config.max_turns + 1 + self.config.max_output_retries
        assert self.model_calls <= bound
        self.request_id = call.request_id
        self.phase = "model"

    def check_turn_results(self, call: CallModel) -> None:
        messages = list(call.messages)
        if self.final or self.tool_turns >= self.config.max_turns:
            assert messages.pop() == UserMessage(self.config.final_instruction)
        results = messages[len(messages) - self.turn_size :]
        assistant = messages[len(messages) - self.turn_size - 1]
        assert isinstance(assistant, AssistantMessage)
        assert [m.call_id for m in results if isinstance(m, ToolMessage)] == [
            c.id for c in assistant.tool_calls
        ]
        for message in results:
            assert isinstance(message, ToolMessage)
            if message.call_id in self.answered:
                assert (message.content, message.is_error) == self.answered[message.call_id]
            else:
                assert message.is_error
        self.answered_before.extend(self.answered)
        self.answered = {}

    def expect_end(self, effects: tuple[Effect, ...], kind: type, reason: AbortKind | None) -> None:
        assert len(effects) == 1, effects
        (end,) = effects
        assert isinstance(end, kind), end
        if reason is not None:
            assert isinstance(end, Abort) and end.reason.kind is reason
        self.phase = "finished" if kind is Finish else "aborted"
        self.outstanding = {}

    # ------------------------------------------------------------------ the one rule

    @rule(data=st.data())
    def act(self, data: st.DataObject) -> None:
        """Draw one action among those that make sense in the current phase.

        One rule drawing from the phase's actions (rather than one rule per action with
        preconditions) keeps every step useful: no draw is rejected by a precondition.
        """
        actions: list[Callable[[st.DataObject], None]] = []
        if self.phase == "idle":
            actions.append(self.start)
        elif self.phase == "model":
            if self.final:
                actions += [self.model_answers, self.model_answers, self.model_calls_tools]
            else:
                actions += [self.model_calls_tools, self.model_calls_tools]
            if self.may_end():
                actions += [self.model_answers, self.model_fails, self.cancel]
        elif self.phase == "tools":
            actions += [self.tool_result, self.tool_result, self.tool_result]
            if self.may_end():
                actions.append(self.cancel)
        else:
            actions.append(self.nothing_is_accepted_after_the_end)
        if self.phase != "error":
            actions.append(self.snapshot_and_restore)
        if self.illegal:
            actions.append(self.illegal_input)
        data.draw(st.sampled_from(actions))(data)

    # ------------------------------------------------------------------ legal actions

    def start(self, data: st.DataObject) -> None:
        self.expect_call_model(self.loop.start(), after_tools=False)

    def model_calls_tools(self, data: st.DataObject) -> None:
        kinds = data.draw(st.lists(st.sampled_from(CALL_KINDS), min_size=1, max_size=4))
        ids = data.draw(st.sampled_from(["unique", "empty", "same"]))
        calls = []
        for kind in kinds:
            self.next_id += 1
            call_id = {"unique": f"m{self.next_id}", "empty": "", "same": "dup"}[ids]
            calls.append(make_tool_call(kind, call_id))
        effects = self.loop.handle(
            ModelResponded(self.request_id, AssistantMessage(None, calls), Usage(3, 1))
        )
        if self.final:
            self.expect_end(effects, Abort, AbortKind.MAX_TURNS)
            return
        self.tool_turns += 1
        self.turn_size = len(kinds)
        self.tool_errors += sum(k in INVALID_KINDS for k in kinds)
        if self.tool_errors > self.config.max_tool_errors:
            self.expect_end(effects, Abort, AbortKind.TOOL_ERRORS)
            return
        valid = [k for k in kinds if k not in INVALID_KINDS]
        if not valid:
            self.expect_call_model(effects, after_tools=True)
            return
        assert all(isinstance(e, CallTool) for e in effects)
        tool_calls = [e for e in effects if isinstance(e, CallTool)]
        assert [e.name for e in tool_calls] == ["add" if k == "valid" else "echo" for k in valid]
        assert len({e.call_id for e in tool_calls}) == len(tool_calls)
        assert all(e.call_id for e in tool_calls)
        self.outstanding = {e.call_id: e.name for e in tool_calls}
        self.phase = "tools"

    def may_end(self) -> bool:
        return self.tool_turns >= self.patience or self.final

    def model_answers(self, data: st.DataObject) -> None:
        valid = data.draw(st.booleans())
        if self.structured:
            content = '{"value": 5}' if valid else '{"value": "five"}'
        else:
            content = "five" if valid else "  "
        effects = self.loop.handle(ModelResponded(self.request_id, AssistantMessage(content)))
        if valid:
            self.expect_end(effects, Finish, None)
        elif self.retries < self.config.max_output_retries:
            self.retries += 1
            self.expect_call_model(effects, after_tools=False)
        else:
            self.expect_end(effects, Abort, AbortKind.OUTPUT_INVALID)

    def model_fails(self, data: st.DataObject) -> None:
        error = ModelError(ErrorKind.OVERLOADED, "busy", status=529, retryable=True)
        effects = self.loop.handle(ModelFailed(self.request_id, error))
        self.expect_end(effects, Abort, AbortKind.MODEL_FAILED)

    def tool_result(self, data: st.DataObject) -> None:
        fails = data.draw(st.booleans())
        call_id = data.draw(st.sampled_from(sorted(self.outstanding)))
        del self.outstanding[call_id]
        event: Event
        if fails:
            event = ToolFailed(call_id, ToolError("OSError", f"down {call_id}"))
            self.answered[call_id] = (f"Error: the tool failed (OSError): down {call_id}", True)
        else:
            event = ToolReturned(call_id, f"result {call_id}")
            self.answered[call_id] = (f"result {call_id}", False)
        effects = self.loop.handle(event)
        if self.outstanding:
            assert effects == ()
        else:
            self.expect_call_model(effects, after_tools=True)

    def cancel(self, data: st.DataObject) -> None:
        self.expect_end(self.loop.handle(CancelRequested("stop")), Abort, AbortKind.CANCELLED)

    def snapshot_and_restore(self, data: st.DataObject) -> None:
        data = agentcore.core.dumps(self.loop.snapshot())
        self.loop = AgentLoop.restore(self.config, agentcore.core.loads(data, LoopSnapshot))
        owed = self.loop.outstanding()
        if self.phase == "model":
            assert [e.request_id for e in owed if isinstance(e, CallModel)] == [self.request_id]
        elif self.phase == "tools":
            assert {e.call_id for e in owed if isinstance(e, CallTool)} == set(self.outstanding)
            assert len(owed) == len(self.outstanding)
        else:
            assert owed == ()

    # ------------------------------------------------------------------ illegal actions

    def illegal_input(self, data: st.DataObject) -> None:
        choices: list[Any] = [
            ToolReturned("never-issued", "x"),
            ModelResponded("run-1/999", AssistantMessage("x")),
        ]
        if self.phase != "idle":
            choices.append("start")
        if self.phase in ("idle", "finished", "aborted", "error"):
            choices += [CancelRequested(), ModelFailed("run-1/0", ModelError(ErrorKind.AUTH, ""))]
        if self.phase == "tools":
            choices.append(ModelResponded(self.request_id, AssistantMessage("x")))
            choices.append(ModelFailed(self.request_id, ModelError(ErrorKind.AUTH, "")))
        if self.phase == "model" and self.answered_before:
            choices.append(ToolReturned(self.answered_before[-1], "late"))
        choice = data.draw(st.sampled_from(choices))
        state_before = self.loop.state
        try:
            if choice == "start":
                self.loop.start()
            else:
                self.loop.handle(choice)
        except LocalProtocolError as exc:
            assert exc.state is state_before
        else:
            raise AssertionError(f"{choice!r} was accepted in phase {self.phase}")
        self.phase = "error"
        self.outstanding = {}

    def nothing_is_accepted_after_the_end(self, data: st.DataObject) -> None:
        for attempt in (
            lambda: self.loop.handle(CancelRequested()),
            lambda: self.loop.handle(ToolReturned("m1", "x")),
            self.loop.start,
        ):
            try:
                attempt()
            except LocalProtocolError:
                pass
            else:
                raise AssertionError("accepted an input after the end")
            assert self.loop.state is RunState.ERROR
        self.phase = "error"

    # ------------------------------------------------------------------ invariants

    @invariant()
    def state_matches_the_reference(self) -> None:
        if hasattr(self, "loop"):
            assert self.loop.state is PHASE_STATES[self.phase]
            stats = self.loop.statistics()
            if self.phase in ("model", "tools"):
                assert stats.outstanding_tools == len(self.outstanding)
                assert stats.model_calls == self.model_calls
                assert stats.tool_errors == self.tool_errors

    @invariant()
    def a_fresh_loop_owes_nothing_whatever_other_loops_did(self) -> None:
        # Loops outside a tool turn share their (empty) record of outstanding calls: what
        # this loop did to its own must never show in another's.
        if hasattr(self, "config"):
            fresh = AgentLoop(self.config, MESSAGES)
            assert fresh.statistics().outstanding_tools == 0


LoopMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLoopAgainstReferenceModel = LoopMachine.TestCase
