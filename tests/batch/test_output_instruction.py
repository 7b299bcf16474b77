"""The output instruction (the JSON schema in the system prompt): ``"auto"`` leaves it out of a
typed task's prompt where every request that can end a run carries the schema for the server
to enforce, so the prefix every request of a batch carries is what the model needs; it stays
wherever an answer could come unconstrained."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

import agentcore
from agentcore import ConfigError, ModelParams, Task, run_batch
from agentcore._tasks.task import compile_job, prefix_call
from agentcore.core import (
    AgentLoop,
    AssistantMessage,
    CallModel,
    LoopConfig,
    ModelResponded,
    SystemMessage,
    ToolCall,
    ToolReturned,
    UserMessage,
)
from tests.batch.test_final_instruction import Note, look

SYSTEM = "You take notes."
FORCED = Task(
    prompt="Note {input}.",
    system=SYSTEM,
    tools=[look],
    output=Note,
    max_turns=1,
    params=ModelParams(tool_choice="required"),
)


def system_of(task: Task[Any], *, schema_on_final: bool) -> str:
    (first,) = compile_job(task, "x", run_id="r", schema_on_final=schema_on_final).start()
    assert isinstance(first, CallModel) and isinstance(first.messages[0], SystemMessage)
    return first.messages[0].content


def announced(text: str) -> bool:
    return "JSON schema" in text


def test_the_default_is_auto() -> None:
    assert FORCED.announce_output == "auto"
    assert agentcore.Agent().announce_output == "auto"


@pytest.mark.parametrize(
    ("task", "schema_on_final", "sent"),
    [
        (FORCED, True, False),  # every answer is a final request, which carries the schema
        (FORCED, False, True),  # nothing constrains the answer: the model is told
        (attrs.evolve(FORCED, tools=()), True, False),  # no tools: every request carries it
        (attrs.evolve(FORCED, params=ModelParams(tool_choice="none")), True, False),
        (attrs.evolve(FORCED, params=ModelParams()), True, True),  # a tool turn may answer
        (attrs.evolve(FORCED, params=ModelParams(tool_choice="auto")), True, True),
    ],
)
def test_auto_announces_the_schema_only_where_an_answer_could_come_unconstrained(
    task: Task[Any], schema_on_final: bool, sent: bool
) -> None:
    text = system_of(task, schema_on_final=schema_on_final)
    assert text.startswith(SYSTEM)
    assert announced(text) is sent
    if not sent:
        assert text == SYSTEM


@pytest.mark.parametrize("schema_on_final", [True, False])
@pytest.mark.parametrize("announce", [True, False])
def test_true_always_announces_and_false_never(announce: bool, schema_on_final: bool) -> None:
    task = attrs.evolve(FORCED, announce_output=announce, params=ModelParams())
    assert announced(system_of(task, schema_on_final=schema_on_final)) is announce


def test_a_text_task_has_no_schema_to_announce() -> None:
    task = attrs.evolve(FORCED, output=None, announce_output=True)
    assert system_of(task, schema_on_final=False) == SYSTEM


@pytest.mark.parametrize("value", ["yes", 1, None, "AUTO"])
def test_anything_else_is_refused_by_name(value: object) -> None:
    with pytest.raises(ConfigError, match="announce_output"):
        attrs.evolve(FORCED, announce_output=value)
    with pytest.raises(ConfigError, match="announce_output"):
        LoopConfig(run_id="r", output=Note, announce_output=value)


@pytest.mark.parametrize("schema_on_final", [True, False])
def test_the_warm_up_request_carries_the_jobs_own_system_prompt(schema_on_final: bool) -> None:
    warm = prefix_call(FORCED, run_id="w", schema_on_final=schema_on_final)
    assert warm.messages[0] == SystemMessage(system_of(FORCED, schema_on_final=schema_on_final))
    assert warm.messages[1] == UserMessage("Note ")
    assert warm.params.max_tokens == 1 and not warm.hints.final


def test_a_repair_turn_refers_to_the_schema_only_where_it_was_given() -> None:
    def repair(announce: bool) -> str:
        config = LoopConfig(run_id="r", output=Note, announce_output=announce, max_turns=1)
        loop = AgentLoop(config, [UserMessage("Note x.")])
        (call,) = loop.start()
        (again,) = loop.handle(
            ModelResponded(call.request_id, AssistantMessage("no json"), agentcore.Usage())
        )
        assert isinstance(again, CallModel) and isinstance(again.messages[-1], UserMessage)
        return again.messages[-1].content

    assert repair(True).endswith("conforming to the JSON schema given in the instructions.")
    assert repair(False).endswith("Reply with only the corrected JSON value.")


async def test_a_forced_typed_batch_on_sim_runs_without_the_instruction() -> None:
    results = await run_batch(FORCED, ["a", "b"], backend="sim://")
    assert [r.status for r in results] == ["ok", "ok"]
    assert all(isinstance(r.output, Note) for r in results)
    assert all(r.transcript[0] == SystemMessage(SYSTEM) for r in results)


async def test_a_tool_turn_answer_still_follows_the_announced_schema() -> None:
    # A task whose tool turns may answer keeps the instruction, and the loop structures
    # the answer given on such a turn.
    task = attrs.evolve(FORCED, params=ModelParams(), max_turns=3)
    (result,) = await run_batch(task, ["a"], backend="sim://")
    assert result.status == "ok" and isinstance(result.output, Note)
    assert announced(result.transcript[0].content)


def test_the_instruction_follows_a_tool_turn_in_a_forced_run() -> None:
    loop = compile_job(FORCED, "x", run_id="r", schema_on_final=True)
    (first,) = loop.start()
    reply = AssistantMessage(tool_calls=(ToolCall("c0", "look", '{"topic": "x"}'),))
    loop.handle(ModelResponded(first.request_id, reply, agentcore.Usage()))
    (final,) = loop.handle(ToolReturned("c0", "notes on x"))
    assert isinstance(final, CallModel) and final.params.tool_choice == "none"
    assert final.output is not None  # the schema travels with the request
    assert final.messages[0] == SystemMessage(SYSTEM)
