"""History the cache can keep: every request after an agent's first replays the history byte
for byte (the model's assistant content, tool-call ids and arguments as received, the tool
results as sent), so request n's bytes extend request n-1's up to the end of its messages, in
every dialect; what changes per request (priority, ids, the final turn's tool choice) comes
after the messages."""

from __future__ import annotations

import itertools
import json
from typing import Any

import orjson
import pytest

from agentcore import ModelParams
from agentcore._codecs.anthropic import AnthropicCodec
from agentcore._codecs.dialects import DIALECTS
from agentcore.core import (
    AgentLoop,
    AssistantMessage,
    CallModel,
    CallTool,
    LoopConfig,
    ModelResponded,
    SystemMessage,
    ToolReturned,
    UserMessage,
)
from tests.codecs.openai_helpers import CLOCK, WEATHER, codec

# The replies as a server sent them: odd spacing in the arguments, ids of the server's own,
# content next to tool calls, two calls in one turn.
REPLIES = [
    {
        "content": "Let me look.  ",
        "tool_calls": [
            {"id": "call_Zq9", "type": "function",
             "function": {"name": "get_weather", "arguments": '{ "city" :"Paris"  }'}},
            {"id": "call_Zr0", "type": "function",
             "function": {"name": "get_time", "arguments": '{"tz":"Europe/Paris"}'}},
        ],
    },
    {
        "content": None,
        "tool_calls": [
            {"id": "call_Zs1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Lyon", "unit": "C"}'}},
        ],
    },
    {"content": "Paris: 18 C at 14:05; Lyon: 20 C.\n", "tool_calls": None},
]  # fmt: skip
RESULTS = ["18 C, clear  \n", "14:05 CEST", '{"temp": 20, "sky": "clear"}']

Encoder = Any


def encoders() -> list[tuple[str, Encoder]]:
    out: list[tuple[str, Encoder]] = [
        (name, codec(name, priority=True) if record.priority else codec(name))
        for name, record in DIALECTS.items()
    ]
    out.append(("anthropic", AnthropicCodec(base_url="https://x", model="m", api_key="k")))
    return out


def reply_event(request_id: str, reply: dict[str, Any]) -> ModelResponded:
    """The reply decoded by the OpenAI codec from the server's bytes (as received)."""
    payload = {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", **reply},
                     "finish_reason": "tool_calls" if reply["tool_calls"] else "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10},
    }  # fmt: skip
    event = codec("vllm").decode(request_id, 200, (), orjson.dumps(payload))
    assert isinstance(event, ModelResponded)
    return event


def run_agent() -> list[CallModel]:
    """One agent's requests: three turns, then the final answer."""
    config = LoopConfig(
        run_id="agent-0",
        tools=(WEATHER, CLOCK),
        params=ModelParams(max_tokens=64, temperature=0.0),
    )
    loop = AgentLoop(config, [SystemMessage("You are terse."), UserMessage("Weather?")])
    effects = loop.start()
    calls: list[CallModel] = []
    results = iter(RESULTS)
    replies = iter(REPLIES)
    while effects:
        model_calls = [e for e in effects if isinstance(e, CallModel)]
        tool_calls = [e for e in effects if isinstance(e, CallTool)]
        if model_calls:
            call = model_calls[0]
            calls.append(call)
            effects = loop.handle(reply_event(call.request_id, next(replies)))
        elif tool_calls:
            for tc in tool_calls:
                effects = loop.handle(ToolReturned(tc.call_id, next(results)))
        else:
            break
    assert len(calls) == 3
    return calls


def messages_end(body: bytes) -> int:
    """Where the bytes of ``body``'s message list end (before its closing bracket)."""
    messages = orjson.dumps(json.loads(body)["messages"])
    start = body.index(b'"messages":' + messages[:1]) + len(b'"messages":')
    assert body[start : start + len(messages)] == messages
    return start + len(messages) - 1


@pytest.mark.parametrize(("name", "encoder"), encoders(), ids=[n for n, _ in encoders()])
def test_each_request_extends_the_previous_requests_bytes(name: str, encoder: Encoder) -> None:
    bodies = [encoder.encode(call).body for call in run_agent()]
    for previous, current in itertools.pairwise(bodies):
        kept = previous[: messages_end(previous)]
        assert current.startswith(kept), name
        assert len(json.loads(current)["messages"]) > len(json.loads(previous)["messages"])


def test_the_assistant_turns_are_replayed_as_the_server_sent_them() -> None:
    calls = run_agent()
    replayed = [m for m in calls[-1].messages if isinstance(m, AssistantMessage)]
    assert [m.content for m in replayed] == ["Let me look.  ", None]
    sent = [(c.id, c.name, c.arguments) for m in replayed for c in m.tool_calls]
    received = [
        (c["id"], c["function"]["name"], c["function"]["arguments"])
        for reply in REPLIES
        for c in reply["tool_calls"] or ()
    ]
    assert sent == received
    body = json.loads(codec("vllm").encode(calls[-1]).body)
    tool_messages = [m for m in body["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == RESULTS
    assert [m["tool_call_id"] for m in tool_messages] == ["call_Zq9", "call_Zr0", "call_Zs1"]
