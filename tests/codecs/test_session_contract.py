"""The session contract (``AgentHints``: session id, parent session, final request) on the wire
of every dialect: the bytes each engine reads, and nothing where it reads nothing."""

from __future__ import annotations

import json

import attrs
import pytest

from agentcore import ConfigError
from agentcore._codecs.anthropic import AnthropicCodec
from agentcore._codecs.dialects import DIALECTS
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
def test_dialects_whose_engine_reads_no_session_send_the_same_bytes_for_any_session(
    dialect: str,
) -> None:
    c = codec(dialect)
    requests = [c.encode(tool_turn_call(hints=hints)) for hints in (PLAN, MAP, LAST)]
    # The priority differs between the hints; the dialects' priority is opt-in, so off here.
    assert len({r.body for r in requests}) == 1
    assert len({r.headers for r in requests}) == 1


def test_anthropic_sends_no_session_field() -> None:
    c = AnthropicCodec(base_url="https://api.anthropic.com", model="m", api_key="k")
    requests = [c.encode(tool_turn_call(hints=hints)) for hints in (PLAN, MAP, LAST)]
    assert len({r.body for r in requests}) == 1
    assert len({r.headers for r in requests}) == 1
