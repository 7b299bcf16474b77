"""Batch API backends as the providers behave, end to end: ``agentcore run`` against the
simulator's Batch APIs in scaled time (``--speedup`` simulated seconds per second).

Per scheme (``openai-batch://``, ``anthropic-batch://``): ``--agents`` agents with ``--turns``
tool turns each; hops lasting 1 to 6 simulated hours; a share of failed lines
(``--fail-rate``); the third batch expiring at its 24-hour window; one batch failed for its
size (OpenAI: past an enqueued-token limit; Anthropic: past a batch size, a 413); results in
any order; one results file past ``--results-mb`` MB (long final answers); the run SIGKILLed
twice while a hop is in flight and resumed each time. It checks, and reports:

- every agent ``ok``, and its output equal to the same agent's on the synchronous endpoint;
- every hop submitted once (the batches the simulator created are exactly the journal's, and
  no hop of the journal has two), split hops apart;
- no batch left running at the provider at the end;
- the peak RSS of the ``agentcore run`` processes (all three);
- the ledger (the sum of the records' costs) against the bill computed here, independently,
  from the simulator's usage and the published prices (to the cent).

Then the same agents on the synchronous endpoint with ``service_tier=flex-then-standard`` while
the simulator refuses 30 % of flex calls (no kill: a killed synchronous run bills its lost
requests again), checked the same way against the simulator's per-tier counts; and the bad
input: a key the simulator rejects, a model it does not serve, a journal naming a batch it
does not know, each timed to its end with its error named and every record written.

    python bench/bench_batch_api.py --agents 1000 --turns 3
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import trio
from _common import emit

import agentcore
import agentcore.sim

TOOLS = '''
import agentcore

@agentcore.tool
async def lookup(term: str) -> str:
    """Look a term up in the catalogue.

    Args:
        term: what to look up.
    """
    return "the catalogue lists " + term + " under shelf " + str(len(term))
'''

TASK = """
name = "catalogue"
system = "You look terms up in the library catalogue with the lookup tool and then report."
prompt = "Look up the term below and report what the catalogue says.\\n\\nTerm: {term}"
max_turns = 8
tools = ["benchtools:lookup"]
"""

MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-haiku-4-5"}
# Published prices, USD per million tokens, of these models in a batch (input and output at
# half the list price) and on the synchronous tiers; written here apart from agentcore's own
# table. Cached input in an OpenAI batch, and cache writes and hits in an Anthropic batch, are
# billed at their list prices (agentcore's documented safe side).
BATCH = {
    "openai": {"input": 0.075, "output": 0.30},
    "anthropic": {
        "input": 0.50,
        "output": 2.50,
        "write_5m": 1.25,
        "write_1h": 2.00,
        "read": 0.10,
    },
}
ANTHROPIC_ANSWER = 4000
"""The longest final answer asked of the Anthropic simulator (under the codec's 4,096-token
default ``max_tokens``)."""
FLEX_MODEL = "o4-mini"  # a model that offers flex
SYNC = {  # o4-mini: standard, and flex at Batch API rates
    "default": {"input": 1.10, "cached": 0.275, "output": 4.40},
    "flex": {"input": 0.55, "cached": 0.1375, "output": 2.20},
}


def _cli(*args: object) -> list[str]:
    return [sys.executable, "-m", "agentcore._cli.main", *map(str, args)]


class _Sim:
    """``agentcore sim`` in a process of its own."""

    def __init__(self, *flags: object) -> None:
        self.proc = subprocess.Popen(
            _cli("sim", "--port", "0", *flags), stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert "serving" in line, line
        self.url = line.split("serving ", 1)[1].split()[0]
        self.host = self.url.removesuffix("/v1").removeprefix("http://")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.communicate(timeout=60)


def _listing(url: str, kind: str, key: str = "sk-sim") -> list[dict[str, Any]]:
    path = "/batches" if kind == "openai" else "/messages/batches"
    return list(httpx.get(url + path, timeout=120, headers={"x-api-key": key}).json()["data"])


def _journal(out: Path) -> list[dict[str, Any]]:
    path = out.with_name(out.name + ".batch-journal.jsonl")
    if not path.exists():
        return []
    records = []
    with path.open("rb") as file:
        for line in file:
            if line.endswith(b"\n") and b'"t":"answer"' not in line:
                records.append(orjson.loads(line))
    return records


def _records(out: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in out.read_bytes().splitlines() if line.strip()]


def _folder(root: Path, agents: int) -> tuple[Path, Path, dict[str, str]]:
    (root / "benchtools.py").write_text(TOOLS)
    task = root / "task.toml"
    task.write_text(TASK)
    inputs = root / "inputs.jsonl"
    inputs.write_bytes(b"".join(orjson.dumps({"term": f"t{i}"}) + b"\n" for i in range(agents)))
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return task, inputs, env


def _run_args(
    task: Path, inputs: Path, out: Path, url: str, model: str, *, gather: float
) -> list[object]:
    """The arguments of ``agentcore run`` on a Batch API backend, polled every 0.2 s."""
    return ["run", task, inputs, "-o", out, "--backend", url, "--model", model,
            "--batch-poll", 0.2, "--batch-gather", gather, "-q"]  # fmt: skip


def _reaped(proc: subprocess.Popen[Any]) -> float:
    """Wait for ``proc`` to end; its own peak RSS in MB (``RUSAGE_CHILDREN`` would also
    count every other child waited for, the simulators of earlier schemes included)."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss / 1024


def _run_until(
    command: list[str], env: dict[str, str], out: Path, batches: int, log: Path | None = None
) -> tuple[float, float]:
    """Run ``command`` until the journal holds ``batches`` batch records, then SIGKILL it;
    the seconds it ran and its peak RSS in MB (its standard error goes to ``log``)."""
    began = time.monotonic()
    errors = subprocess.DEVNULL if log is None else log.open("a")
    proc = subprocess.Popen(command, env=env, stderr=errors)
    try:
        while sum(r["t"] == "batch" for r in _journal(out)) < batches:
            if proc.poll() is not None:
                raise SystemExit(f"the run ended before it could be killed ({proc.returncode})")
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        rss = _reaped(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()
        if log is not None:
            errors.close()  # type: ignore[union-attr]
    return time.monotonic() - began, rss


def _digest(output: Any) -> str:
    return hashlib.blake2b(orjson.dumps(output), digest_size=8).hexdigest()


def _bill(sim: _Sim, kind: str) -> tuple[float, int, int]:
    """The provider's bill for every line its batches answered (from its own usage), the
    number of those lines, and the size of the largest results file."""
    price = BATCH[kind]
    total, lines, largest = 0.0, 0, 0
    with httpx.Client(timeout=300) as http:
        for batch in _listing(sim.url, kind):
            if kind == "openai":
                usage = batch["usage"]
                lines += batch["request_counts"]["completed"]
                total += usage["input_tokens"] * price["input"]
                total += usage["output_tokens"] * price["output"]
                if batch.get("output_file_id"):
                    info = http.get(f"{sim.url}/files/{batch['output_file_id']}").json()
                    largest = max(largest, info["bytes"])
                continue
            results = http.get(f"{sim.url}/messages/batches/{batch['id']}/results").content
            largest = max(largest, len(results))
            for raw in results.splitlines():
                result = orjson.loads(raw)["result"]
                if result["type"] != "succeeded":
                    continue
                usage = result["message"]["usage"]
                split = usage["cache_creation"]
                lines += 1
                total += (
                    usage["input_tokens"] * price["input"]
                    + usage["output_tokens"] * price["output"]
                    + usage["cache_read_input_tokens"] * price["read"]
                    + split["ephemeral_5m_input_tokens"] * price["write_5m"]
                    + split["ephemeral_1h_input_tokens"] * price["write_1h"]
                )
    return total * 1e-6, lines, largest


def _synchronous(task_path: Path, inputs: Path, host: str, kind: str, model: str) -> dict[int, str]:
    """Each agent's output digest on the synchronous endpoint of the same dialect."""
    sys.path.insert(0, str(task_path.parent))
    task = agentcore.load_task(task_path)
    values = [orjson.loads(line) for line in inputs.read_bytes().splitlines()]
    results = trio.run(
        functools.partial(
            agentcore.run_batch,
            task,
            values,
            backend=f"http://{host}",
            model=model,
            dialect=kind,
            max_inflight=64,
        )
    )
    return {r.index: _digest(r.output) for r in results}


def scheme(kind: str, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """One scheme's run (see the module docstring)."""
    model = MODELS[kind]
    size = (
        ["--batch-enqueued-tokens", str(args.enqueued)]
        if kind == "openai"
        else ["--batch-max-bytes", str(args.max_bytes)]
    )
    sim = _Sim(
        "--tool-rounds",
        args.turns,
        "--speedup",
        args.speedup,
        "--batch-delay",
        3600,
        "--batch-delay-max",
        21600,
        "--batch-fail-rate",
        args.fail_rate,
        "--batch-expire",
        args.expire,
        "--batch-retention",
        1e9,
        "--seed",
        7,
        "--answer-tokens",
        # An Anthropic request asks for at most 4,096 tokens (the codec's default max_tokens):
        # a longer answer would stop at that limit, on the synchronous endpoint as in a batch.
        args.answer_tokens if kind == "openai" else min(args.answer_tokens, ANTHROPIC_ANSWER),
        *size,
    )
    try:
        task, inputs, env = _folder(root, args.agents)
        out = root / "out.jsonl"
        base = _run_args(task, inputs, out, f"{kind}-batch://{sim.host}", model, gather=2)
        log = root / "stderr.txt"
        began = time.monotonic()
        first = _run_until(_cli(*base), env, out, 2, log)
        second = _run_until(_cli(*base, "--resume"), env, out, 5, log)
        start = time.monotonic()
        done = subprocess.Popen(_cli(*base, "--resume"), env=env, stderr=subprocess.PIPE, text=True)
        assert done.stderr is not None
        stderr = done.stderr.read()  # to its end: the pipe never fills
        last = _reaped(done)
        walls = [first[0], second[0], time.monotonic() - start]
        said = log.read_text() + stderr
        wall = time.monotonic() - began
        rss = max(first[1], second[1], last)
        records = _records(out)
        journal = _journal(out)
        batches = _listing(sim.url, kind)
        bill, lines, largest = _bill(sim, kind)
        expected = _synchronous(task, inputs, sim.host, kind, model)
    finally:
        sim.stop()
    statuses = [r["status"] for r in records]
    ids = [str(r["id"]) for r in journal if r["t"] == "batch"]
    tags = [r["hop"] for r in journal if r["t"] == "batch"]
    status = [b.get("status", b.get("processing_status")) for b in batches]
    ledger = sum(r["cost"]["usd"] for r in records)
    failed_for_size = [b["id"] for b in batches if b.get("status") == "failed"]
    return {
        "scheme": f"{kind}-batch",
        "exit": done.returncode,
        "agents": len(records),
        "ok": statuses.count("ok"),
        "equal_to_synchronous": sum(
            expected.get(r["index"]) == _digest(r["output"]) for r in records
        ),
        "hops": len(ids),
        "batches_created": len(batches),
        "submitted_once": sorted(ids) == sorted(b["id"] for b in batches)
        and len(set(tags)) == len(tags),
        "split": said.count("split into hops") + said.count("sent again alone"),
        "failed_for_size": len(failed_for_size),
        "refused_413": said.count("HTTP 413"),
        "expired": status.count("expired")
        + sum(b.get("request_counts", {}).get("expired", 0) > 0 for b in batches),
        "running_at_end": sum(
            s not in ("completed", "failed", "expired", "cancelled", "ended") for s in status
        ),
        "largest_results_mb": round(largest / 1e6, 1),
        "peak_rss_mb": round(rss, 1),
        "wall_s": round(wall, 1),
        "walls_s": [round(w, 1) for w in walls],
        "lines_billed": lines,
        "ledger_usd": round(ledger, 6),
        "bill_usd": round(bill, 6),
        "to_the_cent": round(ledger, 2) == round(bill, 2),
    }


def flex(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """The same agents on the synchronous endpoint, flex first, 30 % of flex refused (the
    simulator in this process, to read its per-tier counts; the run in a process of its own)."""
    task, inputs, env = _folder(root, args.agents)
    out = root / "flex.jsonl"
    config = agentcore.sim.SimConfig(
        tool_rounds=args.turns, speedup=args.speedup, seed=7, flex_refuse_rate=0.3
    )

    async def run() -> tuple[Any, float, dict[int, str], int, str]:
        async with agentcore.sim.open_sim_server(config=config) as server:
            host = server.url.removesuffix("/v1").removeprefix("http://")
            start = time.monotonic()
            done = await trio.run_process(
                _cli(
                    "run",
                    task,
                    inputs,
                    "-o",
                    out,
                    "--backend",
                    f"http://{host}",
                    "--model",
                    FLEX_MODEL,
                    "--service-tier",
                    "flex-then-standard",
                    "--max-inflight",
                    64,
                ),
                env=env,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            wall = time.monotonic() - start
            served = server.statistics().tier_tokens
            values = [orjson.loads(line) for line in inputs.read_bytes().splitlines()]
            sys.path.insert(0, str(root))
            results = await agentcore.run_batch(
                agentcore.load_task(task),
                values,
                backend=f"http://{host}",
                model=FLEX_MODEL,
                dialect="openai",
                max_inflight=64,
            )
        expected = {r.index: _digest(r.output) for r in results}
        return served, wall, expected, done.returncode, done.stderr.decode()[-4000:]

    served, wall, expected, code, stderr = trio.run(run)
    if not out.exists():
        raise SystemExit(f"the flex run wrote nothing (exit {code}): {stderr}")
    records = _records(out)
    bill = sum(
        (
            (prompt - cached) * SYNC[tier]["input"]
            + cached * SYNC[tier]["cached"]
            + completion * SYNC[tier]["output"]
        )
        * 1e-6
        for tier, (_, prompt, cached, completion) in served.items()
    )
    # The driver's ledger, as the summary prints it: it counts the one-token request sent
    # before the fan-out (to learn whether the model offers flex), which no agent's record holds.
    summary = next(line for line in stderr.splitlines() if line.strip().startswith("cost "))
    ledger = float(summary.split("$", 1)[1].split()[0])
    records_usd = sum(r["cost"]["usd"] for r in records)
    return {
        "scheme": "flex-then-standard, 30 % refused",
        "exit": code,
        "agents": len(records),
        "ok": sum(r["status"] == "ok" for r in records),
        "equal_to_synchronous": sum(
            expected.get(r["index"]) == _digest(r["output"]) for r in records
        ),
        "served": {tier: counts[0] for tier, counts in served.items()},
        "wall_s": round(wall, 1),
        "records_usd": round(records_usd, 6),
        "ledger_usd": round(ledger, 6),
        "bill_usd": round(bill, 6),
        "to_the_cent": round(ledger, 2) == round(bill, 2),
    }


def bad_input(args: argparse.Namespace, root: Path) -> list[dict[str, Any]]:
    """A key the simulator rejects, a model it does not serve, a journal naming a batch it
    does not know: the seconds each run takes, its exit, its records and named error."""
    rows = []
    cases = [
        ("key rejected", ["--api-keys", "sk-good"], ["--api-key-env", "BENCH_KEY"], {}),
        ("model not served", ["--models", "gpt-4o-mini"], [], {}),
        ("journal names an unknown batch", [], [], {"resume": True}),
    ]
    for name, sim_flags, run_flags, how in cases:
        sim = _Sim("--tool-rounds", 1, "--speedup", args.speedup, "--batch-delay", 3600, *sim_flags)
        try:
            folder = root / name.replace(" ", "_")
            folder.mkdir()
            task, inputs, env = _folder(folder, 20)
            env["BENCH_KEY"] = "sk-bad"
            out = folder / "out.jsonl"
            model = "gpt-4o-nope" if "model" in name else "gpt-4o-mini"
            url = f"openai-batch://{sim.host}"
            base = [*_run_args(task, inputs, out, url, model, gather=0.5), *run_flags]
            if how.get("resume"):  # a journal from another provider's run
                other = _Sim("--tool-rounds", 1, "--speedup", args.speedup, "--batch-delay", 3600)
                try:
                    elsewhere = [*base]
                    elsewhere[elsewhere.index(f"openai-batch://{sim.host}")] = (
                        f"openai-batch://{other.host}"
                    )
                    _run_until(_cli(*elsewhere), env, out, 1)
                finally:
                    other.stop()
                base.append("--resume")
            start = time.monotonic()
            done = subprocess.run(
                _cli(*base), env=env, capture_output=True, text=True, check=False, timeout=600
            )
            seconds = time.monotonic() - start
        finally:
            sim.stop()
        records = _records(out)
        errors = sorted(
            {
                f"{r['error']['model_error']} ({r['error']['http_status']})"
                for r in records
                if r.get("error")
            }
        )
        rows.append(
            {
                "case": name,
                "seconds": round(seconds, 1),
                "exit": done.returncode,
                "records": len(records),
                "errors": errors,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--speedup", type=float, default=3600.0)
    parser.add_argument("--fail-rate", type=float, default=0.1)
    parser.add_argument(
        "--expire", type=int, default=10, help="the batch (by creation number) that expires"
    )
    parser.add_argument("--answer-tokens", type=int, default=50000)
    parser.add_argument(
        "--enqueued", type=int, default=430_000, help="the OpenAI simulator's enqueued-token limit"
    )
    parser.add_argument(
        "--max-bytes",
        type=int,
        default=1_470_000,
        help="the Anthropic simulator's largest batch, in bytes",
    )
    parser.add_argument("--schemes", default="openai,anthropic,flex,bad")
    parser.add_argument("--keep", help="keep the runs' files in this folder")
    args = parser.parse_args()
    report: dict[str, Any] = {"agents": args.agents, "turns": args.turns}
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or scratch
        for kind in args.schemes.split(","):
            root = Path(tmp) / kind
            root.mkdir(parents=True)
            if kind in ("openai", "anthropic"):
                report[kind] = scheme(kind, args, root)
            elif kind == "flex":
                report[kind] = flex(args, root)
            elif kind == "bad":
                report[kind] = bad_input(args, root)
            print(orjson.dumps(report[kind]).decode(), file=sys.stderr, flush=True)
    emit(report)


if __name__ == "__main__":
    main()
