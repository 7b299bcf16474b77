"""Requests built by the OpenAI-compatible codec: golden bodies and headers per dialect."""

from __future__ import annotations

import itertools
import json
import types
from typing import Any

import attrs
import orjson
import pytest

from agentcore import ConfigError, ModelParams
from agentcore._codecs.dialects import DYNAMO_APIS, dynamo_api
from agentcore._codecs.openai import OpenAICodec
from agentcore.core import (
    AgentHints,
    AgentLoop,
    AssistantMessage,
    CallModel,
    LoopConfig,
    ModelResponded,
    OutputSpec,
    ToolCall,
    ToolReturned,
    ToolSpec,
    UserMessage,
)
from tests.codecs.openai_helpers import (
    CLOCK,
    SYSTEM,
    WEATHER,
    codec,
    dynamo_request,
    tool_turn_call,
)


@attrs.frozen
class Verdict:
    summary: str


REPORT = OutputSpec(
    "Report",
    {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]},
)


def body_of(c: OpenAICodec, call: CallModel, *, stream: bool = False) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(c.encode(call, stream=stream).body)
    return parsed


def headers_of(c: OpenAICodec, call: CallModel, *, stream: bool = False) -> dict[str, str]:
    return dict(c.encode(call, stream=stream).headers)


# ----------------------------------------------------------------------------- common body

OPENAI_TOOL_TURN = (
    b'{"model":"m",'
    b'"tools":[{"type":"function","function":{"name":"get_weather",'
    b'"description":"Current weather for a city","parameters":{"type":"object","properties":'
    b'{"city":{"type":"string"},"unit":{"type":"string"}},"required":["city"]}}},'
    b'{"type":"function","function":{"name":"get_time","description":"Current time in a time zone",'
    b'"parameters":{"type":"object","properties":{"tz":{"type":"string"}},"required":["tz"]}}}],'
    b'"messages":[{"role":"system","content":"You are terse."},'
    b'{"role":"user","content":"Weather in Paris?"},'
    b'{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",'
    b'"function":{"name":"get_weather","arguments":"{\\"city\\": \\"Paris\\"}"}}]},'
    b'{"role":"tool","tool_call_id":"call_1","content":"18 C, clear"}],'
    b'"max_tokens":64,"temperature":0.2}'
)


def test_openai_body_is_byte_exact() -> None:
    request = codec("openai").encode(tool_turn_call())
    assert request.body == OPENAI_TOOL_TURN
    assert request.method == "POST"
    assert request.url == "http://127.0.0.1:8000/v1/chat/completions"
    assert request.stream is False


def test_openai_headers() -> None:
    c = OpenAICodec(base_url="https://api.example.com/v1/", model="m", api_key="sk-test")
    request = c.encode(tool_turn_call())
    assert request.url == "https://api.example.com/v1/chat/completions"
    assert request.headers == (
        ("content-type", "application/json"),
        ("authorization", "Bearer sk-test"),
        ("accept", "application/json"),
    )


def test_all_sampling_parameters_and_tool_choice() -> None:
    params = ModelParams(
        max_tokens=10, temperature=0.0, top_p=0.5, tool_choice="required", stop=("END",), seed=7
    )
    body = body_of(codec(), tool_turn_call(params=params))
    assert {
        k: body[k] for k in ("tool_choice", "max_tokens", "temperature", "top_p", "stop", "seed")
    } == {
        "tool_choice": "required",
        "max_tokens": 10,
        "temperature": 0.0,
        "top_p": 0.5,
        "stop": ["END"],
        "seed": 7,
    }


def test_tool_choice_is_not_sent_without_tools() -> None:
    call = CallModel("r", (UserMessage("hi"),), params=ModelParams(tool_choice="none"))
    assert "tool_choice" not in body_of(codec(), call)
    assert "tools" not in body_of(codec(), call)


def test_max_completion_tokens_field_option() -> None:
    body = body_of(codec(max_tokens_field="max_completion_tokens"), tool_turn_call())
    assert body["max_completion_tokens"] == 64
    assert "max_tokens" not in body


def test_unset_parameters_are_omitted() -> None:
    call = CallModel("r", (UserMessage("hi"),))
    assert body_of(codec(), call) == {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_assistant_text_reply_and_empty_reply_are_encoded() -> None:
    call = CallModel(
        "r", (UserMessage("a"), AssistantMessage("text"), AssistantMessage(None), UserMessage("b"))
    )
    assert body_of(codec(), call)["messages"][1:3] == [
        {"role": "assistant", "content": "text"},
        {"role": "assistant", "content": ""},
    ]


def test_tool_without_description_omits_it() -> None:
    call = CallModel("r", (UserMessage("a"),), tools=(ToolSpec("ping"),))
    assert body_of(codec(), call)["tools"] == [
        {
            "type": "function",
            "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}},
        }
    ]


def test_streaming_request_asks_for_usage() -> None:
    request = codec().encode(tool_turn_call(), stream=True)
    body = json.loads(request.body)
    assert (body["stream"], body["stream_options"]) == (True, {"include_usage": True})
    assert request.stream is True
    assert dict(request.headers)["accept"] == "text/event-stream"
    assert "stream_options" not in body_of(codec(stream_usage=False), tool_turn_call(), stream=True)


def test_non_dict_mappings_in_schemas_are_serialized() -> None:
    tool = ToolSpec("t", parameters=types.MappingProxyType({"type": "object", "required": ("a",)}))
    call = CallModel("r", (UserMessage("a"),), tools=(tool,))
    assert body_of(codec(), call)["tools"][0]["function"]["parameters"] == {
        "type": "object",
        "required": ["a"],
    }


def test_unserializable_schema_raises_config_error() -> None:
    call = CallModel("r", (UserMessage("a"),), tools=(ToolSpec("t", parameters={"x": object()}),))
    with pytest.raises(ConfigError, match="not JSON-serializable"):
        codec().encode(call)


def test_extra_body_and_extra_headers_are_appended() -> None:
    c = codec(
        "vllm",
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
        extra_headers={"X-Tenant": "a"},
    )
    request = c.encode(tool_turn_call())
    body = json.loads(request.body)
    assert list(body)[-1] == "chat_template_kwargs"
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert dict(request.headers)["x-tenant"] == "a"


# ----------------------------------------------------------------------------- determinism


def test_same_call_gives_the_same_bytes() -> None:
    c = codec("dynamo")
    assert c.encode(tool_turn_call()).body == c.encode(tool_turn_call()).body


def test_agents_sharing_a_prefix_share_the_leading_bytes() -> None:
    c = codec("vllm", priority=True)
    hints_a = AgentHints(session_id="a", priority=1)
    hints_b = AgentHints(session_id="b", turn=3, priority=9)
    shared = (SYSTEM, UserMessage("Review this file:\n\n"))
    a = CallModel("ra", (*shared, UserMessage("alpha.py")), tools=(WEATHER, CLOCK), hints=hints_a)
    b = CallModel("rb", (*shared, UserMessage("beta.py")), tools=(WEATHER, CLOCK), hints=hints_b)
    body_a, body_b = c.encode(a).body, c.encode(b).body
    prefix = orjson.dumps(
        {"model": "m", "tools": body_of(c, a)["tools"], "messages": body_of(c, a)["messages"][:2]}
    )[:-2]  # drop the closing "]}": the message list continues
    assert body_a.startswith(prefix)
    assert body_b.startswith(prefix)
    assert body_a != body_b


# ----------------------------------------------------------------------------- response_format


@pytest.mark.parametrize(
    ("dialect", "with_tools", "without_tools"),
    [
        ("openai", True, True),
        ("sim", True, True),
        ("vllm", False, True),
        ("sglang", False, True),
        ("dynamo", False, False),
    ],
)
def test_response_format_defaults_per_dialect(
    dialect: str, with_tools: bool, without_tools: bool
) -> None:
    c = codec(dialect)
    tool_call = tool_turn_call()
    tool_call = CallModel(tool_call.request_id, tool_call.messages, tool_call.tools, output=REPORT)
    bare = CallModel("r", (UserMessage("answer"),), output=REPORT)
    assert ("response_format" in body_of(c, tool_call)) is with_tools
    assert ("response_format" in body_of(c, bare)) is without_tools


@pytest.mark.parametrize(
    ("dialect", "on_tool_turns"),
    [("openai", True), ("sim", True), ("vllm", False), ("sglang", False), ("dynamo", False)],
)
def test_a_run_with_tools_and_an_output_type_gets_response_format_as_its_mode_says(
    dialect: str, on_tool_turns: bool
) -> None:
    # From the loop to the wire: "always" (openai, sim) means every request, tools or not;
    # "without_tools" (vllm, sglang) only the final request; "never" (dynamo) none.
    tool = ToolSpec("get_weather", "Weather.", {"type": "object", "properties": {}})
    config = LoopConfig(run_id="r", tools=[tool], output=Verdict, max_turns=1)
    loop = AgentLoop(config, [UserMessage("go")])
    (first,) = loop.start()
    assert isinstance(first, CallModel)
    loop.handle(
        ModelResponded(first.request_id, AssistantMessage(tool_calls=[ToolCall("c", tool.name)]))
    )
    (final,) = loop.handle(ToolReturned("c", "sunny"))
    assert isinstance(final, CallModel) and final.hints.final
    c = codec(dialect)
    first_body = body_of(c, first)
    assert first_body["tools"]
    assert ("response_format" in first_body) is on_tool_turns
    assert ("response_format" in body_of(c, final)) is (dialect != "dynamo")


def test_response_format_shape_and_strict_option() -> None:
    call = CallModel("r", (UserMessage("answer"),), output=REPORT)
    assert body_of(codec("sim"), call)["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Report", "schema": dict(REPORT.schema), "strict": False},
    }
    strict = body_of(codec(strict_output=True), call)["response_format"]
    assert strict["json_schema"]["strict"] is True


def test_response_format_without_tools_mode_sends_it_when_tools_are_disabled() -> None:
    base = tool_turn_call(params=ModelParams(tool_choice="none"))
    call = CallModel(base.request_id, base.messages, base.tools, base.params, output=REPORT)
    assert "response_format" in body_of(codec("vllm"), call)


def test_response_format_can_be_forced_on_or_off() -> None:
    base = tool_turn_call()
    call = CallModel(base.request_id, base.messages, base.tools, output=REPORT)
    assert "response_format" in body_of(codec("dynamo", response_format=True), call)
    assert "response_format" not in body_of(codec("openai", response_format="never"), call)


# ----------------------------------------------------------------------------- vLLM / SGLang / sim


def test_vllm_golden_body_and_headers() -> None:
    c = codec("vllm", priority=True, cache_salt="tenant-a")
    call = tool_turn_call(hints=AgentHints(session_id="run-1", turn=2, priority=5))
    body = body_of(c, call)
    assert list(body)[-2:] == ["priority", "cache_salt"]
    assert (body["priority"], body["cache_salt"]) == (-5, "tenant-a")
    assert headers_of(c, call)["x-request-id"] == "req-1"
    assert "nvext" not in body and "rid" not in body


def test_vllm_priority_is_off_by_default() -> None:
    c = codec("vllm")
    assert "priority" not in body_of(c, tool_turn_call())
    assert headers_of(c, tool_turn_call())["x-request-id"] == "req-1"


def test_sglang_golden_body() -> None:
    c = codec("sglang", priority=True)
    call = tool_turn_call(hints=AgentHints(session_id="run-1", turn=2, priority=5))
    body = body_of(c, call)
    assert list(body)[-2:] == ["rid", "priority"]
    assert (body["rid"], body["priority"]) == ("req-1", 5)
    assert "x-request-id" not in headers_of(c, call)


def test_sglang_without_priority_still_sends_rid() -> None:
    body = body_of(codec("sglang"), tool_turn_call())
    assert body["rid"] == "req-1"
    assert "priority" not in body


def test_sim_sends_request_id_header_and_no_priority() -> None:
    c = codec("sim")
    call = tool_turn_call()
    assert "priority" not in body_of(c, call)
    assert headers_of(c, call)["x-request-id"] == "req-1"


def test_sim_defaults_an_empty_model_name() -> None:
    c = OpenAICodec(base_url="http://127.0.0.1:1/v1", model="", dialect="sim")
    assert body_of(c, tool_turn_call())["model"] == "sim"
    with pytest.raises(ConfigError, match="model"):
        OpenAICodec(base_url="http://127.0.0.1:1/v1", model="", dialect="vllm")


# ----------------------------------------------------------------------------- Dynamo


def test_dynamo_default_hints_and_session_headers() -> None:
    hints = AgentHints(
        session_id="run-1",
        parent_session_id="run-0",
        turn=4,
        priority=7,
        expected_output_tokens=300,
        final=True,
    )
    c = codec("dynamo")
    call = tool_turn_call(hints=hints)
    body = body_of(c, call)
    assert body["nvext"] == {"agent_hints": {"priority": 7, "osl": 300}}
    assert list(body)[-1] == "nvext"
    headers = headers_of(c, call)
    assert {k: v for k, v in headers.items() if k.startswith("x-")} == {
        "x-request-id": "req-1",
        "x-dynamo-session-id": "run-1",
        "x-dynamo-parent-session-id": "run-0",
        "x-dynamo-session-final": "true",
    }


def test_dynamo_omits_final_and_parent_when_not_applicable() -> None:
    hints = AgentHints(session_id="run-1", parent_session_id="run-1", priority=1)
    headers = headers_of(codec("dynamo"), tool_turn_call(hints=hints))
    assert "x-dynamo-parent-session-id" not in headers
    assert "x-dynamo-session-final" not in headers


def test_dynamo_priority_is_not_negated() -> None:
    hints = AgentHints(session_id="s", priority=-4)
    assert body_of(codec("dynamo"), tool_turn_call(hints=hints))["nvext"]["agent_hints"] == {
        "priority": -4
    }


def test_dynamo_priority_is_clamped_to_i32() -> None:
    hints = AgentHints(session_id="s", priority=2**40)
    hints_out = body_of(codec("dynamo"), tool_turn_call(hints=hints))["nvext"]["agent_hints"]
    assert hints_out["priority"] == 2**31 - 1


def test_dynamo_all_options() -> None:
    def replay_key(call: CallModel) -> list[str]:
        return [f"output_replay_id:{call.hints.session_id}-{call.hints.turn}"]

    c = codec(
        "dynamo",
        extra_fields=["timing", "worker_id"],
        annotations=replay_key,
        speculative_prefill=True,
        strict_priority=2,
        cache_salt="tenant-a",
    )
    hints = AgentHints(session_id="run-1", turn=3, priority=2, expected_output_tokens=64)
    assert body_of(c, tool_turn_call(hints=hints))["nvext"] == {
        "annotations": ["output_replay_id:run-1-3"],
        "extra_fields": ["timing", "worker_id"],
        "cache_salt": "tenant-a",
        "agent_hints": {
            "priority": 2,
            "strict_priority": 2,
            "osl": 64,
            "speculative_prefill": True,
        },
    }


def test_dynamo_latency_sensitivity_replaces_priority() -> None:
    c = codec("dynamo", latency_sensitivity=1.2)
    assert body_of(c, tool_turn_call())["nvext"] == {"agent_hints": {"latency_sensitivity": 1.2}}
    with pytest.raises(ConfigError, match="latency_sensitivity and priority"):
        codec("dynamo", latency_sensitivity=1.2, priority=True)


def test_dynamo_without_hints_sends_no_nvext_and_no_session_headers() -> None:
    c = codec("dynamo", priority=False, osl=False, session_headers=False, request_id_header=False)
    request = c.encode(tool_turn_call(hints=AgentHints(session_id="s", expected_output_tokens=5)))
    assert "nvext" not in json.loads(request.body)
    assert not [name for name, _ in request.headers if name.startswith("x-")]


def test_dynamo_request_matches_the_captured_accepted_request() -> None:
    # tool.json was sent to a real Dynamo 1.6.1 frontend and answered with 200.
    c = OpenAICodec(
        base_url="http://127.0.0.1:18000/v1",
        model="tiny-mock",
        dialect="dynamo",
        priority=False,
        annotations=["output_replay_id:lookup"],
    )
    call = CallModel(
        "req-1",
        (SYSTEM, UserMessage("Weather and time in Paris?")),
        tools=(WEATHER, CLOCK),
        params=ModelParams(max_tokens=64),
        hints=AgentHints(session_id="run-1"),
    )
    assert body_of(c, call) == dynamo_request("tool.json")
    streamed = body_of(c, call, stream=True)
    assert streamed == dynamo_request("tool-stream.json")


def test_dynamo_hints_request_matches_the_captured_accepted_request() -> None:
    c = OpenAICodec(
        base_url="http://127.0.0.1:18000/v1",
        model="tiny-mock",
        dialect="dynamo",
        annotations=["output_replay_id:greet"],
        strict_priority=1,
        speculative_prefill=True,
        cache_salt="tenant-a",
    )
    call = CallModel(
        "req-7",
        (SYSTEM, UserMessage("What is the answer?")),
        params=ModelParams(max_tokens=32),
        hints=AgentHints(
            session_id="run-1", parent_session_id="run-0", priority=5, expected_output_tokens=32,
            final=True,
        ),
    )  # fmt: skip
    assert body_of(c, call) == dynamo_request("hints.json")
    assert {k: v for k, v in headers_of(c, call).items() if k.startswith("x-")} == {
        "x-request-id": "req-7",
        "x-dynamo-session-id": "run-1",
        "x-dynamo-parent-session-id": "run-0",
        "x-dynamo-session-final": "true",
    }


def _dynamo_option_sets() -> list[dict[str, Any]]:
    sets = []
    for prio, spec, fields, ann, strict in itertools.product(
        (True, False), (True, False), ((), ("timing",), ("timing", "worker_id")),
        ((), ("output_replay_id:k",)), (None, 0, 3),
    ):  # fmt: skip
        sets.append(
            {"priority": prio, "speculative_prefill": spec, "extra_fields": list(fields),
             "annotations": list(ann), "strict_priority": strict}
        )  # fmt: skip
    sets.append({"priority": False, "latency_sensitivity": 2.5})
    return sets


@pytest.mark.parametrize("version", sorted(DYNAMO_APIS))
def test_every_emitted_dynamo_key_is_in_the_version_table(version: str) -> None:
    api = DYNAMO_APIS[version]
    hints = AgentHints(session_id="s", parent_session_id="p", priority=3, expected_output_tokens=9)
    base = tool_turn_call(hints=hints)
    for option_set in _dynamo_option_sets():
        options = dict(option_set)
        if "cache_salt" in api.nvext_keys:
            options["cache_salt"] = "t"
        c = codec("dynamo", dynamo_version=version, **options)
        for stream in (False, True):
            call = CallModel(base.request_id, base.messages, base.tools, base.params, hints, REPORT)
            body = body_of(c, call, stream=stream)
            assert set(body) <= api.top_level_keys, options
            nvext = body.get("nvext", {})
            assert set(nvext) <= api.nvext_keys, options
            assert set(nvext.get("agent_hints", {})) <= api.hint_keys, options
            assert set(nvext.get("extra_fields", [])) <= api.extra_fields, options
            assert "agent_context" not in nvext


def test_dynamo_version_parsing() -> None:
    assert dynamo_api("1.6.1").version == (1, 6)
    assert dynamo_api("1.3").version == (1, 3)
    assert dynamo_api("2.0").version == max(api.version for api in DYNAMO_APIS.values())
    for bad in ("1.2", "1.1.0", "0.9"):
        with pytest.raises(ConfigError, match=r"before 1\.3"):
            codec("dynamo", dynamo_version=bad)
    with pytest.raises(ConfigError, match="dynamo_version"):
        codec("dynamo", dynamo_version="latest")


def test_dynamo_cache_salt_needs_a_release_known_to_accept_it() -> None:
    with pytest.raises(ConfigError, match="cache_salt"):
        codec("dynamo", dynamo_version="1.5", cache_salt="t")


# ----------------------------------------------------------------------------- option errors


@pytest.mark.parametrize(
    ("dialect", "options", "match"),
    [
        ("openai", {"priority": True}, "not supported by the openai dialect"),
        ("vllm", {"extra_fields": ["timing"]}, "not supported by the vllm dialect"),
        ("sglang", {"annotations": ["a"]}, "not supported"),
        ("nonsense", {}, "unknown OpenAI-compatible dialect"),
        ("vllm", {"priority": "yes"}, "priority must be True or False"),
        ("vllm", {"cache_salt": ""}, "cache_salt"),
        ("openai", {"response_format": "sometimes"}, "response_format"),
        ("openai", {"max_tokens_field": "limit"}, "max_tokens_field"),
        ("openai", {"extra_body": {"model": "x"}}, "extra_body may not set"),
        ("openai", {"extra_body": ["x"]}, "extra_body must be a mapping"),
        ("openai", {"extra_headers": {"x-a": "b\r\nx-evil: 1"}}, "control character"),
        ("dynamo", {"extra_body": {"priority_class": 1}}, "refused by Dynamo"),
        ("dynamo", {"extra_fields": ["routed_experts"]}, "extra_fields"),
        ("dynamo", {"strict_priority": -1}, "strict_priority"),
        ("dynamo", {"latency_sensitivity": "high", "priority": False}, "latency_sensitivity"),
        ("dynamo", {"annotations": "output_replay_id:k"}, "annotations"),
        ("dynamo", {"annotations": [1]}, "annotations"),
    ],
)
def test_bad_options_raise_config_error(dialect: str, options: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        codec(dialect, **options)


def test_session_id_with_newline_is_refused() -> None:
    call = tool_turn_call(hints=AgentHints(session_id="a\r\nx-evil: 1"))
    with pytest.raises(ConfigError, match="control character"):
        codec("dynamo").encode(call)


def test_annotations_hook_returning_garbage_is_refused() -> None:
    c = codec("dynamo", annotations=lambda call: "not-a-list")
    with pytest.raises(ConfigError, match="annotations"):
        c.encode(tool_turn_call())


# ----------------------------------------------------------------------------- secrets


def test_api_key_never_shows_in_reprs() -> None:
    secret = "sk-very-secret-123"
    c = OpenAICodec(
        base_url="https://api.example.com/v1", model="m", api_key=secret, dialect="vllm"
    )
    request = c.encode(tool_turn_call())
    assert ("authorization", f"Bearer {secret}") in request.headers
    for text in (repr(c), str(c), repr(request), repr(c.options)):
        assert secret not in text
    rebound = c.with_base_url("http://127.0.0.1:9/v1")
    assert secret not in repr(rebound)
    assert rebound.encode(tool_turn_call()).url == "http://127.0.0.1:9/v1/chat/completions"
    assert ("authorization", f"Bearer {secret}") in rebound.encode(tool_turn_call()).headers


def test_a_tool_forced_by_name_is_sent_in_the_object_form() -> None:
    body = body_of(codec(), tool_turn_call(params=ModelParams(tool_choice="get_weather")))
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
