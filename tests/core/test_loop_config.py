"""LoopConfig validation and derived values; AgentLoop construction."""

from __future__ import annotations

from typing import Any

import pytest

from agentcore import ConfigError, ModelParams
from agentcore._core.schema import json_schema
from agentcore.core import AgentLoop, LoopConfig, ToolSpec, UserMessage
from tests.core.helpers import ADD, Answer, make_config


def test_defaults() -> None:
    config = LoopConfig(run_id="r")
    assert config.session_id == "r"
    assert config.parent_session_id is None
    assert (config.max_turns, config.max_tool_errors, config.max_output_retries) == (10, 3, 2)
    assert (config.base_priority, config.priority_step) == (0, 1)
    assert config.tools == ()
    assert config.output is None and config.output_spec is None
    assert config.output_instruction is None
    assert config.params == ModelParams()
    assert config.final_instruction


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("run_id", ""),
        ("run_id", 7),
        ("session_id", ""),
        ("parent_session_id", ""),
        ("max_turns", 0),
        ("max_turns", 2.0),
        ("max_turns", True),
        ("max_tool_errors", -1),
        ("max_output_retries", -1),
        ("max_output_retries", "2"),
        ("base_priority", 1.5),
        ("priority_step", None),
        ("expected_output_tokens", 0),
        ("expected_output_tokens", "many"),
        ("final_instruction", ""),
        ("params", {"temperature": 0}),
        ("tools", "add"),
        ("tools", [ADD, "echo"]),
        ("tools", [ADD, ADD]),
        ("tools", [ToolSpec("")]),
        ("tools", 3),
        ("output", set[int]),
        ("output", object),
    ],
)
def test_invalid_values_raise_config_error(field: str, value: Any) -> None:
    values: dict[str, Any] = {"run_id": "r", field: value}
    with pytest.raises(ConfigError):
        LoopConfig(**values)


def test_config_error_is_a_value_error_naming_the_field() -> None:
    with pytest.raises(ValueError, match="max_turns"):
        LoopConfig(run_id="r", max_turns=-3)


def test_output_spec_is_derived_once_from_the_output_type() -> None:
    config = make_config(output=Answer)
    assert config.output_spec is not None
    assert config.output_spec.name == "Answer"
    assert config.output_spec.schema == json_schema(Answer)
    assert config.output_instruction is not None
    assert config.output_instruction.endswith(
        '{"type":"object","properties":{"value":{"type":"integer"},"note":'
        '{"type":"string","default":""}},"required":["value"],"additionalProperties":false}'
    )


def test_output_may_be_any_supported_type() -> None:
    config = make_config(output=list[int])
    assert config.output_spec is not None
    assert config.output_spec.name == "output"
    assert config.output_spec.schema == {"type": "array", "items": {"type": "integer"}}


def test_tools_may_be_given_as_a_list() -> None:
    assert make_config(tools=[ADD]).tools == (ADD,)


def test_loop_rejects_things_that_are_not_messages() -> None:
    with pytest.raises(ConfigError):
        AgentLoop(make_config(), [UserMessage("hi"), "hello"])  # type: ignore[list-item]
    with pytest.raises(ConfigError):
        AgentLoop({"run_id": "r"}, [])  # type: ignore[arg-type]


def test_the_caller_list_of_messages_is_not_modified() -> None:
    messages = [UserMessage("hi")]
    AgentLoop(make_config(output=Answer), messages).start()
    assert messages == [UserMessage("hi")]
