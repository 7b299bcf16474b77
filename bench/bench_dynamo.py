"""The research-summary shape on the real NVIDIA Dynamo stack: agentcore against the baselines.

Workload (the shape of BatchAgent's own research-summary benchmark): N agents, each summarising
one paper for one of 9 shared survey topics, in 2 turns: a ``web_search`` of its topic (400 ms,
deterministic; agents on the same topic search the same query), then the summary. Every
request carries the same ~2,000-token system prompt plus the tool schema; 8 inference slots.
The Dynamo frontend (KV router) and mocker engine (prefill/decode timing, block prefix cache)
run on 127.0.0.1; scripted replies come from a replay file, selected by a key derived from the
conversation, so every contender gets the same answers.

Contenders, each in its own subprocess against a fresh stack (cold prefix cache):

- ``agentcore``: ``run_batch`` over ``dynamo://`` (prefix warmed once, slots released during
  tool waits, identical searches coalesced and cached, session headers and hints);
- ``minimal``: the minimal trio + httpx loop (slots released during tool waits; no warming,
  no coalescing; the server's prefix cache is shared);
- ``isolated``: the minimal loop holding its slot through tool waits, with no prefix shared
  between agents (each system prompt starts with the agent's own session line);
- ``batchagent`` / ``batchagent-nokvflow``: BatchAgent 0.2.0 from PyPI (own venv) with its
  defaults, and with ``kvflow=False``, through the replay proxy. Its Dynamo adapter reads tool
  calls only from the frontend's ``tool_call_dispatch`` events, so its stacks run with
  ``--enable-streaming-tool-dispatch``.

Measured per run: wall time of the batch (inside the contender), and from Dynamo's own request
trace (the same source for everyone): requests, prompt tokens, cached tokens, prefill tokens
actually computed (prompt - cached), server-side TTFT p50/p95; tool executions as counted by
each contender's tool function. Each cell is the median over ``--repeats`` runs.

Run: ``.venv/bin/python bench/bench_dynamo.py`` (N=20); ``--n 100`` or ``--n 1000`` for the
larger batches; ``--help`` for the knobs. Dynamo is installed on first use
(``tools/dynamo/setup.sh``), BatchAgent too (``pip install batch-agent==0.2.0`` in its venv).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    BASELINES,
    ListeningProcess,
    Measured,
    Workload,
    batchagent_python,
    dynamo_stack_module,
    fmt,
    machine,
    median,
    percentile,
    project_python,
    research_script,
    research_workload,
    rotations,
    run_measured,
    table,
)

CONTENDERS = (
    "agentcore",
    "agentcore-priority",
    "minimal",
    "isolated",
    "batchagent",
    "batchagent-nokvflow",
)


# ---------------------------------------------------------------------------- orchestration


def trace_summary(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals over Dynamo's ``request_end`` trace records."""
    requests = [e["request"] for e in events if e.get("event_type") == "request_end"]
    prompt = sum(r.get("input_tokens") or 0 for r in requests)
    cached = sum(r.get("cached_tokens") or 0 for r in requests)
    computed = sum(
        max(0, (r.get("input_tokens") or 0) - (r.get("cached_tokens") or 0)) for r in requests
    )
    ttft = [r["ttft_ms"] for r in requests if isinstance(r.get("ttft_ms"), int | float)]
    return {
        "requests": len(requests),
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "prefill_tokens": computed,
        "ttft_p50_ms": percentile(ttft, 50),
        "ttft_p95_ms": percentile(ttft, 95),
    }


def settled_trace(stack: Any, quiet: float = 1.0, timeout: float = 15.0) -> list[dict[str, Any]]:
    """The trace once no new record has arrived for ``quiet`` seconds."""
    deadline = time.monotonic() + timeout
    count, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        events = stack.trace_records()
        if len(events) != count:
            count, since = len(events), time.monotonic()
        elif time.monotonic() - since >= quiet:
            return events
        time.sleep(0.2)
    return stack.trace_records()


def start_proxy(upstream: str, max_tokens: int) -> ListeningProcess:
    """The replay-annotation proxy in its own process."""
    argv = [project_python(), str(BASELINES / "replay_proxy.py"), "--upstream", upstream,
            "--max-tokens", str(max_tokens)]  # fmt: skip
    return ListeningProcess(argv, "replay proxy")


@dataclass
class Plan:
    """What every contender run of one batch size shares."""

    workload: Workload
    workload_file: Path
    stack_module: Any
    install: Any
    replay: Path
    args: argparse.Namespace


def contender_argv(name: str, plan: Plan, stack: Any, proxy: ListeningProcess | None) -> list[str]:
    """The command line of one contender against ``stack`` (or the proxy in front of it)."""
    args, workload_file = plan.args, str(plan.workload_file)
    if name in ("agentcore", "agentcore-priority"):
        policy = "priority" if name == "agentcore-priority" else "fifo"
        argv = [project_python(), str(BASELINES / "agentcore_runner.py"), workload_file,
                "--url", stack.url, "--slots", str(args.slots),
                "--slot-policy", policy]  # fmt: skip
        return [*argv, "--stream"] if args.stream else argv
    if name in ("minimal", "isolated"):
        script = "minimal_loop.py" if name == "minimal" else "isolated.py"
        return [project_python(), str(BASELINES / script), workload_file,
                "--url", stack.http_url, "--slots", str(args.slots)]  # fmt: skip
    assert proxy is not None
    backend = f"dynamo://127.0.0.1:{proxy.port}"
    argv = [str(batchagent_python()), str(BASELINES / "batchagent_runner.py"), workload_file,
            "--backend", backend, "--slots", str(args.slots)]  # fmt: skip
    return [*argv, "--no-kvflow"] if name == "batchagent-nokvflow" else argv


def run_contender(name: str, plan: Plan, run_dir: Path) -> dict[str, Any]:
    """One run of one contender against a fresh stack; its report plus the trace totals."""
    batchagent = name.startswith("batchagent")
    stack = plan.stack_module.DynamoStack(
        plan.install,
        run_dir=run_dir,
        replay=plan.replay,
        speedup=plan.args.speedup,
        streaming_tool_dispatch=batchagent,
    ).start()
    proxy: ListeningProcess | None = None
    try:
        if batchagent:
            proxy = start_proxy(stack.http_url, plan.workload.max_tokens)
        argv = contender_argv(name, plan, stack, proxy)
        measured: Measured = run_measured(argv, timeout=plan.args.time_limit)
        events = settled_trace(stack)
    finally:
        if proxy is not None:
            proxy.stop()
        stack.stop()
    report = dict(measured.report)
    if measured.returncode != 0 or not report:
        report.setdefault("crash", measured.stderr.strip().splitlines()[-3:])
    return {
        **report,
        **trace_summary(events),
        "process_cpu": measured.cpu,
        "rss_mb": measured.max_rss_mb,
    }


def progress(n: int, repeat: int, name: str, result: dict[str, Any], seconds: float) -> str:
    status = f"crash {result['crash']}" if result.get("crash") else "ok"
    return (
        f"  n={n} run {repeat + 1} {name:20s} wall {fmt(result.get('wall'))} s"
        f"  prefill {fmt(result.get('prefill_tokens'))}  tools {result.get('tool_executions')}"
        f"  ok {result.get('ok')}/{n}  ({seconds:.1f} s, {status})"
    )


def orchestrate(args: argparse.Namespace) -> int:
    stack_module = dynamo_stack_module()
    install = stack_module.Install.find() or stack_module.install()
    contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    unknown = sorted(set(contenders) - set(CONTENDERS))
    if unknown:
        print(f"unknown contenders {unknown}; choose from {CONTENDERS}", file=sys.stderr)
        return 2
    if any(c.startswith("batchagent") for c in contenders):
        batchagent_python()
    print(f"machine: {machine()}; Dynamo {stack_module.DYNAMO_VERSION} (frontend + mocker)")
    everything: dict[int, dict[str, list[dict[str, Any]]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-dynamo-") as tmp:
        work = Path(tmp)
        replay = stack_module.build_replay(install, research_script(), work / "replay.jsonl")
        for n in args.n:
            workload = research_workload(n, tool_latency=args.tool_latency)
            workload_file = workload.dump(work / f"workload-{n}.json")
            plan = Plan(workload, workload_file, stack_module, install, replay, args)
            runs: dict[str, list[dict[str, Any]]] = {c: [] for c in contenders}
            for repeat, name in rotations(contenders, args.repeats):
                started = time.perf_counter()
                result = run_contender(name, plan, work / f"run-{n}-{repeat}-{name}")
                runs[name].append(result)
                print(progress(n, repeat, name, result, time.perf_counter() - started))
                if result.get("errors"):
                    print(f"      errors: {result['errors']}", flush=True)
                if result.get("warm", ["ok"]) != ["ok"]:
                    print(f"      prefix warm-up: {result['warm']}", flush=True)
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

    isolated = med("isolated", "prefill_tokens") if "isolated" in runs else None
    rows = []
    for name in runs:
        prefill = med(name, "prefill_tokens")
        share = "-"
        if prefill is not None and isolated:
            share = fmt(100.0 * prefill / isolated, 1) + " %"
        rows.append(
            [
                name,
                fmt(med(name, "wall")),
                fmt(med(name, "first_result")),
                fmt(med(name, "half_results")),
                fmt(med(name, "ttft_p50_ms"), 1),
                fmt(med(name, "ttft_p95_ms"), 1),
                fmt(med(name, "requests"), 0),
                fmt(med(name, "prompt_tokens"), 0),
                fmt(prefill, 0),
                share,
                fmt(med(name, "tool_executions"), 0),
                f"{fmt(med(name, 'ok'), 0)}/{n}",
                fmt(med(name, "process_cpu")),
            ]
        )
    headers = ["contender", "wall s", "1st result s", "50 % s", "TTFT p50 ms", "TTFT p95 ms",
               "requests", "prompt tok", "prefill tok", "vs isolated", "tool execs", "ok",
               "client CPU s"]  # fmt: skip
    title = (
        f"research summary on Dynamo: N={n}, 9 topics, 2 turns, "
        f"{int(args.tool_latency * 1000)} ms tool, {args.slots} slots, "
        f"mocker speedup {args.speedup:g}; medians of {args.repeats}"
    )
    return title + "\n\n" + table(headers, rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=lambda s: [int(x) for x in s.split(",")], default=[20],
                        help="agents per batch, comma-separated (default 20)")  # fmt: skip
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--tool-latency", type=float, default=0.4)
    parser.add_argument("--speedup", type=float, default=1.0, help="mocker --speedup-ratio")
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--stream", action="store_true", help="agentcore streams its requests")
    parser.add_argument("--time-limit", type=float, default=300.0, help="seconds per contender run")
    parser.add_argument("--json", default=None, help="also write every run to this file")
    return orchestrate(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
