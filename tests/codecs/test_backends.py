"""Backend selection by URL: base URLs, dialects, transports, keys and configuration errors."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

import agentcore
from agentcore import ConfigError
from agentcore._codecs.anthropic import AnthropicCodec
from agentcore._codecs.openai import OpenAICodec
from agentcore.core import OutputSpec
from agentcore.sim import SimConfig
from agentcore.wire import Backend, backend
from tests.codecs.openai_helpers import tool_turn_call


@pytest.fixture(autouse=True)
def _no_keys_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


URL_TABLE = [
    ("vllm://127.0.0.1:8000", {}, ("vllm", "http://127.0.0.1:8000/v1", "lean", True)),
    ("vllm://gpu-box", {}, ("vllm", "http://gpu-box:8000/v1", "lean", True)),
    ("sglang://10.0.0.2", {}, ("sglang", "http://10.0.0.2:30000/v1", "lean", True)),
    ("dynamo://127.0.0.1:18000", {}, ("dynamo", "http://127.0.0.1:18000/v1", "lean", True)),
    ("dynamo://h:1/custom/v1/", {}, ("dynamo", "http://h:1/custom/v1", "lean", True)),
    ("vllm://[::1]:9000", {}, ("vllm", "http://[::1]:9000/v1", "lean", True)),
    ("http://127.0.0.1:9000/v1", {}, ("openai", "http://127.0.0.1:9000/v1", "lean", True)),
    ("http://127.0.0.1:9000", {}, ("openai", "http://127.0.0.1:9000/v1", "lean", True)),
    (
        "https://api.example.com/ai/v1",
        {},
        ("openai", "https://api.example.com/ai/v1", "httpx", False),
    ),
    ("http://h:1/v1", {"dialect": "sglang"}, ("sglang", "http://h:1/v1", "lean", True)),
    ("https://h/v1", {"transport": "lean"}, ("openai", "https://h/v1", "lean", False)),
    ("openai://gw.local:8443", {}, ("openai", "https://gw.local:8443/v1", "httpx", False)),
    ("VLLM://127.0.0.1:8000", {}, ("vllm", "http://127.0.0.1:8000/v1", "lean", True)),
]


@pytest.mark.parametrize(("url", "options", "expected"), URL_TABLE)
def test_url_selects_dialect_base_url_and_transport(
    url: str, options: dict[str, Any], expected: tuple[str, str, str, bool]
) -> None:
    b = backend(url, model="m", **options)
    assert (b.name, b.base_url, b.transport, b.self_hosted) == expected
    assert isinstance(b.codec, OpenAICodec)
    assert b.codec.dialect == b.name
    assert b.codec.encode(tool_turn_call()).url == f"{b.base_url}/chat/completions"


def test_backend_is_exported() -> None:
    assert agentcore.wire.backend is backend
    assert agentcore.wire.Backend is Backend


def test_openai_scheme_uses_the_environment_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-secret")
    b = backend("openai://", model="gpt-4o")
    assert (b.name, b.base_url, b.transport, b.self_hosted) == (
        "openai",
        "https://api.openai.com/v1",
        "httpx",
        False,
    )
    request = b.codec.encode(tool_turn_call())
    assert ("authorization", "Bearer sk-env-secret") in request.headers
    assert "max_completion_tokens" in json.loads(request.body)
    for text in (repr(b), str(b.options), repr(b.codec), repr(request)):
        assert "sk-env-secret" not in text


def test_explicit_key_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    b = backend("openai://", model="gpt-4o", api_key="sk-arg")
    assert ("authorization", "Bearer sk-arg") in b.codec.encode(tool_turn_call()).headers


def test_openai_without_a_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        backend("openai://", model="gpt-4o")


def test_environment_key_is_not_sent_to_other_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    for url in ("https://other.example.com/v1", "openai://gateway.local", "vllm://h:1"):
        headers = dict(backend(url, model="m").codec.encode(tool_turn_call()).headers)
        assert "authorization" not in headers, url


def test_key_for_a_self_hosted_server() -> None:
    b = backend("vllm://h:1", model="m", api_key="token-abc")
    assert ("authorization", "Bearer token-abc") in b.codec.encode(tool_turn_call()).headers
    assert "token-abc" not in repr(b)
    assert "token-abc" not in repr(b.options)


def test_anthropic_scheme(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    b = backend("anthropic://", model="claude-x")
    assert (b.name, b.base_url, b.transport, b.self_hosted) == (
        "anthropic",
        "https://api.anthropic.com",
        "httpx",
        False,
    )
    assert isinstance(b.codec, AnthropicCodec)
    assert b.codec.api_key == "sk-ant-secret"
    assert "sk-ant-secret" not in repr(b)
    assert "sk-ant-secret" not in repr(b.codec)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        monkeypatch.delenv("ANTHROPIC_API_KEY")
        backend("anthropic://", model="claude-x")


def test_anthropic_dialect_on_a_plain_url_and_its_options() -> None:
    b = backend("http://127.0.0.1:8000", model="m", dialect="anthropic", cache_prefix=False)
    assert isinstance(b.codec, AnthropicCodec)
    assert (b.name, b.base_url, b.transport) == ("anthropic", "http://127.0.0.1:8000", "lean")
    with pytest.raises(ConfigError, match="anthropic"):
        backend("http://127.0.0.1:8000", model="m", dialect="anthropic", priority=True)


def test_dialect_options_reach_the_codec() -> None:
    b = backend("vllm://h:1", model="m", priority=True, cache_salt="t")
    body = json.loads(b.codec.encode(tool_turn_call()).body)
    assert (body["priority"], body["cache_salt"]) == (-3, "t")
    assert b.options == {"priority": True, "cache_salt": "t"}


def test_stream_option_sets_the_default() -> None:
    b = backend("dynamo://h:1", model="m", stream=True)
    assert b.stream is True
    assert backend("dynamo://h:1", model="m").stream is False


def test_sim_scheme_is_left_for_the_driver() -> None:
    config = SimConfig(seed=3)
    b = backend("sim://", model="", config=config, priority=True)
    assert (b.name, b.base_url, b.transport, b.self_hosted) == ("sim", "sim://", "lean", True)
    assert b.options["config"] is config
    assert b.model == "sim"  # the model the codec sends: the sim dialect's default
    with pytest.raises(ConfigError, match="config must be a SimConfig"):
        backend("sim://", model="", config={"seed": 3})
    assert isinstance(b.codec, OpenAICodec)
    assert (b.codec.dialect, b.codec.model) == ("sim", "sim")
    bound = backend("http://127.0.0.1:4321/v1", model="", dialect="sim")
    assert bound.codec.encode(tool_turn_call()).url == "http://127.0.0.1:4321/v1/chat/completions"


def test_a_configured_backend_is_returned_unchanged() -> None:
    b = backend("vllm://h:1", model="m")
    assert backend(b) is b
    assert backend(b, model="m") is b
    with pytest.raises(ConfigError, match="configured for model 'm'"):
        backend(b, model="another")  # it would be sent as "m" all the same
    with pytest.raises(ConfigError, match="configured Backend"):
        backend(b, model="m", priority=True)


@pytest.mark.parametrize(
    ("url", "options", "match"),
    [
        ("ftp://h/v1", {}, "unknown backend scheme"),
        ("127.0.0.1:8000", {}, "unknown backend scheme"),
        ("", {}, "unknown backend scheme"),
        ("vllm://", {}, "needs a host"),
        ("http:///v1", {}, "no host"),
        ("http://h:1/v1?x=1", {}, "query or fragment"),
        ("https://user:pw@h/v1", {}, "credentials"),
        ("vllm://h:99999", {}, "invalid port"),
        ("vllm://h:1", {"dialect": "sglang"}, "conflicts"),
        ("http://h:1/v1", {"dialect": "bedrock"}, "unknown dialect"),
        ("vllm://h:1", {"annotations": ["a"]}, "not supported by the vllm dialect"),
        ("dynamo://h:1", {"dynamo_version": "1.2"}, "before 1.3"),
        ("vllm://h:1", {"stream": "yes"}, "stream must be"),
        ("vllm://h:1", {"transport": "curl"}, "transport must be"),
        ("sim://", {"extra_fields": ["timing"]}, "not supported by the sim dialect"),
    ],
)
def test_bad_urls_and_options_are_config_errors(
    url: str, options: dict[str, Any], match: str
) -> None:
    with pytest.raises(ConfigError, match=match):
        backend(url, model="m", **options)


def test_non_string_target_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="URL string or a Backend"):
        backend(8000, model="m")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "key", ["sk-unique-value\n", " sk-unique-value", "sk-unique\x01value", "sk-unique\u2603"]
)
def test_an_api_key_that_cannot_be_sent_is_refused_without_quoting_it(key: str) -> None:
    with pytest.raises(ConfigError, match="API key") as caught:
        backend("vllm://127.0.0.1:8000", model="m", api_key=key)
    assert "unique" not in str(caught.value)


def test_an_api_key_from_the_environment_is_checked_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-a-file\n")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY") as caught:
        backend("openai://", model="m")
    assert "from-a-file" not in str(caught.value)


def test_an_extra_header_value_that_cannot_be_sent_is_refused() -> None:
    with pytest.raises(ConfigError, match="x-team"):
        backend("vllm://127.0.0.1:8000", model="m", extra_headers={"x-team": "a\r\nb"})


def test_an_openai_compatible_url_sends_no_schema_on_tool_turns_by_default() -> None:
    # Self-hosted engines behind a plain URL (llama-server, vLLM) turn a schema into a
    # grammar over the whole reply, which forbids the tool call the turn is for.
    call = attrs.evolve(tool_turn_call(), output=OutputSpec("Report", {"type": "object"}))
    plain = backend("http://127.0.0.1:8080/v1", model="m").codec.encode(call)
    hosted = backend("openai://", model="m", api_key="sk-test").codec.encode(call)
    assert call.tools and call.output is not None
    assert "response_format" not in json.loads(plain.body)
    assert "response_format" in json.loads(hosted.body)
