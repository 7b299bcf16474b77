"""run_worker takes the driver's options as one DriverOptions value, with keywords as sugar."""

from __future__ import annotations

from collections import Counter

import orjson
import pytest
import trio

import agentcore
from agentcore import ConfigError, DriverOptions
from tests.distributed.agents import TASK, CountingModel, expected_total


async def test_a_worker_takes_the_options_and_the_options_it_had_no_keyword_for(
    redis_server, tmp_path
):
    url = redis_server.url("opts1")
    out = tmp_path / "out.jsonl"
    model = CountingModel(turns=2)
    options = DriverOptions(max_inflight=2, thread_limit=2, cache_size=8)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: agentcore.run_worker(
                url,
                TASK,
                backend=model,
                options=options,
                requests_per_minute=100_000,
                exit_when_done=True,
                block_ms=100,
            )
        )
        report = await agentcore.submit_batch(url, TASK, [{"n": i} for i in range(6)], out)
    assert report.ok == 6
    totals = Counter()
    for line in out.read_bytes().splitlines():
        record = orjson.loads(line)
        totals[record["output"]["total"] == expected_total(record["index"], 2)] += 1
    assert totals == Counter({True: 6})


async def test_a_worker_with_the_shared_backoff_keeps_driver_options_apart_from_the_backends(
    redis_server,
):
    # With a backend URL, the worker builds the model client itself (to wrap it in the
    # shared back-off); the driver's own options must not reach the backend as dialect ones.
    url = redis_server.url("opts2")
    async with trio.open_nursery() as nursery:
        worker = await nursery.start(
            lambda task_status: agentcore.run_worker(
                url,
                TASK,
                backend="sim://",
                requests_per_minute=6000,
                thread_limit=2,
                block_ms=100,
                task_status=task_status,
            )
        )
        assert worker is not None
        nursery.cancel_scope.cancel()


async def test_a_worker_given_a_driver_refuses_driver_options(redis_server):
    url = redis_server.url("opts3")
    async with agentcore.open_driver(CountingModel(turns=1), tools=TASK.tools) as driver:
        with pytest.raises(ConfigError, match="not both"):
            await agentcore.run_worker(url, TASK, driver=driver, thread_limit=4)
        with pytest.raises(ConfigError, match="not both"):
            await agentcore.run_worker(url, TASK, driver=driver, options=DriverOptions())
