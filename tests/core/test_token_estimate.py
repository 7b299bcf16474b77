"""The prompt-token estimate: linear in a request's features, fitted to what servers count."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore._core.token_estimate import (
    EstimateErrors,
    RequestShape,
    TokenEstimator,
    prompt_features,
    shape_of,
)
from agentcore.core import (
    AgentHints,
    AssistantMessage,
    CallModel,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)

SPEC = ToolSpec(
    "lookup",
    "Look a record up.",
    {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
)


def conversation(question: str, results: list[str], *, final: bool = False) -> CallModel:
    """A run's request after ``len(results)`` tool turns (the forced final one if ``final``)."""
    messages: list[object] = [SystemMessage("You look records up. " * 20), UserMessage(question)]
    for n, result in enumerate(results):
        call = ToolCall(f"c{n}", "lookup", f'{{"key": "r{n}"}}')
        messages += [AssistantMessage(tool_calls=[call]), ToolMessage(f"c{n}", "lookup", result)]
    if final:
        messages.append(UserMessage("Answer now."))
    hints = AgentHints("s", turn=len(results), final=final)
    return CallModel("r", tuple(messages), (SPEC,), hints=hints)  # type: ignore[arg-type]


def test_shapes_are_told_apart() -> None:
    assert shape_of(conversation("q", [])) is RequestShape.FIRST
    assert shape_of(conversation("q", ["a", "b"])) is RequestShape.TOOL_RESULTS
    assert shape_of(conversation("q", ["a"], final=True)) is RequestShape.FINAL
    repair = CallModel("r", (UserMessage("q"), AssistantMessage("x"), UserMessage("again")))
    assert shape_of(repair) is RequestShape.OTHER


def test_features_count_text_framing_specs_and_images() -> None:
    constant, text, units, spec, images = prompt_features(conversation("q?", ["abc"]))
    assert constant == 1.0
    assert text == len("You look records up. " * 20) + 2 + len('{"key": "r0"}') + 6 + 3
    assert units == 1 + 5  # the tool; system, user, assistant, its call, the result
    assert spec == len("lookup") + len("Look a record up.") + len(
        '{"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}'
    )
    assert images == 0.0


@settings(max_examples=40)
@given(
    per_char=st.floats(0.15, 0.8),
    per_unit=st.floats(0.0, 30.0),
    per_spec_char=st.floats(0.1, 0.6),
    flat=st.floats(0.0, 50.0),
    results=st.permutations([10 + 100 * k for k in range(30)]),
)
def test_a_linear_count_is_learned_for_every_shape(
    per_char: float,
    per_unit: float,
    per_spec_char: float,
    flat: float,
    results: list[int],
) -> None:
    # A server whose count is linear in the features (its template frames each message, its
    # tokenizer reads text and specs at their own rates): after a few dozen runs' replies the
    # estimate is within 1 % on first turns, tool-result turns and final turns alike, given
    # tool results of different sizes (else text and framing grow together, and cannot be told
    # apart), in any order; give or take two tokens of rounding (the estimate rounds up, the
    # count either way).

    def counted(call: CallModel) -> int:
        _, text, units, spec, _ = prompt_features(call)
        return round(flat + per_char * text + per_unit * units + per_spec_char * spec)

    estimator = TokenEstimator()
    for n, size in enumerate(results):
        for turns in range(3):
            call = conversation(f"question {n}", ["x" * size] * turns, final=turns == 2)
            estimator.learn(prompt_features(call), counted(call), 20)
    for call in (
        conversation("a new question", []),
        conversation("a new question", ["y" * 700]),
        conversation("a new question", ["y" * 2_000, "z" * 50], final=True),
    ):
        assert estimator.prompt(prompt_features(call)) == pytest.approx(
            counted(call), rel=0.01, abs=2
        )


@settings(max_examples=50)
@given(st.floats(0.1, 1.0), st.integers(1, 500))
def test_the_estimator_learns_the_tokens_per_character_ratio(ratio: float, completion: int) -> None:
    estimator = TokenEstimator()
    for n in range(200):
        call = CallModel("r", (UserMessage("w" * (1_000 + 37 * (n % 100))),))
        estimator.learn(
            prompt_features(call), math.ceil(len(call.messages[0].content) * ratio), completion
        )  # type: ignore[union-attr]
    call = CallModel("r", (UserMessage("v" * 1_000),))
    features = prompt_features(call)
    assert estimator.estimate(features, None) == pytest.approx(1_000 * ratio + completion, rel=0.02)
    assert estimator.estimate(features, 1) <= math.ceil(1_000 * ratio * 1.02) + 1


def test_before_any_reply_the_prior_holds() -> None:
    estimator = TokenEstimator()
    call = CallModel("r", (UserMessage("w" * 400),))
    assert estimator.prompt(prompt_features(call)) == 100 + 4
    assert estimator.reply(None) == 256
    assert estimator.reply(64) == 64


def test_errors_are_kept_per_shape() -> None:
    errors = EstimateErrors()
    errors.record(RequestShape.FIRST, 90, 100)
    errors.record(RequestShape.FIRST, 110, 100)
    errors.record(RequestShape.FINAL, 100, 100)
    errors.record(RequestShape.FINAL, 5, 0)  # nothing counted: nothing to compare
    first, final = errors.summary()
    assert (first.shape, first.requests) == (RequestShape.FIRST, 2)
    assert first.mean == pytest.approx(0.0)
    assert first.mean_abs == pytest.approx(0.1)
    assert first.worst_short == pytest.approx(-0.1)
    assert (final.shape, final.requests, final.worst_short) == (RequestShape.FINAL, 1, 0.0)
