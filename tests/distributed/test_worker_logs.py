"""A worker says what it does on ``agentcore.distributed``: its start, its progress while its
counters move, and its end; and a distributed agent's record counts its failed tool calls."""

from __future__ import annotations

import logging

import orjson
import pytest
import trio

import agentcore
from agentcore._distributed import worker as worker_module
from tests.distributed.agents import TASK, CountingModel


async def test_a_worker_logs_its_start_progress_and_end(
    redis_server, tmp_path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
):
    caplog.set_level(logging.INFO, logger="agentcore.distributed")
    monkeypatch.setattr(worker_module, "PROGRESS_EVERY", 0.05)
    url = redis_server.url("logs1")
    out = tmp_path / "out.jsonl"
    stats = []

    async def work() -> None:
        stats.append(
            await agentcore.run_worker(
                url, TASK, backend=CountingModel(turns=2, latency=0.01), exit_when_done=True,
                block_ms=100,
            )
        )  # fmt: skip

    async with trio.open_nursery() as nursery:
        nursery.start_soon(work)
        await agentcore.submit_batch(url, TASK, [{"n": i} for i in range(20)], out, block_ms=100)
    lines = [r.getMessage() for r in caplog.records if r.name == "agentcore.distributed"]
    assert lines[0].startswith("worker ")
    assert f"started on batch logs1 at 127.0.0.1:{redis_server.port}" in lines[0]
    assert any(" progress: " in line for line in lines[1:-1])
    committed = stats[0].steps_committed
    assert lines[-1].endswith("server errors")
    assert f" stopped: {committed} steps committed" in lines[-1]


async def test_a_distributed_record_counts_the_failed_tool_calls(redis_server, tmp_path):
    @agentcore.tool(coalesce=False)
    def add(n: int) -> int:
        """Add.

        Args:
            n: a number.
        """
        raise ValueError("no adding today")

    task = agentcore.Task(prompt="Add {n}.", tools=[add], max_turns=2, max_tool_failures=0)
    url = redis_server.url("logs2")
    out = tmp_path / "out.jsonl"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: agentcore.run_worker(
                url, task, backend="sim://", exit_when_done=True, block_ms=100
            )
        )
        await agentcore.submit_batch(url, task, [{"n": 1}], out, block_ms=100)
    (record,) = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert record["status"] == "failed"
    assert record["error"]["kind"] == "tool_failures"
    assert record["tool_failures"]["counts"] == {"add": {"ValueError": 1}}
    assert record["tool_failures"]["first"] == {"add": "ValueError: no adding today"}
