"""What step events cost: the overhead workload with step events off, on, and with deltas.

Workload: the one of ``bench_overhead.py`` (N agents x 2 turns, a 50 ms fixed-latency
server, a 100 ms ``lookup`` tool, 32 slots), run by ``baselines/agentcore_runner.py`` in its
own process, five ways against the same server process:

- ``baseline``: the agentcore of a git ref (default ``fc4b4f6``, before step events existed),
  exported to a temporary folder and put first on ``PYTHONPATH``;
- ``off``: this tree, no step sink (what every batch pays now);
- ``events``: this tree, every run's step events pushed to a counting sink;
- ``stream``: this tree, streamed replies, no step sink;
- ``deltas``: this tree, streamed replies, step events with deltas.

The server cuts each streamed text answer into ``--pieces`` chunks, so each reply carries
that many text deltas. Reported: medians of ``--repeats`` runs of the batch's CPU time (inside
the runner), and the CPU per delta: (``deltas`` - ``stream``) / deltas pushed.

Run: ``.venv/bin/python bench/bench_steps.py`` (``--help`` for the knobs).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    BASELINES,
    ListeningProcess,
    fmt,
    lookup_workload,
    machine,
    median,
    project_python,
    rotations,
    run_measured,
)
from _common import table as make_table

ROOT = Path(__file__).resolve().parents[1]
MODES = {
    "baseline": [],
    "off": [],
    "events": ["--steps", "events"],
    "stream": ["--stream"],
    "deltas": ["--stream", "--steps", "deltas"],
}


def start_server(latency: float, pieces: int) -> ListeningProcess:
    """The fixed-latency server in its own process."""
    argv = [project_python(), str(BASELINES / "fixed_latency_server.py")]
    argv += ["--latency", str(latency), "--pieces", str(pieces)]
    return ListeningProcess(argv, "fixed-latency server")


def export_tree(ref: str, into: Path) -> Path:
    """The ``src`` folder of ``ref``, exported under ``into``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "src"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="agents (default 1000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--slots", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--tool-latency", type=float, default=0.1)
    parser.add_argument("--pieces", type=int, default=16, help="text deltas per answer")
    parser.add_argument("--baseline", default="fc4b4f6", help="git ref of the baseline")
    parser.add_argument("--time-limit", type=float, default=120.0)
    parser.add_argument("--modes", default=",".join(MODES), help="modes to run, comma-separated")
    args = parser.parse_args(argv)
    chosen = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not chosen or set(chosen) - set(MODES):
        print(f"choose modes from {list(MODES)}", file=sys.stderr)
        return 2
    print(f"machine: {machine()}")
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in chosen}
    server = start_server(args.latency, args.pieces)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-steps-") as tmp:
            baseline_src = export_tree(args.baseline, Path(tmp))
            workload = lookup_workload(args.n, tool_latency=args.tool_latency)
            workload_file = workload.dump(Path(tmp) / "workload.json")
            for repeat, name in rotations(chosen, args.repeats):
                env = dict(os.environ)
                if name == "baseline":
                    env["PYTHONPATH"] = str(baseline_src)
                runner = [project_python(), str(BASELINES / "agentcore_runner.py")]
                runner += [str(workload_file), "--url", f"vllm://127.0.0.1:{server.port}"]
                runner += ["--slots", str(args.slots), *MODES[name]]
                started = time.perf_counter()
                measured = run_measured(runner, timeout=args.time_limit, env=env)
                report = dict(measured.report)
                if measured.returncode != 0 or not report:
                    print(measured.stderr.strip().splitlines()[-3:], file=sys.stderr)
                    return 1
                runs[name].append(report)
                print(
                    f"  run {repeat + 1} {name:9s} wall {fmt(report['wall'])} s  "
                    f"cpu {fmt(report['cpu'])} s  ok {report['ok']}/{args.n}  "
                    f"events {report.get('step_events')}  deltas "
                    f"{report.get('delta_events')}  ({time.perf_counter() - started:.1f} s; "
                    f"{report.get('agentcore')})",
                    flush=True,
                )
    finally:
        server.stop()

    def med(name: str, key: str) -> float | None:
        return median(r.get(key) for r in runs.get(name, []))

    base = med("baseline", "cpu")
    rows = [
        [
            name,
            fmt(med(name, "wall")),
            fmt(med(name, "cpu")),
            fmt((med(name, "cpu") or 0) / base) + "x" if base else "-",
            fmt(med(name, "step_events"), 0),
            fmt(med(name, "delta_events"), 0),
        ]
        for name in runs
    ]
    print()
    print(
        f"step events: N={args.n} x 2 turns, {int(args.latency * 1000)} ms model, "
        f"{args.slots} slots, {args.pieces} text pieces per streamed answer; "
        f"medians of {args.repeats}"
    )
    print()
    print(
        make_table(
            ["mode", "wall s", "batch CPU s", "CPU vs baseline", "step events", "deltas"], rows
        )
    )
    deltas = med("deltas", "delta_events")
    stream_cpu, deltas_cpu = med("stream", "cpu"), med("deltas", "cpu")
    if deltas and stream_cpu is not None and deltas_cpu is not None:
        per_delta = (deltas_cpu - stream_cpu) / deltas * 1e6
        print(f"\nCPU per delta (deltas - stream, over deltas pushed): {per_delta:.2f} us")
    events = med("events", "step_events")
    off_cpu, events_cpu = med("off", "cpu"), med("events", "cpu")
    if events and off_cpu is not None and events_cpu is not None:
        per_event = (events_cpu - off_cpu) / events * 1e6
        print(f"CPU per step event without deltas (events - off, over events): {per_event:.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
