"""What the simulated model answers: schema-valid values, tool turns, answers, faults, frames."""

from __future__ import annotations

import random
import re
from typing import Any

import attrs
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore._core.schema import parse_json_text, structure
from agentcore._sim.policy import FaultInjector, find_schema, plan_reply, prompt_digest
from agentcore._sim.request import InvalidRequest, parse_chat_request
from agentcore._sim.responses import stream_frames
from agentcore._sim.schema_values import generate_value
from agentcore._sim.template import render_prompt
from agentcore.core import LoopConfig
from agentcore.sim import SimConfig
from agentcore.testing import Reply
from tests.sim.helpers import REPORT_SCHEMA, TOOL_SCHEMAS, TOOLS, conversation, violations

WORDS = ("alpha", "beta", "gamma")

# -- schemas ------------------------------------------------------------------------------------

_json_ints = st.integers(-(2**53), 2**53)
_scalars = st.one_of(
    st.just({"type": "string"}),
    st.builds(
        lambda lo, span: {"type": "string", "minLength": lo, "maxLength": lo + span},
        st.integers(0, 30),
        st.integers(0, 10),
    ),
    st.builds(
        lambda lo, span: {"type": "integer", "minimum": lo, "maximum": lo + span},
        st.integers(-1000, 1000),
        st.integers(0, 50),
    ),
    st.builds(lambda m: {"type": "integer", "multipleOf": m}, st.integers(1, 7)),
    st.builds(
        lambda lo: {"type": "number", "exclusiveMinimum": lo, "maximum": lo + 1},
        st.integers(-5, 5),
    ),
    st.just({"type": "boolean"}),
    st.just({"type": "null"}),
    st.builds(lambda vs: {"enum": vs}, st.lists(_json_ints | st.text(), min_size=1)),
    st.builds(lambda v: {"const": v}, _json_ints | st.text()),
    st.sampled_from(
        [
            {"type": "string", "format": "date-time"},
            {"type": "string", "format": "date"},
            {"type": "string", "format": "uuid"},
            {"type": "string", "format": "email"},
            {"type": ["integer", "null"]},
            {"type": "string", "nullable": True},
            {},
        ]
    ),
)


def _compound(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    names = st.text("abcdefgh", min_size=1, max_size=5)
    return st.one_of(
        st.builds(
            lambda items, lo, unique: {
                "type": "array",
                "items": items,
                "minItems": lo,
                "maxItems": lo + 3,
                **({"uniqueItems": True, "items": {"type": "integer"}} if unique else {}),
            },
            children,
            st.integers(0, 2),
            st.booleans(),
        ),
        st.builds(
            lambda props, data: {
                "type": "object",
                "properties": props,
                "required": data.draw(st.lists(st.sampled_from(sorted(props)), unique=True))
                if props
                else [],
                "additionalProperties": False,
            },
            st.dictionaries(names, children, max_size=4),
            st.data(),
        ),
        st.builds(lambda v: {"type": "object", "additionalProperties": v}, children),
        st.builds(lambda bs: {"anyOf": bs}, st.lists(children, min_size=1, max_size=3)),
        st.builds(
            lambda items: {"type": "array", "prefixItems": items, "items": False},
            st.lists(children, max_size=3),
        ),
    )


schemas = st.recursive(_scalars, _compound, max_leaves=12)


@settings(max_examples=100, deadline=None)
@given(schemas, st.integers())
def test_generated_values_are_valid_for_their_schema(schema: Any, seed: int) -> None:
    value = generate_value(schema, random.Random(seed), WORDS)
    orjson.dumps(value)
    assert violations(value, schema) == []


def test_generated_values_follow_refs_and_definitions() -> None:
    for seed in range(30):
        value = generate_value(REPORT_SCHEMA, random.Random(seed), WORDS)
        assert violations(value, REPORT_SCHEMA) == []


def test_recursive_schemas_terminate() -> None:
    tree = {
        "$ref": "#/$defs/Node",
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                },
                "required": ["name", "children"],
            }
        },
    }
    for seed in range(20):
        value = generate_value(tree, random.Random(seed), WORDS)
        assert violations(value, tree) == []


def test_same_seed_same_value() -> None:
    one = generate_value(REPORT_SCHEMA, random.Random(7), WORDS)
    assert generate_value(REPORT_SCHEMA, random.Random(7), WORDS) == one


# -- policy -------------------------------------------------------------------------------------


def _plan(body: dict[str, Any], config: SimConfig | None = None, number: int = 1) -> Reply:
    config = config or SimConfig()
    request = parse_chat_request(body)
    return plan_reply(request, config, prompt_digest(render_prompt(request), config.seed), number)


def _check_calls(reply: Reply) -> None:
    assert reply.finish_reason == "tool_calls"
    assert reply.content is None
    assert 1 <= len(reply.tool_calls) <= 2
    for call in reply.tool_calls:
        assert violations(orjson.loads(call.arguments), TOOL_SCHEMAS[call.name]) == []


@pytest.mark.parametrize("user", [f"Review file_{i}.py for bugs" for i in range(25)])
def test_first_turn_calls_offered_tools_with_valid_arguments(user: str) -> None:
    _check_calls(_plan({"messages": conversation(user), "tools": TOOLS}))


def test_tool_rounds_bound_the_tool_turns() -> None:
    config = SimConfig(tool_rounds=2)
    messages = conversation("Check parser.py")
    for _ in range(2):
        reply = _plan({"messages": messages, "tools": TOOLS}, config)
        _check_calls(reply)
        calls = [
            {"id": i, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for i, c in zip(reply.call_ids, reply.tool_calls, strict=True)
        ]
        messages = [
            *messages,
            {"role": "assistant", "content": None, "tool_calls": calls},
            *({"role": "tool", "tool_call_id": i, "content": "ok"} for i in reply.call_ids),
        ]
    final = _plan({"messages": messages, "tools": TOOLS}, config)
    assert final.finish_reason == "stop"
    assert final.tool_calls == ()
    assert final.content


def test_tool_choice_none_answers_and_required_calls() -> None:
    base = {"messages": conversation("x"), "tools": TOOLS}
    assert _plan({**base, "tool_choice": "none"}).tool_calls == ()
    config = SimConfig(tool_rounds=0)
    assert _plan(base, config).tool_calls == ()
    _check_calls(_plan({**base, "tool_choice": "required"}, config))


def test_a_named_tool_choice_calls_that_tool_once() -> None:
    choice = {"type": "function", "function": {"name": "read_file"}}
    for i in range(10):
        reply = _plan({"messages": conversation(f"q{i}"), "tools": TOOLS, "tool_choice": choice})
        assert [c.name for c in reply.tool_calls] == ["read_file"]


def test_parallel_tool_calls_false_makes_one_call_per_turn() -> None:
    for i in range(20):
        body = {"messages": conversation(f"q{i}"), "tools": TOOLS, "parallel_tool_calls": False}
        assert len(_plan(body).tool_calls) == 1


def test_some_turns_make_parallel_calls() -> None:
    counts = {
        len(_plan({"messages": conversation(f"q{i}"), "tools": TOOLS}).tool_calls)
        for i in range(40)
    }
    assert counts == {1, 2}


def test_tool_call_ids_are_unique() -> None:
    body = {"messages": conversation("same"), "tools": TOOLS, "tool_choice": "required"}
    ids = [i for n in range(30) for i in _plan(body, number=n).call_ids]
    assert len(ids) == len(set(ids))


def _arguments_by_agent(config: SimConfig, agents: int) -> list[set[tuple[str, str]]]:
    return [
        {
            (c.name, c.arguments)
            for c in _plan(
                {"messages": conversation(f"Agent {i} reviews module_{i}.py"), "tools": TOOLS},
                config,
            ).tool_calls
        }
        for i in range(agents)
    ]


def test_full_repeat_share_gives_identical_calls_across_agents() -> None:
    config = SimConfig(repeat_share=1.0, pool_size=1, max_parallel_calls=1)
    calls = _arguments_by_agent(SimConfig(**attrs.asdict(config)), 30)
    by_tool: dict[str, set[str]] = {}
    for agent in calls:
        for name, arguments in agent:
            by_tool.setdefault(name, set()).add(arguments)
    assert all(len(arguments) == 1 for arguments in by_tool.values())


def test_repeat_pool_bounds_the_distinct_arguments() -> None:
    calls = _arguments_by_agent(SimConfig(repeat_share=1.0, pool_size=3), 60)
    distinct = {call for agent in calls for call in agent}
    assert len(distinct) <= 3 * len(TOOLS)


def test_without_repeat_share_arguments_follow_the_conversation() -> None:
    calls = _arguments_by_agent(SimConfig(repeat_share=0.0, max_parallel_calls=1), 30)
    distinct = {call for agent in calls for call in agent}
    assert len(distinct) > 20


def test_response_format_schema_gives_a_valid_json_answer() -> None:
    response_format = {"type": "json_schema", "json_schema": {"name": "r", "schema": REPORT_SCHEMA}}
    for i in range(20):
        reply = _plan({"messages": conversation(f"q{i}"), "response_format": response_format})
        assert reply.finish_reason == "stop"
        assert violations(orjson.loads(reply.content or ""), REPORT_SCHEMA) == []


def test_schema_in_the_system_prompt_gives_a_valid_json_answer() -> None:
    fenced = f"Answer as JSON.\n```json\n{orjson.dumps(REPORT_SCHEMA).decode()}\n```\n"
    phrase = f"Reply with JSON matching this JSON schema: {orjson.dumps(REPORT_SCHEMA).decode()}"
    for system in (fenced, phrase):
        messages = [{"role": "system", "content": system}, {"role": "user", "content": "go"}]
        reply = _plan({"messages": messages})
        assert violations(orjson.loads(reply.content or ""), REPORT_SCHEMA) == []


@attrs.frozen
class Finding:
    line: int
    note: str | None


@attrs.frozen
class Report:
    summary: str
    severity: int
    findings: list[Finding]


def test_the_agent_loops_output_instruction_is_understood() -> None:
    instruction = LoopConfig(run_id="r", output=Report).output_instruction
    assert instruction is not None
    messages = [
        {"role": "system", "content": f"You review code.\n\n{instruction}"},
        {"role": "user", "content": "Review a.py"},
    ]
    for i in range(10):
        reply = _plan({"messages": [*messages, {"role": "user", "content": f"again {i}"}]})
        assert isinstance(structure(parse_json_text(reply.content or ""), Report), Report)


def test_find_schema_ignores_text_without_a_schema() -> None:
    assert find_schema("Use the JSON schema {not json} please") is None
    assert find_schema("```json\n[1, 2]\n```") is None
    assert find_schema('The JSON schema: {"type": "integer"}') == {"type": "integer"}


def test_plain_answers_have_the_configured_length() -> None:
    reply = _plan({"messages": conversation("hello")}, SimConfig(answer_tokens=30))
    assert reply.visible_tokens == 30
    assert reply.finish_reason == "stop"


def _reads_as_sentences(text: str) -> bool:
    """Sentences that start with a capital or a digit, end with a period, and never say the
    same word three times in a row."""
    sentences = re.split(r"(?<=\.) ", text)
    words = re.findall(r"\w[\w.-]*\w|\w", text.lower())
    stutter = any(words[i] == words[i + 1] == words[i + 2] for i in range(len(words) - 2))
    shaped = all(s.endswith(".") and (s[:1].isupper() or s[:1].isdigit()) for s in sentences)
    return bool(text) and shaped and not stutter


@pytest.mark.parametrize(
    ("question", "mentioned"),
    [
        ("What is 2 + 3?", {"2", "3"}),
        ("Summarise the history of prefix caching.", {"summarise", "history", "prefix", "caching"}),
        ("hello", {"hello"}),
    ],
)
@pytest.mark.parametrize("tokens", [48, 30, 9, 4])
def test_plain_answers_are_sentences_about_the_prompt(
    question: str, mentioned: set[str], tokens: int
) -> None:
    config = SimConfig(answer_tokens=tokens, tool_rounds=0)
    reply = _plan({"messages": conversation(question)}, config)
    text = reply.content or ""
    assert reply.visible_tokens == tokens
    assert text[:1].isupper() or text[:1].isdigit()
    assert text.endswith(".")
    assert _reads_as_sentences(text), text
    if tokens >= 9:
        assert mentioned & set(re.findall(r"\w[\w.-]*\w|\w", text.lower())), text
    assert _plan({"messages": conversation(question)}, config) == reply


def test_plain_answers_mention_the_tool_results_they_follow() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
    messages = [
        *conversation("What is 2 + 3?"),
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "5"},
    ]
    texts = {_plan({"messages": messages}, SimConfig(seed=s)).content or "" for s in range(20)}
    assert any(re.search(r"\b5\b", text) for text in texts)
    assert all(_reads_as_sentences(text) for text in texts)


def test_json_object_mode_answers_a_json_object() -> None:
    reply = _plan({"messages": conversation("hi"), "response_format": {"type": "json_object"}})
    assert isinstance(orjson.loads(reply.content or ""), dict)


def test_max_tokens_cuts_the_reply() -> None:
    reply = _plan({"messages": conversation("x"), "tools": TOOLS, "max_tokens": 3})
    assert reply.finish_reason == "length"
    assert reply.tool_calls == ()
    assert reply.completion_tokens == 3
    config = SimConfig(reasoning_tokens=10)
    reply = _plan({"messages": conversation("x"), "max_tokens": 1}, config)
    assert (reply.reasoning_tokens, reply.visible_tokens, reply.content) == (1, 0, "")


def test_reasoning_tokens_count_in_completion_tokens() -> None:
    reply = _plan({"messages": conversation("x")}, SimConfig(reasoning_tokens=12, answer_tokens=5))
    assert reply.completion_tokens == 17


def test_replies_are_deterministic_for_a_seed_and_vary_with_it() -> None:
    body = {"messages": conversation("x"), "tools": TOOLS}
    assert _plan(body, SimConfig(seed=1)) == _plan(body, SimConfig(seed=1))
    variants = {_plan(body, SimConfig(seed=s)).tool_calls for s in range(10)}
    assert len(variants) > 1


# -- faults -------------------------------------------------------------------------------------


def test_fault_injection_is_deterministic_and_retries_get_a_fresh_draw() -> None:
    digests = [prompt_digest(f"prompt {i}", 0) for i in range(2000)]
    first = FaultInjector(0.3, 0)
    outcomes = [first.decide(d) for d in digests]
    again = FaultInjector(0.3, 0)
    assert [again.decide(d) for d in digests] == outcomes
    failed = sum(o is not None for o in outcomes)
    assert 450 < failed < 750
    assert {o for o in outcomes if o is not None} == {429, 500}
    retried = [first.decide(d) for d, o in zip(digests, outcomes, strict=True) if o is not None]
    assert sum(o is None for o in retried) > failed / 2


def test_no_faults_at_rate_zero_and_all_at_rate_one() -> None:
    digests = [prompt_digest(f"p{i}", 0) for i in range(200)]
    assert all(FaultInjector(0.0, 0).decide(d) is None for d in digests)
    always = FaultInjector(1.0, 0)
    assert all(always.decide(d) is not None for d in digests for _ in range(3))


# -- requests -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ([], None),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0]"),
        ({"messages": [{"role": "user"}]}, "messages[0].content"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0]"),
        ({"messages": [{"role": "user", "content": "x"}], "tools": {}}, "tools"),
        ({"messages": [{"role": "user", "content": "x"}], "tool_choice": "maybe"}, "tool_choice"),
        (
            {
                "messages": [{"role": "user", "content": "x"}],
                "tool_choice": {"type": "function", "function": {"name": "absent"}},
            },
            "tool_choice",
        ),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, "max_tokens"),
        ({"messages": [{"role": "user", "content": "x"}], "stream": "yes"}, "stream"),
        ({"messages": [{"role": "user", "content": "x"}], "priority": 1.5}, "priority"),
        (
            {"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "xml"}},
            "response_format",
        ),
    ],
)
def test_invalid_requests_name_the_parameter(body: Any, param: str | None) -> None:
    with pytest.raises(InvalidRequest) as info:
        parse_chat_request(body)
    assert info.value.param == param


def test_priority_is_normalised_so_lower_runs_sooner() -> None:
    user = [{"role": "user", "content": "x"}]
    assert parse_chat_request({"messages": user, "priority": 3}).priority == 3
    dynamo = {"messages": user, "nvext": {"agent_hints": {"priority": 5}}}
    assert parse_chat_request(dynamo).priority == -5


def test_content_parts_are_joined_with_a_marker_per_image() -> None:
    def parts(url: str) -> list[dict[str, Any]]:
        image = {"type": "image_url", "image_url": {"url": url}}
        return [{"type": "text", "text": "a"}, image, {"type": "text", "text": "b"}]

    first, same, other = (
        parse_chat_request({"messages": [{"role": "user", "content": parts(url)}]})
        .messages[0]
        .content
        for url in ("https://x/1.png", "https://x/1.png", "data:image/png;base64,AAAA")
    )
    assert first.startswith("a[image ") and first.endswith("]b")
    assert first == same and first != other


@pytest.mark.parametrize("image", [None, {}, {"url": 3}, {"url": "file:///etc/passwd"}])
def test_an_image_part_without_a_usable_url_is_a_bad_request(image: Any) -> None:
    part = {"type": "image_url", "image_url": image}
    with pytest.raises(InvalidRequest, match="image_url"):
        parse_chat_request({"messages": [{"role": "user", "content": [part]}]})


# -- stream frames ------------------------------------------------------------------------------


def _frame_json(frame: bytes) -> Any:
    assert frame.startswith(b"data: ") and frame.endswith(b"\n\n")
    return orjson.loads(frame[6:-2])


@pytest.mark.parametrize("chunk", [1, 3, 16])
def test_stream_frames_carry_the_reply_and_its_decode_tokens(chunk: int) -> None:
    for i in range(10):
        config = SimConfig(reasoning_tokens=i % 3)
        reply = _plan({"messages": conversation(f"q{i}"), "tools": TOOLS if i % 2 else []}, config)
        usage = {"completion_tokens": reply.completion_tokens}
        frames = stream_frames("id", "m", reply, usage, chunk)
        assert sum(tokens for tokens, _ in frames) == reply.completion_tokens
        assert frames[-1][1] == b"data: [DONE]\n\n"
        chunks = [_frame_json(frame) for _, frame in frames[:-1]]
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == usage
        assert chunks[-2]["choices"][0]["finish_reason"] == reply.finish_reason
        deltas = [c["choices"][0]["delta"] for c in chunks[:-1]]
        assert deltas[0] == {"role": "assistant", "content": None}
        text = "".join(d.get("content") or "" for d in deltas)
        assert text == (reply.content or "")
        arguments: dict[int, str] = {}
        for d in deltas:
            for call in d.get("tool_calls", ()):
                arguments[call["index"]] = (
                    arguments.get(call["index"], "") + call["function"]["arguments"]
                )
        assert [arguments[i] for i in sorted(arguments)] == [c.arguments for c in reply.tool_calls]
