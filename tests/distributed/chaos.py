"""Chaos run of a distributed batch: worker processes killed, frozen and the server crashed.

    python tests/distributed/chaos.py --agents 2000 --workers 4 --kills 10 --zombies 3 \\
        --server-kills 1 --seed 7

W worker processes (``worker_main.py``: the deterministic agent of ``agents.py``, whose every
final answer is known) work on one batch; this process submits it and collects the results.
A fault schedule drawn from ``--seed`` (printed, so a run can be replayed) is applied at even
steps of progress (results written): ``kill`` SIGKILLs a worker and starts a replacement,
``zombie`` SIGSTOPs one for longer than its lease and SIGCONTs it later, ``server`` SIGKILLs
the redis-server and restarts it from its AOF on the same port, ``cut`` closes every worker
connection at a TCP proxy (``proxy.py``) and ``delay`` slows it (200 ms per chunk for 2 s);
with ``--cuts``, ``--delays`` or ``--proxy`` the workers reach the server through the proxy.

Checked at the end, and reported: every agent has exactly one line with its expected answer
(lost, wrong, duplicate lines); exactly one commit per (agent, step) (duplicate and missing
commits, from the batch's audit hash); the step stream, its pending list and the live set are
empty; the stats hash counts every commit (``uncounted_commits``), and no consumer name is
left in the group. Reported without a pass/fail: repeated tool executions (side effects run
twice, the crash window between a tool's return and its memo), model decisions asked again
(steps lost before their commit), and the workers' counters. ``--no-compare`` and
``--no-heartbeat`` run the negative controls; ``--baseline`` also runs the same batch in one
process with ``run_batch`` for the overhead ratio. Exit status 0 only when every check passes.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import trio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from agents import CountingModel, expected_total, make_task  # noqa: E402
from proxy import ChaosProxy  # noqa: E402
from redis_server import RedisServer, start_server  # noqa: E402

import agentcore  # noqa: E402
from agentcore import QueueAddress  # noqa: E402
from agentcore._distributed.connection import open_connection  # noqa: E402


def fault_schedule(  # noqa: PLR0917
    seed: int, kills: int, zombies: int, servers: int, cuts: int = 0, delays: int = 0
) -> list[str]:
    """The order of the faults, drawn from the seed; server crashes come last (the results
    held up by a restart arrive in one burst, which can end the batch before a fault
    scheduled after it is applied)."""
    faults = ["kill"] * kills + ["zombie"] * zombies
    faults += ["cut"] * cuts + ["delay"] * delays
    random.Random(seed).shuffle(faults)
    return faults + ["server"] * servers


class Workers:
    def __init__(self, url: str, count: int, options: list[str], log: Path) -> None:
        self.url = url
        self.options = options
        self.env = {**os.environ, "AGENTCORE_DIST_LOG": str(log)}
        self.log = log
        self.started_total = 0
        self.last_log = 0
        self.crashes = 0
        self.slots: list[subprocess.Popen[bytes]] = []
        self.slot_logs: list[int] = []
        for _ in range(count):
            self.slots.append(self._start())
            self.slot_logs.append(self.last_log)
        self.frozen: set[int] = set()
        self.started = count

    def _start(self) -> subprocess.Popen[bytes]:
        with (self.log / f"worker-{self.started_total}.err").open("wb") as err:
            self.last_log = self.started_total
            self.started_total += 1
            return subprocess.Popen(
                [sys.executable, str(HERE / "worker_main.py"), self.url, *self.options],
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    def replace_crashed(self, finished: bool) -> None:
        """Start a replacement for every worker that exited on its own with an error."""
        for slot, proc in enumerate(self.slots):
            code = proc.poll()
            if code is not None and code != 0 and not finished:
                self.crashes += 1
                print(f"  worker in slot {slot} crashed (exit {code}):")
                err = self.log / f"worker-{self.slot_logs[slot]}.err"
                print("    " + "\n    ".join(err.read_text().splitlines()[-25:]))
                self.slots[slot] = self._start()
                self.slot_logs[slot] = self.last_log
                self.started += 1

    def kill(self, slot: int) -> None:
        proc = self.slots[slot]
        proc.kill()
        proc.wait()
        self.slots[slot] = self._start()
        self.slot_logs[slot] = self.last_log
        self.started += 1

    def stop_all(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for proc in self.slots:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def _memory_sampler(address: QueueAddress, peak: list[int]) -> None:
    while True:
        try:
            async with open_connection(address, name="chaos-memory") as conn:
                while True:
                    info = await conn.command("INFO", "memory")
                    for line in str(info).splitlines():
                        if line.startswith("used_memory:"):
                            peak[0] = max(peak[0], int(line.split(":")[1]))
                    await trio.sleep(0.25)
        except Exception:  # the server is being restarted
            await trio.sleep(0.5)


async def _collect_checks(address: QueueAddress, args: argparse.Namespace) -> dict[str, Any]:
    keys = address.keys
    steps = 2 * args.turns + 1
    async with open_connection(address, name="chaos-check", timeout_ms=60000) as conn:
        audit = await conn.command("HGETALL", keys.audit)
        stream = int(await conn.command("XLEN", keys.steps))
        pending = int((await conn.command("XPENDING", keys.steps, "workers"))[0])
        live = int(await conn.command("HLEN", keys.version))
        stats = await conn.command("HGETALL", keys.stats)
        consumers = await conn.command("XINFO", "CONSUMERS", keys.steps, "workers")
    counts = {k: int(v) for k, v in audit.items()}
    expected = {f"{a}:{s}" for a in range(args.agents) for s in range(steps)}
    audited = not args.no_audit
    return {
        "duplicate_commits": sum(v - 1 for v in counts.values() if v > 1) if audited else None,
        "missing_commits": len(expected - set(counts)) if audited else None,
        "stream_left": stream,
        "pending_left": pending,
        "live_left": live,
        # The commit script counts every commit in the stats hash, killed workers' included.
        "uncounted_commits": args.agents * steps - int(stats.get("steps_committed", 0)),
        "consumers_left": len(consumers or ()),
        "worker_stats": {k: int(v) for k, v in sorted(stats.items())},
    }


def _crash_reports(log: Path) -> list[str]:
    """The last line of every worker's stderr that ended with a traceback."""
    reports = []
    for path in sorted(log.glob("worker-*.err")):
        text = path.read_text(errors="replace")
        if "Traceback" in text:
            errors = [line.strip(" |") for line in text.splitlines() if "Error" in line]
            reports.append(f"{path.name}: {errors[-1] if errors else 'traceback'}")
    return reports


def _log_counts(log: Path, kind: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    for path in log.glob(f"{kind}-*.log"):
        counts.update(path.read_text().split())
    return counts


async def _baseline(args: argparse.Namespace) -> float:
    task = make_task(args.turns)
    model = CountingModel(args.turns, args.latency)
    started = time.perf_counter()
    results = await agentcore.run_batch(
        task,
        [{"n": i} for i in range(args.agents)],
        backend=model,
        max_inflight=args.workers * args.max_inflight,
        max_active=args.window,
    )
    assert all(r.status == "ok" for r in results)
    return time.perf_counter() - started


async def chaos(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    async with trio.open_nursery() as proxy_nursery:
        report = await _chaos(args, folder, proxy_nursery)
        proxy_nursery.cancel_scope.cancel()
    return report


async def _chaos(
    args: argparse.Namespace, folder: Path, proxy_nursery: trio.Nursery
) -> dict[str, Any]:
    server: RedisServer = start_server(folder / "redis", fsync=args.fsync)
    log = folder / "log"
    log.mkdir()
    url = server.url(f"chaos{args.seed}")
    address = QueueAddress.parse(url)
    faults = fault_schedule(
        args.seed, args.kills, args.zombies, args.server_kills, args.cuts, args.delays
    )
    print(f"seed {args.seed}; fault schedule: {' '.join(faults) or 'none'}", flush=True)
    options = [
        "--turns", str(args.turns), "--latency", str(args.latency), "--lease", str(args.lease),
        "--max-inflight", str(args.max_inflight), "--max-deliveries", "1000",
    ]  # fmt: skip
    if args.no_compare:
        options.append("--no-compare")
    if args.no_heartbeat:
        options.append("--no-heartbeat")
    if args.no_audit:
        options.append("--no-audit")
    rng = random.Random(args.seed + 1)
    proxy = ChaosProxy(server.port)
    worker_url = url
    if args.proxy or args.cuts or args.delays:
        proxy_port = await proxy_nursery.start(proxy.serve)
        worker_url = f"redis://127.0.0.1:{proxy_port}/{address.batch}"
    workers = Workers(worker_url, args.workers, options, log)
    out = folder / "out.jsonl"
    written = [0]
    applied: Counter[str] = Counter()
    peak = [0]

    def on_result(_: dict[str, Any]) -> None:
        written[0] += 1

    async def zombie(slot: int) -> None:
        proc = workers.slots[slot]
        workers.frozen.add(slot)
        proc.send_signal(signal.SIGSTOP)
        try:
            await trio.sleep(args.lease + rng.uniform(1.0, 2.0))
        finally:
            proc.send_signal(signal.SIGCONT)
            workers.frozen.discard(slot)

    async def supervisor() -> None:
        while True:
            workers.replace_crashed(finished=False)
            await trio.sleep(0.2)

    async def slow_network() -> None:
        proxy.delay = 0.2
        try:
            await trio.sleep(2.0)
        finally:
            proxy.delay = 0.0

    async def injector(nursery: trio.Nursery) -> None:
        for number, fault in enumerate(faults, start=1):
            # Spread over the first 60 % of the results (the last ones come in a burst).
            threshold = args.agents * 3 * number // (5 * (len(faults) + 1))
            while written[0] < threshold:
                await trio.sleep(0.05)
            thawed = [s for s in range(args.workers) if s not in workers.frozen]
            slot = rng.choice(thawed) if thawed else 0
            if fault == "kill" and thawed:
                workers.kill(slot)
            elif fault == "zombie" and len(thawed) > 1:
                nursery.start_soon(zombie, slot)
            elif fault == "cut":
                proxy.cut()
            elif fault == "delay":
                nursery.start_soon(slow_network)
            elif fault == "server":
                server.kill()
                await trio.sleep(0.5)
                server.start()
            else:
                continue
            applied[fault] += 1
            print(f"  t+{time.perf_counter() - started:6.1f}s {fault:6} slot {slot} "
                  f"at {written[0]} results", flush=True)  # fmt: skip

    started = time.perf_counter()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(injector, nursery)
            nursery.start_soon(supervisor)
            nursery.start_soon(_memory_sampler, address, peak)
            with trio.fail_after(args.timeout):
                await agentcore.submit_batch(
                    url,
                    make_task(args.turns),
                    [{"n": i} for i in range(args.agents)],
                    out,
                    window=args.window,
                    on_result=on_result,
                )
            wall = time.perf_counter() - started
            nursery.cancel_scope.cancel()
        workers.stop_all(timeout=30)
        checks = await _collect_checks(address, args)
    finally:
        for proc in workers.slots:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait()
        server.stop()
    lines = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    seen = Counter(r["index"] for r in lines)
    wrong = sum(r.get("output") != {"total": expected_total(r["index"], args.turns)} for r in lines)
    tools = _log_counts(log, "tool")
    models = _log_counts(log, "model")
    report: dict[str, Any] = {
        "agents": args.agents,
        "steps_per_agent": 2 * args.turns + 1,
        "workers": args.workers,
        "fsync": args.fsync,
        "seed": args.seed,
        "faults_applied": dict(applied),
        "worker_processes_started": workers.started,
        "worker_crashes": workers.crashes,
        "worker_errors": _crash_reports(log),
        "wall_s": round(wall, 2),
        "commits_per_s": round(args.agents * (2 * args.turns + 1) / wall, 1),
        "peak_server_memory_mb": round(peak[0] / 2**20, 1),
        "lost": args.agents - len(seen),
        "wrong": wrong,
        "duplicate_lines": sum(c - 1 for c in seen.values()),
        **checks,
        "tool_executions": sum(tools.values()),
        "repeated_tool_executions": sum(c - 1 for c in tools.values()),
        "model_requests": sum(models.values()),
        "model_requests_repeated": sum(c - 1 for c in models.values()),
    }
    if args.baseline:
        report["baseline_run_batch_s"] = round(await _baseline(args), 2)
        report["distributed_over_baseline"] = round(wall / report["baseline_run_batch_s"], 2)
    return report


def passed(report: dict[str, Any]) -> bool:
    keys = ("lost", "wrong", "duplicate_lines", "duplicate_commits", "missing_commits",
            "stream_left", "pending_left", "live_left", "worker_crashes", "uncounted_commits",
            "consumers_left")  # fmt: skip
    return all(report[k] in (0, None) for k in keys)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=2, help="tool turns (2: 5 steps/agent)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--max-inflight", type=int, default=64, help="per worker")
    parser.add_argument("--window", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.05, help="model latency (s)")
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--zombies", type=int, default=3)
    parser.add_argument("--server-kills", type=int, default=1)
    parser.add_argument("--cuts", type=int, default=0, help="cut every worker connection")
    parser.add_argument("--delays", type=int, default=0, help="200 ms per chunk for 2 s")
    parser.add_argument("--proxy", action="store_true", help="workers through the proxy")
    parser.add_argument("--fsync", choices=["always", "everysec"], default="always")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--no-compare", action="store_true", help="negative control")
    parser.add_argument("--no-heartbeat", action="store_true", help="negative control")
    parser.add_argument("--baseline", action="store_true", help="also time run_batch")
    parser.add_argument(
        "--no-audit", action="store_true", help="no per-step commit counts (memory runs)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="agentcore-chaos-") as tmp:
        report = trio.run(chaos, args, Path(tmp))
    print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
    ok = passed(report)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
