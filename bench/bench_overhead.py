"""Client overhead: N agents x 2 turns against a fixed-latency server, side by side.

Workload (the *lookup* shape): N=1000 agents; each asks the model, which calls a ``lookup``
tool with the agent's own record key (100 ms; every key is unique, so nothing can be
coalesced and every contender executes N tools), then answers. The model is a loopback
server that answers every request after exactly 50 ms (``baselines/fixed_latency_server.py``;
the embedded ``agentcore sim`` models per-token latency, so it cannot give a fixed one). 32
inference slots. With slots released during tool waits the floor is
``2 N x 50 ms / 32 = 3.1 s``.

Contenders, each in its own subprocess against the same server (its own process too):

- ``agentcore``: ``run_batch`` over ``vllm://`` (lean h11 transport, prefix warming);
- ``minimal``: the minimal trio + httpx + orjson loop (``baselines/minimal_loop.py``), one
  ``httpx.AsyncClient`` with a pool of 32 connections;
- ``minimal-per-slot``: the same loop with one single-connection client per slot (the leanest
  httpx loop: httpcore's pool costs grow with its connection count);
- ``batchagent`` / ``batchagent-nokvflow``: BatchAgent 0.2.0 over ``vllm://`` with its defaults
  and with ``kvflow=False`` (its own venv).

Measured per run: wall time of the batch (inside the contender), the batch's CPU time (inside
the contender), the whole process's CPU time and peak RSS (``wait4``: interpreter start-up and
imports included), and the server's CPU time. Medians of ``--repeats`` runs.

Run: ``.venv/bin/python bench/bench_overhead.py`` (``--help`` for the knobs). With
``--ref-src DIR`` (the ``src`` folder of another checkout, e.g. from ``git archive``) the
contender ``agentcore-ref`` runs the same runner on that version of the package, to compare two
versions in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    BASELINES,
    ListeningProcess,
    Measured,
    batchagent_python,
    fmt,
    lookup_workload,
    machine,
    median,
    project_python,
    rotations,
    run_measured,
    table,
)

CONTENDERS = (
    "agentcore",
    "minimal",
    "minimal-per-slot",
    "batchagent",
    "batchagent-nokvflow",
    "agentcore-ref",
)


class ServerProcess(ListeningProcess):
    """The fixed-latency server in its own process."""

    def __init__(self, latency: float) -> None:
        argv = [project_python(), str(BASELINES / "fixed_latency_server.py")]
        super().__init__([*argv, "--latency", str(latency)], "fixed-latency server")

    def cpu(self) -> float:
        """CPU seconds the server has used so far (Linux ``/proc``)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])
        return ticks / _CLOCK_TICKS


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def contender_argv(name: str, workload_file: Path, port: int, slots: int) -> list[str]:
    if name in ("agentcore", "agentcore-ref"):
        return [project_python(), str(BASELINES / "agentcore_runner.py"), str(workload_file),
                "--url", f"vllm://127.0.0.1:{port}", "--slots", str(slots)]  # fmt: skip
    if name.startswith("minimal"):
        argv = [project_python(), str(BASELINES / "minimal_loop.py"), str(workload_file),
                "--url", f"http://127.0.0.1:{port}", "--slots", str(slots)]  # fmt: skip
        return [*argv, "--client-per-slot"] if name == "minimal-per-slot" else argv
    argv = [str(batchagent_python()), str(BASELINES / "batchagent_runner.py"), str(workload_file),
            "--backend", f"vllm://127.0.0.1:{port}", "--slots", str(slots)]  # fmt: skip
    return [*argv, "--no-kvflow"] if name == "batchagent-nokvflow" else argv


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="agents (default 1000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--slots", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.05, help="model seconds per request")
    parser.add_argument("--tool-latency", type=float, default=0.1)
    parser.add_argument("--contenders", default=",".join(CONTENDERS[:-1]))
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds per run")
    parser.add_argument("--json", default=None, help="also write every run to this file")
    parser.add_argument(
        "--ref-src", default=None, help="src folder of the package version agentcore-ref runs"
    )
    args = parser.parse_args(argv)
    if "agentcore-ref" in args.contenders and not args.ref_src:
        print("agentcore-ref needs --ref-src", file=sys.stderr)
        return 2
    contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    if set(contenders) - set(CONTENDERS):
        print(f"choose contenders from {CONTENDERS}", file=sys.stderr)
        return 2
    if any(c.startswith("batchagent") for c in contenders):
        batchagent_python()
    print(f"machine: {machine()}")
    runs = measure(
        contenders,
        args,
        env=lambda name: (
            {**os.environ, "PYTHONPATH": args.ref_src} if name == "agentcore-ref" else None
        ),
    )
    print()
    print(report_table(runs, args))
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))
    return 0


def measure(
    names: Sequence[str],
    args: argparse.Namespace,
    *,
    contender: Callable[[str], str] = lambda name: name,
    env: Callable[[str], Mapping[str, str] | None] = lambda name: None,
    check: Callable[[str, Measured], None] = lambda name, measured: None,
) -> dict[str, list[dict[str, Any]]]:
    """Every run of ``names``: one fixed-latency server (``args.latency``) and one *lookup*
    workload (``args.n`` agents, ``args.tool_latency``) for all of them, ``args.repeats``
    passes in rotated order, each run of ``contender(name)``'s program (``contender_argv``)
    in a subprocess with ``env(name)`` and ``args.time_limit``; ``check`` sees each run
    first (it may stop the benchmark). A run's record is its report with its process CPU,
    peak RSS, the server's CPU during it and, for a run that crashed, ``crash``."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    server = ServerProcess(args.latency)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
            workload = lookup_workload(args.n, tool_latency=args.tool_latency)
            workload_file = workload.dump(Path(tmp) / "workload.json")
            for repeat, name in rotations(names, args.repeats):
                server_cpu = server.cpu()
                started = time.perf_counter()
                measured = run_measured(
                    contender_argv(contender(name), workload_file, server.port, args.slots),
                    timeout=args.time_limit,
                    env=env(name),
                )
                check(name, measured)
                result = {
                    **measured.report,
                    "process_cpu": measured.cpu,
                    "rss_mb": measured.max_rss_mb,
                    "server_cpu": server.cpu() - server_cpu,
                }
                if measured.returncode != 0 or not measured.report:
                    result["crash"] = measured.stderr.strip().splitlines()[-3:]
                runs[name].append(result)
                crashed = ", CRASH" if "crash" in result else ""
                print(
                    f"  run {repeat + 1} {name:20s} wall {fmt(result.get('wall'))} s  "
                    f"cpu {fmt(result.get('cpu'))} s  rss {fmt(result['rss_mb'], 0)} MB  "
                    f"ok {result.get('ok')}/{args.n}  tools {result.get('tool_executions')}  "
                    f"({time.perf_counter() - started:.1f} s{crashed})",
                    flush=True,
                )
                if result.get("crash") or result.get("errors"):
                    print(f"      {result.get('crash') or result.get('errors')}", flush=True)
    finally:
        server.stop()
    return runs


def report_table(runs: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> str:
    def med(name: str, key: str) -> float | None:
        return median(r.get(key) for r in runs.get(name, []))

    def ratio(name: str, other: str) -> str:
        mine, theirs = med(name, "wall"), med(other, "wall")
        return fmt(mine / theirs) + "x" if mine and theirs else "-"

    rows = [
        [
            name,
            fmt(med(name, "wall")),
            ratio(name, "minimal"),
            ratio(name, "minimal-per-slot"),
            ratio(name, "batchagent-nokvflow"),
            fmt(med(name, "cpu")),
            fmt(med(name, "process_cpu")),
            fmt(med(name, "rss_mb"), 0),
            fmt(med(name, "server_cpu")),
            f"{fmt(med(name, 'ok'), 0)}/{args.n}",
            fmt(med(name, "tool_executions"), 0),
        ]
        for name in runs
    ]
    headers = ["contender", "wall s", "vs minimal", "vs minimal-per-slot",
               "vs BatchAgent kvflow=False", "batch CPU s",
               "process CPU s", "peak RSS MB", "server CPU s", "ok", "tool execs"]  # fmt: skip
    floor = 2 * args.n * args.latency / args.slots
    title = (
        f"overhead: N={args.n} x 2 turns, {int(args.latency * 1000)} ms model, "
        f"{int(args.tool_latency * 1000)} ms tool, {args.slots} slots (floor {floor:.2f} s); "
        f"medians of {args.repeats}"
    )
    return title + "\n\n" + table(headers, rows)


if __name__ == "__main__":
    sys.exit(main())
