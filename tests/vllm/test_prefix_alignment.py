"""The shared prefix padded to vLLM's cache blocks, against the real server (``make
test-vllm``): the block size read from its ``/metrics``, the probes tokenized by its
``/tokenize``, every first request of the batch then finding the prefix cached up to the
boundary, the alignment's requests counted, the same answers padded or not, and a batch
resumed from its step journal padded as its first run was."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

import agentcore
from agentcore import Result, open_driver
from agentcore._codecs.openai import OpenAICodec
from agentcore._tasks.align import probe_calls, sample_inputs
from agentcore._tasks.task import common_opening
from agentcore.core import AssistantMessage, SystemMessage, ToolMessage
from tests.vllm.test_vllm import REPLY, plain, research, run
from tests.vllm.vllm_server import BLOCK, MAX_NUM_SEQS, VllmServer

pytestmark = pytest.mark.vllm

# Distinct inputs whose first requests differ right after the template's head: nothing but the
# padded prefix is shared between two agents.
SUBJECTS = [
    {"topic": t} for t in ("tides", "comets", "glaciers", "volcanoes", "moss", "owls", "dunes")
]
COMPUTED = 'vllm:prompt_tokens_by_source_total{source="local_compute"}'


def tokenize_lines(server: VllmServer) -> int:
    """``POST /tokenize`` requests in the server's access log so far."""
    return server.log.read_text(errors="replace").count('"POST /tokenize HTTP/1.1"')


def settled_tokenize_lines(server: VllmServer, at_least: int) -> int:
    """The access log's count once it holds ``at_least`` lines (it is written a moment after
    the reply), or after 10 s."""
    deadline = time.monotonic() + 10
    count = tokenize_lines(server)
    while count < at_least and time.monotonic() < deadline:
        time.sleep(0.1)
        count = tokenize_lines(server)
    return count


def first_requests(stats: agentcore.DriverStatistics) -> list[Any]:
    return [r for r in stats.recent_requests if r.index is not None and r.request_id.endswith("/0")]


async def test_the_block_size_is_read_and_every_first_request_starts_past_the_boundary(
    vllm: VllmServer,
) -> None:
    before, lines = vllm.metrics(), tokenize_lines(vllm)
    results, stream, stats = await run(vllm.url, research(), SUBJECTS, warm=None)
    after = vllm.metrics()
    assert [r.status for r in results] == ["ok"] * len(SUBJECTS), [r.error for r in results]
    report = stream.warm_up
    assert report is not None and (report.strategy, report.done) == ("check", "check")
    alignment = report.alignment
    assert alignment is not None and alignment.aligned, alignment
    assert alignment.block_size == BLOCK
    assert alignment.boundary is not None and alignment.boundary % BLOCK == 0
    assert 0 < alignment.padding_tokens < BLOCK and alignment.padding.strip() == ""
    # Statistics: one /metrics read, every other request a tokenization the server logged.
    assert settled_tokenize_lines(vllm, lines + alignment.requests - 1) - lines == (
        alignment.requests - 1
    )
    # The engine found the padded prefix cached for every first request but the one that
    # computed it (the check warm-up carries no prefix: vLLM shares blocks between requests
    # scheduled together), and computed only the tokens after the boundary for the others.
    firsts = first_requests(stats)
    assert len(firsts) == len(SUBJECTS)
    cached = sorted(r.cached_tokens for r in firsts)
    assert cached[0] in (0, alignment.boundary)
    assert cached[1:] == [alignment.boundary] * (len(firsts) - 1), cached
    assert all(r.prompt_tokens - alignment.boundary < BLOCK for r in firsts)
    assert after[COMPUTED] - before[COMPUTED] == stats.prompt_tokens - stats.cached_tokens


async def test_aligned_batches_compute_less_than_unaligned_ones(vllm: VllmServer) -> None:
    computed = {}
    for align in (False, True):
        task = research()  # a system prompt of its own: both start cold
        before = vllm.metrics()[COMPUTED]
        results, stream, _ = await run(vllm.url, task, SUBJECTS, warm=None, align_prefix=align)
        assert all(r.status == "ok" for r in results)
        assert (stream.warm_up.alignment is not None) is align
        computed[align] = vllm.metrics()[COMPUTED] - before
    # Unaligned, each of the 2 x 7 requests recomputes the tail of the shared prefix's last
    # partial block; aligned, none does (at most a block more once: the padding).
    assert computed[True] < computed[False], computed


def answers(results: list[Result]) -> list[Any]:
    """What each agent did and answered, without the system prompt."""
    return [
        (
            r.status,
            r.output,
            [(c.name, c.arguments) for m in r.transcript if isinstance(m, AssistantMessage)
             for c in m.tool_calls],
            [m.content for m in r.transcript if isinstance(m, ToolMessage)],
        )
        for r in results
    ]  # fmt: skip


@pytest.mark.parametrize("kind", ["typed", "text"])
async def test_padded_and_unpadded_runs_give_the_same_answers(vllm: VllmServer, kind: str) -> None:
    task = research() if kind == "typed" else plain()
    padded, stream, _ = await run(vllm.url, task, SUBJECTS, warm=None, align_prefix=True)
    unpadded, _, _ = await run(vllm.url, task, SUBJECTS, warm=None, align_prefix=False)
    alignment = stream.warm_up.alignment
    assert alignment is not None and alignment.padding
    assert answers(padded) == answers(unpadded)
    if kind == "text":
        assert [r.output for r in padded] == [REPLY] * len(SUBJECTS)
    for padded_run, unpadded_run in zip(padded, unpadded, strict=True):
        system, plain_system = padded_run.transcript[0], unpadded_run.transcript[0]
        assert isinstance(system, SystemMessage) and isinstance(plain_system, SystemMessage)
        assert system.content == plain_system.content + alignment.padding


async def test_tokenize_counts_the_prompt_the_chat_endpoint_computes(vllm: VllmServer) -> None:
    # The alignment measures with /tokenize: its count for a request is the prompt the chat
    # endpoint reports for the same request (same template, tools and messages).
    task = research()
    samples, _, every = sample_inputs(SUBJECTS[:2])
    codec = OpenAICodec(base_url=vllm.http + "/v1", model="tiny", dialect="vllm")
    for call in probe_calls(
        task, samples, opening=common_opening(task, samples), every_input=every,
        schema_on_final=True, warm=True,
    ):  # fmt: skip
        chat = codec.encode(call)
        body = orjson.loads(chat.body)
        tokenized = {k: body[k] for k in ("model", "messages", "tools") if k in body}
        with urllib.request.urlopen(
            urllib.request.Request(vllm.http + "/tokenize", data=orjson.dumps(tokenized),
                                   headers={"content-type": "application/json"}),
            timeout=30,
        ) as reply:  # fmt: skip
            count = orjson.loads(reply.read())["count"]
        body["max_tokens"] = 1
        with urllib.request.urlopen(
            urllib.request.Request(chat.url, data=orjson.dumps(body), headers=dict(chat.headers)),
            timeout=60,
        ) as reply:
            assert orjson.loads(reply.read())["usage"]["prompt_tokens"] == count


async def test_a_batch_that_turns_alignment_off_sends_no_tokenization(vllm: VllmServer) -> None:
    lines = tokenize_lines(vllm)
    _, stream, _ = await run(vllm.url, research(), SUBJECTS[:3], warm=None, align_prefix=False)
    assert stream.warm_up is not None and stream.warm_up.alignment is None
    time.sleep(0.5)
    assert tokenize_lines(vllm) == lines


async def test_a_resumed_batch_sends_the_padding_its_first_run_measured_and_finds_it_cached(
    vllm: VllmServer, tmp_path: Path
) -> None:
    # Agents 4-7 are stopped in their tool; the resumed batch runs only them (as `agentcore
    # run --resume` does), and they open alike: measured on their own they would share more
    # tokens, and get another padding, than the whole batch did.
    inputs = [{"topic": t} for t in ("tides", "moss", "owls", "dunes")] + [
        {"topic": f"comets of the outer solar system, part {i}"} for i in range(4)
    ]
    stopped = [4, 5, 6, 7]
    first_run = True
    waiting: set[int] = set()
    all_waiting = trio.Event()

    @agentcore.tool
    async def search(ctx: agentcore.RunContext, q: str) -> str:
        """Search the notes.

        Args:
            q: what to look for.
        """
        if first_run and ctx.index in stopped:
            waiting.add(ctx.index)
            if len(waiting) == len(stopped):
                all_waiting.set()
            await trio.sleep_forever()
        return f"notes about {q!r}"

    task = research(tools=[search])
    path = tmp_path / "batch.journal"

    async def batch(values: list[Any], indices: list[int] | None) -> tuple[list[Result], Any, Any]:
        results: list[Result] = []
        async with (
            open_driver(vllm.url, model="tiny", max_inflight=MAX_NUM_SEQS, tools=[search]) as d,
            agentcore.open_batch(task, values, driver=d, step_journal=path, indices=indices) as s,
        ):
            async for result in s:
                results.append(result)
                if first_run and len(results) == len(inputs) - len(stopped):
                    await all_waiting.wait()
                    s.cancel()
            stats = d.statistics()
        assert s.warm_up is not None
        return results, s.warm_up.alignment, stats

    first, alignment, _ = await batch(inputs, None)
    assert sorted(r.index for r in first if r.status == "ok") == [0, 1, 2, 3]
    assert alignment is not None and alignment.aligned and alignment.padding
    first_run = False
    lines = tokenize_lines(vllm)
    again, resumed, stats = await batch([inputs[i] for i in stopped], stopped)
    assert sorted(r.index for r in again if r.status == "ok") == stopped, [r.error for r in again]
    assert resumed is not None and resumed.journaled and resumed.requests == 0
    assert resumed.padding == alignment.padding and resumed.boundary == alignment.boundary
    time.sleep(0.5)
    assert tokenize_lines(vllm) == lines
    for result in again:
        system = result.transcript[0]
        assert isinstance(system, SystemMessage)
        assert system.content == task.system + alignment.padding
    # Each restored agent asked only for its final answer, and the engine found its padded
    # prefix cached from the first run, up to the boundary and past it.
    finals = [r for r in stats.recent_requests if r.index is not None]
    assert len(finals) == len(stopped) and all(r.request_id.endswith("/1") for r in finals)
    assert all(r.cached_tokens >= alignment.boundary for r in finals), [
        r.cached_tokens for r in finals
    ]
