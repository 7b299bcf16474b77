"""Padding a batch's shared prefix to the engine's cache blocks, against a scripted tokenizer
(``tests/batch/scripted_tokenizer.py``): the boundary is reached, the warm-up request covers
it, whitespace a tokenizer merges or a template drops is measured rather than assumed, the
inputs are sampled so that the boundary holds for every input, and the requests are counted."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import attrs
import pytest

from agentcore import Task
from agentcore._tasks.align import (
    MAX_TRIES,
    PAD_UNITS,
    PrefixAlignment,
    pad_to_blocks,
    probe_calls,
    sample_inputs,
)
from agentcore._tasks.task import common_opening, compile_job, prefix_call
from agentcore.core import CallModel, SystemMessage
from tests.batch.scripted_tokenizer import TASK, ScriptedTokenizer, papers, shared


def first_request(task: Task[Any], value: Any) -> CallModel:
    (call,) = compile_job(task, value, run_id="r", schema_on_final=True).start()
    assert isinstance(call, CallModel)
    return call


async def align(
    tokenizer: Any, inputs: Any, block: int, task: Task[Any] = TASK, *, warm: bool = True
) -> tuple[Task[Any], PrefixAlignment, Any]:
    """Align ``task`` for ``inputs``; ``warm``: as for a batch that sends a warm request
    carrying the prefix."""
    samples, inputs, every = sample_inputs(inputs)
    opening = common_opening(task, samples)

    def probes(candidate: Task[Any]) -> list[CallModel]:
        return probe_calls(
            candidate,
            samples,
            opening=opening,
            every_input=every,
            schema_on_final=True,
            warm=warm,
        )

    padded, report = await pad_to_blocks(task, probes, tokenizer, block)
    return padded, report, (inputs, opening)


async def tokens_of(tokenizer: Any, calls: Sequence[CallModel]) -> list[list[int]]:
    found = [await tokenizer(call) for call in calls]
    assert all(t is not None for t in found)
    return [t for t in found if t is not None]


@pytest.mark.parametrize("block", [16, 32, 128])
async def test_every_first_request_shares_the_prefix_up_to_a_block_boundary(block: int) -> None:
    tokenizer = ScriptedTokenizer()
    inputs = papers(300)
    padded, report, (_, opening) = await align(tokenizer, inputs, block)
    assert report.block_size == block
    assert report.aligned and report.boundary is not None
    assert report.boundary % block == 0
    assert report.boundary > report.shared_tokens or report.shared_tokens % block == 0
    assert report.padding_tokens == report.boundary - report.shared_tokens < block
    jobs = await tokens_of(tokenizer, [first_request(padded, value) for value in inputs])
    assert shared(jobs) >= report.boundary  # every input, not only the sampled ones
    warm = prefix_call(padded, run_id="w", schema_on_final=True, opening=opening)
    (warm_tokens,) = await tokens_of(tokenizer, [warm])
    assert shared([warm_tokens, *jobs]) >= report.boundary  # the warm-up fills every block


async def test_the_padding_is_whitespace_at_the_end_of_the_system_prompt_only() -> None:
    padded, report, _ = await align(ScriptedTokenizer(), papers(8), 64)
    assert report.padding and set(report.padding) <= set(" \n")
    assert padded == attrs.evolve(TASK, system=TASK.system + report.padding)
    system = first_request(padded, papers(1)[0]).messages[0]
    assert isinstance(system, SystemMessage)
    assert system.content.startswith(TASK.system + report.padding)


async def test_a_prefix_already_on_a_boundary_is_not_padded() -> None:
    tokenizer = ScriptedTokenizer()
    _, first, _ = await align(tokenizer, papers(8), 64)
    assert first.padding
    # The same tokens shared, measured in blocks the shared prefix already ends on.
    padded, report, _ = await align(tokenizer, papers(8), first.shared_tokens)
    assert padded is TASK
    assert (report.padding, report.boundary) == ("", report.shared_tokens)


async def test_merged_newlines_are_counted_as_the_tokens_they_make() -> None:
    tokenizer = ScriptedTokenizer(merge_newlines=True)
    padded, report, _ = await align(tokenizer, papers(20), 64)
    assert report.aligned and report.boundary is not None
    assert len(report.padding) > report.padding_tokens  # two newlines a token
    jobs = await tokens_of(tokenizer, [first_request(padded, v) for v in papers(20)])
    assert shared(jobs) >= report.boundary and report.boundary % 64 == 0


async def test_a_template_that_drops_the_padding_leaves_the_task_as_it_was() -> None:
    tokenizer = ScriptedTokenizer(strip_system=True)
    padded, report, _ = await align(tokenizer, papers(8), 64)
    assert padded is TASK
    assert not report.aligned and report.padding == ""
    assert "no whitespace padding" in report.detail
    # The warm-up request and four samples, then one try of one probe per unit (each added
    # no token).
    assert report.requests == 5 + len(PAD_UNITS)


@pytest.mark.parametrize("warm", [True, False])
async def test_the_requests_are_counted(warm: bool) -> None:
    tokenizer = ScriptedTokenizer()
    padded, report, (_, opening) = await align(tokenizer, papers(300), 64, warm=warm)
    assert report.aligned and report.requests == len(tokenizer.calls)
    # Four sampled inputs (and the warm-up request when one is sent), then one probe per try.
    probes = 4 + warm
    assert probes < report.requests <= probes + len(PAD_UNITS) * MAX_TRIES
    warm_up = prefix_call(padded, run_id="align", schema_on_final=True, opening=opening)
    assert any(call.messages[-1] == warm_up.messages[-1] for call in tokenizer.calls) is warm


@attrs.frozen
class Trailing:
    """The scripted tokenizer with a last token that counts the system prompt's characters:
    padding then changes a token past the shared part of every probe."""

    tokenizer: ScriptedTokenizer = attrs.field(factory=ScriptedTokenizer)
    calls: list[CallModel] = attrs.field(factory=list)

    async def __call__(self, call: CallModel) -> list[int] | None:
        self.calls.append(call)
        tokens = await self.tokenizer(call)
        system = call.messages[0]
        assert tokens is not None and isinstance(system, SystemMessage)
        return [*tokens, 10_000 + len(system.content)]


async def test_padding_that_changes_tokens_past_the_shared_part_is_measured_on_two_probes() -> None:
    tokenizer = Trailing()
    padded, report, (inputs, _) = await align(tokenizer, papers(40), 64, warm=False)
    assert report.aligned and report.boundary is not None
    # Four samples, then per try the first probe and, its tail changed, two probes again.
    assert report.requests == len(tokenizer.calls) and (report.requests - 4) % 3 == 0
    jobs = await tokens_of(tokenizer, [first_request(padded, value) for value in inputs])
    assert shared(jobs) >= report.boundary and report.boundary % 64 == 0


async def test_an_engine_that_does_not_tokenize_leaves_the_task_as_it_was() -> None:
    async def refuses(call: CallModel) -> list[int] | None:
        return None

    samples, _, _ = sample_inputs(papers(4))
    padded, report = await pad_to_blocks(
        TASK,
        lambda t: probe_calls(
            t, samples, opening=None, every_input=True, schema_on_final=True, warm=True
        ),
        refuses,
        64,
    )
    assert padded is TASK and not report.aligned
    assert report.detail == "the engine did not tokenize the probe requests"


async def test_a_task_without_a_system_prompt_is_not_padded() -> None:
    padded, report, _ = await align(
        ScriptedTokenizer(), papers(4), 64, attrs.evolve(TASK, system="")
    )
    assert padded.system == "" and not report.aligned
    assert report.requests == 0


def test_a_sequence_is_sampled_across_its_length() -> None:
    inputs = papers(512)
    samples, run, every = sample_inputs(inputs)
    assert run is inputs and every
    assert samples == [inputs[0], inputs[170], inputs[341], inputs[511]]


def test_an_iterator_is_sampled_from_its_head_and_given_back_whole() -> None:
    samples, run, every = sample_inputs(iter(papers(10)))
    assert not every
    assert samples == papers(4)
    assert list(run) == papers(10)


async def test_an_iterator_aligns_to_what_the_template_guarantees_every_input() -> None:
    # The first inputs share "arXiv:2501.1000", the later ones less: the boundary must not
    # pass what the template's literal head guarantees.
    tokenizer = ScriptedTokenizer(merge_newlines=False)
    padded, report, (run, opening) = await align(tokenizer, iter(papers(300)), 16)
    assert opening == "Summarise the paper arXiv:2501.1000"
    assert report.aligned and report.boundary is not None
    everyone = await tokens_of(
        tokenizer, [first_request(padded, v) for v in itertools.islice(run, 300)]
    )
    assert shared(everyone) >= report.boundary


def test_the_opening_is_what_the_inputs_share_and_at_least_the_head() -> None:
    assert common_opening(TASK, papers(3)) == "Summarise the paper arXiv:2501.1000"
    assert common_opening(TASK, [papers(1)[0], {"paper": "x", "topic": "y"}]) == (
        "Summarise the paper "
    )
    assert common_opening(TASK, [{"nothing": 1}]) is None
