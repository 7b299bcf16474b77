"""The fleet's rate budget against a real server: the ``RESERVE`` script agrees with the pure
policy step for step, holds during the batch's pause, counts the live workers; and workers
that share it stay within an API's limits, also when the server is gone for a while."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentcore
from agentcore import QueueAddress, WorkerStatistics
from agentcore._core.fleetbudget import SharedBudget
from agentcore._distributed.address import Keys
from agentcore._distributed.budget import FleetBudget
from agentcore._distributed.connection import Connection, open_connection
from agentcore._tasks.task import compile_job
from agentcore.core import CallModel
from agentcore.sim import SimConfig, SimStatistics, open_sim_server
from tests.core.test_ratebudget import ServerBucket
from tests.distributed.redis_server import RedisServer

_names = itertools.count()

optional_limit = st.none() | st.integers(1, 50_000)
step = st.fixed_dictionaries(
    {
        "gap": st.floats(0.0, 20.0),
        "learned": st.tuples(optional_limit, optional_limit),
        "back": st.tuples(st.integers(-3, 3), st.integers(-2_000, 2_000)),
        "remaining": st.tuples(
            st.none() | st.integers(0, 50_000), st.none() | st.integers(0, 50_000)
        ),
        "costs": st.lists(st.integers(0, 6_000), max_size=8),
        "horizon": st.floats(0.0, 5.0),
    }
)


def _opt(value: int | None) -> str:
    return "" if value is None else str(value)


async def reserve(
    conn: Connection, keys: Keys, now: float, s: dict[str, Any], configured: tuple[Any, Any]
) -> list[int]:
    reply = await conn.script(
        "RESERVE",
        [keys.budget, keys.pause, keys.budget_workers],
        [
            "w1", repr(now), repr(s["horizon"]), "30", *map(_opt, configured),
            *map(_opt, s["learned"]), *map(_opt, s["remaining"]), str(s["back"][0]),
            str(s["back"][1]), *map(str, s["costs"]),
        ],
    )  # fmt: skip
    return [int(x) for x in reply]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.tuples(optional_limit, optional_limit), st.lists(step, min_size=1, max_size=12))
def test_the_reserve_script_grants_what_the_pure_policy_grants(
    redis_server: RedisServer, configured: tuple[int | None, int | None], steps: list[Any]
) -> None:
    keys = Keys(f"budget-{next(_names)}")
    address = QueueAddress.parse(redis_server.url("x"))

    async def check() -> None:
        pure = SharedBudget(*configured)
        now = 1_000.0
        async with open_connection(address) as conn:
            for s in steps:
                now += s["gap"]
                pure.update(now, learned=s["learned"], back=s["back"], remaining=s["remaining"])
                grants = pure.reserve(now, s["costs"], s["horizon"])
                reply = await reserve(conn, keys, now, s, configured)
                retry, rpm, tpm, live = reply[:4]
                assert (rpm, tpm) == tuple(-1 if x is None else x for x in pure.limits)
                assert live == 1
                assert reply[5:] == [math.ceil(d * 1e6) for d in grants.delays]
                assert retry == (math.ceil(grants.retry * 1e6) if grants.retry else 0)
                stored = await conn.command("HGETALL", keys.budget)
                for bucket, name in ((pure.requests, "r"), (pure.tokens, "t")):
                    full = bucket is None or bucket.tat <= now * bucket.rate
                    tat = stored.get(name + "tat")
                    if full:
                        assert tat is None
                    else:
                        assert bucket is not None and float(tat) == bucket.tat

    trio.run(check)


async def test_nothing_is_granted_while_the_batch_is_paused(redis_server: RedisServer) -> None:
    address = QueueAddress.parse(redis_server.url("budget-pause"))
    keys = address.keys
    s = {"learned": (60, None), "remaining": (None, None), "back": (0, 0), "costs": [1],
         "horizon": 1.0}  # fmt: skip
    async with open_connection(address) as conn:
        await conn.command("SET", keys.pause, "1", "PX", "1500")
        reply = await reserve(conn, keys, 0.0, s, (None, None))
        assert reply[5:] == []  # nothing granted
        assert 1_000_000 < reply[0] <= 1_500_000  # the pause's time left, in microseconds
        await conn.command("DEL", keys.pause)
        assert (await reserve(conn, keys, 0.0, s, (None, None)))[5:] == [0]


async def test_the_live_workers_are_those_that_reserved_within_the_window(
    redis_server: RedisServer,
) -> None:
    address = QueueAddress.parse(redis_server.url("budget-live"))
    keys = address.keys

    async def live(conn: Connection, worker: str, now: float) -> int:
        reply = await conn.script(
            "RESERVE",
            [keys.budget, keys.pause, keys.budget_workers],
            [worker, repr(now), "1", "30", "", "", "", "", "", "", "0", "0"],
        )
        return int(reply[3])

    async with open_connection(address) as conn:
        assert await live(conn, "a", 100.0) == 1
        assert await live(conn, "b", 110.0) == 2
        assert await live(conn, "c", 125.0) == 3
        assert await live(conn, "b", 135.0) == 2  # a last reserved 35 s ago


pytestmark = pytest.mark.distributed


@agentcore.tool
def lookup(item: str) -> str:
    """Look an item up.

    Args:
        item: the item's name.
    """
    return f"{item}: in stock"


async def run_fleet(
    url: str, tmp_path: Path, agents: int, rpm: int, **options: Any
) -> tuple[SimStatistics, list[WorkerStatistics]]:
    """Two workers in this process share an API limited to ``rpm`` requests a minute (real
    minutes); every agent makes two requests."""
    task = agentcore.Task(prompt="Is item {i} in stock?", tools=[lookup], max_turns=3)
    config = SimConfig(requests_per_minute=rpm, tool_rounds=1, answer_tokens=8)
    stats: list[WorkerStatistics] = []
    async with open_sim_server(config=config) as api, trio.open_nursery() as nursery:

        async def work() -> None:
            stats.append(
                await agentcore.run_worker(
                    url, task, backend=api.url, model="sim", max_inflight=16,
                    exit_when_done=True, block_ms=100, **options,
                )
            )  # fmt: skip

        for _ in range(2):
            nursery.start_soon(work)
        with trio.fail_after(240):
            report = await agentcore.submit_batch(
                url, task, [{"i": i} for i in range(agents)], tmp_path / "out.jsonl",
                block_ms=100,
            )  # fmt: skip
        assert report.ok == agents
    return api.statistics(), stats


async def test_workers_sharing_the_budget_stay_within_the_apis_limit(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    # 30 requests a minute, 60 requests: the first 30 at once, then one every 2 s. With a
    # budget of its own each worker learned the limit from the headers and sent twice it.
    api, workers = await run_fleet(redis_server.url("fleet-limit"), tmp_path, 30, 30)
    assert api.requests == 60
    assert api.rate_limited == 0
    reserved = sum(w.budget_reservations for w in workers)
    calls = sum(w.budget_calls for w in workers)
    assert reserved >= 30  # every attempt once the headers taught the limit
    assert calls < reserved  # a round trip served several attempts


async def test_without_the_server_each_worker_keeps_to_its_share_and_pays_it_back(
    own_redis_server: RedisServer,
) -> None:
    # Two workers share 120 requests a minute; the server dies. Each goes on with 60 a
    # minute, starting empty a horizon after its last call: an API bucket of 120 that was
    # empty then admits everything they send. Once the server is back, what they spent is
    # charged to the fleet's budget.
    address = QueueAddress.parse(own_redis_server.url("budget-down"))
    keys = address.keys
    task = agentcore.Task(prompt="x")
    call = compile_job(task, None, run_id="r").start()[0]
    assert isinstance(call, CallModel)
    async with open_connection(address) as a, open_connection(address) as b:
        budgets = [
            FleetBudget(conn, keys, name, requests_per_minute=120, horizon=1.0)
            for conn, name in ((a, "a"), (b, "b"))
        ]
        for budget in (*budgets, budgets[0]):
            await budget.reserve(call)  # both known to the server: two live workers
        assert [budget.live for budget in budgets] == [2, 2]
        own_redis_server.kill()
        down = trio.current_time()
        sent: list[list[float]] = [[], []]

        async def send(i: int) -> None:
            await budgets[i].reserve(call)
            sent[i].append(trio.current_time() - down)

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for i in (0, 1):
                    for _ in range(4):
                        nursery.start_soon(send, i)
        api = ServerBucket(120)
        api.level, api.updated = 0.0, 1.0  # a horizon after the last call, about `down`
        for when in sorted(sent[0] + sent[1]):
            assert api.admit(when + 0.02, 1), sent  # 20 ms for the time between calls
        assert sum(budget.stats.local for budget in budgets) == 8
        own_redis_server.start()
        # The bucket refilled while the server was away; the first call back charges the 4
        # requests a spent alone, and its own.
        await budgets[0].reserve(call)
        stored = float(await a.command("HGET", keys.budget, "rtat"))
        seconds, micros = await a.command("TIME")
        level = 120 - (stored - (int(seconds) + int(micros) / 1e6) * 2.0)
        assert level == pytest.approx(120 - 4 - 1, abs=0.5)
