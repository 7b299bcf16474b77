"""Shared pieces of the Dynamo integration tests: the harness module, the scripted replies,
and the annotation hook that selects them."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import agentcore

ROOT = Path(__file__).resolve().parents[2]


def _load_stack_module() -> ModuleType:
    name = "agentcore_tools_dynamo_stack"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / "dynamo" / "stack.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


STACK = _load_stack_module()
MODEL: str = STACK.MODEL_NAME

# Scripted replies, by key. A conversation's key is "<scenario>-<assistant turns so far>", the
# scenario being named in its user message ("Scenario: weather.").
SCRIPT: dict[str, Any] = {
    "weather-0": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
    "weather-1": {
        "tool_calls": [
            {"name": "get_weather", "arguments": {"city": "Lyon"}},
            {"name": "get_weather", "arguments": {"city": "Nice"}},
        ]
    },
    "weather-2": "Paris is sunny, Lyon is cloudy and Nice is warm.",
    "session-0": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]},
    "session-1": "Oslo is cold.",
    "plain-0": "A short scripted answer.",
    "plain-1": "Another short scripted answer.",
    "plain-2": "A third short scripted answer.",
}


_SCENARIO = re.compile(r"Scenario: (\w+)\.")


def replay_key(call: agentcore.core.CallModel) -> str | None:
    """The scripted reply for ``call``: ``<scenario>-<assistant turns so far>``."""
    for message in call.messages:
        if isinstance(message, agentcore.core.UserMessage):
            found = _SCENARIO.search(message.content)
            if found:
                turns = sum(isinstance(m, agentcore.core.AssistantMessage) for m in call.messages)
                return f"{found.group(1)}-{turns}"
    return None


def replay_annotations(call: agentcore.core.CallModel) -> list[str]:
    """The ``annotations`` hook of the dynamo backend: select the call's scripted reply."""
    key = replay_key(call)
    return [] if key is None else [f"output_replay_id:{key}"]
