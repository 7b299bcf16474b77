"""Driver overhead: agentcore's trio driver against a minimal hand-written trio + httpx loop.

Workload: N agents (default 1,000) of the *lookup* shape (``_common.lookup_workload``): each
asks the model, which calls the ``lookup`` tool once (100 ms), then asks again and gets the
final answer: 2 model requests per agent. The model is ``baselines/fixed_latency_server.py``
(trio + h11, its own process on 127.0.0.1), which answers every request after 50 ms. 32
inference slots, held around model requests only. (``bench_overhead.py`` runs the same
workload through the batch layer against other libraries; this benchmark isolates the driver.)

Contenders, each in its own subprocess (so CPU time and peak RSS are its own):

- ``minimal``: ``baselines/minimal_loop.py``, the loop one writes by hand: one task per agent,
  a ``trio.Semaphore`` around each request, ``httpx.AsyncClient`` with 32 connections, orjson.
- ``agentcore``: ``open_driver(url, max_inflight=32)`` with its default transport for a
  plain-HTTP self-hosted server (the lean h11 transport), the agent loop, the tool executor,
  slot limiter, retries and metrics all on.
- ``agentcore-httpx``: the same with ``transport="httpx"``: the same HTTP client as the
  baseline, so the difference is the driver itself.
- ``minimal-lean``: the minimal loop on agentcore's lean transport (no driver, no agent loop,
  no codec): against ``agentcore`` it isolates the driver's cost on the default transport.

Reported per contender: the batch's wall time and CPU time (measured by the contender around
the batch, interpreter start-up and imports excluded), the process's total CPU and peak RSS
(from ``wait4``), each the median of ``--runs`` runs (contenders interleaved), and the ratios
to the minimal loop. Every run is bounded by a time limit.

Run: ``.venv/bin/python bench/bench_driver.py`` (``--help`` for the knobs; ``--agents 200
--runs 1`` for a quick look).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    BENCH,
    Measured,
    Workload,
    emit,
    fmt,
    lookup_workload,
    machine,
    median,
    project_python,
    run_measured,
    self_cpu,
    table,
    tool_result,
)

CONTENDERS = ("minimal", "agentcore-httpx", "minimal-lean", "agentcore")

# ---------------------------------------------------------------------------- agentcore


async def _agentcore(workload: Workload, url: str, slots: int, transport: str) -> dict[str, Any]:
    from agentcore import ModelParams, open_driver, tool
    from agentcore.core import AgentLoop, LoopConfig, SystemMessage, UserMessage

    shape = workload.tool

    @tool(name=shape.name, description=shape.description)
    async def lookup(key: str) -> str:
        await trio.sleep(shape.latency)
        return tool_result(shape.name, key)

    config_params = ModelParams(max_tokens=workload.max_tokens)

    def loops() -> Any:
        for index in range(len(workload.inputs)):
            config = LoopConfig(
                run_id=f"a{index}",
                tools=(lookup.spec,),
                max_turns=workload.max_turns,
                params=config_params,
            )
            yield AgentLoop(
                config,
                [SystemMessage(workload.system), UserMessage(workload.user_message(index))],
            )

    cpu0, t0 = self_cpu(), time.perf_counter()
    async with open_driver(
        url, model=workload.model, tools=[lookup], max_inflight=slots, transport=transport
    ) as driver:
        async with driver.stream(loops()) as results:
            statuses = [r.status async for r in results]
        stats = driver.statistics()
    return {
        "wall": time.perf_counter() - t0,
        "cpu": self_cpu() - cpu0,
        "ok": statuses.count("ok"),
        "failed": len(statuses) - statuses.count("ok"),
        "requests": stats.requests,
        "tool_executions": stats.tool_executions,
        "peak_slots": stats.slots.peak_in_use,
    }


# ---------------------------------------------------------------------------- minimal-lean


async def _minimal_lean(workload: Workload, url: str, slots: int) -> dict[str, Any]:
    """The minimal loop again, on agentcore's lean transport instead of httpx.

    Same shape as ``baselines/minimal_loop.py`` (one task per agent, a semaphore around each
    request, hand-built JSON): against ``agentcore`` it isolates what the driver itself costs,
    since both move their bytes through the same transport.
    """
    from agentcore import Timeouts
    from agentcore._transports.factory import make_transport
    from agentcore.wire import HttpRequest

    shape = workload.tool
    endpoint = url.rstrip("/") + "/v1/chat/completions"
    transport = make_transport(url, kind="lean", max_connections=slots)
    semaphore = trio.Semaphore(slots)
    timeouts = Timeouts()
    tools = [
        {
            "type": "function",
            "function": {
                "name": shape.name,
                "description": shape.description,
                "parameters": {
                    "type": "object",
                    "properties": {shape.parameter: {"type": "string"}},
                    "required": [shape.parameter],
                },
            },
        }
    ]
    counts = {"ok": 0, "failed": 0, "requests": 0}

    async def ask(messages: list[dict[str, Any]]) -> dict[str, Any]:
        body = {
            "model": workload.model,
            "tools": tools,
            "messages": messages,
            "max_tokens": workload.max_tokens,
        }
        request = HttpRequest(
            "POST", endpoint, [("content-type", "application/json")], orjson.dumps(body)
        )
        counts["requests"] += 1
        async with semaphore:
            response = await transport.send(request, timeouts)
        message: dict[str, Any] = orjson.loads(response.body)["choices"][0]["message"]
        return message

    async def agent(index: int) -> None:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": workload.system},
            {"role": "user", "content": workload.user_message(index)},
        ]
        for _ in range(workload.max_turns + 1):
            reply = await ask(messages)
            calls = reply.get("tool_calls") or []
            messages.append(
                {
                    "role": "assistant",
                    "content": reply.get("content"),
                    **({"tool_calls": calls} if calls else {}),
                }
            )
            if not calls:
                counts["ok"] += 1
                return
            for call in calls:
                argument = orjson.loads(call["function"]["arguments"])[shape.parameter]
                await trio.sleep(shape.latency)
                content = tool_result(shape.name, argument)
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
        counts["failed"] += 1

    cpu0, t0 = self_cpu(), time.perf_counter()
    async with trio.open_nursery() as nursery:
        for index in range(len(workload.inputs)):
            nursery.start_soon(agent, index)
    await transport.aclose()
    return {"wall": time.perf_counter() - t0, "cpu": self_cpu() - cpu0, **counts}


# ---------------------------------------------------------------------------- orchestration


def _contender_argv(name: str, workload_path: Path, url: str, slots: int) -> list[str]:
    python = project_python()
    if name == "minimal":
        script = BENCH / "baselines" / "minimal_loop.py"
        return [python, str(script), str(workload_path), "--url", url, "--slots", str(slots)]
    transport = "httpx" if name == "agentcore-httpx" else "lean"
    return [
        python,
        __file__,
        "--contender",
        name,
        "--workload",
        str(workload_path),
        "--url",
        url,
        "--slots",
        str(slots),
        "--transport",
        transport,
    ]


def _start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    """``baselines/fixed_latency_server.py`` in its own process; returns it and its URL."""
    script = BENCH / "baselines" / "fixed_latency_server.py"
    server = subprocess.Popen(
        [project_python(), str(script), "--latency", str(latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    if not line.startswith("listening on "):
        server.kill()
        raise SystemExit(f"the fixed-latency server did not start: {line!r}")
    return server, f"http://127.0.0.1:{int(line.split()[-1])}"


def _stop(server: subprocess.Popen[str]) -> None:
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    if server.stdout is not None:
        server.stdout.close()


def main(args: argparse.Namespace) -> None:
    contenders = args.contenders
    runs: dict[str, list[Measured]] = {name: [] for name in contenders}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        workload = lookup_workload(args.agents, tool_latency=args.tool_latency)
        workload_path = workload.dump(directory / "workload.json")
        server, url = _start_server(args.latency)
        try:
            for _ in range(args.runs):
                for name in contenders:
                    argv = _contender_argv(name, workload_path, url, args.slots)
                    measured = run_measured(argv, timeout=args.timeout)
                    report = measured.report
                    if measured.returncode != 0 or report.get("ok") != args.agents:
                        sys.stderr.write(measured.stderr)
                        raise SystemExit(f"{name} failed: {report or measured.returncode}")
                    runs[name].append(measured)
        finally:
            _stop(server)

    def stat(name: str, key: str) -> float | None:
        return median(m.report[key] for m in runs[name])

    base_wall, base_cpu = stat(contenders[0], "wall"), stat(contenders[0], "cpu")
    rows = []
    for name in contenders:
        wall, cpu = stat(name, "wall"), stat(name, "cpu")
        process_cpu = median(m.cpu for m in runs[name])
        rss = median(m.max_rss_mb for m in runs[name])
        rows.append(
            [
                name,
                fmt(wall),
                fmt(wall / base_wall if wall and base_wall else None),
                fmt(cpu),
                fmt(cpu / base_cpu if cpu and base_cpu else None),
                fmt(process_cpu),
                fmt(rss, 1),
                fmt(int(stat(name, "requests") or 0)),
            ]
        )
    print(
        f"{args.agents} agents x 2 turns, model {args.latency * 1000:.0f} ms, tool "
        f"{args.tool_latency * 1000:.0f} ms, {args.slots} slots; median of {args.runs} runs"
    )
    print(machine())
    print()
    print(
        table(
            [
                "contender",
                "wall s",
                "wall ratio",
                "batch CPU s",
                "CPU ratio",
                "process CPU s",
                "peak RSS MB",
                "requests",
            ],
            rows,
        )
    )


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--slots", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.05, help="model seconds per request")
    parser.add_argument("--tool-latency", type=float, default=0.1, help="tool seconds per call")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per contender run")
    parser.add_argument(
        "--contenders",
        nargs="+",
        choices=CONTENDERS,
        default=["minimal", "minimal-lean", "agentcore"],
        help="which contenders to run; the first one is the baseline of the ratios "
        "(agentcore-httpx is left out by default: httpx under trio costs several ms of CPU "
        "per request here, which makes it the slowest to run)",
    )
    # Internal entry points of the subprocesses.
    parser.add_argument("--contender", help=argparse.SUPPRESS)
    parser.add_argument("--workload", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--transport", default="lean", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    options = parse()
    if options.contender == "minimal-lean":
        loaded = Workload.load(options.workload)
        emit(trio.run(_minimal_lean, loaded, options.url, options.slots))
    elif options.contender is not None:
        loaded = Workload.load(options.workload)
        emit(trio.run(_agentcore, loaded, options.url, options.slots, options.transport))
    else:
        main(options)
