"""The llamacpp:// backend and the per-backend warm-up, prefix-alignment and reply-cap
options."""

from __future__ import annotations

import attrs
import pytest

import agentcore
from agentcore import ConfigError, ModelParams
from agentcore.core import CallModel, OutputSpec, ToolSpec, UserMessage


def test_llamacpp_scheme_defaults_to_port_8080_lean_and_slot_copy_warm_up() -> None:
    configured = agentcore.wire.backend("llamacpp://127.0.0.1", model="m")
    assert (configured.name, configured.base_url) == ("llamacpp", "http://127.0.0.1:8080/v1")
    assert (configured.transport, configured.self_hosted) == ("lean", True)
    assert configured.warm_up == "slots"


@pytest.mark.parametrize(
    ("url", "warm_up"),
    [("vllm://h:1", "check"), ("sglang://h:1", "request"), ("sim://", "request"),
     ("http://h:1/v1", "request"), ("https://h/v1", "off")],
)  # fmt: skip
def test_warm_up_default_follows_the_backend(url: str, warm_up: str) -> None:
    assert agentcore.wire.backend(url, model="m").warm_up == warm_up


def test_warm_up_can_be_chosen_and_is_validated() -> None:
    assert agentcore.wire.backend("llamacpp://h", model="m", warm_up="request").warm_up == "request"
    assert agentcore.wire.backend("vllm://h", model="m", warm_up="off").warm_up == "off"
    with pytest.raises(ConfigError, match="warm_up"):
        agentcore.wire.backend("vllm://h", model="m", warm_up="everything")


@pytest.mark.parametrize(
    ("url", "options", "align"),
    [("vllm://h:1", {}, "auto"), ("http://h:1/v1", {"dialect": "vllm"}, "auto"),
     ("https://h/v1", {"dialect": "vllm"}, "auto"), ("llamacpp://h:1", {}, False),
     ("sglang://h:1", {}, False), ("dynamo://h:1", {}, False), ("sim://", {}, False),
     ("http://h:1/v1", {}, False), ("vllm://h:1", {"align_prefix": True}, True),
     ("vllm://h:1", {"align_prefix": False}, False),
     ("llamacpp://h:1", {"align_prefix": False}, False)],
)  # fmt: skip
def test_prefix_alignment_is_on_where_the_engine_can_measure_blocks(
    url: str, options: dict[str, object], align: object
) -> None:
    assert agentcore.wire.backend(url, model="m", **options).align_prefix == align


def test_a_configured_backend_takes_alignment_only_where_the_engine_can_measure_blocks() -> None:
    # From a URL, tests/driver/test_backend_options.py checks every entry point alike.
    configured = agentcore.wire.backend("llamacpp://h:1", model="m")
    with pytest.raises(ConfigError, match="align_prefix=True needs an engine"):
        agentcore.wire.backend(configured, align_prefix=True)
    with pytest.raises(ConfigError, match="align_prefix=True needs an engine"):
        attrs.evolve(configured, align_prefix=True)
    vllm = agentcore.wire.backend("vllm://h:1", model="m")
    assert agentcore.wire.backend(vllm, align_prefix=True).align_prefix is True
    with pytest.raises(ConfigError, match="align_prefix must be"):
        attrs.evolve(vllm, align_prefix="always")


def test_llamacpp_dialect_sends_no_fields_llama_server_would_ignore() -> None:
    configured = agentcore.wire.backend("http://h:1/v1", model="m", dialect="llamacpp")
    tool = ToolSpec("search", "", {"type": "object"})
    call = CallModel("r/0", (UserMessage("hi"),), (tool,), ModelParams(max_tokens=5))
    request = configured.codec.encode(call)
    assert b'"priority"' not in request.body and b"cache_salt" not in request.body
    assert all(name != "x-request-id" for name, _ in request.headers)
    for option in ("priority", "cache_salt", "rid"):
        with pytest.raises(ConfigError):
            agentcore.wire.backend("llamacpp://h", model="m", **{option: True})


def test_llamacpp_sends_response_format_only_without_tools() -> None:
    configured = agentcore.wire.backend("llamacpp://h", model="m")
    spec = OutputSpec("out", {"type": "object"})
    tool = ToolSpec("search", "", {"type": "object"})
    with_tools = CallModel("r/0", (UserMessage("hi"),), (tool,), output=spec)
    without = CallModel("r/0", (UserMessage("hi"),), (), output=spec)
    assert b"response_format" not in configured.codec.encode(with_tools).body
    assert b"response_format" in configured.codec.encode(without).body


def test_llamacpp_connections_are_not_reused_after_streamed_replies() -> None:
    # llama-server closes them right after every streamed reply; other servers keep them.
    assert agentcore.wire.backend("llamacpp://h", model="m").reuse_streams is False
    assert agentcore.wire.backend("vllm://h", model="m").reuse_streams is True
    assert (
        agentcore.wire.backend("http://h:1/v1", model="m", dialect="llamacpp").reuse_streams
        is False
    )
