"""``@agentcore.tool``: specs from signatures and docstrings, validation, options, results."""

from __future__ import annotations

import enum
import inspect
from typing import Any, Literal

import attrs
import pytest
import trio

import agentcore
from agentcore import ConfigError, Tool, tool
from agentcore._core.schema import ValidationFailed
from agentcore._tools.spec import ToolOptions, encode_result
from agentcore.core import ToolSpec


class Depth(enum.Enum):
    SHALLOW = "shallow"
    DEEP = "deep"


@attrs.frozen
class Hit:
    url: str
    score: float


@tool
async def web_search(query: str, k: int = 5, depth: Depth = Depth.SHALLOW) -> list[Hit]:
    """Search the web for pages.

    Returns the best hits first.

    Args:
        query: search terms, as a user
            would type them.
        k (int): number of hits.
        depth: how hard to look.

    Returns:
        The hits.
    """
    return [Hit(f"https://example.org/{query}", 1.0)][:k]


@tool(name="grep", timeout=3, max_concurrency=2)
def grep_files(pattern: str, paths: list[str], mode: Literal["fixed", "regex"] = "fixed") -> str:
    """Find lines. Args: pattern: what to look for. paths: files to search. mode: how."""
    return f"{pattern} in {len(paths)} files ({mode})"


# ----------------------------------------------------------------------------- spec


def test_bare_decorator_builds_spec_from_signature_and_docstring() -> None:
    spec = web_search.spec
    assert isinstance(spec, ToolSpec)
    assert spec.name == "web_search"
    assert spec.description == "Search the web for pages.\n\nReturns the best hits first."
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "query": {"description": "search terms, as a user would type them.", "type": "string"},
            "k": {"description": "number of hits.", "type": "integer", "default": 5},
            "depth": {
                "description": "how hard to look.",
                "type": "string",
                "enum": ["shallow", "deep"],
                "default": "shallow",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }


def test_one_line_docstring_with_inline_args_is_understood() -> None:
    spec = grep_files.spec
    assert spec.name == "grep"
    assert spec.description == "Find lines."
    properties = spec.parameters["properties"]
    assert properties["pattern"]["description"] == "what to look for."
    assert properties["paths"] == {
        "description": "files to search.",
        "type": "array",
        "items": {"type": "string"},
    }
    assert properties["mode"]["description"] == "how."
    assert spec.parameters["required"] == ["pattern", "paths"]


def test_description_and_name_can_be_given_explicitly() -> None:
    @tool(name="lookup-v2", description="Look a word up.")
    def lookup(word: str) -> str:
        """Internal notes that the model should not see."""
        return word

    assert lookup.spec.name == "lookup-v2"
    assert lookup.spec.description == "Look a word up."


def test_prose_mentioning_a_parameter_is_not_mistaken_for_an_entry() -> None:
    @tool
    def scale(value: float, factor: float = 2.0) -> float:
        """Scale a value.

        Args:
            value: the number; note that factor: is applied after rounding.
            factor: multiplier.
        """
        return value * factor

    properties = scale.spec.parameters["properties"]
    assert properties["value"]["description"] == (
        "the number; note that factor: is applied after rounding."
    )
    assert properties["factor"]["description"] == "multiplier."


def test_function_without_docstring_has_empty_description() -> None:
    @tool
    def ping() -> str:
        return "pong"

    assert ping.spec.description == ""
    assert ping.spec.parameters["properties"] == {}


# ----------------------------------------------------------------------------- the Tool object


def test_tool_object_still_calls_the_original_function() -> None:
    assert isinstance(grep_files, Tool)
    assert grep_files("x", ["a", "b"]) == "x in 2 files (fixed)"
    assert grep_files.__name__ == "grep_files"
    assert grep_files.__wrapped__ is grep_files.function
    assert list(inspect.signature(grep_files).parameters) == ["pattern", "paths", "mode"]


async def test_async_tool_object_returns_the_coroutine_of_the_original() -> None:
    assert web_search.is_async
    assert not grep_files.is_async
    assert await web_search("trio", k=1) == [Hit("https://example.org/trio", 1.0)]


def test_options_are_frozen_values() -> None:
    assert grep_files.options == ToolOptions(timeout=3, max_concurrency=2)
    assert web_search.options == ToolOptions()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        grep_files.options.timeout = 5  # type: ignore[misc]


def test_tool_and_tool_class_are_public() -> None:
    assert agentcore.tool is tool
    assert agentcore.Tool is Tool


# ----------------------------------------------------------------------------- validation


def test_validator_builds_the_arguments_object_with_defaults() -> None:
    arguments = web_search.spec.validator({"query": "trio", "depth": "deep"})
    assert isinstance(arguments, web_search.arguments_type)
    assert (arguments.query, arguments.k, arguments.depth) == ("trio", 5, Depth.DEEP)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"query": 3}, "expected str, got integer 3 @ $.query"),
        ({"query": "x", "k": "5"}, 'expected int, got string "5" @ $.k'),
        ({"k": 5}, "required field missing @ $.query"),
        ({"query": "x", "limit": 3}, "extra fields found (limit) @ $"),
        ({"query": "x", "depth": "medium"}, "@ $.depth"),
        (["x"], "expected object"),
    ],
)
def test_bad_arguments_are_rejected_with_field_level_messages(arguments: Any, message: str) -> None:
    with pytest.raises(ValidationFailed) as info:
        web_search.spec.validator(arguments)
    assert message in info.value.message


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ValidationFailed) as info:
        grep_files.spec.validator({"pattern": 1, "paths": ["a", 2]})
    assert "@ $.pattern" in info.value.message
    assert "@ $.paths[1]" in info.value.message


def test_mutable_defaults_are_not_shared_between_calls() -> None:
    @tool
    def tag(name: str, labels: list[str] = ["a"]) -> str:  # noqa: B006 - the point of the test
        return name

    first = tag.spec.validator({"name": "x"})
    second = tag.spec.validator({"name": "y"})
    first.labels.append("b")
    assert second.labels == ["a"]


def test_positional_only_and_keyword_only_parameters_are_bound_correctly() -> None:
    @tool
    def join(left: str, /, right: str, *, sep: str = "-") -> str:
        return f"{left}{sep}{right}"

    arguments = join.spec.validator({"left": "a", "right": "b"})
    assert join.bind(arguments)() == "a-b"


def test_nested_attrs_types_are_structured() -> None:
    @tool
    def rank(hits: list[Hit]) -> int:
        return len(hits)

    arguments = rank.spec.validator({"hits": [{"url": "u", "score": 1}]})
    assert arguments.hits == [Hit("u", 1.0)]
    assert rank.spec.parameters["properties"]["hits"]["items"]["required"] == ["url", "score"]


# ----------------------------------------------------------------------------- config errors


def test_variadic_parameters_are_rejected() -> None:
    def star(*terms: str) -> str:
        return ""

    def kwstar(**options: str) -> str:
        return ""

    for function in (star, kwstar):
        with pytest.raises(ConfigError, match=r"\*args and \*\*kwargs"):
            tool(function)


def test_missing_annotation_is_rejected() -> None:
    def untyped(query, k: int = 1) -> str:  # type: ignore[no-untyped-def]
        return ""

    with pytest.raises(ConfigError, match=r"'query'.*no type annotation"):
        tool(untyped)


def test_unsupported_annotation_is_rejected() -> None:
    def opener(handle: trio.Lock) -> str:
        return ""

    with pytest.raises(ConfigError, match="Lock"):
        tool(opener)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ttl": 10}, "ttl needs cache=True"),
        ({"cache": True, "coalesce": False}, "cache=True needs coalesce=True"),
        ({"burst": 3}, "burst needs rate"),
        ({"timeout": 0}, "timeout must be a positive"),
        ({"timeout": -1.5}, "timeout must be a positive"),
        ({"max_concurrency": 0}, "max_concurrency must be a positive integer"),
        ({"max_concurrency": 1.5}, "max_concurrency must be a positive integer"),
        ({"rate": True}, "rate must be a positive"),
        ({"cache": "yes"}, "cache must be True or False"),
    ],
)
def test_contradictory_or_out_of_range_options_are_rejected(
    options: dict[str, Any], message: str
) -> None:
    def noop() -> str:
        return ""

    with pytest.raises(ConfigError, match=message):
        tool(**options)(noop)


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "dots.not.allowed"])
def test_invalid_tool_names_are_rejected(name: str) -> None:
    def noop() -> str:
        return ""

    with pytest.raises(ConfigError, match="tool name"):
        tool(name=name)(noop)


def test_generator_functions_are_rejected() -> None:
    def numbers() -> Any:
        yield 1

    with pytest.raises(ConfigError, match="generator"):
        tool(numbers)


def test_cache_with_ttl_and_rate_with_burst_are_accepted() -> None:
    @tool(cache=True, ttl=60, rate=2.5, burst=4)
    def const() -> int:
        return 1

    assert const.options == ToolOptions(cache=True, ttl=60, rate=2.5, burst=4)


# ----------------------------------------------------------------------------- results


def test_text_results_pass_through_unchanged() -> None:
    assert encode_result('{"not": "re-encoded"}') == '{"not": "re-encoded"}'
    assert encode_result("") == ""


def test_other_results_are_encoded_as_json() -> None:
    assert encode_result([Hit("u", 0.5)]) == '[{"url":"u","score":0.5}]'
    assert encode_result({"n": 1, "ok": True, "none": None}) == '{"n":1,"ok":true,"none":null}'
    assert encode_result(Depth.DEEP) == '"deep"'
    assert encode_result(None) == "null"
    assert encode_result((1, 2)) == "[1,2]"


def test_values_that_are_not_json_raise_type_error() -> None:
    with pytest.raises(TypeError, match="not JSON-encodable"):
        encode_result(object())


def test_a_note_inside_the_description_is_kept() -> None:
    @tool
    def fetch(url: str) -> str:
        """Fetch a page. Note: only HTTPS is supported.

        Args:
            url: the address.

        Note:
            Internal remark after the arguments.
        """
        return url

    assert fetch.spec.description == "Fetch a page. Note: only HTTPS is supported."
    assert fetch.spec.parameters["properties"]["url"]["description"] == "the address."


def test_return_annotation_is_not_resolved() -> None:
    def build() -> Any:
        @tool
        def make(n: int) -> LocalType:  # type: ignore[name-defined]  # noqa: F821
            return n

        return make

    assert build().spec.parameters["required"] == ["n"]
