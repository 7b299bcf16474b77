"""Finish reasons and the history the loop sends back.

A reply cut by the token limit is never a success; a required tool call that did not come is
not a final answer; and a tool call whose arguments are not a JSON object is quoted to the
model but kept in the transcript as ``{}``, so every server can render the history (llama-server
answers 500 to a history holding the raw invalid arguments).
"""

from __future__ import annotations

import json

import pytest

from agentcore import AbortKind, ConfigError, ModelParams, Usage
from agentcore.core import (
    Abort,
    AgentLoop,
    AssistantMessage,
    Finish,
    LoopConfig,
    LoopSnapshot,
    ModelResponded,
    ToolCall,
    ToolMessage,
    UserMessage,
    dumps,
    loads,
)
from tests.core.helpers import Answer, add_call, make_loop, only_call_model, text_reply


def cut(request_id: str, content: str | None, *calls: ToolCall) -> ModelResponded:
    return ModelResponded(request_id, AssistantMessage(content, calls), Usage(5, 8), "length")


def test_a_text_answer_cut_by_the_token_limit_is_not_ok() -> None:
    loop = make_loop(on_truncated="fail")
    loop.start()
    (end,) = loop.handle(cut("run-1/0", "The answer is"))
    assert isinstance(end, Abort)
    assert end.reason.kind is AbortKind.TRUNCATED
    assert "finish_reason=length" in end.reason.message
    assert loop.statistics().truncated_replies == 1


def test_a_cut_answer_earns_a_repair_turn_by_default_then_truncated() -> None:
    loop = make_loop(max_output_retries=1)
    loop.start()
    repair = only_call_model(loop.handle(cut("run-1/0", "The answer is")))
    assert isinstance(repair.messages[-1], UserMessage)
    assert "cut off" in repair.messages[-1].content
    (end,) = loop.handle(cut("run-1/1", "Again cut"))
    assert isinstance(end, Abort)
    assert end.reason.kind is AbortKind.TRUNCATED
    assert loop.statistics().truncated_replies == 2


def test_a_repaired_answer_finishes() -> None:
    loop = make_loop()
    loop.start()
    loop.handle(cut("run-1/0", "The answer is"))
    (end,) = loop.handle(text_reply("run-1/1", "5"))
    assert isinstance(end, Finish)
    assert end.output == "5"


def test_continue_joins_the_pieces_of_a_cut_answer() -> None:
    loop = make_loop(on_truncated="continue", output=Answer)
    loop.start()
    ask = only_call_model(loop.handle(cut("run-1/0", '{"value": ')))
    assert "where it stopped" in ask.messages[-1].content  # type: ignore[union-attr]
    (end,) = loop.handle(text_reply("run-1/1", "5}"))
    assert isinstance(end, Finish)
    assert end.output == Answer(5)


def test_typed_output_that_was_cut_is_invalid_even_when_it_parses() -> None:
    loop = make_loop(output=Answer, on_truncated="fail")
    loop.start()
    (end,) = loop.handle(cut("run-1/0", '{"value": 5}'))
    assert isinstance(end, Abort)
    assert end.reason.kind is AbortKind.TRUNCATED


def test_the_continue_state_survives_a_snapshot() -> None:
    config = LoopConfig(run_id="run-1", on_truncated="continue")
    loop = AgentLoop(config, [UserMessage("q")])
    loop.start()
    loop.handle(cut("run-1/0", "Hello, "))
    snapshot = loads(dumps(loop.snapshot()), LoopSnapshot)
    restored = AgentLoop.restore(config, snapshot)
    (end,) = restored.handle(text_reply("run-1/1", "world"))
    assert isinstance(end, Finish)
    assert end.output == "Hello, world"
    assert restored.statistics().truncated_replies == 1


def test_on_truncated_is_validated() -> None:
    with pytest.raises(ConfigError, match="on_truncated"):
        LoopConfig(run_id="r", on_truncated="ignore")  # type: ignore[arg-type]


def test_a_required_tool_call_that_did_not_come_is_not_a_final_answer() -> None:
    loop = make_loop(params=ModelParams(tool_choice="required"), max_tool_errors=1)
    loop.start()
    again = only_call_model(loop.handle(text_reply("run-1/0", "I will not call a tool.")))
    assert "A tool call is required" in again.messages[-1].content  # type: ignore[union-attr]
    assert loop.statistics().missing_tool_calls == 1
    (end,) = loop.handle(text_reply("run-1/1", "Still no tool."))
    assert isinstance(end, Abort)
    assert end.reason.kind is AbortKind.TOOL_CALL_MISSING
    assert loop.statistics().missing_tool_calls == 2


def test_required_tool_choice_without_tools_is_not_enforced() -> None:
    # The codec sends tool_choice only with tools; with none offered, a text answer is final.
    loop = make_loop(tools=(), params=ModelParams(tool_choice="required"))
    loop.start()
    (end,) = loop.handle(text_reply("run-1/0", "5"))
    assert isinstance(end, Finish)


def test_the_final_request_does_not_require_a_tool() -> None:
    loop = make_loop(params=ModelParams(tool_choice="required"), max_turns=1)
    loop.start()
    effects = loop.handle(ModelResponded("run-1/0", AssistantMessage(None, (add_call("a"),))))
    from agentcore.core import ToolReturned

    final = only_call_model(loop.handle(ToolReturned(effects[0].call_id, "5")))  # type: ignore[union-attr]
    assert final.params.tool_choice == "none"
    (end,) = loop.handle(text_reply("run-1/1", "5"))
    assert isinstance(end, Finish)


@pytest.mark.parametrize("raw", ['{"x": 2, "y', "[1, 2]", '"just a string"'])
def test_invalid_arguments_are_quoted_to_the_model_but_not_echoed_in_history(raw: str) -> None:
    loop = make_loop()
    loop.start()
    bad = ToolCall("c1", "add", raw)
    nxt = only_call_model(loop.handle(cut("run-1/0", None, bad)))
    assistant = nxt.messages[-2]
    result = nxt.messages[-1]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.tool_calls == (ToolCall("c1", "add", "{}"),)
    for message in nxt.messages:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                assert isinstance(json.loads(call.arguments), dict)
    assert isinstance(result, ToolMessage) and result.is_error
    assert json.dumps(raw) in result.content
    assert loop.statistics().tool_errors == 1


def test_valid_calls_next_to_an_invalid_one_keep_their_arguments() -> None:
    loop = make_loop()
    loop.start()
    effects = loop.handle(
        ModelResponded(
            "run-1/0", AssistantMessage(None, (add_call("a"), ToolCall("b", "add", "{")))
        )
    )
    assert [e.call_id for e in effects] == ["a"]  # type: ignore[union-attr]
    assistant = loop.snapshot().transcript[-1]
    assert isinstance(assistant, AssistantMessage)
    assert [c.arguments for c in assistant.tool_calls] == [add_call("a").arguments, "{}"]


def test_a_very_long_invalid_argument_text_is_quoted_cut() -> None:
    loop = make_loop()
    loop.start()
    nxt = only_call_model(loop.handle(cut("run-1/0", None, ToolCall("c", "add", "{" * 100_000))))
    assert len(nxt.messages[-1].content) < 3000  # type: ignore[union-attr]
