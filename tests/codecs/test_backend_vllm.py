"""The vllm dialect's tool schemas: strict by default, so vLLM constrains the arguments."""

from __future__ import annotations

import orjson
import pytest

import agentcore
from agentcore import ConfigError, ModelParams
from agentcore.core import CallModel, ToolSpec, UserMessage

TOOL = ToolSpec("search", "Search.", {"type": "object", "properties": {"q": {"type": "string"}}})
CALL = CallModel("r/0", (UserMessage("hi"),), (TOOL,), ModelParams(tool_choice="required"))


def tools_sent(url: str, **options: object) -> list[dict[str, object]]:
    body = orjson.loads(agentcore.wire.backend(url, model="m", **options).codec.encode(CALL).body)
    tools: list[dict[str, object]] = body["tools"]
    return tools


@pytest.mark.parametrize(
    ("url", "options"), [("vllm://h", {}), ("http://h:1/v1", {"dialect": "vllm"})]
)
def test_vllm_marks_every_tool_strict(url: str, options: dict[str, str]) -> None:
    assert tools_sent(url, **options) == [
        {"type": "function", "function": {"name": "search", "description": "Search.",
                                          "parameters": TOOL.parameters, "strict": True}}
    ]  # fmt: skip


def test_strict_tools_can_be_turned_off_or_on_per_backend() -> None:
    assert "strict" not in tools_sent("vllm://h", strict_tools=False)[0]["function"]  # type: ignore[operator]
    for url in ("openai://h", "sglang://h", "llamacpp://h", "dynamo://h"):
        assert "strict" not in tools_sent(url)[0]["function"]  # type: ignore[operator]
    assert tools_sent("sglang://h", strict_tools=True)[0]["function"]["strict"] is True  # type: ignore[index]
    with pytest.raises(ConfigError, match="strict_tools"):
        agentcore.wire.backend("vllm://h", model="m", strict_tools="yes")
