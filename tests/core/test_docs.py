"""docs/core.md states the loop's transition table; it must match the code's table."""

from __future__ import annotations

import pathlib
from collections.abc import Mapping
from typing import Any

from agentcore._core.loop import TRANSITIONS
from agentcore.core import (
    AssistantMessage,
    CallModel,
    ModelResponded,
    RunState,
    ToolCall,
    ToolMessage,
)
from tests.core.helpers import Answer, make_loop

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "core.md"


def documented_transitions() -> dict[tuple[str, str], frozenset[str]]:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("<!-- transitions:begin -->")
    end = text.index("<!-- transitions:end -->")
    rows = [line for line in text[start:end].splitlines() if line.startswith("|")]
    table: dict[tuple[str, str], frozenset[str]] = {}
    for row in rows[2:]:  # header and separator
        state, event, targets = (cell.strip() for cell in row.strip("|").split("|"))
        assert (state, event) not in table, f"duplicate row {state} {event}"
        table[(state, event)] = frozenset(t.strip() for t in targets.split(","))
    return table


def code_transitions() -> dict[tuple[str, str], frozenset[str]]:
    return {
        (state.name, key if isinstance(key, str) else key.__name__): frozenset(
            target.name for target in targets
        )
        for (state, key), targets in TRANSITIONS.items()
    }


def test_documented_transition_table_matches_the_code() -> None:
    assert documented_transitions() == code_transitions()


def test_every_state_is_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    for state in RunState:
        assert f"| `{state.name}` |" in text


def embedding_example() -> str:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Embedding the loop") :]
    start = section.index("```python\n") + len("```python\n")
    return section[start : section.index("```\n", start)]


def test_the_documented_sync_embedding_runs_a_tool_using_agent() -> None:
    namespace: dict[str, Any] = {}
    exec(compile(embedding_example(), str(DOC), "exec"), namespace)
    replies = iter(
        [
            AssistantMessage(None, (ToolCall("a", "add", '{"x": 2, "y": 3}'),)),
            AssistantMessage('{"value": 5}'),
        ]
    )

    def call_model(effect: CallModel) -> ModelResponded:
        return ModelResponded(effect.request_id, next(replies))

    def call_tool(name: str, arguments: Mapping[str, Any]) -> str:
        if arguments["x"] > 100:
            raise ValueError("too big")
        return str(arguments["x"] + arguments["y"])

    loop = make_loop(output=Answer)
    assert namespace["run"](loop, call_model, call_tool) == Answer(5)
    assert ToolMessage("a", "add", "5") in loop.transcript
