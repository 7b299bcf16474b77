"""JSON schemas for Python types, strict structuring, and JSON extraction from model text."""

from __future__ import annotations

import enum
from typing import Any, Literal, Optional

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore import ConfigError
from agentcore._core.schema import ValidationFailed, json_schema, parse_json_text, structure


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@attrs.frozen
class Point:
    x: int
    y: int = 0


@attrs.frozen
class Report:
    title: str = attrs.field(metadata={"description": "A short title."})
    score: float
    points: list[Point]
    color: Color = Color.RED
    tags: tuple[str, ...] = ()
    extra: dict[str, int] = attrs.field(factory=dict)
    note: str | None = None


@attrs.frozen
class Node:
    children: list[Node]


# ----------------------------------------------------------------------------- json_schema


@pytest.mark.parametrize(
    ("tp", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (None, {"type": "null"}),
        (type(None), {"type": "null"}),
        (Any, {}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (tuple[str, ...], {"type": "array", "items": {"type": "string"}}),
        (
            tuple[int, str],
            {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "items": False,
                "minItems": 2,
                "maxItems": 2,
            },
        ),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (Optional[str], {"anyOf": [{"type": "string"}, {"type": "null"}]}),  # noqa: UP045
        (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, "x"], {"type": ["integer", "string"], "enum": [1, "x"]}),
        (Color, {"type": "string", "enum": ["red", "blue"]}),
        (Level, {"type": "integer", "enum": [1, 2]}),
        (list[Color], {"type": "array", "items": {"type": "string", "enum": ["red", "blue"]}}),
    ],
)
def test_schema_of_supported_types(tp: Any, schema: dict[str, Any]) -> None:
    assert json_schema(tp) == schema


def test_schema_of_an_attrs_class_lists_required_fields_defaults_and_descriptions() -> None:
    assert json_schema(Report) == {
        "type": "object",
        "properties": {
            "title": {"description": "A short title.", "type": "string"},
            "score": {"type": "number"},
            "points": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "x": {"type": "integer"},
                        "y": {"type": "integer", "default": 0},
                    },
                    "required": ["x"],
                    "additionalProperties": False,
                },
            },
            "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "extra": {"type": "object", "additionalProperties": {"type": "integer"}},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        },
        "required": ["title", "score", "points"],
        "additionalProperties": False,
    }


def test_schema_is_a_fresh_value_each_time() -> None:
    first = json_schema(Report)
    first["properties"].clear()
    assert json_schema(Report)["properties"]


@pytest.mark.parametrize(
    ("tp", "named"),
    [
        (set[int], "set[int]"),
        (complex, "complex"),
        (object, "object"),
        (dict[int, str], "dict[int, str]"),
        (list[bytes], "bytes"),
        (Node, "Node"),
    ],
)
def test_unsupported_types_raise_config_error_naming_the_type(tp: Any, named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace("[", r"\[").replace("]", r"\]")):
        json_schema(tp)


def test_structure_rejects_unsupported_types_with_config_error() -> None:
    with pytest.raises(ConfigError):
        structure([1], set[int])


# ----------------------------------------------------------------------------- structure


def test_structure_builds_nested_attrs_values() -> None:
    value = {
        "title": "t",
        "score": 3,
        "points": [{"x": 1}, {"x": 2, "y": 5}],
        "color": "blue",
        "tags": ["a"],
        "extra": {"k": 1},
        "note": None,
    }
    report = structure(value, Report)
    assert report == Report("t", 3.0, [Point(1), Point(2, 5)], Color.BLUE, ("a",), {"k": 1})
    assert type(report.score) is float


@pytest.mark.parametrize(
    ("value", "tp", "expected"),
    [
        (3, int, 3),
        (3, float, 3.0),
        (2.5, float, 2.5),
        ("s", str, "s"),
        (True, bool, True),
        (None, None, None),
        ([1, 2], list[int], [1, 2]),
        ([1, 2], tuple[int, ...], (1, 2)),
        ([1, "a"], tuple[int, str], (1, "a")),
        ({"a": 1}, dict[str, int], {"a": 1}),
        (None, int | None, None),
        (4, int | None, 4),
        ("x", int | str, "x"),
        (3, float | int, 3),
        (2, Level, Level.HIGH),
        ("red", Color, Color.RED),
        ("b", Literal["a", "b"], "b"),
        ({"anything": [1]}, Any, {"anything": [1]}),
    ],
)
def test_structure_accepts_values_of_the_right_json_type(
    value: Any, tp: Any, expected: Any
) -> None:
    result = structure(value, tp)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("value", "tp", "message"),
    [
        ("3", int, "expected int, got string"),
        (True, int, "expected int, got boolean"),
        (3.0, int, "expected int, got number"),
        (True, float, "expected float, got boolean"),
        ("2.5", float, "expected float, got string"),
        (1, str, "expected str, got integer"),
        (1, bool, "expected bool, got integer"),
        ("true", bool, "expected bool, got string"),
        ("ab", list[str], "expected array, got string"),
        ({"a": 1}, list[int], "expected array, got object"),
        ([1, 2, 3], tuple[int, int], "expected an array of 2 items, got 3"),
        ([1], dict[str, int], "expected object, got array"),
        ("green", Color, 'expected one of "red", "blue"'),
        (True, Level, "expected one of 1, 2"),
        ("c", Literal["a", "b"], 'expected one of "a", "b"'),
        (1, Literal[True], "expected one of true"),
        ([1], int | str, "expected int | str, got array"),
        ("x", Point, "expected object (Point), got string"),
        (0, None, "expected null, got integer"),
    ],
)
def test_structure_rejects_values_of_the_wrong_json_type(value: Any, tp: Any, message: str) -> None:
    with pytest.raises(ValidationFailed) as info:
        structure(value, tp)
    assert message in info.value.message
    assert info.value.message.endswith("@ $")


def test_structure_reports_every_problem_with_its_path() -> None:
    value = {
        "title": 1,
        "score": "high",
        "points": [{"x": 1}, {"y": 2}, {"x": "3", "z": 0}],
        "color": "green",
        "extra": {"a": 1.5},
        "unknown": True,
    }
    with pytest.raises(ValidationFailed) as info:
        structure(value, Report)
    lines = set(info.value.message.split("; "))
    assert lines == {
        "invalid value for type, expected str, got integer 1 @ $.title",
        'invalid value for type, expected float, got string "high" @ $.score',
        "required field missing @ $.points[1].x",
        'invalid value for type, expected int, got string "3" @ $.points[2].x',
        "extra fields found (z) @ $.points[2]",
        'invalid value for type, expected one of "red", "blue" (Color), got string "green" @ '
        "$.color",
        "invalid value for type, expected int, got number 1.5 @ $.extra['a']",
        "extra fields found (unknown) @ $",
    }


def test_structure_reports_attrs_validator_messages() -> None:
    @attrs.frozen
    class Positive:
        n: int = attrs.field(validator=attrs.validators.gt(0))

    with pytest.raises(ValidationFailed, match="must be > 0"):
        structure({"n": -1}, Positive)


def test_union_members_are_tried_when_several_fit_the_json_type() -> None:
    @attrs.frozen
    class A:
        a: int

    @attrs.frozen
    class B:
        b: str

    assert structure({"b": "x"}, A | B) == B("x")
    with pytest.raises(ValidationFailed) as info:
        structure({"c": 1}, A | B)
    assert "A:" in info.value.message and "B:" in info.value.message


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_structure_raises_only_validation_failed_on_any_json_value(value: Any) -> None:
    try:
        result = structure(value, Report)
    except ValidationFailed as exc:
        assert exc.message
    else:
        assert isinstance(result, Report)


# ----------------------------------------------------------------------------- parse_json_text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("  \n[1, 2]\n ", [1, 2]),
        ("42", 42),
        ('Sure.\n```json\n{"a": 2}\n```\nDone.', {"a": 2}),
        ('```JSON\n{"a": 3}\n```', {"a": 3}),
        ('```\n{"a": 4}\n```', {"a": 4}),
        ('```python\nx = 1\n```\n```json\n{"a": 5}\n```', {"a": 5}),
        ('The answer is {"a": 6}, as computed.', {"a": 6}),
    ],
)
def test_parse_json_text_finds_the_json(text: str, expected: Any) -> None:
    assert parse_json_text(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty answer"),
        ("   ", "empty answer"),
        ("The answer is five.", "not valid JSON"),
        ('```json\n{"a": }\n```', "```json block is not valid JSON"),
        ("NaN", "NaN is not valid JSON"),
        ('{"a": Infinity}', "not valid JSON"),
    ],
)
def test_parse_json_text_explains_failures(text: str, message: str) -> None:
    with pytest.raises(ValidationFailed, match=message):
        parse_json_text(text)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_parse_json_text_raises_only_validation_failed(text: str) -> None:
    try:
        parse_json_text(text)
    except ValidationFailed as exc:
        assert exc.message
