"""A batch on a vLLM-dialect backend pads its shared prefix as the engine measures it: the block
size read from ``/metrics``, the probes tokenized by ``/tokenize`` (a loopback engine with the
scripted template and tokenizer of ``tests/batch/scripted_tokenizer.py``), every chat request
of the batch then sharing the prefix up to the boundary, and every request of the alignment
counted in the batch's report. ``align_prefix`` decides when."""

from __future__ import annotations

from typing import Any

import attrs
import orjson
import pytest

import agentcore
from agentcore import run_batch
from agentcore._tasks.align import AUTO_MIN_BLOCK
from agentcore._tasks.warmup import CHECK_PROMPT
from tests.batch.scripted_tokenizer import TASK, ScriptedTokenizer, Summary, papers, search, shared
from tests.driver.openai_server import Reply, completion, error, open_openai_server

METRICS = (
    "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
    "# TYPE vllm:cache_config_info gauge\n"
    'vllm:cache_config_info{block_size="BLOCK",cache_dtype="auto",'
    'cache_hit_alignment_tokens="None",enable_prefix_caching="True",engine="0"} 1.0\n'
)


INPUTS = papers(40)


@attrs.define
class Engine:
    """The loopback engine's behaviour and what it saw."""

    block: int
    tokenizer: ScriptedTokenizer = attrs.field(factory=ScriptedTokenizer)
    metrics_status: int = 200
    prompts: list[list[int]] = attrs.field(factory=list)
    """The token ids of every chat request's prompt."""

    def chat(self, body: dict[str, Any], n: int) -> Reply:
        self.prompts.append(self.tokenizer.ids(body))
        if body.get("tool_choice") == "required":
            return completion(None, [(f"c{n}", "search", '{"query": "q"}')])
        return completion('{"text": "a summary"}')

    def routes(self) -> dict[str, Any]:
        def metrics(body: dict[str, Any]) -> Reply:
            if self.metrics_status != 200:
                return error(self.metrics_status, "not found")
            text = METRICS.replace("BLOCK", str(self.block)).encode()
            return Reply(headers=(("content-type", "text/plain"),), body=text)

        def tokenize(body: dict[str, Any]) -> Reply:
            assert body["add_generation_prompt"] is True
            tokens = self.tokenizer.ids(body)
            answer = {"count": len(tokens), "max_model_len": 4096, "tokens": tokens}
            return Reply(headers=(("content-type", "application/json"),), body=orjson.dumps(answer))

        return {"/metrics": metrics, "/tokenize": tokenize}


async def run(engine: Engine, **options: Any) -> tuple[list[Any], Any, Any]:
    async with (
        open_openai_server(engine.chat, engine.routes()) as server,
        agentcore.open_batch(
            TASK, INPUTS, backend=server.url, dialect="vllm", model="m", **options
        ) as stream,
    ):
        results = [r async for r in stream]
    return results, stream.warm_up, server


def jobs(server: Any) -> list[dict[str, Any]]:
    """The bodies of the batch's own requests (not the warm-up's)."""
    return [body for body in server.requests if body.get("max_tokens") != 1]


def prompts(engine: Engine, server: Any, first: bool) -> list[list[int]]:
    """The prompt tokens of the batch's first requests (``first``), or of its one-token
    warm-up request."""
    return [
        prompt
        for prompt, body in zip(engine.prompts, server.requests, strict=True)
        if (body.get("max_tokens") != 1 and body.get("tool_choice") == "required") is first
        and (first or body.get("max_tokens") == 1)
    ]


async def test_every_request_shares_the_prefix_up_to_the_engines_block_boundary() -> None:
    engine = Engine(block=64)
    results, report, server = await run(engine)
    assert all(r.status == "ok" and r.output == Summary("a summary") for r in results)
    alignment = report.alignment
    assert alignment is not None and alignment.aligned
    assert alignment.block_size == 64 and alignment.boundary % 64 == 0
    assert alignment.requests == len(server.routed)  # /metrics and every /tokenize
    assert server.routed[0][0] == "/metrics"
    first_requests = prompts(engine, server, first=True)
    assert len(first_requests) == len(INPUTS)
    assert shared(first_requests) >= alignment.boundary
    system = server.requests[-1]["messages"][0]["content"]
    assert system == TASK.system + alignment.padding  # no output instruction: see announce_output


@pytest.mark.parametrize("given", [list, tuple, iter])
async def test_a_sequence_of_inputs_is_sampled_across_and_an_iterator_at_its_head(
    given: Any,
) -> None:
    engine = Engine(block=64)
    async with (
        open_openai_server(engine.chat, engine.routes()) as server,
        agentcore.open_batch(
            TASK, given(INPUTS), backend=server.url, dialect="vllm", model="m"
        ) as stream,
    ):
        results = [r async for r in stream]
    assert sorted(r.index for r in results if r.status == "ok") == list(range(len(INPUTS)))
    tokenized = [request for route, request in server.routed if route == "/tokenize"]
    users = [m["content"] for body in tokenized for m in body["messages"] if m["role"] == "user"]
    sequence = given is not iter
    assert any(INPUTS[-1]["paper"] in text for text in users) is sequence
    assert stream.warm_up is not None and stream.warm_up.alignment is not None
    assert stream.warm_up.alignment.aligned


async def test_vllms_warm_up_checks_the_backend_while_the_prefix_is_measured() -> None:
    # vLLM shares a prefix between requests scheduled together, so its warm-up request
    # carries no prefix: it only checks that the backend serves the model.
    engine = Engine(block=64)
    _, report, server = await run(engine)
    assert (report.strategy, report.done, report.slots_filled) == ("check", "check", 0)
    (check,) = [body for body in server.requests if body.get("max_tokens") == 1]
    assert check["messages"] == [{"role": "user", "content": CHECK_PROMPT}]
    assert "tools" not in check


@pytest.mark.parametrize("warm", ["request", True])
async def test_a_warm_request_carries_every_block_of_the_padded_prefix(warm: object) -> None:
    engine = Engine(block=64)
    _, report, server = await run(engine, warm=warm)
    assert report.done == "request" and report.alignment.aligned
    (warm,) = prompts(engine, server, first=False)
    assert shared([warm, *prompts(engine, server, first=True)]) >= report.alignment.boundary


async def test_auto_leaves_small_blocks_alone_and_reads_their_size_once_per_driver() -> None:
    engine = Engine(block=AUTO_MIN_BLOCK // 2)
    reports = []
    async with (
        open_openai_server(engine.chat, engine.routes()) as server,
        agentcore.open_driver(server.url, dialect="vllm", model="m", tools=[search]) as driver,
    ):
        for _ in range(2):
            async with agentcore.open_batch(TASK, INPUTS[:4], driver=driver) as stream:
                assert all([r.status == "ok" async for r in stream])
            reports.append(stream.warm_up.alignment)
            routed, server.routed = server.routed, []
            # The first batch asks for the block size and the probes' tokens at once; the
            # second knows the block size, too small to pad, and asks nothing.
            assert reports[-1].requests == len(routed)
            if len(reports) == 1:
                assert [path for path, _ in routed].count("/metrics") == 1
            else:
                assert routed == []
    for report in reports:
        assert not report.aligned and report.block_size == AUTO_MIN_BLOCK // 2
        assert "pads from" in report.detail
    assert all(body["messages"][0]["content"] == TASK.system for body in jobs(server))


async def test_align_prefix_true_pads_small_blocks_too() -> None:
    engine = Engine(block=16)
    _, report, _ = await run(engine, align_prefix=True)
    assert report.alignment is not None and report.alignment.aligned
    assert report.alignment.boundary % 16 == 0


async def test_align_prefix_false_asks_the_engine_nothing() -> None:
    engine = Engine(block=128)
    _, report, server = await run(engine, align_prefix=False)
    assert report.alignment is None
    assert server.routed == []


async def test_an_engine_without_block_metrics_runs_the_batch_unpadded_and_says_why() -> None:
    engine = Engine(block=128, metrics_status=404)
    results, report, server = await run(engine)
    assert all(r.status == "ok" for r in results)
    assert report.alignment is not None and not report.alignment.aligned
    assert report.alignment.detail == "/metrics answered 404"
    assert report.alignment.requests == len(server.routed)
    assert all(body["messages"][0]["content"] == TASK.system for body in jobs(server))


async def test_a_batch_of_one_input_is_not_aligned() -> None:
    engine = Engine(block=128)
    async with open_openai_server(engine.chat, engine.routes()) as server:
        await run_batch(TASK, INPUTS[:1], backend=server.url, dialect="vllm", model="m")
    assert server.routed == []


@pytest.mark.parametrize("align_prefix", [True, False])
async def test_padded_and_unpadded_batches_send_the_same_requests_but_for_the_padding(
    align_prefix: bool,
) -> None:
    engine = Engine(block=64)
    _, report, server = await run(engine, align_prefix=align_prefix)
    padding = report.alignment.padding if report.alignment else ""
    assert bool(padding) == align_prefix
    for body in jobs(server):
        assert body["messages"][0]["content"] == TASK.system + padding
        assert body["messages"][1]["content"].startswith("Summarise the paper ")
