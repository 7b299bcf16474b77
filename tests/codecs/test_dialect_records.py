"""One record per OpenAI-compatible dialect: complete, consistent, and the only place a dialect's
facts live (the backend URLs, the options and the wire extras all read it)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import attrs
import pytest

from agentcore import ConfigError
from agentcore._codecs.dialects import COMMON_OPTIONS, DIALECTS, Dialect, OpenAIOptions
from agentcore._codecs.openai import OpenAICodec
from agentcore.core import AgentHints
from agentcore.wire import backend
from tests.codecs.openai_helpers import tool_turn_call

DOCS = Path(__file__).resolve().parents[2] / "docs"
OPTION_FIELDS = {f.name for f in attrs.fields(OpenAIOptions)} | {"dynamo_version"}


@pytest.mark.parametrize("record", list(DIALECTS.values()), ids=list(DIALECTS))
def test_every_dialect_has_a_complete_and_consistent_record(record: Dialect) -> None:
    assert DIALECTS[record.name] is record
    assert record.options.isdisjoint(COMMON_OPTIONS)
    assert record.options <= OPTION_FIELDS, "every option is read by make_options"
    assert ("priority" in record.options) == (record.priority is not None)
    assert ("rid" in record.options) == (record.request_id == "rid")
    if record.request_id == "header":
        assert "request_id_header" in record.options
    assert ("dynamo_version" in record.options) == record.nvext
    assert ("prompt_cache_key" in record.options) == (record.session == "prompt_cache_key")
    assert ("session_headers" in record.options) == (record.session == "headers")
    if record.port is not None:
        assert record.self_hosted
        assert record.transport == "lean"


@pytest.mark.parametrize("record", [r for r in DIALECTS.values() if r.port is not None])
def test_a_dialect_scheme_is_configured_from_its_record(record: Dialect) -> None:
    configured = backend(f"{record.name}://gpu-box", model="m")
    assert configured.base_url == f"http://gpu-box:{record.port}/v1"
    assert (configured.transport, configured.self_hosted) == (record.transport, True)
    assert (configured.warm_up, configured.reuse_streams) == (record.warm_up, record.reuse_streams)
    assert isinstance(configured.codec, OpenAICodec)
    options = configured.codec.options
    assert options.record is record
    assert options.response_format == record.response_format
    assert options.strict_tools == record.strict_tools
    assert options.request_id_header == (record.request_id == "header")
    assert options.rid == (record.request_id == "rid")


def test_a_hosted_server_of_a_self_hosted_dialect_is_not_warmed() -> None:
    configured = backend("https://gpu.example.com/v1", model="m", dialect="llamacpp")
    assert not configured.self_hosted
    assert configured.warm_up == "off"
    assert not configured.reuse_streams  # the engine still closes after streamed replies


def test_every_dialect_scheme_is_in_the_backends_doc_table() -> None:
    text = (DOCS / "backends.md").read_text()
    for record in DIALECTS.values():
        if record.port is not None:
            row = rf"\| `{record.name}://host\[:port\]\[/path\]` \| {record.name} \| .*"
            row += rf"\(port {record.port}\) \| {record.transport} \| yes \|"
            assert re.search(row, text), record.name


NEW = Dialect(
    name="newengine",
    port=9123,
    self_hosted=True,
    transport="lean",
    warm_up="slots",
    reuse_streams=False,
    options=frozenset({"priority", "cache_salt", "request_id_header"}),
    response_format="never",
    strict_tools=True,
    priority="higher_first",
    request_id="header",
    nvext=False,
    session=None,
    session_key_header=("x-affinity",),
    default_model=None,
    prefix_blocks="vllm",
)


def test_adding_a_dialect_needs_only_its_record(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(DIALECTS, NEW.name, NEW)  # type: ignore[index]
    configured = backend("newengine://gpu-box", model="m", priority=True, cache_salt="s")
    assert configured.base_url == "http://gpu-box:9123/v1"
    assert (configured.name, configured.transport, configured.self_hosted) == (
        "newengine",
        "lean",
        True,
    )
    assert (configured.warm_up, configured.reuse_streams) == ("slots", False)

    request = configured.codec.encode(
        tool_turn_call(hints=AgentHints(session_id="run-1", priority=7))
    )
    body = json.loads(request.body)
    assert body["priority"] == 7  # higher_first: as is
    assert body["cache_salt"] == "s"
    assert all(tool["function"]["strict"] is True for tool in body["tools"])
    assert dict(request.headers)["x-request-id"] == "req-1"
    assert dict(request.headers)["x-affinity"] == "run-1"  # the record's session-key header

    plain = backend("http://10.0.0.9:7000/v1", model="m", dialect="newengine")
    assert plain.name == "newengine"
    assert plain.warm_up == "slots"
    with pytest.raises(ConfigError, match="not supported by the newengine dialect"):
        backend("newengine://gpu-box", model="m", rid=True)
    with pytest.raises(ConfigError, match="newengine://"):
        backend("nosuchengine://gpu-box", model="m")


def test_priority_direction_follows_the_record() -> None:
    hints = AgentHints(session_id="run-1", priority=7)
    for name, written in (("vllm", -7), ("sim", -7), ("sglang", 7)):
        configured = backend("sim://" if name == "sim" else f"{name}://h", model="m", priority=True)
        body = json.loads(configured.codec.encode(tool_turn_call(hints=hints)).body)
        assert body["priority"] == written, name
