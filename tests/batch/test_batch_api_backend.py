"""``--backend openai-batch://`` and ``anthropic-batch://`` end to end: 100 agents with three
tool turns each through the simulator's Batch APIs, the process killed (SIGKILL) while a hop
is in flight and resumed, against the same simulator in its own process."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
import trio

from agentcore import load_task, run_batch
from agentcore._cli.main import main as cli_main
from agentcore._observe.trace import SLOTS_PID, read_trace
from agentcore._tasks.results_file import ResultRecord
from tests.batch.test_cli import _cli, _records
from tests.sim_process import sim_process

TOOLS = '''
import agentcore

@agentcore.tool
def lookup(term: str) -> str:
    """Look a term up.

    Args:
        term: what to look up.
    """
    return "found " + term
'''

TASK = """
name = "lookup"
system = "You look terms up and report."
prompt = "Look up the term below and report.\\n\\nTerm: {term}"
max_turns = 6
tools = ["batchtools:lookup"]

[output_fields]
term = "str"
found = "bool"
notes = "list[str]"
"""

AGENTS = 100
TOOL_TURNS = 3


@pytest.fixture
def sim_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A simulator in its own process (it outlives the killed run), three tool turns per agent,
    batches ending 0.6 s after their creation (long enough to kill a run while one is in flight
    and, polled every 0.1 s, to see its progress line) or as a test's ``batch_delay`` mark says."""
    mark = request.node.get_closest_marker("batch_delay")
    delay = str(mark.args[0]) if mark else "0.6"
    with sim_process("--tool-rounds", str(TOOL_TURNS), "--batch-delay", delay) as url:
        yield url


def _folder(
    tmp_path: Path,
    module: str = "batchtools",
    tools: str = TOOLS,
    text: str = TASK,
    agents: int = AGENTS,
) -> tuple[Path, Path, dict[str, str]]:
    """A task folder: its tools module, ``task.toml``, the inputs and an environment that
    imports the tools."""
    (tmp_path / f"{module}.py").write_text(tools)
    task = tmp_path / "task.toml"
    task.write_text(text)
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_bytes(b"".join(orjson.dumps({"term": f"t{i}"}) + b"\n" for i in range(agents)))
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return task, inputs, env


def _journal(out: Path) -> list[dict[str, object]]:
    path = out.with_name(out.name + ".batch-journal.jsonl")
    if not path.exists():
        return []
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.endswith(b"}")]


def _created(sim_url: str, kind: str) -> list[dict[str, object]]:
    path = "/batches" if kind == "openai" else "/messages/batches"
    listing = httpx.get(sim_url + path, timeout=30).json()
    return list(listing["data"])


def _kill_during_hop(
    command: list[str], env: dict[str, str], out: Path, hop: int, sig: int = signal.SIGKILL
) -> tuple[int, str]:
    """Run ``command`` until the journal records hop ``hop``'s batch, then send it ``sig``;
    its exit status and standard error."""
    proc = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            batches = [r for r in _journal(out) if r["t"] == "batch"]
            if len(batches) >= hop:
                proc.send_signal(sig)
                break
            assert proc.poll() is None, "the run ended before it could be killed"
            time.sleep(0.02)
        else:
            pytest.fail("the hop was never submitted")
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return proc.returncode, stderr


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_run_killed_during_a_hop_resumes_without_submitting_any_hop_twice(
    tmp_path: Path, sim_url: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    task, inputs, env = _folder(tmp_path)
    out = tmp_path / "out.jsonl"
    host = sim_url.removesuffix("/v1").removeprefix("http://")
    backend = f"{kind}-batch://{host}"
    base: list[str | Path] = ["run", task, inputs, "-o", out, "--backend", backend, "--model", "m"]
    fast = ["--batch-poll", "0.1", "--batch-gather", "0.3"]

    trace = tmp_path / "trace.json"
    code, stderr = _kill_during_hop(_cli(*base, *fast, "--trace", trace), env, out, hop=2)
    assert code == -signal.SIGKILL
    assert "hop 1: batch" in stderr  # the progress says which hop waits, and since when
    assert " since " in stderr
    assert "hop 1: batch" in stderr and " submitted at " in stderr  # ...when it was submitted
    assert "tomorrow at the latest" in stderr  # ...when it ends at the latest
    assert "hop 1: batch" in stderr and " after " in stderr  # ...and how long it took
    submitted = [r for r in _journal(out) if r["t"] == "batch"]
    ended = [r for r in _journal(out) if r["t"] == "ended"]
    assert len(submitted) == 2
    assert len(ended) == 1  # killed while the second hop was in flight
    _check_cut_trace(trace, tmp_path / "timeline.svg")

    resumed = subprocess.run(
        _cli(*base, *fast, "--resume"),
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    # The resumed run's hops go on from the journal's numbers: hop 2 again (polled), then 3.
    assert "hop 1:" not in resumed.stderr
    assert "hop 2: batch" in resumed.stderr and "hop 3: batch" in resumed.stderr

    records = _records(out)
    assert sorted(r["index"] for r in records) == list(range(AGENTS))  # type: ignore[type-var]
    assert all(r["status"] == "ok" for r in records)
    assert all(r["turns"] == TOOL_TURNS + 1 for r in records)

    journal = _journal(out)
    hops = [r for r in journal if r["t"] == "batch"]
    created = _created(sim_url, kind)
    # Every hop was submitted once: the server created exactly the journal's batches, and no
    # request went into two of them.
    assert sorted(str(r["id"]) for r in hops) == sorted(str(b["id"]) for b in created)
    assert len({r["hop"] for r in hops}) == len(hops)
    ids = [i for r in journal if r["t"] == "intent" for i in r["ids"]]  # type: ignore[attr-defined]
    assert len(ids) == len(set(ids)) == AGENTS * (TOOL_TURNS + 1)

    # The same agents on the synchronous endpoint give the same outputs.
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _standard_outputs(task, inputs, host, kind) == {r["index"]: r["output"] for r in records}


def _check_cut_trace(trace: Path, picture: Path) -> None:
    """The trace of the killed run: on disk up to the wait for hop 2 (every reply of hop 1
    drawn), and its picture says it was cut while the 100 agents were waiting."""
    assert cli_main(["trace", str(trace), "-o", str(picture)]) == 0
    text = picture.read_text()
    assert "CUT SHORT at " in text
    assert f"At the cut {AGENTS} agents were running" in text
    replies = [
        e
        for e in read_trace(trace)
        if e.get("ph") == "X" and e.get("pid") == SLOTS_PID and e["args"].get("run") is not None
    ]
    assert len(replies) == AGENTS  # hop 1: each agent's first request


def _standard_outputs(task: Path, inputs: Path, host: str, kind: str) -> dict[object, object]:
    """Each agent's output through the synchronous endpoint of the same dialect."""
    loaded = load_task(task)
    values = [orjson.loads(line) for line in inputs.read_bytes().splitlines()]
    results = trio.run(
        functools.partial(
            run_batch, loaded, values, backend=f"http://{host}", model="m", dialect=kind
        )
    )
    records = [orjson.loads(ResultRecord.of_result(r, r.index).encode()) for r in results]
    return {r["index"]: r["output"] for r in records}


@pytest.mark.batch_delay(0.1)  # nothing is killed here: no hop needs to stay in flight
def test_a_run_without_resume_starts_a_new_journal(tmp_path: Path, sim_url: str) -> None:
    task, _, env = _folder(tmp_path)
    inputs = tmp_path / "few.jsonl"
    inputs.write_bytes(b'{"term": "a"}\n{"term": "b"}\n')
    out = tmp_path / "out.jsonl"
    stale = b'{"t":"intent","hop":"old-1","ids":["k-0"]}\n{"t":"batch","hop":"old-1","id":"x"}\n'
    out.with_name(out.name + ".batch-journal.jsonl").write_bytes(stale)
    host = sim_url.removesuffix("/v1").removeprefix("http://")
    backend = f"openai-batch://{host}"
    fast = ["--batch-poll", "0.1", "--batch-gather", "0.1", "-q"]
    command = _cli("run", task, inputs, "-o", out, "--backend", backend, "--model", "m", *fast)
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    hops = {r["hop"] for r in _journal(out)}
    assert hops
    assert "old-1" not in hops  # the stale batch "x" was neither polled nor kept


def _backend(sim_url: str, kind: str) -> str:
    return f"{kind}-batch://{sim_url.removesuffix('/v1').removeprefix('http://')}"


@pytest.mark.batch_delay(3600)  # hops last an hour: they are in flight when the run stops
@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_ctrl_c_cancels_the_batches_in_flight_and_says_so(
    tmp_path: Path, sim_url: str, kind: str
) -> None:
    task, inputs, env = _folder(tmp_path)
    out = tmp_path / "out.jsonl"
    command = _cli("run", task, inputs, "-o", out, "--backend", _backend(sim_url, kind),
                   "--model", "m", "--batch-poll", "0.1", "--batch-gather", "0.3")  # fmt: skip
    code, stderr = _kill_during_hop(command, env, out, hop=1, sig=signal.SIGINT)
    assert code == 130, stderr
    assert "cancelled at the provider" in stderr
    (batch,) = _created(sim_url, kind)
    assert batch.get("status", "cancelling") in ("cancelling", "cancelled")
    assert batch.get("processing_status", "canceling") in ("canceling", "ended")
    assert [r["t"] for r in _journal(out) if r["t"] != "answer"][-1] == "cancelled"


@pytest.mark.batch_delay(3600)
def test_agents_that_time_out_have_their_hop_cancelled_and_the_run_says_so(
    tmp_path: Path, sim_url: str
) -> None:
    task, inputs, env = _folder(tmp_path)
    out = tmp_path / "out.jsonl"
    command = _cli("run", task, inputs, "-o", out, "--backend", _backend(sim_url, "openai"),
                   "--model", "m", "--batch-poll", "0.1", "--batch-gather", "0.3",
                   "--timeout", "3")  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "cancelled at the provider" in done.stderr
    assert len(_records(out)) == AGENTS  # every agent has its record: failed, timed out
    (batch,) = _created(sim_url, "openai")
    assert batch["status"] in ("cancelling", "cancelled")


@pytest.mark.batch_delay(3600)
def test_a_fresh_run_cancels_the_batches_the_last_one_left_running(
    tmp_path: Path, sim_url: str
) -> None:
    task, _, env = _folder(tmp_path)
    few = tmp_path / "few.jsonl"
    few.write_bytes(b'{"term": "a"}\n{"term": "b"}\n')
    out = tmp_path / "out.jsonl"
    base = ["run", task, few, "-o", out, "--backend", _backend(sim_url, "openai"), "--model",
            "m", "--batch-poll", "0.1", "--batch-gather", "0.3"]  # fmt: skip
    code, _ = _kill_during_hop(_cli(*base), env, out, hop=1)
    assert code == -signal.SIGKILL
    (orphan,) = _created(sim_url, "openai")
    fresh = subprocess.Popen(_cli(*base, "--force"), env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(_created(sim_url, "openai")) < 2:
            time.sleep(0.1)
        fresh.send_signal(signal.SIGINT)
        _, stderr = fresh.communicate(timeout=60)
    finally:
        fresh.kill()
    assert f"batch {orphan['id']} (hop 1 of the replaced journal) cancelled at the provider" in (
        stderr
    )
    statuses = {b["id"]: b["status"] for b in _created(sim_url, "openai")}
    assert statuses[orphan["id"]] in ("cancelling", "cancelled")
