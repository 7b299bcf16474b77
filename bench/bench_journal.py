"""The step journal: a batch SIGKILLed at random points and resumed, its cost, its size.

Three parts (``--part``, default all), each a real ``agentcore run`` in subprocesses:

- **local** (``sim``): ``--agents`` agents (2,000) x ``--steps`` model requests (8: seven tool
  turns and the answer), a tool of 0.2 s that logs its idempotency key, the model on the
  simulator (``agentcore sim --tool-rounds 7``, its own process, behind a proxy that counts
  the model requests). First the same batch uninterrupted, with the journal and without
  (``--no-journal``), ``--repeats`` times each in alternation (same run: the wall ratio);
  then the batch SIGKILLed ``--kills`` times at random moments, resumed each time with
  ``--resume``, and once more to the end. Checked: every agent ``ok`` with the output, turns
  and tokens of the uninterrupted run; no tool whose outcome the journal held ran again;
  the tool executions and model requests beyond the uninterrupted run's are no more than the
  steps in flight at the kills (started in the killed run, not in its journal). Reported:
  the wall and CPU ratios, the journal's bytes per agent-step (rows, and the file at its
  largest) and per finished agent (compacted).
- **batch-api**: the same on ``openai-batch://`` (the simulator's Batch API), with a tool
  that returns the time: killed ``--kills`` times while a hop is in flight, resumed. Checked:
  the provider holds exactly the hops' journal's batches (none submitted twice) and exactly
  one batch line per model request (no answer paid twice). The control, the same kills with
  ``--no-journal`` (the hops' journal alone), is reported beside it.
- **distributed**: ``tests/distributed/chaos.py`` with 4 workers, ``--kills`` SIGKILLs and a
  server crash, ``--steps`` model requests per agent: the same guarantees through the
  distributed journal (the Valkey store of the same interface).

Run: ``.venv/bin/python bench/bench_journal.py`` (``--agents``, ``--steps``, ``--kills``,
``--repeats``, ``--part``, ``--seed``; ``--help``). Everything shares the machine's cores: the
simulator, the run, the proxy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _common import machine, project_python  # noqa: E402

PYTHON = project_python()
CHAOS = ROOT / "tests" / "distributed" / "chaos.py"

TOOLS = '''
import os
import time

import trio

import agentcore


def _log(key):
    log = os.environ.get("TOOL_LOG")
    if log:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.write(fd, (key + "\\n").encode())
        os.close(fd)


@agentcore.tool
async def lookup(ctx: agentcore.RunContext, term: str) -> str:
    """Look a term up.

    Args:
        term: what to look up.
    """
    _log(ctx.idempotency_key)
    await trio.sleep(0.2)
    return "found " + term


@agentcore.tool
async def clock(ctx: agentcore.RunContext, term: str) -> str:
    """Say when a term was looked at.

    Args:
        term: the term.
    """
    _log(ctx.idempotency_key)
    await trio.sleep(0.2)
    return f"{term} at {time.time():.6f}"
'''

TASK = """
name = "{tool}"
system = "You look terms up and report."
prompt = "Look up the term below and report.\\n\\nTerm: {{term}}"
max_turns = {turns}
tools = ["benchtools:{tool}"]

[output_fields]
term = "str"
found = "bool"
notes = "list[str]"
"""


# ---------------------------------------------------------------------------- helpers


class CountingProxy:
    """A TCP proxy in a thread that counts the HTTP requests going through it."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = upstream_port
        self.requests = 0
        self.port = 0
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, args=(ready,), daemon=True)
        self._thread.start()
        ready.wait()

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)

        async def pump(reader: Any, writer: Any, count: bool) -> None:
            tail = b""
            try:
                while chunk := await reader.read(65536):
                    if count:
                        seen = tail + chunk
                        self.requests += seen.count(b"POST /") - tail.count(b"POST /")
                        tail = seen[-8:]
                    writer.write(chunk)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                writer.close()

        async def handle(reader: Any, writer: Any) -> None:
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
            except OSError:
                writer.close()
                return
            await asyncio.gather(pump(reader, up_writer, True), pump(up_reader, writer, False))

        async def start() -> None:
            server = await asyncio.start_server(handle, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            ready.set()

        self._loop.run_until_complete(start())
        self._loop.run_forever()


@contextmanager
def simulator(*flags: str) -> Iterator[int]:
    """``agentcore sim`` in its own process; yields its port."""
    proc = subprocess.Popen(
        [PYTHON, "-m", "agentcore._cli.main", "sim", "--port", "0", *flags],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        yield int(line.split("serving ", 1)[1].split()[0].rsplit(":", 1)[1].split("/")[0])
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def write_folder(folder: Path, agents: int, steps: int, tool: str) -> tuple[Path, Path]:
    (folder / "benchtools.py").write_text(TOOLS)
    task = folder / f"{tool}.toml"
    task.write_text(TASK.format(tool=tool, turns=steps))
    inputs = folder / "inputs.jsonl"
    inputs.write_text("".join(json.dumps({"term": f"t{i}"}) + "\n" for i in range(agents)))
    return task, inputs


def cli(*args: str | Path) -> list[str]:
    return [PYTHON, "-m", "agentcore._cli.main", *map(str, args)]


def env_for(folder: Path, log: Path | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{ROOT / 'src'}"}
    if log is not None:
        env["TOOL_LOG"] = str(log)
    else:
        env.pop("TOOL_LOG", None)
    return env


def records(path: Path) -> dict[int, dict[str, Any]]:
    found: dict[int, dict[str, Any]] = {}
    for line in path.read_bytes().splitlines():
        record = json.loads(line)
        found[record["index"]] = record
    return found


def count_lines(path: Path) -> int:
    try:
        with path.open("rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except FileNotFoundError:
        return 0


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def journal_state(path: Path) -> tuple[set[str], set[str], dict[str, int], int, int]:
    """Tool keys and reply request ids in the journal's steps, the finished runs (with their
    turns), the steps' payload bytes and rows (nothing when there is no journal yet)."""
    if not path.exists():
        return set(), set(), {}, 0, 0
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tools: set[str] = set()
        replies: set[str] = set()
        size = rows = 0
        for key, data in conn.execute("SELECT key, data FROM steps"):
            rows += 1
            size += len(data)
            if key:
                tools.add(key)
            else:
                replies.add(json.loads(data)["request_id"])
        ended = {
            run: json.loads(zlib.decompress(data))["turns"]
            for run, data in conn.execute("SELECT run, data FROM ends")
        }
    finally:
        conn.close()
    return tools, replies, ended, size, rows


def file_size(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def run_watched(
    command: list[str], env: dict[str, str], journal: Path | None
) -> tuple[float, float, int]:
    """Run to the end; the wall time, the run's CPU seconds and the journal's largest size on
    disk (polled)."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
    largest = 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if journal is not None:
            largest = max(largest, file_size(journal))
        time.sleep(0.1)
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    if code not in (0, 1):
        raise SystemExit(f"{command} failed ({code})")
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime, largest


def same(got: dict[int, dict[str, Any]], want: dict[int, dict[str, Any]]) -> list[int]:
    def key(r: dict[str, Any]) -> Any:
        usage = r["usage"]
        return (r["status"], r["output"], r["turns"], usage["prompt_tokens"],
                usage["completion_tokens"])  # fmt: skip

    return [i for i in want if i not in got or key(got[i]) != key(want[i])]


# ---------------------------------------------------------------------------- local


def local(args: argparse.Namespace, rng: random.Random) -> None:
    folder = Path(tempfile.mkdtemp(prefix="bench-journal-"))
    task, inputs = write_folder(folder, args.agents, args.steps, "lookup")
    with simulator("--tool-rounds", str(args.steps - 1)) as port:
        proxy = CountingProxy(port)
        backend = f"http://127.0.0.1:{proxy.port}"
        common = ["--backend", backend, "--model", "agentcore-sim", "--max-inflight", "64", "-q"]

        # 1. uninterrupted, with the journal and without, alternating
        walls: dict[str, list[float]] = {"journal": [], "no journal": []}
        cpus: dict[str, list[float]] = {"journal": [], "no journal": []}
        reference: dict[int, dict[str, Any]] = {}
        ref_requests = ref_tools = 0
        largest = final_size = 0
        for repeat in range(args.repeats):
            order = ["journal", "no journal"] if repeat % 2 == 0 else ["no journal", "journal"]
            for name in order:
                out = folder / f"ref-{name.replace(' ', '-')}-{repeat}.jsonl"
                log = folder / f"ref-{repeat}-{name.replace(' ', '-')}.log"
                before = proxy.requests
                flags = [] if name == "journal" else ["--no-journal"]
                wall, cpu, size = run_watched(
                    cli("run", task, inputs, "-o", out, *common, *flags),
                    env_for(folder, log),
                    Path(f"{out}.journal") if name == "journal" else None,
                )
                walls[name].append(wall)
                cpus[name].append(cpu)
                if name == "journal" and not reference:
                    reference = records(out)
                    ref_requests, ref_tools = proxy.requests - before, len(lines(log))
                    largest = size
                    final_size = file_size(Path(f"{out}.journal"))
                print(f"  uninterrupted, {name}: {wall:.1f} s, CPU {cpu:.1f} s", flush=True)
        assert all(r["status"] == "ok" for r in reference.values())
        agent_steps = args.agents * args.steps
        warm = ref_requests - agent_steps  # the warm-up request of each run
        ratio = statistics.median(walls["journal"]) / statistics.median(walls["no journal"])

        # 2. killed and resumed
        out = folder / "killed.jsonl"
        journal = Path(f"{out}.journal")
        tools_done: set[str] = set()
        requests_done: set[str] = set()
        ended: dict[str, int] = {}
        in_flight_tools = in_flight_requests = 0
        executed = requests = 0
        violations: list[str] = []
        rows_bytes: list[float] = []
        kills = 0
        segment = 0
        while True:
            log = folder / f"segment-{segment}.log"
            flags = ["--resume"] if segment else []
            command = cli("run", task, inputs, "-o", out, *common, *flags)
            before = proxy.requests
            proc = subprocess.Popen(command, env=env_for(folder, log), stderr=subprocess.PIPE)
            # Killed once this run has written a random share (5 to 35 %) of the results
            # still missing when it started.
            written = count_lines(out)
            share = rng.uniform(0.05, 0.35)
            target = written + max(1, int(share * (args.agents - written)))
            if kills >= args.kills:
                target = None
            started = time.perf_counter()
            while proc.poll() is None:
                if target is not None and count_lines(out) >= target:
                    proc.send_signal(signal.SIGKILL)
                    break
                time.sleep(0.02)
            _, stderr = proc.communicate()
            sent = proxy.requests - before
            ran = lines(log)
            executed += len(ran)
            requests += sent
            if proc.returncode == -signal.SIGKILL:
                kills += 1
            elif proc.returncode != 0:
                raise SystemExit(
                    f"segment {segment} failed ({proc.returncode}):\n{stderr[-3000:]!r}"
                )
            # Nothing the journal held before this segment was computed again in it.
            redone = [k for k in ran if k in tools_done or k.split("/")[0] in ended]
            violations += redone
            tools_now, replies_now, ended_now, size, rows = journal_state(journal)
            if rows:
                rows_bytes.append(size / rows)
            ended_tools = {k for k in ran if k.split("/")[0] in ended_now}
            committed = replies_now | {
                f"{run}/{n}" for run, turns in ended_now.items() for n in range(turns)
            }
            if proc.returncode == -signal.SIGKILL:
                # Started in this run, and not in its journal when it died.
                in_flight_tools += len(set(ran) - tools_now - ended_tools)
                in_flight_requests += max(0, sent - warm - len(committed - requests_done))
            tools_done |= tools_now | ended_tools
            requests_done |= committed
            ended.update(ended_now)
            print(
                f"  segment {segment}: {'killed' if proc.returncode else 'finished'} after "
                f"{time.perf_counter() - started:.1f} s, {sent} requests, {len(ran)} tool "
                f"executions, {len(ended_now)} agents finished in the journal",
                flush=True,
            )
            segment += 1
            if proc.returncode == 0:
                break
        got = records(out)
        extra_tools = executed - ref_tools
        extra_requests = requests - warm * segment - agent_steps
        print()
        print(f"local: {args.agents} agents x {args.steps} steps on sim, tool 0.2 s, {machine()}")
        print("| | value |")
        print("|---|---|")
        print(f"| wall, uninterrupted, journal / no journal (median of {args.repeats} each) | "
              f"{statistics.median(walls['journal']):.1f} s / "
              f"{statistics.median(walls['no journal']):.1f} s = {ratio:.3f} |")  # fmt: skip
        cpu_ratio = statistics.median(cpus["journal"]) / statistics.median(cpus["no journal"])
        print(f"| CPU of the run, journal / no journal (median) | "
              f"{statistics.median(cpus['journal']):.1f} s / "
              f"{statistics.median(cpus['no journal']):.1f} s = {cpu_ratio:.3f} |")  # fmt: skip
        print(f"| runs (journal) | {' / '.join(f'{w:.1f}' for w in walls['journal'])} s |")
        print(f"| runs (no journal) | {' / '.join(f'{w:.1f}' for w in walls['no journal'])} s |")
        print(f"| kills, then resumed | {kills} |")
        print(f"| agents ok, result as uninterrupted | "
              f"{sum(r['status'] == 'ok' for r in got.values())} / {args.agents}, "
              f"{args.agents - len(same(got, reference))} / {args.agents} |")  # fmt: skip
        print(f"| journaled tool outcomes or finished agents computed again | {len(violations)} |")
        print(f"| tool executions beyond the uninterrupted run / in flight at the kills | "
              f"{extra_tools} / {in_flight_tools} |")  # fmt: skip
        print(f"| model requests beyond the uninterrupted run / in flight at the kills | "
              f"{extra_requests} / {in_flight_requests} |")  # fmt: skip
        row = statistics.median(rows_bytes) if rows_bytes else 0.0
        print(f"| journal row per step (event payload, median over kills) | {row:.0f} B |")
        print(f"| journal file at its largest / agent-step | {largest / agent_steps:.0f} B |")
        print(f"| journal file at the end (compacted) / agent | {final_size / args.agents:.0f} B |")
        ok = (
            kills == args.kills
            and not same(got, reference)
            and not violations
            and extra_tools <= in_flight_tools
            and extra_requests <= in_flight_requests
        )
        print("PASS" if ok else "FAIL", flush=True)


# ---------------------------------------------------------------------------- batch API


def batch_api(args: argparse.Namespace, rng: random.Random) -> None:
    """The same kills with the step journal and, as the control, with ``--no-journal`` (the
    hops' journal alone), each on a simulator of its own."""
    runs = {name: _batch_api_run(args, rng, name == "journal")
            for name in ("journal", "no journal")}  # fmt: skip
    needed = args.agents * args.steps
    print()
    print(f"batch api: {args.agents} agents x {args.steps} steps on openai-batch:// (sim), "
          f"a tool returning the time")  # fmt: skip
    print("| | step journal | no journal (control) |")
    print("|---|---|---|")
    for label, key in (("kills while a hop was in flight, then resumed", "kills"),
                       ("agents ok", "ok"),
                       ("hops submitted / batches the provider holds", "hops"),
                       ("batch lines paid / model requests needed", "lines"),
                       ("tool executions (all segments)", "executions"),
                       ("wall, all segments", "wall")):  # fmt: skip
        print(f"| {label} | {runs['journal'][key]} | {runs['no journal'][key]} |")
    got = runs["journal"]
    ok = (
        got["kills"] == args.kills
        and got["hops_ok"]
        and got["paid"] == needed
        and got["ok_count"] == args.agents
    )
    print("PASS" if ok else "FAIL", flush=True)


def _batch_api_run(args: argparse.Namespace, rng: random.Random, journal: bool) -> dict[str, Any]:
    import httpx

    folder = Path(tempfile.mkdtemp(prefix="bench-journal-batch-"))
    task, inputs = write_folder(folder, args.agents, args.steps, "clock")
    out = folder / "out.jsonl"
    hop_journal = Path(f"{out}.batch-journal.jsonl")
    flags = ["--tool-rounds", str(args.steps - 1), "--batch-delay", "1.0"]
    with simulator(*flags) as port:
        backend = f"openai-batch://127.0.0.1:{port}"
        common = ["--backend", backend, "--model", "m", "--batch-poll", "0.2",
                  "--batch-gather", "0.5", "-q"]  # fmt: skip
        if not journal:
            common.append("--no-journal")
        kills = 0
        segment = 0
        started_all = time.perf_counter()
        while True:
            resume = ["--resume"] if segment else []
            proc = subprocess.Popen(
                cli("run", task, inputs, "-o", out, *common, *resume),
                env=env_for(folder, folder / f"batch-{segment}.log"),
                stderr=subprocess.PIPE,
            )
            target = 1 if kills < args.kills else None  # the next hop, at a random moment
            seen = len(_hops(hop_journal))
            while proc.poll() is None:
                if target is not None and len(_hops(hop_journal)) >= seen + target:
                    time.sleep(rng.uniform(0.0, 0.8))  # while that hop is in flight
                    proc.send_signal(signal.SIGKILL)
                    break
                time.sleep(0.02)
            _, stderr = proc.communicate()
            if proc.returncode == -signal.SIGKILL:
                kills += 1
            elif proc.returncode != 0:
                raise SystemExit(f"batch segment failed ({proc.returncode}):\n{stderr[-3000:]!r}")
            segment += 1
            if proc.returncode == 0:
                break
        wall = time.perf_counter() - started_all
        hops = _hops(hop_journal)
        listing = httpx.get(f"http://127.0.0.1:{port}/v1/batches", timeout=60).json()["data"]
    created = sorted(str(b["id"]) for b in listing)
    paid = sum(int(b["request_counts"]["total"]) for b in listing)
    got = records(out)
    ok_count = sum(r["status"] == "ok" for r in got.values())
    executions = sum(len(lines(folder / f"batch-{n}.log")) for n in range(segment))
    return {
        "kills": kills,
        "ok": f"{ok_count} / {args.agents}",
        "ok_count": ok_count if len(got) == args.agents else -1,
        "hops": f"{len(hops)} / {len(created)}",
        "hops_ok": sorted(hops) == created,
        "lines": f"{paid} / {args.agents * args.steps}",
        "paid": paid,
        "executions": executions,
        "wall": f"{wall:.1f} s",
    }


def _hops(path: Path) -> list[str]:
    if not path.exists():
        return []
    found = []
    for line in path.read_bytes().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("t") == "batch":
            found.append(str(record["id"]))
    return found


# ---------------------------------------------------------------------------- distributed


def distributed(args: argparse.Namespace) -> None:
    command = [
        PYTHON, str(CHAOS), "--agents", str(args.agents), "--workers", "4",
        "--turns", str(args.steps - 1), "--kills", str(args.kills), "--zombies", "0",
        "--server-kills", "1", "--seed", str(args.seed), "--timeout", "1800",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=2000, check=False)
    out = done.stdout
    report = json.loads(out[out.index("{") : out.rindex("}") + 1])
    print()
    print(f"distributed: {args.agents} agents x {args.steps} model steps, 4 workers, "
          f"{args.kills} worker SIGKILLs and a server crash (chaos.py)")  # fmt: skip
    print("| | value |")
    print("|---|---|")
    for key in ("faults_applied", "lost", "wrong", "duplicate_lines", "duplicate_commits",
                "repeated_tool_executions", "model_requests_repeated", "wall_s"):  # fmt: skip
        print(f"| {key} | {report.get(key)} |")
    print("PASS" if done.returncode == 0 else "FAIL", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=8, help="model requests per agent")
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    parser.add_argument(
        "--part", choices=["all", "local", "batch-api", "distributed"], default="all"
    )
    args = parser.parse_args()
    print(f"seed {args.seed}; {machine()}", flush=True)
    rng = random.Random(args.seed)
    if args.part in ("all", "local"):
        local(args, rng)
    if args.part in ("all", "batch-api"):
        batch_api(args, rng)
    if args.part in ("all", "distributed"):
        distributed(args)


if __name__ == "__main__":
    main()
