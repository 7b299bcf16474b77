"""OpenTelemetry spans (``otel=True``), checked with the SDK's in-memory exporter."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
import trio
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import agentcore
from agentcore.sim import SimConfig

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="session", autouse=True)
def provider() -> Iterator[None]:
    # Once per process, as OpenTelemetry allows: a module-scoped fixture is set up again when
    # a test worker comes back to this module after another one, and the second provider is
    # refused while the first is already shut down.
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(tracer_provider)
    yield
    tracer_provider.shutdown()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


@agentcore.tool(coalesce=True)
async def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: what to look up.
    """
    await trio.sleep(0.2)
    return f"{topic}: found"


TASK = agentcore.Task(
    name="look",
    system="Use the lookup tool, then answer in one sentence.",
    prompt="Topic: {topic}",
    tools=[lookup],
    max_turns=3,
)


def _by_operation(finished: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in finished if (s.attributes or {}).get("gen_ai.operation.name") == name]


async def test_runs_requests_and_tools_become_genai_spans(spans: InMemorySpanExporter) -> None:
    inputs = [{"topic": f"t{i}"} for i in range(12)]
    async with agentcore.open_driver(
        "sim://",
        model="sim-model",
        max_inflight=4,
        tools=[lookup],
        stream=True,
        otel=True,
        config=SimConfig(speedup=10, repeat_share=1.0, pool_size=1),
    ) as driver:
        results = await agentcore.run_batch(TASK, inputs, driver=driver)
        stats = driver.statistics()
    assert all(r.status == "ok" for r in results)
    finished = spans.get_finished_spans()
    runs = _by_operation(finished, "invoke_agent")
    chats = _by_operation(finished, "chat")
    tools = _by_operation(finished, "execute_tool")
    assert len(runs) == 12
    assert len(chats) == stats.requests
    run_ids = {r.context.span_id for r in runs}
    for chat in chats:
        attributes = chat.attributes or {}
        assert chat.name == "chat sim-model"
        assert attributes["gen_ai.request.model"] == "sim-model"
        assert attributes["server.address"] == "127.0.0.1"
        assert isinstance(attributes["server.port"], int)
        assert attributes["gen_ai.usage.input_tokens"] > 0
        assert attributes["gen_ai.usage.output_tokens"] > 0
        assert "gen_ai.usage.cache_read.input_tokens" in attributes
        assert attributes["gen_ai.response.finish_reasons"][0] in {"stop", "tool_calls", "length"}
        assert chat.events[0].name == "slot_acquired"
        if chat.parent is not None:
            assert chat.parent.span_id in run_ids
    assert sum(c.parent is None for c in chats) <= 1  # the prefix warm-up belongs to no run
    # Tool calls: one span per call, child of its run; its source says whether it ran the
    # execution or shared one (coalesced), and an execution counts the calls it answered.
    assert len(tools) == stats.tool_calls
    executions = [t for t in tools if (t.attributes or {})["agentcore.tool.source"] == "executed"]
    joined = [t for t in tools if (t.attributes or {})["agentcore.tool.source"] == "coalesced"]
    assert len(executions) == stats.tool_executions
    assert len(executions) + len(joined) == stats.tool_calls
    assert joined  # every agent asks the same thing at once: calls were coalesced
    assert sum((e.attributes or {})["agentcore.tool.waiters"] for e in executions) == len(tools)
    for span in tools:
        attributes = span.attributes or {}
        assert attributes["gen_ai.tool.name"] == "lookup"
        assert span.parent is not None and span.parent.span_id in run_ids


async def test_retries_are_span_events_and_final_failures_set_error_status(
    spans: InMemorySpanExporter,
) -> None:
    async with agentcore.open_driver(
        "sim://",
        model="sim",
        max_inflight=2,
        tools=[lookup],
        otel=True,
        retry=agentcore.RetryPolicy(max_attempts=2, base_delay=0.01, max_delay=0.02),
        config=SimConfig(speedup=20, fail_rate=0.6, seed=5),
    ) as driver:
        await agentcore.run_batch(TASK, [{"topic": f"t{i}"} for i in range(10)], driver=driver)
    chats = _by_operation(spans.get_finished_spans(), "chat")
    retried = [c for c in chats if any(e.name == "retry" for e in c.events)]
    assert retried
    for chat in retried:
        names = [e.name for e in chat.events]
        assert names[:3] == ["slot_acquired", "attempt_failed", "retry"]
    failed = [c for c in chats if c.status.status_code is StatusCode.ERROR]
    assert failed
    assert all((c.attributes or {}).get("error.type") for c in failed)
    runs = _by_operation(spans.get_finished_spans(), "invoke_agent")
    assert any(r.status.status_code is StatusCode.ERROR for r in runs)


def test_importing_agentcore_and_running_without_otel_loads_no_opentelemetry() -> None:
    script = (
        "import sys, trio, agentcore\n"
        "task = agentcore.Task(system='Answer.', prompt='Topic: {topic}')\n"
        "trio.run(lambda: agentcore.run_batch(task, [{'topic': 'x'}], backend='sim://',"
        " model='sim', trace='/dev/null'))\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


AGENT = agentcore.Agent(instructions="Use the lookup tool, then answer.", tools=[lookup])


async def test_concurrent_agent_runs_on_one_driver_get_one_invoke_agent_span_each(
    spans: InMemorySpanExporter,
) -> None:
    async with agentcore.open_driver(
        "sim://", model="sim", tools=AGENT.tools, otel=True, config=SimConfig(speedup=20)
    ) as driver:
        results: list[agentcore.Result] = []

        async def one(topic: str) -> None:
            results.append(await AGENT.run(f"Topic: {topic}", driver=driver))

        async with trio.open_nursery() as nursery:
            for topic in ("a", "b", "c"):
                nursery.start_soon(one, topic)
        # Each run's span has ended by the time its result is back: before the driver closes.
        runs = _by_operation(spans.get_finished_spans(), "invoke_agent")
    assert [r.status for r in results] == ["ok"] * 3
    assert len(runs) == 3  # all three have index 0; each has its own run id and span
    assert len({(r.attributes or {})["agentcore.run.id"] for r in runs}) == 3
    assert all((r.attributes or {})["agentcore.agent.status"] == "ok" for r in runs)
    assert all((r.attributes or {})["agentcore.agent.turns"] >= 2 for r in runs)
    # Every request and tool span hangs under its own run's span.
    run_ids = {r.context.span_id for r in runs}
    children = [
        s
        for s in spans.get_finished_spans()
        if (s.attributes or {}).get("gen_ai.operation.name") in {"chat", "execute_tool"}
        and s.parent is not None
    ]
    assert {c.parent.span_id for c in children if c.parent is not None} == run_ids


async def test_a_watched_run_ends_its_span_with_status_and_usage_when_it_ends(
    spans: InMemorySpanExporter,
) -> None:
    async with agentcore.open_driver(
        "sim://", model="sim", tools=AGENT.tools, otel=True, config=SimConfig(speedup=20)
    ) as driver:
        async with AGENT.watch("Topic: x", driver=driver) as steps:
            [_ async for _ in steps]
        assert steps.result is not None
        runs = _by_operation(spans.get_finished_spans(), "invoke_agent")  # driver still open
        assert len(runs) == 1
        attributes = runs[0].attributes or {}
        assert attributes["agentcore.agent.status"] == "ok"
        assert attributes["agentcore.agent.turns"] == steps.result.turns
        assert attributes["gen_ai.usage.input_tokens"] == steps.result.usage.prompt_tokens
        assert attributes["gen_ai.usage.output_tokens"] == steps.result.usage.completion_tokens
