"""Scripted runs of AgentLoop: each test plays one conversation and checks the effects."""

from __future__ import annotations

import json

import attrs
import pytest

from agentcore import (
    AbortKind,
    ErrorKind,
    ModelError,
    ModelParams,
    ToolError,
    Usage,
    UsageLimits,
)
from agentcore.core import (
    Abort,
    AgentHints,
    AgentLoop,
    AssistantMessage,
    CallModel,
    CallTool,
    CancelRequested,
    Finish,
    ModelFailed,
    RunState,
    SystemMessage,
    ToolCall,
    ToolFailed,
    ToolMessage,
    ToolReturned,
    ToolSpec,
    UserMessage,
)
from tests.core.helpers import (
    ADD,
    MESSAGES,
    TOOLS,
    Answer,
    add_call,
    call_tools,
    feed,
    make_config,
    make_loop,
    only_call_model,
    text_reply,
    tool_reply,
)


def only(effects: tuple[object, ...], kind: type) -> object:
    assert len(effects) == 1, effects
    assert isinstance(effects[0], kind), effects
    return effects[0]


# ----------------------------------------------------------------------------- basics


def test_start_emits_the_first_model_call_with_hints() -> None:
    loop = make_loop(params=ModelParams(temperature=0.2), expected_output_tokens=300)
    call = only_call_model(loop.start())
    assert call.request_id == "run-1/0"
    assert call.messages == MESSAGES
    assert call.tools == TOOLS
    assert call.params == ModelParams(temperature=0.2)
    assert call.output is None
    assert call.hints == AgentHints(
        session_id="run-1",
        parent_session_id=None,
        turn=0,
        priority=0,
        expected_output_tokens=300,
        final=False,
    )
    assert loop.state is RunState.AWAITING_MODEL


def test_text_answer_finishes_with_content_transcript_and_usage() -> None:
    loop = make_loop()
    loop.start()
    effects = loop.handle(text_reply("run-1/0", "5", Usage(12, 3, 4)))
    finish = only(effects, Finish)
    assert isinstance(finish, Finish)
    assert finish.output == "5"
    assert finish.transcript == (*MESSAGES, AssistantMessage("5"))
    assert finish.usage == Usage(12, 3, 4)
    assert loop.state is RunState.FINISHED


def test_identical_runs_emit_identical_effects() -> None:
    def play() -> list[object]:
        loop = make_loop()
        out: list[object] = list(loop.start())
        out += loop.handle(tool_reply("run-1/0", add_call("a"), ToolCall("", "echo", "{}")))
        out += loop.handle(ToolReturned("a", "5"))
        out += loop.handle(ToolReturned("call_0_1", "{}"))
        out += loop.handle(text_reply("run-1/1", "done"))
        return out

    assert play() == play()


# ----------------------------------------------------------------------------- tools


def test_parallel_tool_calls_each_become_one_call_tool() -> None:
    loop = make_loop()
    loop.start()
    effects = loop.handle(
        tool_reply("run-1/0", add_call("a", 1, 2), ToolCall("b", "echo", '{"say": [1, 2]}'))
    )
    assert list(effects) == [
        CallTool("a", "add", {"x": 1, "y": 2}, "run-1/0/0"),
        CallTool("b", "echo", {"say": [1, 2]}, "run-1/0/1"),
    ]
    assert loop.state is RunState.AWAITING_TOOLS


def test_next_model_call_waits_for_every_result() -> None:
    loop = make_loop()
    loop.start()
    loop.handle(tool_reply("run-1/0", add_call("a"), add_call("b"), add_call("c")))
    assert loop.handle(ToolReturned("a", "5")) == ()
    assert loop.handle(ToolFailed("c", ToolError("RuntimeError", "boom"))) == ()
    assert loop.state is RunState.AWAITING_TOOLS
    call = only_call_model(loop.handle(ToolReturned("b", "5")))
    assert call.request_id == "run-1/1"
    assert loop.state is RunState.AWAITING_MODEL


def test_results_are_appended_in_model_order_whatever_the_arrival_order() -> None:
    loop = make_loop()
    loop.start()
    reply = tool_reply("run-1/0", add_call("a"), ToolCall("b", "echo"), add_call("c", 1, 1))
    loop.handle(reply)
    loop.handle(ToolReturned("c", "2"))
    loop.handle(ToolReturned("a", "5"))
    call = only_call_model(loop.handle(ToolFailed("b", ToolError("TimeoutError", "slow"))))
    assert call.messages[len(MESSAGES) :] == (
        reply.message,
        ToolMessage("a", "add", "5"),
        ToolMessage("b", "echo", "Error: the tool failed (TimeoutError): slow", is_error=True),
        ToolMessage("c", "add", "2"),
    )


def test_unknown_tool_is_reported_to_the_model_without_call_tool() -> None:
    loop = make_loop()
    loop.start()
    effects = loop.handle(tool_reply("run-1/0", ToolCall("x", "search", "{}"), add_call("a")))
    assert [e.call_id for e in call_tools(effects)] == ["a"]
    call = only_call_model(loop.handle(ToolReturned("a", "5")))
    error = call.messages[len(MESSAGES) + 1]
    assert isinstance(error, ToolMessage)
    assert error.is_error and error.call_id == "x" and error.name == "search"
    assert "no tool named 'search'" in error.content
    assert "Valid tool names: add, echo" in error.content


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"x": 1,', "are not valid JSON"),
        ('{"x": NaN, "y": 1}', "are not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('"x"', "must be a JSON object"),
    ],
)
def test_arguments_that_are_not_a_json_object_are_reported(arguments: str, expected: str) -> None:
    loop = make_loop()
    loop.start()
    call = only_call_model(loop.handle(tool_reply("run-1/0", ToolCall("a", "add", arguments))))
    error = call.messages[-1]
    assert isinstance(error, ToolMessage) and error.is_error
    assert expected in error.content
    assert "'add'" in error.content


def test_validator_error_is_quoted_with_the_field_path() -> None:
    loop = make_loop()
    loop.start()
    bad = ToolCall("a", "add", '{"x": "2", "y": 3, "z": 0}')
    call = only_call_model(loop.handle(tool_reply("run-1/0", bad)))
    error = call.messages[-1]
    assert isinstance(error, ToolMessage) and error.is_error
    assert "invalid arguments for tool 'add'" in error.content
    assert "expected int, got string" in error.content
    assert "@ $.x" in error.content
    assert "extra fields found (z)" in error.content


def test_any_exception_from_a_validator_is_reported_to_the_model() -> None:
    def picky(arguments: object) -> object:
        raise LookupError

    def wordy(arguments: object) -> object:
        raise ValueError("query must not be empty")

    tools = (ToolSpec("picky", validator=picky), ToolSpec("wordy", validator=wordy))
    loop = make_loop(tools=tools)
    loop.start()
    reply = tool_reply("run-1/0", ToolCall("a", "picky"), ToolCall("b", "wordy"))
    call = only_call_model(loop.handle(reply))
    first, second = call.messages[-2:]
    assert isinstance(first, ToolMessage) and isinstance(second, ToolMessage)
    assert first.content == "Error: invalid arguments for tool 'picky': LookupError"
    assert second.content == ("Error: invalid arguments for tool 'wordy': query must not be empty")


def test_validator_sees_the_parsed_arguments_and_empty_text_means_no_arguments() -> None:
    seen: list[object] = []

    def record(arguments: object) -> object:
        seen.append(arguments)
        return arguments

    loop = make_loop(tools=(ToolSpec("now", validator=record),))
    loop.start()
    effects = loop.handle(tool_reply("run-1/0", ToolCall("a", "now", "  ")))
    assert seen == [{}]
    assert list(effects) == [CallTool("a", "now", {}, "run-1/0/0")]


def test_turn_with_only_invalid_calls_asks_the_model_again_at_once() -> None:
    loop = make_loop()
    loop.start()
    call = only_call_model(
        loop.handle(tool_reply("run-1/0", ToolCall("a", "nope"), ToolCall("b", "add", "{")))
    )
    assert call.request_id == "run-1/1"
    assert [type(m) for m in call.messages[len(MESSAGES) :]] == [
        AssistantMessage,
        ToolMessage,
        ToolMessage,
    ]
    assert loop.statistics().tool_errors == 2


def test_invalid_calls_beyond_max_tool_errors_abort_without_calling_tools() -> None:
    loop = make_loop(max_tool_errors=2)
    loop.start()
    only_call_model(loop.handle(tool_reply("run-1/0", ToolCall("a", "nope"))))
    only_call_model(loop.handle(tool_reply("run-1/1", ToolCall("b", "nope"))))
    effects = loop.handle(tool_reply("run-1/2", add_call("c"), ToolCall("d", "nope")))
    abort = only(effects, Abort)
    assert isinstance(abort, Abort)
    assert abort.reason.kind is AbortKind.TOOL_ERRORS
    assert "3 invalid tool calls" in abort.reason.message
    last = abort.transcript[-1]
    assert isinstance(last, ToolMessage) and last.call_id == "d" and last.is_error
    assert loop.state is RunState.ABORTED


def test_max_tool_errors_zero_aborts_on_the_first_invalid_call() -> None:
    loop = make_loop(max_tool_errors=0)
    loop.start()
    abort = only(loop.handle(tool_reply("run-1/0", ToolCall("a", "nope"))), Abort)
    assert isinstance(abort, Abort) and abort.reason.kind is AbortKind.TOOL_ERRORS


def test_tool_failures_do_not_count_toward_the_error_budget() -> None:
    loop = make_loop(max_tool_errors=0)
    loop.start()
    for turn in range(3):
        loop.handle(tool_reply(f"run-1/{turn}", add_call(f"c{turn}")))
        call = only_call_model(loop.handle(ToolFailed(f"c{turn}", ToolError("OSError", "down"))))
        assert call.request_id == f"run-1/{turn + 1}"
    assert loop.statistics().tool_errors == 0


def test_missing_and_duplicate_call_ids_are_replaced_deterministically() -> None:
    loop = make_loop()
    loop.start()
    calls = (
        ToolCall("", "echo"),
        ToolCall("dup", "echo"),
        ToolCall("dup", "echo"),
        ToolCall("call_0_3", "nope"),
        ToolCall("", "echo"),
    )
    effects = loop.handle(tool_reply("run-1/0", *calls))
    ids = [e.call_id for e in call_tools(effects)]
    assert ids == ["call_0_0", "dup", "call_0_2", "call_0_4"]
    keys = [e.idempotency_key for e in call_tools(effects)]
    assert keys == ["run-1/0/0", "run-1/0/1", "run-1/0/2", "run-1/0/4"]
    feed(loop, [ToolReturned(i, i) for i in reversed(ids[1:])])
    call = only_call_model(loop.handle(ToolReturned(ids[0], "first")))
    assistant = call.messages[len(MESSAGES)]
    assert isinstance(assistant, AssistantMessage)
    assert [c.id for c in assistant.tool_calls] == [
        "call_0_0",
        "dup",
        "call_0_2",
        "call_0_3",
        "call_0_4",
    ]
    results = call.messages[len(MESSAGES) + 1 :]
    assert [m.call_id for m in results if isinstance(m, ToolMessage)] == [
        c.id for c in assistant.tool_calls
    ]


def test_a_replacement_id_never_collides_with_an_id_the_model_chose() -> None:
    loop = make_loop()
    loop.start()
    effects = loop.handle(tool_reply("run-1/0", ToolCall("call_0_1", "echo"), ToolCall("", "echo")))
    ids = [e.call_id for e in call_tools(effects)]
    assert ids[0] == "call_0_1"
    assert ids[1] not in ("", "call_0_1")


# ----------------------------------------------------------------------------- structured output


def test_structured_output_finishes_with_the_structured_value() -> None:
    loop = make_loop(output=Answer)
    loop.start()
    reply = text_reply("run-1/0", 'Here it is:\n```json\n{"value": 5}\n```')
    finish = only(loop.handle(reply), Finish)
    assert isinstance(finish, Finish)
    assert finish.output == Answer(5)


def test_invalid_output_gets_a_repair_turn_quoting_the_error() -> None:
    loop = make_loop(output=Answer)
    loop.start()
    call = only_call_model(loop.handle(text_reply("run-1/0", '{"value": "five"}')))
    repair = call.messages[-1]
    assert isinstance(repair, UserMessage)
    assert "invalid value for type, expected int" in repair.content
    assert "@ $.value" in repair.content
    assert call.tools == TOOLS
    assert call.hints.final is False
    finish = only(loop.handle(text_reply("run-1/1", '{"value": 5, "note": "sum"}')), Finish)
    assert isinstance(finish, Finish) and finish.output == Answer(5, "sum")
    assert loop.statistics().output_retries == 1


def test_output_that_is_not_json_gets_a_repair_turn() -> None:
    loop = make_loop(output=Answer)
    loop.start()
    call = only_call_model(loop.handle(text_reply("run-1/0", "The answer is five.")))
    repair = call.messages[-1]
    assert isinstance(repair, UserMessage) and "not valid JSON" in repair.content


def test_output_invalid_after_max_output_retries_aborts() -> None:
    loop = make_loop(output=Answer, max_output_retries=1)
    loop.start()
    only_call_model(loop.handle(text_reply("run-1/0", "{}")))
    abort = only(loop.handle(text_reply("run-1/1", '{"value": 1, "extra": 2}')), Abort)
    assert isinstance(abort, Abort)
    assert abort.reason.kind is AbortKind.OUTPUT_INVALID
    assert "extra fields found (extra)" in abort.reason.message
    assert abort.transcript[-1] == AssistantMessage('{"value": 1, "extra": 2}')


def test_no_repair_turns_when_max_output_retries_is_zero() -> None:
    loop = make_loop(output=Answer, max_output_retries=0)
    loop.start()
    abort = only(loop.handle(text_reply("run-1/0", "nope")), Abort)
    assert isinstance(abort, Abort) and abort.reason.kind is AbortKind.OUTPUT_INVALID


def test_empty_text_answer_gets_a_repair_turn() -> None:
    loop = make_loop()
    loop.start()
    call = only_call_model(loop.handle(text_reply("run-1/0", None)))
    assert call.messages[-1] == UserMessage("Your answer was empty. Reply with your final answer.")
    finish = only(loop.handle(text_reply("run-1/1", "5")), Finish)
    assert isinstance(finish, Finish) and finish.output == "5"


def test_output_instruction_is_appended_to_the_first_system_message() -> None:
    loop = make_loop(output=Answer)
    call = only_call_model(loop.start())
    system = call.messages[0]
    assert isinstance(system, SystemMessage)
    assert system.content.startswith("You are terse.\n\n")
    schema = json.dumps(make_config(output=Answer).output_spec.schema, separators=(",", ":"))  # type: ignore[union-attr]
    assert system.content.endswith(schema)
    assert call.messages[1:] == MESSAGES[1:]


def test_output_instruction_becomes_a_system_message_when_there_is_none() -> None:
    loop = AgentLoop(make_config(output=Answer), [UserMessage("hi")])
    call = only_call_model(loop.start())
    assert isinstance(call.messages[0], SystemMessage)
    assert "JSON schema" in call.messages[0].content
    assert call.messages[1] == UserMessage("hi")


def test_output_instruction_is_byte_identical_across_runs_with_the_same_config() -> None:
    first = only_call_model(AgentLoop(make_config(output=Answer), MESSAGES).start())
    second_config = make_config(output=Answer, run_id="run-2")
    second = only_call_model(AgentLoop(second_config, MESSAGES).start())
    assert first.messages[0] == second.messages[0]


def test_runs_of_one_config_share_the_system_message_with_the_instruction() -> None:
    config = make_config(output=Answer)
    # Equal system prompts held in distinct string objects still share one message.
    prompts = ["You are " + word for word in ("terse.", "terse.")]
    first, second = (AgentLoop(config, [SystemMessage(p), UserMessage("hi")]) for p in prompts)
    assert first.transcript[0] is second.transcript[0]
    other = AgentLoop(config, [SystemMessage("You are verbose."), UserMessage("hi")])
    assert isinstance(other.transcript[0], SystemMessage)
    assert other.transcript[0].content.startswith("You are verbose.\n\n")
    bare = AgentLoop(config, [UserMessage("hi")])
    empty = AgentLoop(config, [SystemMessage(""), UserMessage("hi")])
    assert (
        bare.transcript[0] == empty.transcript[0] == SystemMessage(config.output_instruction or "")
    )


def test_output_spec_travels_on_every_request_of_a_run_with_an_output_type() -> None:
    # The codec decides per backend whether a request with tools carries it on the wire.
    loop = make_loop(output=Answer, max_turns=1)
    with_tools = only_call_model(loop.start())
    assert with_tools.tools == TOOLS
    spec = with_tools.output
    assert spec is not None and spec.name == "Answer"
    assert spec.schema["required"] == ["value"]
    loop.handle(tool_reply(with_tools.request_id, add_call("c0")))
    final = only_call_model(loop.handle(ToolReturned("c0", "5")))
    assert final.hints.final and final.output == spec
    without_tools = only_call_model(make_loop(output=Answer, tools=()).start())
    assert without_tools.tools == () and without_tools.output == spec
    assert only_call_model(make_loop().start()).output is None


# ----------------------------------------------------------------------------- max_turns


def play_tool_turns(loop: AgentLoop, turns: int) -> CallModel:
    call = only_call_model(loop.start())
    for turn in range(turns):
        loop.handle(tool_reply(call.request_id, add_call(f"c{turn}")))
        call = only_call_model(loop.handle(ToolReturned(f"c{turn}", "5")))
    return call


def test_max_turns_forces_a_final_request_with_tools_switched_off() -> None:
    loop = make_loop(max_turns=2, params=ModelParams(tool_choice="auto", max_tokens=50))
    final = play_tool_turns(loop, 2)
    assert final.request_id == "run-1/2"
    # The tool list stays (same prompt prefix, so the prefix cache still hits); the model is
    # told not to use it.
    assert final.tools == TOOLS
    assert final.params == ModelParams(tool_choice="none", max_tokens=50)
    assert final.hints.final is True
    assert final.messages[-1] == UserMessage(make_config().final_instruction)
    finish = only(loop.handle(text_reply("run-1/2", "5")), Finish)
    assert isinstance(finish, Finish) and finish.output == "5"


def test_without_a_final_instruction_the_final_request_adds_no_message() -> None:
    loop = make_loop(max_turns=1, final_instruction=None)
    first = only_call_model(loop.start())
    loop.handle(tool_reply(first.request_id, add_call("c0")))
    final = only_call_model(loop.handle(ToolReturned("c0", "5")))
    assert final.hints.final is True and final.params.tool_choice == "none"
    # The history ends with the tool result, as a hand-written loop would send it.
    assert isinstance(final.messages[-1], ToolMessage)
    assert len(final.messages) == len(first.messages) + 2
    finish = only(loop.handle(text_reply(final.request_id, "5")), Finish)
    assert isinstance(finish, Finish) and finish.output == "5"


def test_requests_before_the_limit_are_not_final() -> None:
    loop = make_loop(max_turns=3)
    call = play_tool_turns(loop, 2)
    assert call.hints.final is False and call.tools == TOOLS


def test_final_reply_that_still_calls_tools_aborts_with_max_turns() -> None:
    loop = make_loop(max_turns=1)
    play_tool_turns(loop, 1)
    abort = only(loop.handle(tool_reply("run-1/1", add_call("z"))), Abort)
    assert isinstance(abort, Abort)
    assert abort.reason.kind is AbortKind.MAX_TURNS
    assert isinstance(abort.transcript[-1], AssistantMessage)


def test_final_answer_can_be_repaired_and_the_repair_stays_final() -> None:
    loop = make_loop(max_turns=1, output=Answer)
    final = play_tool_turns(loop, 1)
    assert final.output is not None and final.output.name == "Answer"
    repair = only_call_model(loop.handle(text_reply(final.request_id, "five")))
    assert repair.hints.final is True and repair.tools == TOOLS and repair.output == final.output
    assert repair.params.tool_choice == "none"
    finish = only(loop.handle(text_reply(repair.request_id, '{"value": 5}')), Finish)
    assert isinstance(finish, Finish) and finish.output == Answer(5)


def test_final_answer_still_invalid_aborts_with_output_invalid() -> None:
    loop = make_loop(max_turns=1, output=Answer, max_output_retries=0)
    final = play_tool_turns(loop, 1)
    abort = only(loop.handle(text_reply(final.request_id, "five")), Abort)
    assert isinstance(abort, Abort) and abort.reason.kind is AbortKind.OUTPUT_INVALID


def test_invalid_only_turns_count_as_tool_turns() -> None:
    loop = make_loop(max_turns=2)
    loop.start()
    only_call_model(loop.handle(tool_reply("run-1/0", ToolCall("a", "nope"))))
    final = only_call_model(loop.handle(tool_reply("run-1/1", ToolCall("b", "nope"))))
    assert final.hints.final is True


# ----------------------------------------------------------------------------- failure, cancel


def test_model_failure_aborts_with_the_typed_error_and_the_transcript() -> None:
    loop = make_loop()
    loop.start()
    loop.handle(tool_reply("run-1/0", add_call("a"), usage=Usage(7, 2)))
    loop.handle(ToolReturned("a", "5"))
    error = ModelError(ErrorKind.TOO_LARGE, "context length exceeded", status=400)
    abort = only(loop.handle(ModelFailed("run-1/1", error)), Abort)
    assert isinstance(abort, Abort)
    assert abort.reason.kind is AbortKind.MODEL_FAILED
    assert abort.reason.error == error
    assert abort.reason.message == "context length exceeded"
    assert abort.transcript[-1] == ToolMessage("a", "add", "5")
    assert abort.usage == Usage(7, 2)


def test_cancel_while_waiting_for_the_model_aborts() -> None:
    loop = make_loop()
    loop.start()
    abort = only(loop.handle(CancelRequested("shutdown")), Abort)
    assert isinstance(abort, Abort)
    assert abort.reason.kind is AbortKind.CANCELLED
    assert abort.reason.message == "shutdown"
    assert abort.transcript == MESSAGES
    assert loop.state is RunState.ABORTED


def test_cancel_while_tools_run_keeps_the_results_that_arrived() -> None:
    loop = make_loop()
    loop.start()
    loop.handle(tool_reply("run-1/0", add_call("a"), add_call("b"), ToolCall("c", "nope")))
    loop.handle(ToolReturned("b", "5"))
    abort = only(loop.handle(CancelRequested()), Abort)
    assert isinstance(abort, Abort)
    tail = abort.transcript[len(MESSAGES) + 1 :]
    assert [m.call_id for m in tail if isinstance(m, ToolMessage)] == ["b", "c"]
    assert loop.outstanding() == ()


# ----------------------------------------------------------------------------- hints, usage


def test_priority_grows_with_the_turn_and_request_ids_count_up() -> None:
    loop = make_loop(base_priority=10, priority_step=5, parent_session_id="boss")
    calls = [only_call_model(loop.start())]
    for turn in range(3):
        loop.handle(tool_reply(calls[-1].request_id, add_call(f"c{turn}")))
        calls.append(only_call_model(loop.handle(ToolReturned(f"c{turn}", "5"))))
    assert [c.request_id for c in calls] == ["run-1/0", "run-1/1", "run-1/2", "run-1/3"]
    assert [c.hints.turn for c in calls] == [0, 1, 2, 3]
    assert [c.hints.priority for c in calls] == [10, 15, 20, 25]
    assert {c.hints.parent_session_id for c in calls} == {"boss"}


def test_session_id_defaults_to_the_run_id_and_can_be_set() -> None:
    assert only_call_model(make_loop().start()).hints.session_id == "run-1"
    call = only_call_model(make_loop(session_id="sess").start())
    assert call.hints.session_id == "sess"


def test_usage_is_summed_and_unknown_cached_tokens_stay_unknown() -> None:
    loop = make_loop()
    loop.start()
    loop.handle(tool_reply("run-1/0", add_call("a"), usage=Usage(10, 2)))
    assert loop.usage == Usage(10, 2, None)
    loop.handle(ToolReturned("a", "5"))
    finish = only(loop.handle(text_reply("run-1/1", "5", Usage(20, 3, 8))), Finish)
    assert isinstance(finish, Finish)
    assert finish.usage == Usage(30, 5, 8)


def test_statistics_count_the_run() -> None:
    loop = make_loop()
    loop.start()
    loop.handle(tool_reply("run-1/0", add_call("a"), add_call("b"), ToolCall("c", "nope")))
    stats = loop.statistics()
    assert attrs.asdict(stats, recurse=False) == {
        "state": RunState.AWAITING_TOOLS,
        "model_calls": 1,
        "tool_turns": 1,
        "tool_errors": 1,
        "output_retries": 0,
        "outstanding_tools": 2,
        "usage": Usage(5, 1),
        "tool_calls": 2,
        "plans": 0,
        "truncated_replies": 0,
        "missing_tool_calls": 0,
        "tool_failures": 0,
    }


def test_outstanding_lists_what_the_loop_still_waits_for() -> None:
    loop = make_loop()
    assert loop.outstanding() == ()
    (first,) = loop.start()
    assert loop.outstanding() == (first,)
    effects = loop.handle(tool_reply("run-1/0", add_call("a"), ToolCall("b", "echo")))
    assert loop.outstanding() == effects
    loop.handle(ToolReturned("a", "5"))
    assert loop.outstanding() == effects[1:]
    (second,) = loop.handle(ToolReturned("b", "{}"))
    assert loop.outstanding() == (second,)


def test_tool_validator_is_not_part_of_the_effect() -> None:
    loop = make_loop(tools=(ADD,))
    loop.start()
    (effect,) = loop.handle(tool_reply("run-1/0", add_call("a", 4, 5)))
    assert effect == CallTool("a", "add", {"x": 4, "y": 5}, "run-1/0/0")


@pytest.mark.parametrize("planning", [None, 2])
def test_opening_priority_is_the_priority_of_the_request_start_returns(
    planning: int | None,
) -> None:
    loop = AgentLoop(
        make_config(base_priority=7, priority_step=3, planning_interval=planning), MESSAGES
    )
    announced = loop.opening_priority
    call = only_call_model(loop.start())
    assert announced == call.hints.priority == 7
    assert loop.opening_priority is None  # started: nothing more to announce


def test_opening_priority_is_unknown_when_a_run_budget_could_end_the_run_at_start() -> None:
    loop = AgentLoop(make_config(limits=UsageLimits(requests=0)), MESSAGES)
    assert loop.opening_priority is None
    assert isinstance(loop.start()[0], Abort)
