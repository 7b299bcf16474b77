"""Workers as separate processes: SIGKILL one mid-batch; the command line end to end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import trio

import agentcore
from agentcore import QueueAddress
from agentcore._distributed.connection import open_connection
from tests.distributed.agents import expected_total, make_task

HERE = Path(__file__).parent


def _worker(url: str, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(HERE / "worker_main.py"), url, *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


async def check_batch_is_clean(url: str, agents: int, steps_per_agent: int) -> None:
    """Exactly one commit per (agent, step); nothing left in the stream or pending lists."""
    address = QueueAddress.parse(url)
    keys = address.keys
    async with open_connection(address) as conn:
        audit = await conn.command("HGETALL", keys.audit)
        assert int(await conn.command("XLEN", keys.steps)) == 0
        assert (await conn.command("XPENDING", keys.steps, "workers"))[0] == 0
        assert int(await conn.command("HLEN", keys.version)) == 0
    counts = {k: int(v) for k, v in audit.items()}
    assert len(counts) == agents * steps_per_agent
    duplicates = {k: v for k, v in counts.items() if v != 1}
    assert duplicates == {}


async def test_a_worker_killed_mid_batch_loses_and_repeats_nothing(redis_server, tmp_path):
    url = redis_server.url("kill9")
    agents, turns = 120, 2
    out = tmp_path / "out.jsonl"
    args = ("--turns", str(turns), "--latency", "0.05", "--lease", "1.0")
    procs = [_worker(url, *args) for _ in range(3)]
    written = 0
    killed = False

    def on_result(_: dict[str, object]) -> None:
        nonlocal written
        written += 1

    try:
        async with trio.open_nursery() as nursery:

            async def killer() -> None:
                nonlocal killed
                while written < 30:
                    await trio.sleep(0.02)
                os.kill(procs[0].pid, signal.SIGKILL)
                killed = True
                procs.append(_worker(url, *args))

            nursery.start_soon(killer)
            with trio.fail_after(120):
                report = await agentcore.submit_batch(
                    url,
                    make_task(turns),
                    [{"n": i} for i in range(agents)],
                    out,
                    window=40,
                    block_ms=100,
                    on_result=on_result,
                )
    finally:
        _stop_all(procs)
    assert killed and report.written == agents
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert sorted(r["index"] for r in records) == list(range(agents))
    for r in records:
        assert r["output"] == {"total": expected_total(r["index"], turns)}, r
    await check_batch_is_clean(url, agents, 2 * turns + 1)


TOOLS_MODULE = '''
import agentcore

@agentcore.tool
def lookup(term: str) -> str:
    """Look a term up.

    Args:
        term: what to look up.
    """
    return "found " + term
'''

TASK_FILE = """
name = "lookup"
system = "You look terms up and report."
prompt = "Look up the term below and report.\\n\\nTerm: {term}"
max_turns = 2
tools = ["disttools:lookup"]

[output_fields]
term = "str"
found = "bool"
"""


def _cli(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "agentcore._cli.main", *map(str, args)]


def test_the_command_line_runs_a_batch_and_resumes_a_killed_submitter(redis_server, tmp_path):
    (tmp_path / "disttools.py").write_text(TOOLS_MODULE)
    task = tmp_path / "task.toml"
    task.write_text(TASK_FILE)
    inputs = tmp_path / "inputs.jsonl"
    count = 60
    inputs.write_bytes(b"".join(orjson.dumps({"term": f"t{i}"}) + b"\n" for i in range(count)))
    out = tmp_path / "out.jsonl"
    url = redis_server.url("cli")
    submit = _cli("run", task, inputs, "-o", out, "--queue", url, "--window", "10", "-q")
    workers = [
        subprocess.Popen(
            _cli("worker", task, "--queue", url, "--max-inflight", "4", "--exit-when-done"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    first = subprocess.Popen(submit, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while out.read_bytes().count(b"\n") < 10 if out.exists() else True:
            assert time.monotonic() < deadline, "no results within 60 s"
            time.sleep(0.02)
        first.kill()
        first.wait(timeout=30)
        assert first.returncode == -signal.SIGKILL  # killed mid-batch, not finished
        assert out.read_bytes().count(b"\n") < count
        resumed = subprocess.run(
            [*submit, "--resume"], capture_output=True, text=True, timeout=120, check=False
        )
        assert resumed.returncode == 0, resumed.stderr
        for proc in workers:
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err.decode()
            assert b"steps_committed" in err
    finally:
        for proc in [first, *workers]:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert sorted(r["index"] for r in records) == list(range(count))
    assert all(r["status"] == "ok" for r in records)
    assert all(r["output"]["term"] for r in records)


async def test_the_stats_hash_counts_every_commit_of_a_killed_worker_and_no_dead_name_stays(
    redis_server, tmp_path
):
    # A worker adds its own counters to the stats hash every lease / 2 (10 s for the first
    # worker here); it is killed after its first commits, long before. The commit counters
    # are counted by the commit script, so none of its commits is missing from the hash; and
    # its consumer name, which owns nothing once its steps are reclaimed, leaves the group.
    url = redis_server.url("statskill")
    keys = QueueAddress.parse(url).keys
    agents, turns = 60, 2
    steps = 2 * turns + 1
    procs = [_worker(url, "--turns", str(turns), "--latency", "0.02", "--lease", "20")]
    killed_after = 0
    try:
        async with open_connection(QueueAddress.parse(url)) as conn, trio.open_nursery() as n:

            async def killer() -> None:
                nonlocal killed_after
                while int(await conn.command("HLEN", keys.audit)) < 20:
                    await trio.sleep(0.01)
                os.kill(procs[0].pid, signal.SIGKILL)
                procs[0].wait(timeout=30)
                killed_after = int(await conn.command("HLEN", keys.audit))
                procs.append(_worker(url, "--turns", str(turns), "--lease", "1.0"))

            n.start_soon(killer)
            with trio.fail_after(120):
                await agentcore.submit_batch(
                    url, make_task(turns), [{"n": i} for i in range(agents)],
                    tmp_path / "out.jsonl", window=agents, block_ms=100,
                )  # fmt: skip
        for proc in procs[1:]:
            proc.wait(timeout=60)  # exit_when_done: a clean stop
        async with open_connection(QueueAddress.parse(url)) as conn:
            stats = {k: int(v) for k, v in (await conn.command("HGETALL", keys.stats)).items()}
            consumers = await conn.command("XINFO", "CONSUMERS", keys.steps, "workers")
    finally:
        _stop_all(procs)
    assert 20 <= killed_after < agents * steps
    assert stats["steps_committed"] == agents * steps, stats
    assert stats["agents_finished"] == agents
    assert stats.get("steps_rejected", 0) == 0
    assert consumers == []
    await check_batch_is_clean(url, agents, steps)
