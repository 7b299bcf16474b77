"""The wire format, pinned: the bytes ``agentcore.core.dumps`` writes for representative values.

A change to any expected string below is a change of the format that snapshots, result files
and logs already on disk use; it needs a migration story, not just a new expectation.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

import agentcore
from agentcore import (
    AbortKind,
    AbortReason,
    Budget,
    BudgetExceeded,
    ErrorKind,
    ModelError,
    ModelParams,
    ToolError,
    Usage,
)
from agentcore.core import (
    Abort,
    AgentHints,
    AssistantMessage,
    CallModel,
    CallTool,
    CancelRequested,
    Finish,
    Image,
    LoopSnapshot,
    ModelFailed,
    ModelResponded,
    OutputSpec,
    RunState,
    ServerTiming,
    SystemMessage,
    ToolCall,
    ToolFailed,
    ToolMessage,
    ToolReturned,
    ToolSpec,
    UserMessage,
)

GOLDEN: list[tuple[str, Any, bytes]] = [
    (
        "system",
        SystemMessage("You are terse."),
        b'{"type":"system","content":"You are terse."}',
    ),
    (
        "user",
        UserMessage("Weather in Oslo?"),
        b'{"type":"user","content":"Weather in Oslo?","images":[]}',
    ),
    (
        "user_with_images",
        UserMessage(
            "Compare  and this.",
            (
                Image(data=b"\x89PNG\r\n", media_type="image/png", at=8),
                Image(url="https://example.com/b.jpg"),
            ),
        ),
        b'{"type":"user","content":"Compare  and this.","images":['
        b'{"data":"iVBORw0K","url":null,"media_type":"image/png","at":8},'
        b'{"data":null,"url":"https://example.com/b.jpg","media_type":null,"at":null}]}',
    ),
    (
        "assistant_with_call",
        AssistantMessage(None, (ToolCall("call_1", "weather", '{"city":"Oslo"}'),)),
        b'{"type":"assistant","content":null,"tool_calls":'
        b'[{"id":"call_1","name":"weather","arguments":"{\\"city\\":\\"Oslo\\"}"}]}',
    ),
    (
        "tool_error_result",
        ToolMessage("call_1", "weather", "unknown tool: weather", is_error=True),
        b'{"type":"tool","call_id":"call_1","name":"weather",'
        b'"content":"unknown tool: weather","is_error":true}',
    ),
    (
        "model_responded",
        ModelResponded(
            request_id="run-1/0",
            message=AssistantMessage("Sunny."),
            usage=Usage(12, 3, None),
            finish_reason="stop",
            timing=ServerTiming(ttft_ms=41.5, kv_hit_rate=0.75, worker_id=2),
        ),
        b'{"type":"model_responded","request_id":"run-1/0",'
        b'"message":{"type":"assistant","content":"Sunny.","tool_calls":[]},'
        b'"usage":{"prompt_tokens":12,"completion_tokens":3,"cached_tokens":null},'
        b'"finish_reason":"stop","timing":{"ttft_ms":41.5,"prefill_time_ms":null,'
        b'"prefill_wait_time_ms":null,"total_time_ms":null,"kv_hit_rate":0.75,'
        b'"router_queue_depth":null,"worker_id":2}}',
    ),
    (
        "model_failed",
        ModelFailed(
            "run-1/1",
            ModelError(
                ErrorKind.RATE_LIMITED, "slow down", status=429, retryable=True, retry_after=1.5
            ),
        ),
        b'{"type":"model_failed","request_id":"run-1/1","error":{"kind":"rate_limited",'
        b'"message":"slow down","status":429,"retryable":true,"retry_after":1.5,"code":null}}',
    ),
    (
        "tool_returned",
        ToolReturned("call_1", "12 C"),
        b'{"type":"tool_returned","call_id":"call_1","content":"12 C"}',
    ),
    (
        "tool_failed",
        ToolFailed("call_2", ToolError("TimeoutError", "tool timed out")),
        b'{"type":"tool_failed","call_id":"call_2",'
        b'"error":{"type":"TimeoutError","message":"tool timed out"},"budget":null}',
    ),
    (
        "tool_refused_by_a_budget",
        ToolFailed(
            "call_3",
            ToolError("budget_exhausted", "out"),
            BudgetExceeded(Budget.TOOL_CALLS, "batch", 15, 15),
        ),
        b'{"type":"tool_failed","call_id":"call_3",'
        b'"error":{"type":"budget_exhausted","message":"out"},'
        b'"budget":{"budget":"tool_calls","scope":"batch","limit":15,"used":15}}',
    ),
    (
        "cancel_requested",
        CancelRequested(),
        b'{"type":"cancel_requested","reason":"cancelled"}',
    ),
    (
        "call_model",
        CallModel(
            request_id="run-1/0",
            messages=(UserMessage("hi"),),
            tools=(
                ToolSpec(
                    "weather",
                    "Current weather.",
                    {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                ),
            ),
            params=ModelParams(max_tokens=256, temperature=0.0, stop=("END",)),
            hints=AgentHints("run-1", turn=0, priority=5),
            output=OutputSpec("Answer", {"type": "object"}),
        ),
        b'{"type":"call_model","request_id":"run-1/0",'
        b'"messages":[{"type":"user","content":"hi","images":[]}],'
        b'"tools":[{"name":"weather","description":"Current weather.",'
        b'"parameters":{"type":"object","properties":{"city":{"type":"string"}},'
        b'"required":["city"]}}],'
        b'"params":{"max_tokens":256,"temperature":0.0,"top_p":null,"tool_choice":null,'
        b'"stop":["END"],"seed":null},'
        b'"hints":{"session_id":"run-1","parent_session_id":null,"turn":0,"priority":5,'
        b'"expected_output_tokens":null,"final":false},'
        b'"output":{"name":"Answer","schema":{"type":"object"}}}',
    ),
    (
        "call_tool",
        CallTool("call_1", "weather", {"city": "Oslo", "days": [1, 2]}, "run-1/0/0"),
        b'{"type":"call_tool","call_id":"call_1","name":"weather",'
        b'"arguments":{"city":"Oslo","days":[1,2]},"idempotency_key":"run-1/0/0"}',
    ),
    (
        "finish",
        Finish(
            output={"answer": 42},
            transcript=(UserMessage("q"), AssistantMessage("42")),
            usage=Usage(5, 1, 0),
        ),
        b'{"type":"finish","output":{"answer":42},'
        b'"transcript":[{"type":"user","content":"q","images":[]},'
        b'{"type":"assistant","content":"42","tool_calls":[]}],'
        b'"usage":{"prompt_tokens":5,"completion_tokens":1,"cached_tokens":0}}',
    ),
    (
        "abort",
        Abort(AbortReason(AbortKind.CANCELLED, "cancelled"), transcript=(), usage=Usage()),
        b'{"type":"abort","reason":{"kind":"cancelled","message":"cancelled","error":null,'
        b'"budget":null},'
        b'"transcript":[],"usage":{"prompt_tokens":0,"completion_tokens":0,"cached_tokens":null}}',
    ),
    (
        "loop_snapshot",
        LoopSnapshot(
            run_id="run-1",
            state=RunState.AWAITING_TOOLS,
            transcript=(
                UserMessage("q"),
                AssistantMessage(None, (ToolCall("c0", "f"), ToolCall("c1", "g"))),
            ),
            model_calls=1,
            tool_turns=0,
            tool_errors=0,
            output_retries=0,
            final=False,
            usage=Usage(7, 2, None),
            results=(ToolMessage("c0", "f", "ok"), None),
        ),
        b'{"run_id":"run-1","state":"awaiting_tools","transcript":'
        b'[{"type":"user","content":"q","images":[]},{"type":"assistant","content":null,"tool_calls":'
        b'[{"id":"c0","name":"f","arguments":"{}"},{"id":"c1","name":"g","arguments":"{}"}]}],'
        b'"model_calls":1,"tool_turns":0,"tool_errors":0,"output_retries":0,"final":false,'
        b'"usage":{"prompt_tokens":7,"completion_tokens":2,"cached_tokens":null},'
        b'"results":[{"type":"tool","call_id":"c0","name":"f","content":"ok","is_error":false},'
        b'null],"tool_calls":0,"planning":false,"plans":0,"partial":"","truncated_replies":0,'
        b'"missing_tool_calls":0,"tool_failures":{"counts":{},"first":{}}}',
    ),
]

# A loop snapshot written before the truncation counters existed still loads (with zeros).
OLD_LOOP_SNAPSHOT = GOLDEN[-1][2].replace(
    b',"partial":"","truncated_replies":0,"missing_tool_calls":0,'
    b'"tool_failures":{"counts":{},"first":{}}}',
    b"}",
)


def test_a_snapshot_without_the_truncation_fields_loads() -> None:
    assert len(OLD_LOOP_SNAPSHOT) < len(GOLDEN[-1][2])
    assert agentcore.core.loads(OLD_LOOP_SNAPSHOT, LoopSnapshot) == GOLDEN[-1][1]


def test_a_snapshot_written_before_tool_failures_were_counted_loads_with_none() -> None:
    before = GOLDEN[-1][2].replace(b',"tool_failures":{"counts":{},"first":{}}}', b"}")
    assert len(before) < len(GOLDEN[-1][2])
    assert agentcore.core.loads(before, LoopSnapshot) == GOLDEN[-1][1]


UNIONS = [agentcore.core.Message, agentcore.core.Event, agentcore.core.Effect]


def union_of(value: Any) -> Any:
    """The public union ``value``'s class belongs to, if any."""
    for union in UNIONS:
        if isinstance(value, union):
            return union
    return None


@pytest.mark.parametrize(("value", "expected"), [g[1:] for g in GOLDEN], ids=[g[0] for g in GOLDEN])
def test_dumps_writes_the_pinned_bytes(value: Any, expected: bytes) -> None:
    assert agentcore.core.dumps(value) == expected


@pytest.mark.parametrize(("value", "expected"), [g[1:] for g in GOLDEN], ids=[g[0] for g in GOLDEN])
def test_pinned_bytes_load_back_as_the_value(value: Any, expected: bytes) -> None:
    decoded = agentcore.core.loads(expected, type(value))
    assert decoded == value
    # Fields excluded from equality (JSON schemas) must survive too.
    assert agentcore.core.dumps(decoded) == expected


@pytest.mark.parametrize(("value", "expected"), [g[1:] for g in GOLDEN], ids=[g[0] for g in GOLDEN])
def test_pinned_bytes_load_through_the_union(value: Any, expected: bytes) -> None:
    union = union_of(value)
    if union is None:
        assert isinstance(value, LoopSnapshot)
        return
    assert agentcore.core.loads(expected, union) == value


# Bytes written before a format change that only added fields with defaults: they must still
# load, the new fields taking their defaults.
LEGACY: list[tuple[str, bytes, Any]] = [
    (
        "user_before_images",
        b'{"type":"user","content":"Weather in Oslo?"}',
        UserMessage("Weather in Oslo?"),
    ),
    (
        "abort_before_budgets",
        b'{"type":"abort","reason":{"kind":"cancelled","message":"cancelled","error":null},'
        b'"transcript":[],"usage":{"prompt_tokens":0,"completion_tokens":0,"cached_tokens":null}}',
        Abort(AbortReason(AbortKind.CANCELLED, "cancelled"), transcript=(), usage=Usage()),
    ),
    (
        "tool_failed_before_budgets",
        b'{"type":"tool_failed","call_id":"call_2",'
        b'"error":{"type":"TimeoutError","message":"tool timed out"}}',
        ToolFailed("call_2", ToolError("TimeoutError", "tool timed out")),
    ),
    (
        "loop_snapshot_before_tool_call_count",
        b'{"run_id":"run-1","state":"finished","transcript":[],"model_calls":1,"tool_turns":0,'
        b'"tool_errors":0,"output_retries":0,"final":false,'
        b'"usage":{"prompt_tokens":7,"completion_tokens":2,"cached_tokens":null},"results":[]}',
        LoopSnapshot(
            run_id="run-1",
            state=RunState.FINISHED,
            transcript=(),
            model_calls=1,
            tool_turns=0,
            tool_errors=0,
            output_retries=0,
            final=False,
            usage=Usage(7, 2, None),
        ),
    ),
]


@pytest.mark.parametrize(("data", "value"), [g[1:] for g in LEGACY], ids=[g[0] for g in LEGACY])
def test_bytes_of_an_older_format_load_with_defaults_for_new_fields(
    data: bytes, value: Any
) -> None:
    assert agentcore.core.loads(data, type(value)) == value


def test_loads_accepts_text_as_well_as_bytes() -> None:
    text = '{"type":"user","content":"Grüße ✓","images":[]}'
    assert agentcore.core.loads(text, agentcore.core.Message) == UserMessage("Grüße ✓")
    assert agentcore.core.dumps(UserMessage("Grüße ✓")) == text.encode()


def test_member_decodes_without_its_tag_when_the_class_is_named() -> None:
    assert agentcore.core.loads(b'{"content":"x"}', UserMessage) == UserMessage("x")


def test_tool_spec_validator_is_not_written_and_defaults_on_load() -> None:
    spec = ToolSpec("add", "Adds.", {"type": "object"}, validator=lambda args: ("checked", args))
    data = agentcore.core.dumps(spec)
    assert data == b'{"name":"add","description":"Adds.","parameters":{"type":"object"}}'
    loaded = agentcore.core.loads(data, ToolSpec)
    assert loaded == spec
    assert loaded.parameters == {"type": "object"}
    assert loaded.validator({"a": 1}) == {"a": 1}


def test_tool_spec_parameters_default_when_absent() -> None:
    loaded = agentcore.core.loads(b'{"name":"ping"}', ToolSpec)
    assert loaded == ToolSpec("ping")
    assert loaded.parameters == {"type": "object", "properties": {}}


@attrs.frozen
class Forecast:
    city: str
    days: tuple[int, ...]
    kind: ErrorKind | None = None


def test_typed_finish_output_comes_back_as_json_unless_a_type_is_given() -> None:
    finish = Finish(output=Forecast("Oslo", (1, 2)), transcript=(), usage=Usage())
    data = agentcore.core.dumps(finish)
    assert data.startswith(b'{"type":"finish","output":{"city":"Oslo","days":[1,2],"kind":null},')

    plain = agentcore.core.loads(data, Finish)
    assert plain.output == {"city": "Oslo", "days": [1, 2], "kind": None}

    typed = agentcore.core.loads(data, agentcore.core.Effect, output_type=Forecast)
    assert typed == finish


def test_output_type_is_ignored_for_other_effects() -> None:
    call = CallTool("c", "f", {"x": 1})
    assert (
        agentcore.core.loads(
            agentcore.core.dumps(call), agentcore.core.Effect, output_type=Forecast
        )
        == call
    )


def test_sequences_of_messages_round_trip() -> None:
    transcript = (SystemMessage("s"), UserMessage("u"), AssistantMessage("a"))
    data = agentcore.core.dumps(transcript)
    assert data == (
        b'[{"type":"system","content":"s"},{"type":"user","content":"u","images":[]},'
        b'{"type":"assistant","content":"a","tool_calls":[]}]'
    )
    assert agentcore.core.loads(data, tuple[agentcore.core.Message, ...]) == transcript
