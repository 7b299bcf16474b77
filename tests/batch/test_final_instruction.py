"""The forced final request's instruction: ``"auto"`` leaves the default out of a typed task's
runs where every backend sends the output schema with that request, and keeps it elsewhere.

A final request is the one made once ``max_turns`` tool turns are spent: tools withheld with
``tool_choice="none"``. Where the codec also sends the output schema (``response_format``), a
server's guided decoding admits nothing but the answer, and the instruction only costs prompt
tokens no cache can hold (docs/decisions.md).
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

import agentcore
from agentcore import (
    DEFAULT_FINAL_INSTRUCTION,
    Agent,
    ModelParams,
    Task,
    open_driver,
    run_batch,
)
from agentcore._distributed.backoff import SharedBackoff
from agentcore._driver.open import open_driver_with
from agentcore._driver.options import DriverOptions
from agentcore._tasks.task import compile_job
from agentcore.core import (
    AssistantMessage,
    CallModel,
    ModelResponded,
    ToolCall,
    ToolMessage,
    ToolReturned,
    UserMessage,
)
from agentcore.testing import ScriptedModel
from agentcore.wire import ModelClient


@agentcore.tool(cache=True)
def look(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: what to look up.
    """
    return f"notes on {topic}"


@attrs.frozen
class Note:
    text: str


# Every request that offers tools must call one, so a run spends its one tool turn first.
FORCED = ModelParams(tool_choice="required")
TYPED = Task(prompt="Note {input}.", tools=[look], output=Note, max_turns=1, params=FORCED)
TEXT = attrs.evolve(TYPED, output=None)
INSTRUCTION = UserMessage(DEFAULT_FINAL_INSTRUCTION)


def final_request(task: Task[Any], *, schema_on_final: bool) -> CallModel:
    """The final request of one compiled job, after one tool turn."""
    loop = compile_job(task, "x", run_id="r", schema_on_final=schema_on_final)
    (first,) = loop.start()
    assert isinstance(first, CallModel)
    reply = AssistantMessage(tool_calls=(ToolCall("c0", "look", '{"topic": "x"}'),))
    loop.handle(ModelResponded(first.request_id, reply, agentcore.Usage()))
    (final,) = loop.handle(ToolReturned("c0", "notes on x"))
    assert isinstance(final, CallModel) and final.hints.final
    return final


def test_the_default_is_auto() -> None:
    assert TYPED.final_instruction == "auto"
    assert Agent().final_instruction == "auto"


@pytest.mark.parametrize(
    ("task", "schema_on_final", "last"),
    [
        (TYPED, True, None),  # the schema is sent: the reply can only be the answer
        (TYPED, False, INSTRUCTION),  # nothing constrains the reply: the model is told
        (TEXT, True, INSTRUCTION),  # a text answer has no schema to send
        (TEXT, False, INSTRUCTION),
    ],
)
def test_auto_sends_the_default_instruction_only_where_nothing_else_constrains_the_answer(
    task: Task[Any], schema_on_final: bool, last: UserMessage | None
) -> None:
    final = final_request(task, schema_on_final=schema_on_final)
    if last is None:
        assert isinstance(final.messages[-1], ToolMessage)
        assert INSTRUCTION not in final.messages
    else:
        assert final.messages[-1] == last


@pytest.mark.parametrize("schema_on_final", [True, False])
@pytest.mark.parametrize("instruction", ["Answer now.", None])
def test_an_instruction_given_is_sent_on_every_backend_and_none_never(
    instruction: str | None, schema_on_final: bool
) -> None:
    final = final_request(
        attrs.evolve(TYPED, final_instruction=instruction), schema_on_final=schema_on_final
    )
    if instruction is None:
        assert isinstance(final.messages[-1], ToolMessage)
    else:
        assert final.messages[-1] == UserMessage(instruction)


@pytest.mark.parametrize(
    ("backend", "options", "expected"),
    [
        ("sim://", {}, True),
        ("vllm://127.0.0.1:1", {}, True),  # response_format without tools (and on final)
        ("llamacpp://127.0.0.1:1", {}, True),
        ("sglang://127.0.0.1:1", {}, True),
        ("openai://", {"api_key": "k"}, True),  # response_format on every typed request
        ("http://127.0.0.1:1/v1", {}, True),
        ("vllm://127.0.0.1:1", {"response_format": "never"}, False),
        ("dynamo://127.0.0.1:1", {}, False),  # the dialect never sends response_format
        ("anthropic://", {"api_key": "k"}, False),  # the schema is in the system prompt only
    ],
)
async def test_a_driver_knows_whether_its_backend_sends_the_schema_with_the_final_request(
    backend: str, options: dict[str, Any], expected: bool
) -> None:
    async with open_driver(backend, model="m", **options) as driver:
        assert driver.schema_on_final is expected
        assert driver.backend is not None
        assert driver.backend.schema_on_final is expected


async def test_every_fallback_must_send_the_schema_too() -> None:
    async with open_driver("sim://", fallback=["sim://"]) as driver:
        assert driver.schema_on_final
    async with open_driver("sim://", fallback=["dynamo://127.0.0.1:1"], model="m") as driver:
        assert not driver.schema_on_final  # a request that falls over is not constrained
    async with open_driver("sim://", fallback=[ScriptedModel(lambda call: "x")]) as driver:
        assert not driver.schema_on_final
    async with open_driver(ScriptedModel(lambda call: "x")) as driver:
        assert not driver.schema_on_final  # a model client that does not say


class Saying:
    """A model client of one's own that says its final requests carry the schema."""

    schema_on_final = True

    async def exchange(self, call: CallModel) -> Any:
        raise AssertionError("not called")

    async def aclose(self) -> None:
        return None


async def test_a_model_client_given_as_such_counts_when_it_says_so() -> None:
    async with open_driver(Saying()) as driver:
        assert driver.schema_on_final
    async with open_driver("sim://", fallback=[Saying()]) as driver:
        assert driver.schema_on_final


async def test_a_distributed_workers_shared_back_off_keeps_its_clients_answer() -> None:
    # Workers wrap their backend's client to pause together; the wrapper sends the same
    # requests, so a distributed batch sends what a local one sends.
    def wrap(inner: ModelClient) -> ModelClient:
        return SharedBackoff(inner, None, "pause")  # type: ignore[arg-type]

    options = DriverOptions(model="m")
    async with open_driver_with("vllm://127.0.0.1:1", options, (), wrap) as driver:
        assert isinstance(driver.client, SharedBackoff)
        assert driver.backend is not None and driver.backend.schema_on_final
        assert driver.schema_on_final


def instruction_sent(transcript: Any) -> bool:
    return any(m == INSTRUCTION for m in transcript)


async def test_a_typed_batch_on_sim_ends_with_the_tool_results_and_a_text_batch_is_told() -> None:
    typed = await run_batch(TYPED, ["a", "b"], backend="sim://")
    text = await run_batch(TEXT, ["a", "b"], backend="sim://")
    assert [r.status for r in typed + text] == ["ok"] * 4
    assert all(isinstance(r.output, Note) for r in typed)
    assert all(r.turns == 2 for r in typed + text)  # one tool turn, then the final request
    assert not any(instruction_sent(r.transcript) for r in typed)
    assert all(instruction_sent(r.transcript) for r in text)


async def test_a_typed_batch_on_a_model_client_is_told() -> None:
    def answer(call: CallModel) -> str | AssistantMessage:
        if call.params.tool_choice == "none":
            return '{"text": "done"}'
        return AssistantMessage(tool_calls=[ToolCall("c0", "look", '{"topic": "x"}')])

    model = ScriptedModel(answer)
    async with open_driver(model, tools=[look]) as driver:
        (result,) = await run_batch(TYPED, ["a"], driver=driver)
    assert result.output == Note("done")
    assert model.calls[-1].messages[-1] == INSTRUCTION


async def test_an_agent_asks_its_driver_and_its_loop_without_one_keeps_the_instruction() -> None:
    agent = Agent(tools=[look], output=Note, max_turns=1, params=FORCED)
    async with open_driver("sim://", tools=agent.tools) as driver:
        result = await agent.run("x", driver=driver)
        assert result.status == "ok" and isinstance(result.output, Note)
        assert not instruction_sent(result.transcript)
        told = await driver.run(agent.loop("x"))
        assert told.status == "ok" and instruction_sent(told.transcript)
        untold = await driver.run(agent.loop("x", driver=driver))
        assert untold.status == "ok" and not instruction_sent(untold.transcript)
