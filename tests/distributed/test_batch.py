"""End to end on a real server: submitter and workers in one trio run, then the protocol's
guarantees one by one (compare-and-set, checkpoint before effects, memos, dead letters)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson
import pytest
import trio

import agentcore
from agentcore import ConfigError
from tests.distributed.agents import TASK, CountingModel, expected_total, make_task


def _lines(path: Path) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


async def _run_batch(url, inputs, out, *, workers=2, model=None, window=1000, **options):
    model = model or CountingModel(turns=2)
    stats = []

    async def worker() -> None:
        stats.append(
            await agentcore.run_worker(
                url,
                TASK,
                backend=model,
                exit_when_done=True,
                block_ms=100,
                audit=True,
                **options,
            )
        )

    async with trio.open_nursery() as nursery:
        for _ in range(workers):
            nursery.start_soon(worker)
        report = await agentcore.submit_batch(url, TASK, inputs, out, window=window, block_ms=100)
    return report, stats, model


async def test_every_agent_gets_its_result_exactly_once(redis_server, tmp_path):
    url = redis_server.url("b1")
    inputs = [{"n": i} for i in range(40)]
    out = tmp_path / "out.jsonl"
    report, stats, model = await _run_batch(url, inputs, out, window=8)
    lines = _lines(out)
    assert sorted(r["index"] for r in lines) == list(range(40))
    for record in lines:
        assert record["status"] == "ok"
        assert record["output"] == {"total": expected_total(record["index"], 2)}
    assert report.written == 40 and report.ok == 40
    # 2 tool turns: model, tool, model, tool, model = 5 committed steps per agent.
    assert sum(s.steps_committed for s in stats) == 40 * 5
    assert model.calls == 40 * 3
    assert sum(s.tool_executions for s in stats) == 40 * 2


async def test_server_holds_only_the_window(redis_server, tmp_path):
    from agentcore import QueueAddress
    from agentcore._distributed.connection import open_connection

    url = redis_server.url("win")
    seen: list[int] = []
    address = QueueAddress.parse(url)

    async def watch() -> None:
        async with open_connection(address) as conn:
            while True:
                seen.append(int(await conn.command("HLEN", address.keys.version)))
                await trio.sleep(0.01)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        await _run_batch(url, [{"n": i} for i in range(60)], tmp_path / "o.jsonl", window=5)
        nursery.cancel_scope.cancel()
    assert max(seen) <= 5
    async with open_connection(address) as conn:
        # Finished agents are forgotten: nothing live, no checkpoints, no memos left.
        assert int(await conn.command("HLEN", address.keys.version)) == 0
        assert int(await conn.command("HLEN", address.keys.checkpoint)) == 0
        assert await conn.command("KEYS", "ac:{win}:fx:*") == []
        assert int(await conn.command("XLEN", address.keys.steps)) == 0
        pending = await conn.command("XPENDING", address.keys.steps, "workers")
        assert pending[0] == 0


async def test_audit_shows_one_commit_per_agent_step(redis_server, tmp_path):
    from agentcore import QueueAddress
    from agentcore._distributed.connection import open_connection

    url = redis_server.url("aud")
    await _run_batch(url, [{"n": i} for i in range(20)], tmp_path / "o.jsonl", workers=3)
    address = QueueAddress.parse(url)
    async with open_connection(address) as conn:
        audit = await conn.command("HGETALL", address.keys.audit)
    counts = audit if isinstance(audit, dict) else dict(zip(audit[::2], audit[1::2], strict=True))
    assert len(counts) == 20 * 5
    assert set(map(int, counts.values())) == {1}


async def test_resubmitting_a_finished_batch_writes_nothing_again(redis_server, tmp_path):
    url = redis_server.url("again")
    inputs = [{"n": i} for i in range(10)]
    out = tmp_path / "out.jsonl"
    await _run_batch(url, inputs, out)
    report = await agentcore.submit_batch(url, TASK, inputs, out, block_ms=100)
    assert report.already_done == 10 and report.written == 0
    assert Counter(r["index"] for r in _lines(out)) == Counter(range(10))


async def test_a_worker_with_another_task_is_refused(redis_server, tmp_path):
    url = redis_server.url("mismatch")
    with trio.move_on_after(0.5):
        await agentcore.submit_batch(url, TASK, [{"n": 1}], tmp_path / "o.jsonl", block_ms=50)
    with pytest.raises(ConfigError, match="another task"):
        await agentcore.run_worker(url, make_task(3), backend=CountingModel())


async def test_an_input_that_does_not_fit_fails_alone(redis_server, tmp_path):
    url = redis_server.url("bad")
    out = tmp_path / "out.jsonl"
    await _run_batch(url, [{"n": 1}, {"m": 2}, {"n": 3}], out)
    by_index = {r["index"]: r for r in _lines(out)}
    assert by_index[1]["status"] == "failed"
    assert by_index[1]["error"]["kind"] == "invalid_input"
    assert by_index[0]["status"] == by_index[2]["status"] == "ok"


def test_queue_urls_are_checked():
    from agentcore import QueueAddress

    assert QueueAddress.parse("redis://127.0.0.1:7000/b-1").port == 7000
    assert QueueAddress.parse("valkey://host/b").port == 6379
    for bad in ("http://h/b", "redis://h:1/", "redis://h:1/a b", "redis://h:x/b"):
        with pytest.raises(ConfigError):
            QueueAddress.parse(bad)


async def test_a_finished_batch_refuses_another_output_file(redis_server, tmp_path):
    url = redis_server.url("reuse")
    inputs = [{"n": i} for i in range(5)]
    await _run_batch(url, inputs, tmp_path / "first.jsonl")
    with pytest.raises(ConfigError, match="finished"):
        await agentcore.submit_batch(url, TASK, inputs, tmp_path / "second.jsonl")


def test_bad_worker_arguments_exit_with_status_2(tmp_path, capsys):
    from agentcore._cli.main import main

    task = tmp_path / "task.toml"
    task.write_text('prompt = "Add up the values of agent {n}."\n')
    assert main(["worker", str(task), "--queue", "http://127.0.0.1:1/b"]) == 2
    assert "redis://" in capsys.readouterr().err
