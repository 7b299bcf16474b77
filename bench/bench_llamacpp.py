"""The research-summary shape on a real llama.cpp llama-server (CPU): agentcore against baselines.

Workload: N agents, each summarising one paper for one of 9 shared survey topics, in 2 turns:
a ``web_search`` of its topic (400 ms) under ``tool_choice="required"``, then the summary with
``tool_choice="none"`` (the scripted model of ``tools/llamacpp/make_model.py`` calls a tool
exactly when one is required, so every contender gets the same 2 turns and answers). Every
request carries the same ~2,000-token system prompt plus the tool schema. The server is
llama-server with ``--model`` (``tiny`` by default: 0.6 M parameters, so a loaded 2-core CI
machine finishes the sweep in minutes; ``small``, 13 M, gives prefill a real cost), ``-np``
slots, ``--threads`` compute threads, and a fresh process per run (cold cache, zeroed
counters). The prefill *token* counts do not depend on the model size; the wall times do.

Contenders, each in its own subprocess (client CPU measured by ``wait4``):

- ``agentcore``: ``run_batch`` over ``llamacpp://`` with the backend's defaults: the prefix
  warmed by slot copy (``warm_up="slots"``), ``max_inflight`` = slots, slots released during
  tool waits, identical searches coalesced;
- ``agentcore-plain``: the same, but sending exactly the hand-written loops' messages: no
  final-turn instruction (``Task(final_instruction=None)``; agentcore's default adds a user
  message to the forced final request, about 40 tokens per agent);
- ``agentcore-xK``: the defaults with ``max_inflight`` = K x slots;
- ``minimal``: a hand-written trio + httpx loop, a semaphore of ``slots`` around each request
  (released during tool waits), no warm-up, no coalescing;
- ``isolated``: the minimal loop holding its slot through the tool wait, and no prefix shared
  between agents (each system prompt starts with the agent's own session line);
- ``naive``: the minimal loop without any client-side limit: all N agents at once, the server
  queues what its slots cannot take.

Measured per run: wall time of the batch (inside the contender, warm-up included), prefill
tokens the server computed (``llamacpp:prompt_tokens_total`` from ``/metrics``: every request,
the warm-up included; restored slots compute nothing), model requests (as each contender
counts them), the server's decode steps (``n_decode_total``) and average busy slots per step
(``n_busy_slots_per_decode``: how full the server kept its batch), and the contender
process's CPU seconds. Cells are medians over ``--repeats``
runs; the contender order rotates between repeats.

With ``--typed`` the summary is a typed answer for every contender: agentcore's task has an
output type (``Summary``), the hand-written loops send its JSON schema as ``response_format``
with the final request, and an agent is counted ``ok`` only when its answer is a ``Summary``.
agentcore's defaults then send neither the final instruction nor the schema in the system
prompt (the server's grammar enforces the schema on the final request), as on vLLM.

Run: ``make bench-llamacpp`` or ``.venv/bin/python bench/bench_llamacpp.py [--n 32,128]
[--slots 8] [--repeats 3] [--typed]`` (builds llama-server first: ``tools/llamacpp/setup.sh``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    ROOT,
    emit,
    fmt,
    machine,
    median,
    percentile,
    project_python,
    research_system_prompt,
    rotations,
    run_measured,
    self_cpu,
    table,
)

CONTENDERS = ("agentcore", "minimal", "isolated", "naive")
# Extra contenders for the client-side-cap analysis: agentcore with max_inflight = k x slots.
INFLIGHT = re.compile(r"agentcore-x(\d+)$")
SERVER = ROOT / "tools" / "llamacpp" / "server.py"
TOPICS = 9
TEMPLATE = "Summarise the paper {paper} for the survey section on {topic}. Topic: {topic}."
MAX_TOKENS = 128  # a tool call takes ~50 tokens: never cut (see test_llamacpp for cut ones)
RESPONSE_FORMAT = {"type": "json_schema", "json_schema": {"name": "Summary", "schema": {
    "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"],
    "additionalProperties": False}}}  # fmt: skip


def system_prompt() -> str:
    """About 2,000 tokens on the scripted models' tokenizer (the tool schema adds ~100)."""
    return research_system_prompt(paragraphs=7)


def inputs(n: int) -> list[dict[str, str]]:
    return [{"paper": f"arXiv:2501.{10000 + i}", "topic": f"topic {i % TOPICS}"} for i in range(n)]


def is_summary(content: str | None) -> bool:
    """Whether a reply's text is a ``Summary`` (a JSON object with a string ``text``)."""
    import orjson

    try:
        value = orjson.loads(content or "null")
    except orjson.JSONDecodeError:
        return False
    return isinstance(value, dict) and isinstance(value.get("text"), str)


# ---------------------------------------------------------------------------- contenders


async def run_agentcore(  # noqa: PLR0917 - a contender's settings, one call site
    url: str,
    n: int,
    slots: int,
    latency: float,
    plain: bool = False,
    trace: str | None = None,
    typed: bool = False,
) -> dict[str, Any]:
    import attrs
    import trio

    import agentcore
    from agentcore import ModelParams

    @attrs.frozen
    class Summary:
        text: str

    executions = 0

    @agentcore.tool(cache=True)
    async def web_search(query: str) -> str:
        """Search the web and return the top results as text.

        Args:
            query: what to look up.
        """
        nonlocal executions
        executions += 1
        await trio.sleep(latency)
        return f"results for {query}"

    task = agentcore.Task(
        prompt=TEMPLATE,
        system=system_prompt(),
        tools=[web_search],
        max_turns=1,
        params=ModelParams(tool_choice="required", max_tokens=MAX_TOKENS),
        name="research",
        output=Summary if typed else None,
        **({"final_instruction": None} if plain else {}),
    )
    cpu0, t0 = self_cpu(), time.perf_counter()
    async with agentcore.open_driver(
        url, model="bench", max_inflight=slots, tools=[web_search], trace=trace
    ) as driver:
        async with agentcore.open_batch(task, inputs(n), driver=driver, warm=True) as stream:
            results = [r async for r in stream]
        stats = driver.statistics()
    return {
        "wall": time.perf_counter() - t0,
        "cpu": self_cpu() - cpu0,
        "ok": sum(
            r.status == "ok" and (not typed or isinstance(r.output, Summary)) for r in results
        ),
        "requests": stats.requests,
        "tool_executions": executions,
        "warm_up": None if stream.warm_up is None else stream.warm_up.done,
        "warm_up_s": None if stream.warm_up is None else stream.warm_up.seconds,
    }


async def run_loop(
    url: str,
    n: int,
    slots: int | None,
    latency: float,
    *,
    hold: bool,
    isolate: bool,
    typed: bool = False,
) -> dict[str, Any]:
    import httpx
    import orjson
    import trio

    endpoint = url + "/v1/chat/completions"
    system = system_prompt()
    tools = [{"type": "function", "function": {
        "name": "web_search", "description": "Search the web and return the top results as text.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                       "required": ["query"]}}}]  # fmt: skip
    limit = trio.Semaphore(slots or n)
    connections = slots or n
    counts = {"ok": 0, "requests": 0, "tool_executions": 0}
    client = httpx.AsyncClient(
        timeout=httpx.Timeout(600.0),
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
    )

    async def ask(messages: list[dict[str, Any]], choice: str) -> dict[str, Any]:
        body = {"model": "bench", "tools": tools, "messages": messages,
                "tool_choice": choice, "max_tokens": MAX_TOKENS}  # fmt: skip
        if typed and choice == "none":
            body["response_format"] = RESPONSE_FORMAT
        counts["requests"] += 1
        answer = await client.post(endpoint, content=orjson.dumps(body),
                                   headers={"content-type": "application/json"})  # fmt: skip
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
            for turn, choice in enumerate(("required", "none")):
                if hold:
                    reply = await ask(messages, choice)
                else:
                    async with limit:
                        reply = await ask(messages, choice)
                calls = reply.get("tool_calls") or []
                messages.append({"role": "assistant", "content": reply.get("content") or "",
                                 **({"tool_calls": calls} if calls else {})})  # fmt: skip
                if turn == 1 or not calls:
                    return not typed or (turn == 1 and is_summary(reply.get("content")))
                for call in calls:
                    counts["tool_executions"] += 1
                    await trio.sleep(latency)
                    query = orjson.loads(call["function"]["arguments"]).get("query", "")
                    messages.append({"role": "tool", "tool_call_id": call["id"],
                                     "content": f"results for {query}"})  # fmt: skip
            return False

        if hold:
            async with limit:
                good = await converse()
        else:
            good = await converse()
        counts["ok"] += good

    cpu0, t0 = self_cpu(), time.perf_counter()
    try:
        async with trio.open_nursery() as nursery:
            for index, values in enumerate(inputs(n)):
                nursery.start_soon(agent, index, values)
    finally:
        await client.aclose()
    return {"wall": time.perf_counter() - t0, "cpu": self_cpu() - cpu0, **counts}


def contender_main(args: argparse.Namespace) -> int:
    import trio

    name, url, n, slots, latency = args.contender, args.url, args.n[0], args.slots, args.latency
    capped = INFLIGHT.match(name)
    if name in ("agentcore", "agentcore-plain") or capped:
        url = url.replace("http://", "llamacpp://")
        inflight = slots * int(capped.group(1)) if capped else slots
        plain = name == "agentcore-plain"
        report = trio.run(run_agentcore, url, n, inflight, latency, plain, args.trace, args.typed)
    else:
        hold = name == "isolated"
        limit = None if name == "naive" else slots
        report = trio.run(
            lambda: run_loop(
                url, n, limit, latency, hold=hold, isolate=name == "isolated", typed=args.typed
            )
        )
    emit(report)
    return 0


# ---------------------------------------------------------------------------- orchestration


def metrics(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    found = {}
    for line in text.splitlines():
        match = re.match(r"llamacpp:(\w+)\s+([0-9.eE+-]+)$", line)
        if match:
            found[match.group(1)] = float(match.group(2))
    return found


def server(command: str, port: int, args: argparse.Namespace | None = None) -> None:
    argv = [sys.executable, str(SERVER), command, "--port", str(port)]
    if args is not None:
        argv += ["--model", args.model, "--slots", str(args.slots), "--ctx", "4096",
                 "--threads", str(args.threads), "--slot-save"]  # fmt: skip
    subprocess.run(argv, check=command == "start", capture_output=True, timeout=120)


def handoffs(trace: Path, slots: int) -> dict[str, Any]:
    """The client-side hand-off gaps of an agentcore run's trace: on each slot track, the time
    from one attempt's end to the next attempt's start while requests were waiting for a slot
    (the slot idles for that long at the client, before the server sees the next request)."""
    from bisect import bisect_right

    from agentcore._observe.trace import SLOTS_PID, read_trace

    lanes: dict[int, list[tuple[float, float]]] = {}
    waits: list[tuple[float, int]] = []
    for event in read_trace(trace):
        if (
            event.get("ph") == "X"
            and event.get("pid") == SLOTS_PID
            and event["name"] != "streaming"
        ):
            lanes.setdefault(event["tid"], []).append((event["ts"], event["ts"] + event["dur"]))
        elif event.get("ph") == "C" and event.get("name") == "slots":
            waits.append((event["ts"], event["args"].get("waiting", 0)))
    waits.sort()
    times = [t for t, _ in waits]
    gaps, first, last = [], math.inf, 0.0
    for spans in lanes.values():
        spans.sort()
        first, last = min(first, spans[0][0]), max(last, spans[-1][1])
        for (_, end), (start, _) in itertools.pairwise(spans):
            k = bisect_right(times, end) - 1
            if k >= 0 and waits[k][1] > 0:
                gaps.append((start - end) / 1e3)  # ms
    if not gaps:
        return {}
    return {
        "handoffs": len(gaps),
        "gap_ms_median": median(gaps),
        "gap_ms_p90": percentile(gaps, 90),
        "idle_share": sum(gaps) / 1e3 / (slots * (last - first) / 1e6),
    }


def run_one(name: str, n: int, args: argparse.Namespace, port: int) -> dict[str, Any]:
    server("start", port, args)
    trace = None
    if args.timeline and name.startswith("agentcore"):
        trace = Path(tempfile.mkdtemp()) / "trace.json"
    try:
        argv = [project_python(), __file__, "--contender", name, "--url",
                f"http://127.0.0.1:{port}", "--n", str(n), "--slots", str(args.slots),
                "--latency", str(args.latency), *(["--typed"] if args.typed else [])]  # fmt: skip
        if trace is not None:
            argv += ["--trace", str(trace)]
        measured = run_measured(argv, timeout=args.time_limit)
        counters = metrics(port)
    finally:
        server("stop", port)
    report = dict(measured.report)
    if measured.returncode != 0 or not report:
        report["crash"] = measured.stderr.strip().splitlines()[-3:]
    report["prefill"] = counters.get("prompt_tokens_total")
    report["decodes"] = counters.get("n_decode_total")
    report["busy_per_decode"] = counters.get("n_busy_slots_per_decode")
    report["process_cpu"] = measured.cpu
    if trace is not None and trace.exists():
        report.update(handoffs(trace, args.slots))
        shutil.rmtree(trace.parent, ignore_errors=True)
    return report


def progress(n: int, repeat: int, name: str, result: dict[str, Any]) -> str:
    """One line per pass."""
    line = (f"  n={n} run {repeat + 1} {name:10s} wall {fmt(result.get('wall'))} s "
            f"prefill {fmt(result.get('prefill'), 0)} ok {result.get('ok')}/{n} "
            f"steps {fmt(result.get('decodes'), 0)} busy {fmt(result.get('busy_per_decode'))} "
            f"warm {result.get('warm_up_s')} cpu {fmt(result.get('process_cpu'))} "
            f"{result.get('crash') or ''}")  # fmt: skip
    if "handoffs" in result:
        line += (f" hand-offs {result['handoffs']} gap median {result['gap_ms_median']:.2f} ms"
                 f" p90 {result['gap_ms_p90']:.2f} ms"
                 f" slot idle {100 * result['idle_share']:.2f} %")  # fmt: skip
    return line


def orchestrate(args: argparse.Namespace) -> int:
    import signal
    import socket

    # A SIGTERM (a CI timeout) unwinds like an exception, so the running server is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    print(f"machine: {machine()}; llama-server (llama-cpp-python 0.3.36), {args.model} model, "
          f"{args.threads} thread(s)")  # fmt: skip
    everything: dict[int, dict[str, list[dict[str, Any]]]] = {}
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
    return 0


def report_table(n: int, runs: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> str:
    def med(name: str, key: str) -> float | None:
        return median(r.get(key) for r in runs[name])

    base_wall = med("minimal", "wall") if "minimal" in runs else None
    base_prefill = med("minimal", "prefill") if "minimal" in runs else None
    rows = []
    for name in runs:
        wall, prefill = med(name, "wall"), med(name, "prefill")
        rows.append([
            name, fmt(wall),
            fmt(wall / base_wall, 2) + "x" if wall and base_wall else "-",
            fmt(prefill, 0),
            fmt(prefill / base_prefill, 2) + "x" if prefill and base_prefill else "-",
            fmt(med(name, "requests"), 0), f"{fmt(med(name, 'ok'), 0)}/{n}",
            fmt(med(name, "decodes"), 0), fmt(med(name, "busy_per_decode")),
            fmt(med(name, "process_cpu")),
        ])  # fmt: skip
    headers = ["contender", "wall s", "wall vs minimal", "server prefill tok",
               "prefill vs minimal", "requests", "ok", "decode steps", "busy slots/step",
               "client CPU s"]  # fmt: skip
    title = (
        f"research summary on llama-server (CPU, {args.model} model): N={n}, {TOPICS} topics, "
        f"2 turns, {'a typed answer' if args.typed else 'a text answer'}, "
        f"{int(args.latency * 1000)} ms tool, {args.slots} slots (-np); medians of {args.repeats}"
    )
    return title + "\n\n" + table(headers, rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=lambda s: [int(x) for x in s.split(",")], default=[32, 128])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.4, help="tool latency, seconds")
    parser.add_argument("--model", default="tiny", help="tiny or small (tools/llamacpp/setup.sh)")
    parser.add_argument("--threads", type=int, default=1, help="llama-server compute threads")
    parser.add_argument("--contenders", type=lambda s: s.split(","), default=list(CONTENDERS))
    parser.add_argument(
        "--typed", action="store_true",
        help="the summary is a typed answer (a JSON schema under response_format on the final "
        "request, for every contender) instead of text",
    )  # fmt: skip
    parser.add_argument("--time-limit", type=float, default=600.0)
    parser.add_argument("--json", default=None, help="also write every run to this file")
    parser.add_argument(
        "--timeline",
        action="store_true",
        help="agentcore contenders write a trace; report the client-side hand-off gaps "
        "(a slot idle between one attempt's end and the next one's start while requests wait)",
    )
    parser.add_argument("--contender", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--trace", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--url", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.contender:
        return contender_main(args)
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
