"""Bad input of every kind raises ``DecodeError`` with a readable message and the cause chained;
values JSON cannot hold raise ``TypeError`` from ``dumps``; programming errors raise
``TypeError``. No orjson or cattrs exception ever escapes."""

from __future__ import annotations

import ast
import math
import typing
from pathlib import Path
from typing import Any

import attrs
import pytest

import agentcore
from agentcore import Usage
from agentcore._codecs.serde import _TAGS
from agentcore.core import (
    AssistantMessage,
    CallModel,
    Finish,
    LoopSnapshot,
    ModelResponded,
    ToolCall,
    ToolSpec,
    UserMessage,
)

EVENT = agentcore.core.Event
MESSAGE = agentcore.core.Message

# (id, target type, input, fragments the message must contain)
BAD_INPUT: list[tuple[str, Any, bytes | str, tuple[str, ...]]] = [
    ("empty", EVENT, b"", ("invalid JSON",)),
    ("truncated", EVENT, b'{"type":"tool_returned"', ("invalid JSON",)),
    ("trailing_garbage", EVENT, b'{"type":"cancel_requested"} x', ("invalid JSON",)),
    ("not_utf8", MESSAGE, b'{"type":"user","content":"\xff"}', ("invalid JSON",)),
    ("lone_surrogate_text", MESSAGE, '{"type":"user","content":"\\ud800"}', ("invalid JSON",)),
    ("nan_literal", agentcore.core.ServerTiming, b'{"ttft_ms":NaN}', ("invalid JSON",)),
    ("too_deep", EVENT, b"[" * 2000 + b"]" * 2000, ("invalid JSON",)),
    ("array_for_union", EVENT, b"[]", ("expected an object (Event), got an array @ $",)),
    ("null_for_class", UserMessage, b"null", ("expected an object (UserMessage), got null @ $",)),
    ("missing_tag", EVENT, b'{"call_id":"c","content":"x"}', ("missing type tag for Event",)),
    (
        "unknown_tag",
        agentcore.core.Effect,
        b'{"type":"explode"}',
        ("unknown type tag 'explode' for Effect", "'call_model'"),
    ),
    ("tag_of_other_union", EVENT, b'{"type":"user","content":"x"}', ("unknown type tag 'user'",)),
    (
        "non_string_tag",
        MESSAGE,
        b'{"type":["user"],"content":"x"}',
        ("type tag must be a string, got an array",),
    ),
    (
        "mismatched_tag_for_class",
        UserMessage,
        b'{"type":"system","content":"x"}',
        ("expected type tag 'user' (UserMessage), got 'system' @ $",),
    ),
    (
        "extra_key",
        EVENT,
        b'{"type":"tool_returned","call_id":"c","content":"x","secret":1}',
        ("extra fields found (secret) @ $",),
    ),
    (
        "missing_field",
        EVENT,
        b'{"type":"tool_returned","call_id":"c"}',
        ("required field missing @ $.content",),
    ),
    (
        "int_for_string",
        EVENT,
        b'{"type":"tool_returned","call_id":7,"content":"x"}',
        ("expected a string, got an integer @ $.call_id",),
    ),
    (
        "bool_for_int",
        agentcore.Usage,
        b'{"prompt_tokens":true}',
        ("expected an integer, got a boolean @ $.prompt_tokens",),
    ),
    (
        "float_for_int",
        agentcore.Usage,
        b'{"prompt_tokens":1.0}',
        ("expected an integer, got a number @ $.prompt_tokens",),
    ),
    (
        "out_of_range_int",
        agentcore.Usage,
        b'{"prompt_tokens":99999999999999999999}',
        ("expected an integer, got a number @ $.prompt_tokens",),
    ),
    (
        "string_for_number",
        agentcore.core.ServerTiming,
        b'{"ttft_ms":"12"}',
        ("expected a number, got a string @ $.ttft_ms",),
    ),
    (
        "string_for_bool",
        MESSAGE,
        b'{"type":"tool","call_id":"c","name":"n","content":"x","is_error":"false"}',
        ("expected a boolean, got a string @ $.is_error",),
    ),
    (
        "string_for_array",
        MESSAGE,
        b'{"type":"assistant","tool_calls":"abc"}',
        ("expected an array, got a string @ $.tool_calls",),
    ),
    (
        "object_for_array",
        MESSAGE,
        b'{"type":"assistant","tool_calls":{"id":"c","name":"n"}}',
        ("expected an array, got an object @ $.tool_calls",),
    ),
    (
        "array_for_mapping",
        agentcore.core.Effect,
        b'{"type":"call_tool","call_id":"c","name":"n","arguments":[1]}',
        ("expected an object, got an array @ $.arguments",),
    ),
    (
        "unknown_enum_value",
        EVENT,
        b'{"type":"model_failed","request_id":"r","error":{"kind":"meltdown","message":"m"}}',
        ("got 'meltdown' @ $.error.kind", "'rate_limited'"),
    ),
    (
        "nested_message_problem",
        agentcore.core.Effect,
        b'{"type":"call_model","request_id":"r","messages":[{"type":"user","content":"a"},'
        b'{"type":"user","content":5}]}',
        ("expected a string, got an integer @ $.messages[1].content",),
    ),
    (
        "validator_key_for_tool_spec",
        ToolSpec,
        b'{"name":"t","validator":"lambda x: x"}',
        ("extra fields found (validator)",),
    ),
    (
        "several_problems",
        EVENT,
        b'{"type":"model_responded","request_id":1,"message":{"type":"assistant",'
        b'"tool_calls":[{"id":"c"}]},"usage":{"prompt_tokens":"x"},"extra":null}',
        (
            "@ $.request_id",
            "required field missing @ $.message.tool_calls[0].name",
            "@ $.usage.prompt_tokens",
            "extra fields found (extra) @ $",
        ),
    ),
    (
        "snapshot_state",
        LoopSnapshot,
        b'{"run_id":"r","state":"sleeping","transcript":[],"model_calls":0,"tool_turns":0,'
        b'"tool_errors":0,"output_retries":0,"final":false,"usage":{}}',
        ("got 'sleeping' @ $.state",),
    ),
]


@pytest.mark.parametrize(
    ("tp", "data", "fragments"), [b[1:] for b in BAD_INPUT], ids=[b[0] for b in BAD_INPUT]
)
def test_bad_input_raises_DecodeError_with_a_readable_message(
    tp: Any, data: bytes | str, fragments: tuple[str, ...]
) -> None:
    with pytest.raises(agentcore.DecodeError) as info:
        agentcore.core.loads(data, tp)
    message = str(info.value)
    assert message.startswith("cannot decode ")
    for fragment in fragments:
        assert fragment in message
    assert info.value.__cause__ is not None
    assert isinstance(info.value, ValueError)


def test_long_lists_of_problems_are_cut_short() -> None:
    data = b'{"type":"call_model","request_id":"r","messages":[' + b",".join([b"1"] * 50) + b"]}"
    with pytest.raises(agentcore.DecodeError) as info:
        agentcore.core.loads(data, agentcore.core.Effect)
    message = str(info.value)
    assert message.count("@ $.messages[") == 10
    assert message.endswith("and 40 more")


def test_bad_typed_output_raises_DecodeError_at_the_output_path() -> None:
    @attrs.frozen
    class Answer:
        value: int

    data = agentcore.core.dumps(Finish(output={"value": "x"}, transcript=(), usage=Usage()))
    with pytest.raises(agentcore.DecodeError) as info:
        agentcore.core.loads(data, Finish, output_type=Answer)
    assert "expected an integer, got a string @ $.output.value" in str(info.value)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (Finish(output=object(), transcript=(), usage=Usage()), "not JSON serializable"),
        (Finish(output=math.nan, transcript=(), usage=Usage()), "nan"),
        (Finish(output=[math.inf], transcript=(), usage=Usage()), "inf"),
        (agentcore.core.ServerTiming(ttft_ms=math.nan), "nan"),
        (Usage(prompt_tokens=2**64), "64-bit"),
        (Finish(output={1: "x"}, transcript=(), usage=Usage()), "mapping key 1"),
        (UserMessage("\ud800"), "surrogates"),
        (CallModel("r", messages=("hello",)), "str is not a member of Message"),  # type: ignore[arg-type]
    ],
    ids=[
        "object",
        "nan",
        "inf_in_list",
        "nan_field",
        "huge_int",
        "int_key",
        "surrogate",
        "not_a_message",
    ],
)
def test_dumps_raises_TypeError_for_values_JSON_cannot_hold(value: Any, fragment: str) -> None:
    with pytest.raises(TypeError) as info:
        agentcore.core.dumps(value)
    assert type(info.value) is TypeError
    assert fragment in str(info.value)
    assert str(info.value).startswith(f"cannot encode {type(value).__name__} as JSON")
    assert info.value.__cause__ is not None


def test_loads_of_a_non_bytes_argument_is_a_TypeError() -> None:
    with pytest.raises(TypeError, match="expects bytes or str"):
        agentcore.core.loads(42, UserMessage)  # type: ignore[call-overload]


def test_loads_into_an_unsupported_type_is_a_TypeError() -> None:
    class Opaque:
        pass

    with pytest.raises(TypeError, match="cannot decode into"):
        agentcore.core.loads(b"{}", Opaque)


def test_assistant_message_fields_must_be_array_items_not_a_string() -> None:
    # cattrs would turn the string "ab" into a tuple of characters; the converter refuses.
    with pytest.raises(agentcore.DecodeError):
        agentcore.core.loads(b'{"type":"assistant","tool_calls":"ab"}', AssistantMessage)


def test_reply_with_wrong_message_kind_names_the_place() -> None:
    data = (
        b'{"type":"model_responded","request_id":"r","message":{"type":"tool","call_id":"c",'
        b'"name":"n","content":"x"}}'
    )
    with pytest.raises(agentcore.DecodeError) as info:
        agentcore.core.loads(data, ModelResponded)
    assert "expected type tag 'assistant' (AssistantMessage), got 'tool' @ $.message" in str(
        info.value
    )


# ----------------------------------------------------------------------------- format rules


def test_every_union_member_has_a_distinct_tag() -> None:
    members = [
        m for union in (MESSAGE, EVENT, agentcore.core.Effect) for m in typing.get_args(union)
    ]
    assert set(members) == set(_TAGS)
    assert len(set(_TAGS.values())) == len(_TAGS)
    for member in members:
        assert "type" not in attrs.fields_dict(member), f"{member.__name__} has a 'type' field"


def test_serde_imports_only_stdlib_attrs_and_cattrs() -> None:
    source = (Path(agentcore.__file__).parent / "_codecs" / "serde.py").read_text()
    roots: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    third_party = roots - set(__import__("sys").stdlib_module_names) - {"__future__"}
    assert third_party <= {"attrs", "cattrs"}


def test_tool_call_arguments_stay_raw_text() -> None:
    call = ToolCall("c", "f", "not json {")
    assert agentcore.core.loads(agentcore.core.dumps(call), ToolCall) == call
