"""Requests built by the Anthropic codec: golden bodies, message mapping, caching, headers."""

from __future__ import annotations

from typing import Any

import attrs
import orjson
import pytest

from agentcore import ConfigError, ModelParams
from agentcore._codecs.anthropic import AnthropicCodec
from agentcore.core import (
    AssistantMessage,
    CallModel,
    Message,
    OutputSpec,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from tests.codecs.anthropic.helpers import SECRET, codec, golden

GREP = ToolSpec(
    "grep",
    "Search files for a pattern.",
    {"type": "object", "properties": {"pat": {"type": "string"}}, "required": ["pat"]},
)
READ = ToolSpec(
    "read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}
)

SYSTEM = (
    SystemMessage("You are a careful code reviewer."),
    SystemMessage("Answer in English."),
)
FIRST_TURN: tuple[Message, ...] = (*SYSTEM, UserMessage("Where are the TODOs?"))
SECOND_TURN: tuple[Message, ...] = (
    *FIRST_TURN,
    AssistantMessage(
        "Checking both.",
        (
            ToolCall("toolu_01", "grep", '{"pat": "TODO"}'),
            ToolCall("toolu_02", "read_file", '{"path":"src/a.py"}'),
        ),
    ),
    ToolMessage("toolu_01", "grep", "src/a.py:3: # TODO"),
    ToolMessage("toolu_02", "read_file", "FileNotFoundError: src/a.py", is_error=True),
)


def call(
    messages: tuple[Message, ...],
    tools: tuple[ToolSpec, ...] = (GREP, READ),
    **params: Any,
) -> CallModel:
    return CallModel("req-1", messages, tools, ModelParams(**params))


def body(request_bytes: bytes) -> Any:
    return orjson.loads(request_bytes)


def messages_of(*messages: Message, **options: Any) -> Any:
    return body(codec(**options).encode(call(messages, ())).body)["messages"]


# ----------------------------------------------------------------------------- golden bodies


def test_parallel_tool_turn_matches_golden_body() -> None:
    request = codec().encode(call(SECOND_TURN, tool_choice="auto"))
    assert request.body == golden("parallel_tools_turn.json")


def test_streamed_plain_chat_matches_golden_body() -> None:
    messages = (
        SystemMessage("Be brief."),
        UserMessage("Hi"),
        AssistantMessage("Hello."),
        UserMessage("Name a prime."),
    )
    request = codec(cache_prefix=False).encode(
        call(messages, (), max_tokens=256, temperature=0.2, top_p=0.9, stop=("\n\n", "END")),
        stream=True,
    )
    assert request.body == golden("plain_chat_streamed.json")
    assert request.stream is True


# ----------------------------------------------------------------------------- HTTP envelope


def test_request_targets_messages_endpoint_with_version_and_key() -> None:
    request = codec().encode(call(FIRST_TURN))
    assert request.method == "POST"
    assert request.url == "https://api.anthropic.test/v1/messages"
    assert dict(request.headers) == {
        "content-type": "application/json",
        "accept": "application/json",
        "anthropic-version": "2023-06-01",
        "x-api-key": SECRET,
    }
    assert request.stream is False
    assert "stream" not in body(request.body)


def test_streamed_request_asks_for_event_stream() -> None:
    request = codec().encode(call(FIRST_TURN), stream=True)
    assert dict(request.headers)["accept"] == "text/event-stream"
    assert body(request.body)["stream"] is True
    assert request.stream is True


@pytest.mark.parametrize(
    ("base_url", "url"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080/v1/messages"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/v1/messages"),
        ("https://proxy.test/anthropic", "https://proxy.test/anthropic/v1/messages"),
        ("https://proxy.test/anthropic/v1/", "https://proxy.test/anthropic/v1/messages"),
    ],
)
def test_url_appends_messages_path_to_base_url(base_url: str, url: str) -> None:
    assert AnthropicCodec(base_url, "m", None).encode(call(FIRST_TURN)).url == url


def test_version_option_sets_header() -> None:
    request = codec(version="2099-01-01").encode(call(FIRST_TURN))
    assert dict(request.headers)["anthropic-version"] == "2099-01-01"


def test_no_api_key_means_no_key_header() -> None:
    request = AnthropicCodec("http://127.0.0.1:1", "m", None).encode(call(FIRST_TURN))
    assert "x-api-key" not in dict(request.headers)


def test_api_key_never_appears_in_reprs() -> None:
    the_codec = codec()
    request = the_codec.encode(call(FIRST_TURN))
    assert SECRET not in repr(the_codec)
    assert SECRET not in str(the_codec)
    assert SECRET not in repr(request)
    assert "<redacted>" in repr(the_codec)
    assert the_codec.api_key == SECRET


# ----------------------------------------------------------------------------- options


def test_default_max_tokens_is_used_when_params_leave_it_open() -> None:
    assert body(codec().encode(call(FIRST_TURN)).body)["max_tokens"] == 4096
    assert body(codec(max_tokens=77).encode(call(FIRST_TURN)).body)["max_tokens"] == 77
    explicit = codec(max_tokens=77).encode(call(FIRST_TURN, max_tokens=12))
    assert body(explicit.body)["max_tokens"] == 12


@pytest.mark.parametrize(
    "options",
    [
        {"cache_ttl": "2h"},
        {"max_tokens": 0},
        {"max_tokens": True},
        {"max_tokens": "10"},
        {"cache_prefix": "yes"},
        {"version": ""},
    ],
)
def test_invalid_options_raise_config_error(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        codec(**options)


def test_empty_model_raises_config_error() -> None:
    with pytest.raises(ConfigError):
        AnthropicCodec("http://127.0.0.1:1", "", None)


def test_cache_ttl_is_written_into_every_breakpoint() -> None:
    sent = body(codec(cache_ttl="1h").encode(call(FIRST_TURN)).body)
    breakpoint_ = {"type": "ephemeral", "ttl": "1h"}
    assert sent["system"][-1]["cache_control"] == breakpoint_
    assert sent["tools"][-1]["cache_control"] == breakpoint_
    assert "cache_control" not in sent["system"][0]
    assert "cache_control" not in sent["tools"][0]


def test_without_cache_prefix_no_breakpoint_is_sent() -> None:
    request = codec(cache_prefix=False).encode(call(FIRST_TURN))
    assert b"cache_control" not in request.body


def test_breakpoint_goes_on_tools_alone_when_there_is_no_system_prompt() -> None:
    sent = body(codec().encode(call((UserMessage("hi"),))).body)
    assert "system" not in sent
    assert sent["tools"][-1]["cache_control"] == {"type": "ephemeral"}


# ----------------------------------------------------------------------------- tools


def test_without_tools_tool_choice_is_omitted() -> None:
    sent = body(codec().encode(call(FIRST_TURN, (), tool_choice="required")).body)
    assert "tools" not in sent
    assert "tool_choice" not in sent


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        ("grep", {"type": "tool", "name": "grep"}),
    ],
)
def test_tool_choice_maps_to_anthropic_form(choice: str, wire: dict[str, str]) -> None:
    assert body(codec().encode(call(FIRST_TURN, tool_choice=choice)).body)["tool_choice"] == wire


def test_tool_choice_left_open_is_not_sent() -> None:
    assert "tool_choice" not in body(codec().encode(call(FIRST_TURN)).body)


def test_tool_without_description_omits_it() -> None:
    sent = body(codec().encode(call(FIRST_TURN, (ToolSpec("ping"),))).body)
    assert sent["tools"] == [
        {
            "name": "ping",
            "input_schema": {"type": "object", "properties": {}},
            "cache_control": {"type": "ephemeral"},
        }
    ]


def test_schema_that_is_not_json_raises_config_error() -> None:
    bad = ToolSpec("bad", "", {"type": "object", "default": object()})
    with pytest.raises(ConfigError):
        codec().encode(call(FIRST_TURN, (bad,)))


# ----------------------------------------------------------------------------- messages


def test_parallel_tool_results_travel_in_one_user_message() -> None:
    sent = body(codec().encode(call(SECOND_TURN)).body)["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    results = sent[2]["content"]
    assert [b["type"] for b in results] == ["tool_result", "tool_result"]
    assert [b["tool_use_id"] for b in results] == ["toolu_01", "toolu_02"]
    assert "is_error" not in results[0]
    assert results[1]["is_error"] is True


def test_tool_results_lead_the_user_turn_they_share() -> None:
    sent = messages_of(
        UserMessage("go"),
        AssistantMessage(None, (ToolCall("t1", "grep", "{}"),)),
        UserMessage("Also hurry."),
        ToolMessage("t1", "grep", "nothing"),
    )
    assert sent[2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "nothing"},
            {"type": "text", "text": "Also hurry."},
        ],
    }


def test_adjacent_same_role_messages_are_merged() -> None:
    sent = messages_of(
        UserMessage("one"),
        UserMessage("two"),
        AssistantMessage("three"),
        AssistantMessage("four", (ToolCall("t1", "grep", "{}"),)),
        ToolMessage("t1", "grep", "five"),
        UserMessage("six"),
    )
    assert sent == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "three"},
                {"type": "text", "text": "four"},
                {"type": "tool_use", "id": "t1", "name": "grep", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "five"},
                {"type": "text", "text": "six"},
            ],
        },
    ]


def test_blank_text_is_left_out_and_empty_turns_vanish() -> None:
    sent = messages_of(
        UserMessage("question"),
        AssistantMessage("  \n"),
        UserMessage(""),
        UserMessage("again"),
        AssistantMessage("", (ToolCall("t1", "grep", "{}"),)),
        ToolMessage("t1", "grep", ""),
    )
    assert sent == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "question"}, {"type": "text", "text": "again"}],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "grep", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]},
    ]


def test_later_system_message_becomes_user_text() -> None:
    sent = body(
        codec()
        .encode(
            call(
                (
                    SystemMessage("rules"),
                    UserMessage("task"),
                    AssistantMessage("draft"),
                    SystemMessage("Answer now."),
                ),
                (),
            )
        )
        .body
    )
    assert sent["system"] == [
        {"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}
    ]
    assert sent["messages"][-1] == {
        "role": "user",
        "content": [{"type": "text", "text": "Answer now."}],
    }


@pytest.mark.parametrize(
    ("arguments", "sent_input"),
    [
        ('{"pat": "x", "n": [1, 2.5, null]}', {"pat": "x", "n": [1, 2.5, None]}),
        ("", {}),
        ("   ", {}),
        ('{"pat": "TO', {"_raw_arguments": '{"pat": "TO'}),
        ("[1, 2]", {"_raw_arguments": "[1, 2]"}),
        ('"just text"', {"_raw_arguments": '"just text"'}),
    ],
)
def test_tool_use_input_is_the_arguments_object_or_the_raw_text(
    arguments: str, sent_input: Any
) -> None:
    sent = messages_of(
        UserMessage("go"), AssistantMessage(None, (ToolCall("t1", "grep", arguments),))
    )
    assert sent[1]["content"][0]["input"] == sent_input


def test_call_ids_outside_the_allowed_alphabet_are_rewritten_consistently() -> None:
    sent = messages_of(
        UserMessage("go"),
        AssistantMessage(None, (ToolCall("call:7/a.b", "grep", "{}"),)),
        ToolMessage("call:7/a.b", "grep", "ok"),
    )
    assert sent[1]["content"][0]["id"] == "call_7_a_b"
    assert sent[2]["content"][0]["tool_use_id"] == "call_7_a_b"


def test_structured_output_request_is_not_sent() -> None:
    plain = codec().encode(call(FIRST_TURN))
    with_output = codec().encode(
        CallModel(
            "req-1",
            FIRST_TURN,
            (GREP, READ),
            output=OutputSpec("answer", {"type": "object"}),
        )
    )
    assert with_output.body == plain.body


def test_seed_is_not_sent() -> None:
    assert b"seed" not in codec().encode(call(FIRST_TURN, seed=7)).body


# ----------------------------------------------------------------------------- determinism


def test_encoding_is_deterministic_for_equal_calls() -> None:
    first = codec().encode(call(SECOND_TURN))
    rebuilt = call(tuple(type(m)(**_fields(m)) for m in SECOND_TURN))
    assert codec().encode(rebuilt).body == first.body
    assert codec().encode(call(SECOND_TURN)).body == first.body


def _fields(message: Message) -> dict[str, Any]:
    return attrs.asdict(message, recurse=False)


def test_next_turn_body_extends_the_previous_turns_bytes() -> None:
    first = codec().encode(call(FIRST_TURN)).body
    second = codec().encode(call(SECOND_TURN)).body
    # Everything up to the end of the first turn's last message is shared byte for byte.
    shared = first[: first.index(b'],"max_tokens"')]
    assert second.startswith(shared)
    assert len(shared) > len(first) // 2
