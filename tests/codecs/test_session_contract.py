"""The session contract (``AgentHints``: session id, parent session, final request) on the wire
of every dialect: the bytes each engine reads, and nothing where it reads nothing."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from agentcore import ConfigError
from agentcore._codecs.anthropic import AnthropicCodec
from agentcore._codecs.dialects import DIALECTS, ROUTER_SESSION_HEADERS
from agentcore.core import AgentHints, SystemMessage
from agentcore.wire import backend
from tests.codecs.openai_helpers import codec, tool_turn_call
from tests.codecs.test_openai_request import OPENAI_TOOL_TURN

OPENAI_TOOL_TURN_KEY = (
    OPENAI_TOOL_TURN[:-1] + b',"prompt_cache_key":"agentcore-08e898f53604c2b332e896c8"}'
)
"""The golden request of the OpenAI dialect with the key derived from its tools and system
prompt (``prompt_cache_key=True``)."""

PLAN = AgentHints(session_id="batch-p-0", turn=0, priority=0)
MAP = AgentHints(session_id="batch-m-3", parent_session_id="batch-p-0", turn=2, priority=2)
LAST = attrs.evolve(MAP, turn=3, final=True)


def session_headers(headers: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k.startswith("x-dynamo-session")] + [
        (k, v) for k, v in headers if k.startswith("x-dynamo-parent")
    ]


def test_dynamo_sends_the_session_parent_and_final_request_as_headers() -> None:
    c = codec("dynamo")
    assert session_headers(c.encode(tool_turn_call(hints=PLAN)).headers) == [
        ("x-dynamo-session-id", "batch-p-0")
    ]
    assert session_headers(c.encode(tool_turn_call(hints=MAP)).headers) == [
        ("x-dynamo-session-id", "batch-m-3"),
        ("x-dynamo-parent-session-id", "batch-p-0"),
    ]
    assert session_headers(c.encode(tool_turn_call(hints=LAST)).headers) == [
        ("x-dynamo-session-id", "batch-m-3"),
        ("x-dynamo-session-final", "true"),
        ("x-dynamo-parent-session-id", "batch-p-0"),
    ]
    # Never in the body: current Dynamo answers nvext.agent_context with HTTP 400.
    for hints in (PLAN, MAP, LAST):
        body = c.encode(tool_turn_call(hints=hints)).body
        assert b"agent_context" not in body and b"session" not in body


def test_openai_sends_one_prompt_cache_key_per_shared_prefix() -> None:
    c = codec("openai", prompt_cache_key=True)
    request = c.encode(tool_turn_call(hints=MAP))
    assert request.body == OPENAI_TOOL_TURN_KEY
    # Every agent of the task, on every turn, has the same key: the key names the prefix.
    for hints in (PLAN, LAST):
        assert (
            json.loads(c.encode(tool_turn_call(hints=hints)).body)["prompt_cache_key"]
            == (json.loads(request.body)["prompt_cache_key"])
        )
    # Another system prompt (another task) is another prefix, another key.
    other = tool_turn_call()
    other = attrs.evolve(other, messages=(SystemMessage("Be verbose."), *other.messages[1:]))
    assert (
        json.loads(c.encode(other).body)["prompt_cache_key"]
        != (json.loads(request.body)["prompt_cache_key"])
    )


def test_openai_prompt_cache_key_can_be_given_or_left_off() -> None:
    given = json.loads(codec("openai", prompt_cache_key="tenant-a").encode(tool_turn_call()).body)
    assert given["prompt_cache_key"] == "tenant-a"
    assert b"prompt_cache_key" not in codec("openai").encode(tool_turn_call()).body
    with pytest.raises(ConfigError, match="prompt_cache_key"):
        codec("openai", prompt_cache_key="")
    with pytest.raises(ConfigError, match="not supported"):
        codec("vllm", prompt_cache_key=True)


def test_the_openai_api_itself_gets_the_prompt_cache_key_by_default() -> None:
    configured = backend("openai://", model="gpt-test", api_key="sk-test")
    assert configured.codec.options.prompt_cache_key is True  # type: ignore[attr-defined]
    plain = backend("http://127.0.0.1:8000/v1", model="m")
    assert plain.codec.options.prompt_cache_key is False  # type: ignore[attr-defined]


@pytest.mark.parametrize("dialect", [d for d, r in DIALECTS.items() if r.session is None])
def test_dialects_whose_engine_reads_no_session_send_it_only_in_the_router_headers(
    dialect: str,
) -> None:
    c = codec(dialect)
    requests = [c.encode(tool_turn_call(hints=hints)) for hints in (PLAN, MAP, LAST)]
    # The priority differs between the hints; the dialects' priority is opt-in, so off here.
    assert len({r.body for r in requests}) == 1
    # The headers differ only in the session key a router in front of replicas hashes on.
    routed = set(ROUTER_SESSION_HEADERS)
    assert len({tuple(h for h in r.headers if h[0] not in routed) for r in requests}) == 1
    for request, hints in zip(requests, (PLAN, MAP, LAST), strict=True):
        assert [(k, v) for k, v in request.headers if k in routed] == [
            (name, hints.session_id) for name in ROUTER_SESSION_HEADERS
        ]


def test_the_router_headers_are_what_vllm_router_and_sglang_router_hash_on() -> None:
    # vllm-router 0.1.17 (src/policies/hash_key.rs): x-session-id first, before the
    # per-request x-request-id agentcore also sends; sglang-router: x-smg-routing-key.
    assert ROUTER_SESSION_HEADERS == ("x-session-id", "x-smg-routing-key")


@pytest.mark.parametrize(
    ("url", "options", "sent"),
    [
        ("vllm://127.0.0.1:8000", {}, ROUTER_SESSION_HEADERS),
        ("sglang://127.0.0.1", {}, ROUTER_SESSION_HEADERS),
        ("llamacpp://127.0.0.1", {}, ROUTER_SESSION_HEADERS),
        ("sim://", {}, ROUTER_SESSION_HEADERS),
        ("http://10.0.0.5:8000/v1", {}, ROUTER_SESSION_HEADERS),
        ("http://10.0.0.5:8000/v1", {"dialect": "vllm"}, ROUTER_SESSION_HEADERS),
        ("https://api.example.com/v1", {}, ()),
        ("openai://", {"api_key": "sk-test"}, ()),
        ("dynamo://127.0.0.1", {}, ()),
        ("vllm://127.0.0.1:8000", {"session_key_header": "X-Affinity"}, ("x-affinity",)),
        ("dynamo://127.0.0.1", {"session_key_header": ["x-session-id"]}, ("x-session-id",)),
        ("openai://", {"api_key": "sk-test", "session_key_header": "x-session-id"},
         ("x-session-id",)),
        ("vllm://127.0.0.1:8000", {"session_key_header": None}, ()),
        ("sglang://127.0.0.1", {"session_key_header": False}, ()),
    ],
)  # fmt: skip
def test_self_hosted_servers_get_the_session_key_header_by_default_and_any_dialect_on_request(
    url: str, options: dict[str, Any], sent: tuple[str, ...]
) -> None:
    configured = backend(url, model="m", **options)
    headers = configured.codec.encode(tool_turn_call(hints=MAP)).headers
    names = {name for name, _ in headers}
    assert [(k, v) for k, v in headers if k in {*sent, *ROUTER_SESSION_HEADERS}] == [
        (name, "batch-m-3") for name in sent
    ]
    assert names >= set(sent)


def test_a_request_without_a_session_sends_no_session_key() -> None:
    request = codec("vllm").encode(tool_turn_call(hints=AgentHints(session_id="")))
    assert not {name for name, _ in request.headers} & set(ROUTER_SESSION_HEADERS)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("x session", "not an HTTP header name"),
        ("", "not an HTTP header name"),
        (["x-a", 3], "a header name, a list of them or None"),
        (7, "a header name, a list of them or None"),
        ("x-request-id", "writes that header itself"),
        ("Authorization", "writes that header itself"),
        ("x-dynamo-session-id", "writes that header itself"),
    ],
)
def test_a_bad_session_key_header_is_refused_naming_the_option(value: object, match: str) -> None:
    with pytest.raises(ConfigError, match=f"session_key_header.*{match}|{match}"):
        codec("vllm", session_key_header=value)


def test_anthropic_sends_no_session_field() -> None:
    c = AnthropicCodec(base_url="https://api.anthropic.com", model="m", api_key="k")
    requests = [c.encode(tool_turn_call(hints=hints)) for hints in (PLAN, MAP, LAST)]
    assert len({r.body for r in requests}) == 1
    assert len({r.headers for r in requests}) == 1
