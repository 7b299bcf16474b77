"""The protocol's guarantees, one at a time, on a real server: the compare-and-set commit,
the model's decision committed before its tools run, leases kept by heartbeats, dead letters,
and the negative controls that show what the compare and the heartbeat are for."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import trio

import agentcore
from agentcore import QueueAddress
from agentcore._distributed.connection import open_connection
from agentcore._distributed.records import decode_checkpoint
from agentcore.core import AssistantMessage, CallModel, ToolCall, ToolMessage
from agentcore.testing import ScriptedModel
from tests.distributed.agents import TASK, CountingModel, expected_total, make_task


async def _audit(url: str) -> dict[str, int]:
    address = QueueAddress.parse(url)
    async with open_connection(address) as conn:
        audit = await conn.command("HGETALL", address.keys.audit)
    return {k: int(v) for k, v in audit.items()}


def _records(path: Path) -> dict[int, dict[str, Any]]:
    return {r["index"]: r for r in map(orjson.loads, path.read_bytes().splitlines())}


async def _batch(url, count, out, *, workers=1, model=None, limit=60.0, **options):
    model = model or CountingModel(turns=2)
    stats: list[agentcore.WorkerStatistics] = []

    async def worker() -> None:
        stats.append(
            await agentcore.run_worker(
                url, TASK, backend=model, exit_when_done=True, block_ms=100, audit=True,
                **options,
            )
        )  # fmt: skip

    with trio.fail_after(limit):
        async with trio.open_nursery() as nursery:
            for _ in range(workers):
                nursery.start_soon(worker)
            await agentcore.submit_batch(
                url, TASK, [{"n": i} for i in range(count)], out, block_ms=100
            )
    return stats, model


async def test_a_second_commit_of_the_same_step_is_rejected(redis_server):
    address = QueueAddress.parse(redis_server.url("cas"))
    keys = address.keys
    async with open_connection(address) as conn:
        await conn.command("XGROUP", "CREATE", keys.steps, "workers", "0", "MKSTREAM")
        await conn.script(
            "ADMIT", [keys.version, keys.inputs, keys.steps, keys.meta], ["1", "0", "{}"]
        )
        commit_keys = [
            keys.version, keys.checkpoint, keys.steps, keys.results, keys.done, keys.audit,
            keys.stats,
        ]  # fmt: skip

        async def commit(snapshot: str, compare: str) -> int:
            args = ["0", "0", "1-0", "next", snapshot, compare, "1", "workers"]
            return int(await conn.script("COMMIT", commit_keys, args))

        first = await commit("s1", "1")
        again = await commit("s2", "1")
        assert (first, again) == (1, 0)
        # The commit script counts both in the batch's stats, in the same transaction.
        stats = await conn.command("HGETALL", keys.stats)
        assert (stats["steps_committed"], stats["steps_rejected"]) == ("1", "1")
        assert await conn.command("HGET", keys.version, "0") == "1"
        assert await conn.command("HGET", keys.checkpoint, "0") == "s1"
        # The admitted entry plus exactly one entry for step 1.
        assert int(await conn.command("XLEN", keys.steps)) == 2
        # Without the compare (the negative control), the second commit goes through.
        unguarded = await commit("s3", "0")
        assert unguarded == 1
        assert await conn.command("HGET", keys.audit, "0:0") == "2"


async def test_a_recovered_agent_runs_its_pending_tools_without_asking_the_model_again(
    redis_server, tmp_path
):
    """Worker A commits the model's reply (a tool call), then dies inside the tool; worker B
    reclaims the step after the lease and runs the pending call. The model is asked for
    that turn once, by A."""
    url = redis_server.url("ckpt")
    address = QueueAddress.parse(url)
    first_model, second_model = CountingModel(turns=1), CountingModel(turns=1)
    task = make_task(1)
    blocked = trio.Event()

    async def worker_a() -> None:
        async with agentcore.open_driver(first_model, tools=task.tools) as driver:
            original = driver.executor.call

            async def hang(effect):  # dies inside the tool: never returns
                blocked.set()
                await trio.sleep_forever()
                return await original(effect)

            driver.executor.call = hang  # type: ignore[method-assign]
            await agentcore.run_worker(url, task, driver=driver, lease=0.3, block_ms=100)

    out = tmp_path / "out.jsonl"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: agentcore.submit_batch(url, task, [{"n": 7}], out, block_ms=100))
        with trio.CancelScope() as a_scope:
            nursery.start_soon(worker_a)
            await blocked.wait()
            async with open_connection(address) as conn:
                # The reply with its pending call is committed before the tool runs.
                assert await conn.command("HGET", address.keys.version, "0") == "1"
                checkpoint = await conn.command("HGET", address.keys.checkpoint, "0")
            clock, snapshot = decode_checkpoint(checkpoint, now=0.0)
            assert orjson.loads(snapshot)["state"] == "awaiting_tools"
            assert clock.started > 0 and clock.model_time >= 0 and clock.tool_time == 0
            a_scope.cancel()  # A stops heartbeating: its entry is left pending
        nursery.cancel_scope.cancel()
    assert first_model.calls == 1
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: agentcore.run_worker(
                    url, task, backend=second_model, lease=0.3, block_ms=100, exit_when_done=True
                )
            )
            await agentcore.submit_batch(url, task, [{"n": 7}], out, block_ms=100)
    record = _records(out)[0]
    assert record["output"] == {"total": expected_total(7, 1)}
    # B asked only for the turn after the tool; the decision A committed was not re-asked.
    assert second_model.calls == 1


async def test_heartbeats_keep_slow_steps_with_their_worker(redis_server, tmp_path):
    url = redis_server.url("hb")
    stats, _ = await _batch(
        url, 4, tmp_path / "o.jsonl", workers=2, model=CountingModel(2, latency=2.5), lease=1.0
    )
    assert sum(s.reclaimed for s in stats) == 0
    assert sum(s.model_calls for s in stats) == 4 * 3
    assert set((await _audit(url)).values()) == {1}


async def test_without_heartbeats_steps_run_again_but_commit_once(redis_server, tmp_path):
    """Negative control of the heartbeat: slow steps lose their lease and are run again
    (wasted work), yet the compare-and-set still lets exactly one execution commit."""
    url = redis_server.url("nohb")
    out = tmp_path / "o.jsonl"
    stats, _ = await _batch(
        url, 4, out, workers=2, model=CountingModel(2, latency=1.0), lease=0.4,
        heartbeat=False, max_deliveries=50,
    )  # fmt: skip
    assert sum(s.reclaimed for s in stats) > 0
    assert sum(s.model_calls for s in stats) > 4 * 3
    assert set((await _audit(url)).values()) == {1}
    assert all(r["output"] == {"total": expected_total(i, 2)} for i, r in _records(out).items())


async def test_without_the_compare_reexecuted_steps_commit_twice(redis_server, tmp_path):
    """Negative control of the compare-and-set: the same re-executions now all commit."""
    url = redis_server.url("nocas")
    with trio.move_on_after(20):
        await _batch(
            url, 4, tmp_path / "o.jsonl", workers=2, model=CountingModel(2, latency=1.0),
            lease=0.4, heartbeat=False, compare=False, max_deliveries=50,
        )  # fmt: skip
    assert max((await _audit(url)).values()) > 1


async def test_a_step_delivered_too_often_is_dead_lettered_with_a_reason(redis_server, tmp_path):
    url = redis_server.url("dlq")
    out = tmp_path / "o.jsonl"
    await _batch(
        url, 1, out, model=CountingModel(2, latency=2.0), lease=0.3, heartbeat=False,
        max_deliveries=2,
    )  # fmt: skip
    record = _records(out)[0]
    assert record["status"] == "failed"
    assert record["error"]["kind"] == "dead_letter"
    assert "delivered 3 times" in record["error"]["message"]
    address = QueueAddress.parse(url)
    async with open_connection(address) as conn:
        assert int(await conn.command("XLEN", address.keys.dead)) == 1


async def test_consumers_of_dead_workers_are_removed(redis_server):
    url = redis_server.url("consumers")
    address = QueueAddress.parse(url)
    keys = address.keys
    async with open_connection(address) as conn:
        await conn.command("XGROUP", "CREATE", keys.steps, "workers", "0", "MKSTREAM")
        await conn.command("XGROUP", "CREATECONSUMER", keys.steps, "workers", "gone-1")
        with trio.move_on_after(3):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    lambda: agentcore.run_worker(url, TASK, backend=CountingModel(), lease=0.05)
                )
                while True:
                    consumers = await conn.command("XINFO", "CONSUMERS", keys.steps, "workers")
                    if "gone-1" not in [c["name"] for c in consumers]:
                        break
                    await trio.sleep(0.05)
                nursery.cancel_scope.cancel()
        names = [c["name"] for c in await conn.command("XINFO", "CONSUMERS", keys.steps, "workers")]
    assert "gone-1" not in names


class _RateLimitedOnce(CountingModel):
    """Answers the 41st request of the whole test with a 429 asking for 1 s of quiet; says it
    sends to ``base_url`` (an API whose provider documents its limits as shared, or not)."""

    def __init__(self, shared: dict[str, Any], name: str, base_url: str) -> None:
        super().__init__(turns=2, latency=0.05)
        self.shared = shared
        self.name = name
        self.codec = SimpleNamespace(base_url=base_url)

    async def exchange(self, call):
        from agentcore import ErrorKind, ModelError
        from agentcore.core import ModelFailed
        from agentcore.wire import Exchange

        now = trio.current_time()
        self.shared["starts"].append((now, self.name))
        if not self.shared.get("limited") and len(self.shared["starts"]) > 40:
            self.shared["limited"] = now
            error = ModelError(ErrorKind.RATE_LIMITED, "slow down", 429, True, retry_after=1.0)
            return Exchange(ModelFailed(call.request_id, error))
        return await super().exchange(call)


async def _starts_during_pause(
    url: str, tmp_path: Path, shared_backoff: bool, base_url: str = "https://api.openai.com/v1"
) -> list[str]:
    shared: dict[str, Any] = {"starts": []}
    async with trio.open_nursery() as nursery:
        for name in ("a", "b"):
            nursery.start_soon(
                lambda name=name: agentcore.run_worker(
                    url, TASK, backend=_RateLimitedOnce(shared, name, base_url),
                    exit_when_done=True, block_ms=100, shared_backoff=shared_backoff,
                )
            )  # fmt: skip
        with trio.fail_after(60):
            await agentcore.submit_batch(
                url, TASK, [{"n": i} for i in range(200)], tmp_path / f"{url[-3:]}.jsonl",
                block_ms=100, window=20,
            )  # fmt: skip
    limited = shared["limited"]
    return [name for t, name in shared["starts"] if limited + 0.2 < t < limited + 0.95]


async def test_a_429_pauses_every_worker_of_the_batch(redis_server, tmp_path):
    # OpenAI's own API: its provider documents one quota for all of an organisation's requests.
    assert await _starts_during_pause(redis_server.url("bo1"), tmp_path, True) == []


async def test_a_429_whose_limits_are_not_known_shared_pauses_only_its_request(
    redis_server, tmp_path
):
    # A gateway that published no limits on its successful replies: the refusal is the
    # request's own, and the other worker keeps calling (the driver's rule in one process).
    starts = await _starts_during_pause(
        redis_server.url("bo2"), tmp_path, True, base_url="https://gateway.example/v1"
    )
    assert starts != []


async def test_without_the_shared_backoff_other_workers_keep_calling(redis_server, tmp_path):
    """Control: only the request that got the 429 waits (its driver's own retry)."""
    starts = await _starts_during_pause(
        redis_server.url("bo0"), tmp_path, False, base_url="https://gateway.example/v1"
    )
    assert starts != []


async def test_a_reclaimed_tool_step_runs_only_the_calls_without_a_memo_with_their_keys(
    redis_server, tmp_path
):
    """Worker A commits a reply asking for two calls, memoises the first call's outcome and
    dies inside the second; worker B restores the step from the checkpoint and the memo (the
    step journal's ``replay``, as a resumed ``agentcore run`` does from its file) and runs
    only the second call, which sees the idempotency key A's attempt saw."""
    url = redis_server.url("memo")
    seen: list[tuple[str, str]] = []
    hang = trio.Event()

    @agentcore.tool
    async def charge(ctx: agentcore.RunContext, item: str) -> str:
        """Charge an item. Args: item: what to charge."""
        seen.append((item, ctx.idempotency_key))
        if item == "b" and not hang.is_set():
            hang.set()
            await trio.sleep_forever()  # worker A dies here
        return f"charged {item}"

    def reply(call: CallModel) -> AssistantMessage | str:
        if any(isinstance(m, ToolMessage) for m in call.messages):
            return "done"
        calls = (ToolCall("x", "charge", '{"item": "a"}'), ToolCall("y", "charge", '{"item": "b"}'))
        return AssistantMessage(tool_calls=calls)

    task = agentcore.Task(prompt="Charge {n}.", tools=[charge], name="charge")
    out = tmp_path / "out.jsonl"
    models = [ScriptedModel(reply), ScriptedModel(reply)]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: agentcore.submit_batch(url, task, [{"n": 1}], out, block_ms=100))
        with trio.CancelScope() as a_scope:
            nursery.start_soon(
                lambda: agentcore.run_worker(url, task, backend=models[0], lease=0.3, block_ms=100)
            )
            await hang.wait()
            a_scope.cancel()
        nursery.cancel_scope.cancel()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: agentcore.run_worker(
                    url, task, backend=models[1], lease=0.3, block_ms=100, exit_when_done=True
                )
            )
            await agentcore.submit_batch(url, task, [{"n": 1}], out, block_ms=100)
    assert _records(out)[0]["output"] == "done"
    run = f"{QueueAddress.parse(url).batch}-0"
    assert sorted(seen) == [("a", f"{run}/0/0"), ("b", f"{run}/0/1"), ("b", f"{run}/0/1")]
    assert len(models[1].calls) == 1  # B asked only for the answer after the tools
