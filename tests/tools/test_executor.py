"""The trio tool executor: coalescing, cancellation, caching, limits, threads and failures.

Scenarios involving time run under trio's MockClock with ``autojump_threshold=0``: virtual time
jumps to the next deadline whenever every task is blocked, so the tests are instant and exact.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore import ConfigError, Tool, ToolError, tool
from agentcore._tools.executor import open_tool_executor
from agentcore.core import CallTool, ToolFailed, ToolReturned


def call(name: str, call_id: str = "c", **arguments: Any) -> CallTool:
    return CallTool(call_id=call_id, name=name, arguments=arguments)


def run_virtual(scenario: Callable[[], Awaitable[None]]) -> None:
    """Run ``scenario`` in a fresh trio run whose clock jumps whenever all tasks are blocked.

    A scenario that deadlocks fails with ``TooSlowError`` (virtual time jumps to the limit)
    instead of hanging.
    """

    async def bounded() -> None:
        with trio.fail_after(10_000):
            await scenario()

    trio.run(bounded, clock=trio.testing.MockClock(autojump_threshold=0))


# ----------------------------------------------------------------------------- coalescing


@attrs.frozen
class Arrival:
    key: str
    at: int  # integer times: arrivals never coincide with completions (at x.5)
    cancel_after: float | None  # cancel the waiter this long after arrival, or never


arrivals = st.lists(
    st.builds(
        Arrival,
        key=st.sampled_from("abc"),
        at=st.integers(0, 6),
        cancel_after=st.none() | st.sampled_from([0.25, 1.25, 2.25]),
    ),
    min_size=1,
    max_size=12,
)


def arrival_time(plan: list[Arrival], i: int) -> float:
    """When arrival ``i`` calls: its integer time plus a small offset by index, so that no two
    calls join a flight at the same instant (the leader of a flight is then the earliest)."""
    return plan[i].at + i / 1000


def reference_outcomes(
    plan: list[Arrival], duration: float
) -> tuple[dict[int, str | None], int, int]:
    """What a correct singleflight executor must answer, computed without one.

    Events are ordered by time: arrivals at integers, cancellations at .25, completions at .5
    or .75 (each plus the offsets of :func:`arrival_time`), so no two kinds ever coincide.
    The first waiter of a flight starts its execution; a cancelled waiter (the leader too)
    only leaves it, and the execution is abandoned only when its last waiter has left.
    Returns, per arrival index, the label ``"<key>#<n>"`` of the execution that served it
    (``None`` if the waiter was cancelled first), and the numbers of executions started and
    abandoned.
    """
    events: list[tuple[float, int, int]] = []  # (time, order, index) - order: 0 arrive, 1 cancel
    for i, a in enumerate(plan):
        at = arrival_time(plan, i)
        events.append((at, 0, i))
        if a.cancel_after is not None:
            events.append((at + a.cancel_after, 1, i))
    events.sort()
    started: Counter[str] = Counter()
    flights: dict[str, tuple[float, int, list[int]]] = {}  # key -> (ends at, number, waiters)
    answers: dict[int, str | None] = {}
    abandoned = 0

    def complete_until(now: float) -> None:
        for key, (ends, number, waiters) in list(flights.items()):
            if ends <= now:
                for w in waiters:
                    answers[w] = f"{key}#{number}"
                del flights[key]

    for time, kind, i in events:
        complete_until(time)
        key = plan[i].key
        if kind == 0:
            if key in flights:
                flights[key][2].append(i)
            else:
                started[key] += 1
                flights[key] = (time + duration, started[key], [i])
        elif i not in answers:
            answers[i] = None
            waiters = flights[key][2]
            waiters.remove(i)
            if not waiters:
                del flights[key]
                abandoned += 1
    complete_until(math.inf)
    return answers, sum(started.values()), abandoned


@settings(max_examples=60, deadline=None)
@given(
    plan=arrivals,
    duration=st.sampled_from([0.5, 1.5, 3.5]),
    failing=st.sets(st.sampled_from("abc")),
)
def test_every_coalesced_waiter_gets_the_outcome_of_the_execution_it_joined(
    plan: list[Arrival], duration: float, failing: set[str]
) -> None:
    started: Counter[str] = Counter()
    finished: list[str] = []
    cancelled: list[str] = []

    @tool(coalesce=True)
    async def lookup(key: str) -> str:
        started[key] += 1
        label = f"{key}#{started[key]}"
        try:
            await trio.sleep(duration)
        except trio.Cancelled:
            cancelled.append(label)
            raise
        finished.append(label)
        if key in failing:
            raise ValueError(label)
        return label

    got: dict[int, ToolReturned | ToolFailed | None] = {}

    async def scenario() -> None:
        async with open_tool_executor([lookup]) as executor:

            async def arrive(i: int, a: Arrival) -> None:
                at = arrival_time(plan, i)
                await trio.sleep(at)
                deadline = math.inf if a.cancel_after is None else at + a.cancel_after
                got[i] = None
                with trio.move_on_at(deadline):
                    got[i] = await executor.call(call("lookup", f"call{i}", key=a.key))

            async with trio.open_nursery() as nursery:
                for i, a in enumerate(plan):
                    nursery.start_soon(arrive, i, a)
            stats = executor.statistics()
            assert stats.flights == 0
            assert stats.tools["lookup"].executions == sum(started.values())
            coalesced = stats.tools["lookup"].coalesced
            assert coalesced == len(plan) - sum(started.values())

    run_virtual(scenario)

    expected, executions, abandoned = reference_outcomes(plan, duration)
    assert sum(started.values()) == executions
    assert len(cancelled) == abandoned
    assert len(finished) == executions - abandoned
    for i, label in expected.items():
        reply = got[i]
        if label is None:
            assert reply is None
        elif plan[i].key in failing:
            assert reply == ToolFailed(f"call{i}", ToolError("ValueError", label))
        else:
            assert reply == ToolReturned(f"call{i}", label)


async def test_cancelling_one_waiter_leaves_the_others_results_intact(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runs: list[str] = []

    @tool(coalesce=True)
    async def fetch(url: str) -> str:
        runs.append(url)
        await trio.sleep(10)
        return f"body of {url}"

    results: dict[str, ToolReturned | ToolFailed] = {}
    async with open_tool_executor([fetch]) as executor:

        async def wait(call_id: str) -> None:
            results[call_id] = await executor.call(call("fetch", call_id, url="u"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait, "first")  # it leads: it calls first
            await trio.sleep(1)
            impatient = trio.CancelScope()

            async def impatient_wait() -> None:
                with impatient:
                    await wait("impatient")

            nursery.start_soon(impatient_wait)
            nursery.start_soon(wait, "last")
            await trio.sleep(4)
            impatient.cancel()
    assert runs == ["u"]
    assert results == {
        "first": ToolReturned("first", "body of u"),
        "last": ToolReturned("last", "body of u"),
    }
    assert executor.statistics().tools["fetch"].coalesced == 2


async def test_a_lone_call_runs_in_the_callers_task() -> None:
    seen: list[trio.lowlevel.Task] = []

    @tool
    async def where(x: int) -> str:
        seen.append(trio.lowlevel.current_task())
        await trio.sleep(0)
        return "here"

    async with open_tool_executor([where]) as executor:
        assert await executor.call(call("where", "c1", x=1)) == ToolReturned("c1", "here")
    assert seen == [trio.lowlevel.current_task()]


async def test_when_the_leader_is_cancelled_the_shared_execution_goes_on_for_the_others(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runs: list[tuple[str, float]] = []
    cancelled: list[float] = []

    @tool(coalesce=True)
    async def fetch(url: str) -> str:
        runs.append((url, trio.current_time()))
        try:
            await trio.sleep(10)
        except trio.Cancelled:
            cancelled.append(trio.current_time())
            raise
        return f"body of {url}"

    results: dict[str, ToolReturned | ToolFailed] = {}
    left_at: list[float] = []
    async with open_tool_executor([fetch]) as executor:

        async def wait(call_id: str) -> None:
            results[call_id] = await executor.call(call("fetch", call_id, url="u"))

        async with trio.open_nursery() as nursery:
            leader = trio.CancelScope()

            async def leader_wait() -> None:
                with leader:
                    await wait("leader")
                left_at.append(trio.current_time())

            nursery.start_soon(leader_wait)
            await trio.sleep(1)
            nursery.start_soon(wait, "second")
            await trio.sleep(1)
            nursery.start_soon(wait, "third")
            await trio.sleep(3)
            leader.cancel()
        stats = executor.statistics()
    assert runs == [("u", 0.0)]  # started once, never again
    assert cancelled == []
    assert left_at == [5.0]  # the leader left at once, at its own cancellation
    assert results == {
        "second": ToolReturned("second", "body of u"),
        "third": ToolReturned("third", "body of u"),
    }
    assert trio.current_time() == 10.0
    assert (stats.tools["fetch"].executions, stats.tools["fetch"].coalesced) == (1, 2)
    assert stats.flights == 0


async def test_cancelling_the_last_waiter_cancels_the_execution(
    autojump_clock: trio.testing.MockClock,
) -> None:
    events: list[str] = []

    @tool(coalesce=True)
    async def crawl(site: str) -> str:
        events.append("started")
        try:
            await trio.sleep(100)
        finally:
            events.append("stopped")
        return "done"

    async with open_tool_executor([crawl]) as executor:
        with trio.move_on_after(1):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(executor.call, call("crawl", "a", site="s"))
                nursery.start_soon(executor.call, call("crawl", "b", site="s"))
        await trio.sleep(0)
        assert events == ["started", "stopped"]
        assert executor.statistics().flights == 0
        # The key is free again: a new call starts a fresh execution.
        with trio.move_on_after(1):
            await executor.call(call("crawl", "c", site="s"))
    assert events == ["started", "stopped", "started", "stopped"]


async def test_key_is_forgotten_on_completion_so_later_calls_execute_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runs = 0

    @tool
    async def roll(sides: int) -> int:
        nonlocal runs
        runs += 1
        await trio.sleep(1)
        return runs

    async with open_tool_executor([roll]) as executor:
        first = await executor.call(call("roll", sides=6))
        second = await executor.call(call("roll", sides=6))
    assert (first, second) == (ToolReturned("c", "1"), ToolReturned("c", "2"))
    assert executor.statistics().tools["roll"].coalesced == 0


async def test_arguments_that_differ_only_in_spelling_share_one_execution(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runs = 0

    @tool(coalesce=True)
    async def search(query: str, k: int = 5, tags: dict[str, int] | None = None) -> str:
        nonlocal runs
        runs += 1
        await trio.sleep(1)
        return query

    spellings = [
        {"query": "q", "tags": {"a": 1, "b": 2}},
        {"tags": {"b": 2, "a": 1}, "query": "q", "k": 5},
        {"k": 5, "query": "q", "tags": {"a": 1, "b": 2}},
    ]
    async with open_tool_executor([search]) as executor, trio.open_nursery() as nursery:
        for arguments in spellings:
            nursery.start_soon(executor.call, CallTool("c", "search", arguments))
    assert runs == 1


async def test_coalesce_false_executes_every_call(autojump_clock: trio.testing.MockClock) -> None:
    runs = 0

    @tool(coalesce=False)
    async def draw(deck: str) -> int:
        nonlocal runs
        runs += 1
        number = runs
        await trio.sleep(1)
        return number

    results: list[ToolReturned | ToolFailed] = []
    async with open_tool_executor([draw]) as executor:

        async def one() -> None:
            results.append(await executor.call(call("draw", deck="d")))

        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(one)
    assert runs == 4
    assert sorted(r.content for r in results if isinstance(r, ToolReturned)) == ["1", "2", "3", "4"]


async def test_cancelling_an_uncoalesced_call_cancels_its_execution(
    autojump_clock: trio.testing.MockClock,
) -> None:
    stopped = trio.Event()

    @tool(coalesce=False)
    async def wait_forever() -> str:
        try:
            await trio.sleep_forever()
        finally:
            stopped.set()

    async with open_tool_executor([wait_forever]) as executor:
        with trio.move_on_after(1):
            await executor.call(call("wait_forever"))
        assert stopped.is_set()


# ----------------------------------------------------------------------------- caching


async def test_cached_results_are_served_until_the_ttl_expires(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runs = 0

    @tool(cache=True, ttl=10)
    async def rate_of(currency: str) -> str:
        nonlocal runs
        runs += 1
        return f"{currency}:{runs}"

    async with open_tool_executor([rate_of]) as executor:
        assert await executor.call(call("rate_of", currency="EUR")) == ToolReturned("c", "EUR:1")
        await trio.sleep(9)
        assert await executor.call(call("rate_of", currency="EUR")) == ToolReturned("c", "EUR:1")
        assert await executor.call(call("rate_of", currency="USD")) == ToolReturned("c", "USD:2")
        await trio.sleep(1)
        assert await executor.call(call("rate_of", currency="EUR")) == ToolReturned("c", "EUR:3")
        stats = executor.statistics()
    assert stats.tools["rate_of"].cache_hits == 1
    assert stats.tools["rate_of"].executions == 3
    assert stats.dedup_ratio == pytest.approx(1 / 4)


async def test_cache_without_ttl_keeps_results_for_the_executors_lifetime(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runs = 0

    @tool(cache=True)
    async def square(n: int) -> int:
        nonlocal runs
        runs += 1
        return n * n

    async with open_tool_executor([square]) as executor:
        for _ in range(3):
            assert await executor.call(call("square", n=7)) == ToolReturned("c", "49")
            await trio.sleep(1e6)
    assert runs == 1


async def test_failures_are_never_cached() -> None:
    runs = 0

    @tool(cache=True)
    def flaky(n: int) -> int:
        nonlocal runs
        runs += 1
        raise RuntimeError(f"attempt {runs}")

    async with open_tool_executor([flaky]) as executor:
        first = await executor.call(call("flaky", n=1))
        second = await executor.call(call("flaky", n=1))
    assert first == ToolFailed("c", ToolError("RuntimeError", "attempt 1"))
    assert second == ToolFailed("c", ToolError("RuntimeError", "attempt 2"))


# ----------------------------------------------------------------------------- limits


@settings(max_examples=40, deadline=None)
@given(
    limit=st.integers(1, 4),
    durations=st.lists(st.integers(1, 5), min_size=1, max_size=10),
)
def test_max_concurrency_is_never_exceeded(limit: int, durations: list[int]) -> None:
    running = 0
    peak = 0

    @tool(max_concurrency=limit)
    async def job(n: int, seconds: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await trio.sleep(seconds)
        running -= 1
        return n

    async def scenario() -> None:
        async with open_tool_executor([job]) as executor, trio.open_nursery() as nursery:
            for n, seconds in enumerate(durations):
                nursery.start_soon(executor.call, call("job", n=n, seconds=seconds))

    run_virtual(scenario)
    assert peak == min(limit, len(durations))


async def test_rate_limit_spaces_execution_starts_in_trio_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    starts: list[float] = []

    @tool(rate=2)
    async def ping(n: int) -> int:
        starts.append(trio.current_time())
        return n

    async with open_tool_executor([ping]) as executor, trio.open_nursery() as nursery:
        t0 = trio.current_time()
        for n in range(5):
            nursery.start_soon(executor.call, call("ping", n=n))
    assert [s - t0 for s in starts] == pytest.approx([0.0, 0.5, 1.0, 1.5, 2.0])


@settings(max_examples=40, deadline=None)
@given(
    rate=st.sampled_from([0.5, 1.0, 3.0]),
    burst=st.integers(1, 4),
    arrivals=st.lists(st.integers(0, 8), min_size=1, max_size=12),
)
def test_rate_limited_starts_conform_to_the_token_bucket(
    rate: float, burst: int, arrivals: list[int]
) -> None:
    starts: list[float] = []

    @tool(rate=rate, burst=burst)
    async def ping(n: int) -> int:
        starts.append(trio.current_time())
        return n

    async def scenario() -> None:
        async with open_tool_executor([ping]) as executor:

            async def arrive(n: int, at: int) -> None:
                await trio.sleep(at)
                await executor.call(call("ping", n=n))

            t0 = trio.current_time()
            async with trio.open_nursery() as nursery:
                for n, at in enumerate(arrivals):
                    nursery.start_soon(arrive, n, at)
        starts[:] = [s - t0 for s in starts]

    run_virtual(scenario)
    starts.sort()
    assert len(starts) == len(arrivals)
    # Any run of consecutive starts fits in the bucket: at most burst + rate * span calls.
    for i in range(len(starts)):
        for j in range(i, len(starts)):
            assert j - i + 1 <= burst + rate * (starts[j] - starts[i]) + 1e-6
    # And nobody waits longer than necessary: the first `burst` calls at time 0 start at once.
    assert sum(1 for s in starts if s == 0) >= min(burst, arrivals.count(0))


async def test_timeout_is_reported_as_a_tool_failure(
    autojump_clock: trio.testing.MockClock,
) -> None:
    @tool(timeout=3)
    async def hang(seconds: float) -> str:
        await trio.sleep(seconds)
        return "finished"

    async with open_tool_executor([hang]) as executor:
        start = trio.current_time()
        slow = await executor.call(call("hang", seconds=60))
        elapsed = trio.current_time() - start
        fast = await executor.call(call("hang", seconds=2))
        stats = executor.statistics().tools["hang"]
    assert slow == ToolFailed("c", ToolError("timeout", "tool 'hang' did not finish within 3 s"))
    assert elapsed == pytest.approx(3)
    assert fast == ToolReturned("c", "finished")
    assert (stats.timeouts, stats.failures, stats.executions) == (1, 1, 2)


async def test_all_coalesced_waiters_share_one_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    @tool(coalesce=True, timeout=1)
    async def hang() -> str:
        await trio.sleep_forever()

    replies: list[ToolReturned | ToolFailed] = []
    async with open_tool_executor([hang]) as executor:

        async def one(call_id: str) -> None:
            replies.append(await executor.call(call("hang", call_id)))

        async with trio.open_nursery() as nursery:
            for call_id in "abc":
                nursery.start_soon(one, call_id)
        assert executor.statistics().tools["hang"].executions == 1
    assert {r.call_id for r in replies} == {"a", "b", "c"}
    assert all(isinstance(r, ToolFailed) and r.error.type == "timeout" for r in replies)


# ----------------------------------------------------------------------------- threads


async def test_sync_tools_run_in_worker_threads() -> None:
    seen: list[threading.Thread] = []

    @tool
    def where() -> str:
        seen.append(threading.current_thread())
        return "ok"

    async with open_tool_executor([where]) as executor:
        assert await executor.call(call("where")) == ToolReturned("c", "ok")
    assert seen and seen[0] is not threading.main_thread()


async def test_sync_tools_never_use_more_threads_than_the_limit() -> None:
    lock = threading.Lock()
    running = 0
    peak = 0
    release = threading.Event()

    @tool
    def work(n: int) -> int:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        release.wait(5)
        with lock:
            running -= 1
        return n

    async with open_tool_executor([work], thread_limit=2) as executor:
        async with trio.open_nursery() as nursery:
            for n in range(6):
                nursery.start_soon(executor.call, call("work", n=n))
            while True:
                with lock:
                    if running >= 2:
                        break
                await trio.sleep(0.001)
            await trio.sleep(0.05)  # room for any thread beyond the limit to show up
            release.set()
        assert executor.statistics().tools["work"].executions == 6
    assert peak == 2


async def test_closing_the_executor_waits_for_a_timed_out_sync_tool(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate = threading.Event()
    returned = threading.Event()

    @tool(timeout=5)
    def blocking() -> str:
        gate.wait()
        returned.set()
        return "late"

    async def open_gate_later() -> None:
        await trio.sleep(30)
        gate.set()

    async with trio.open_nursery() as outside:
        async with open_tool_executor([blocking]) as executor:
            reply = await executor.call(call("blocking"))
            assert reply == ToolFailed(
                "c", ToolError("timeout", "tool 'blocking' did not finish within 5 s")
            )
            stats = executor.statistics()
            assert (stats.threads_running, stats.threads_abandoned) == (1, 1)
            outside.start_soon(open_gate_later)
        # The block ended only once the thread had returned: nothing is left running.
        assert returned.is_set()
        stats = executor.statistics()
        assert (stats.threads_running, stats.threads_abandoned) == (0, 0)


async def test_a_sync_tool_can_notice_its_timeout_and_stop(
    autojump_clock: trio.testing.MockClock,
) -> None:
    stopped = threading.Event()

    @tool(timeout=2)
    def polling() -> str:
        try:
            while True:
                trio.from_thread.check_cancelled()
                stopped.wait(0.001)
        finally:
            stopped.set()

    async with open_tool_executor([polling]) as executor:
        reply = await executor.call(call("polling"))
    assert isinstance(reply, ToolFailed)
    assert reply.error.type == "timeout"
    assert stopped.is_set()


async def test_a_sync_call_abandoned_before_it_got_a_thread_never_runs() -> None:
    gate = threading.Event()
    ran: list[str] = []

    @tool(coalesce=False)
    def record(label: str) -> str:
        ran.append(label)
        gate.wait(5)
        return label

    async with (
        open_tool_executor([record], thread_limit=1) as executor,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(executor.call, call("record", label="first"))
        while executor.statistics().threads_running < 1:
            await trio.sleep(0.001)
        with trio.move_on_after(0.01):
            await executor.call(call("record", label="second"))
        gate.set()
    assert ran == ["first"]


# ----------------------------------------------------------------------------- failures


async def test_exceptions_become_tool_failures_and_do_not_disturb_other_calls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    @tool
    async def broken(x: int) -> str:
        await trio.sleep(1)
        raise KeyError(f"no such thing: {x}")

    @tool
    def broken_sync() -> str:
        raise ValueError

    @tool
    async def fine() -> str:
        await trio.sleep(2)
        return "fine"

    replies: dict[str, ToolReturned | ToolFailed] = {}
    async with open_tool_executor([broken, broken_sync, fine]) as executor:

        async def one(effect: CallTool) -> None:
            replies[effect.call_id] = await executor.call(effect)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(one, call("broken", "1", x=1))
            nursery.start_soon(one, call("broken_sync", "2"))
            nursery.start_soon(one, call("fine", "3"))
        assert executor.statistics().tools["broken"].failures == 1
    assert replies == {
        "1": ToolFailed("1", ToolError("KeyError", "'no such thing: 1'")),
        "2": ToolFailed("2", ToolError("ValueError", "ValueError")),
        "3": ToolReturned("3", "fine"),
    }


async def test_unknown_tool_is_reported_to_the_model() -> None:
    @tool
    def known() -> str:
        return ""

    async with open_tool_executor([known]) as executor:
        reply = await executor.call(call("unknown", "x"))
        assert executor.statistics().unknown_tool == 1
    assert reply == ToolFailed(
        "x", ToolError("unknown_tool", "unknown tool 'unknown'; available: known")
    )


async def test_invalid_arguments_are_reported_and_the_tool_does_not_run() -> None:
    runs = 0

    @tool
    async def add(a: int, b: int = 0) -> int:
        nonlocal runs
        runs += 1
        return a + b

    async with open_tool_executor([add]) as executor:
        wrong_type = await executor.call(call("add", a="1"))
        missing = await executor.call(call("add", b=2))
        extra = await executor.call(call("add", a=1, c=3))
        stats = executor.statistics().tools["add"]
    assert wrong_type == ToolFailed(
        "c",
        ToolError(
            "invalid_arguments", 'invalid value for type, expected int, got string "1" @ $.a'
        ),
    )
    assert missing == ToolFailed(
        "c", ToolError("invalid_arguments", "required field missing @ $.a")
    )
    assert extra == ToolFailed("c", ToolError("invalid_arguments", "extra fields found (c) @ $"))
    assert runs == 0
    assert (stats.requests, stats.invalid_arguments, stats.executions) == (3, 3, 0)


async def test_results_are_encoded_as_json_unless_they_are_text() -> None:
    @attrs.frozen
    class Point:
        x: int
        y: int

    @tool
    async def origin() -> Point:
        return Point(0, 0)

    @tool
    def unencodable() -> object:
        return object()

    async with open_tool_executor([origin, unencodable]) as executor:
        assert await executor.call(call("origin")) == ToolReturned("c", '{"x":0,"y":0}')
        reply = await executor.call(call("unencodable"))
    assert isinstance(reply, ToolFailed)
    assert reply.error.type == "TypeError"


async def test_cancellation_of_the_caller_propagates(
    autojump_clock: trio.testing.MockClock,
) -> None:
    @tool
    async def slow() -> str:
        await trio.sleep(10)
        return "x"

    async with open_tool_executor([slow]) as executor:
        with trio.CancelScope() as scope:
            scope.cancel()
            await executor.call(call("slow"))
        assert scope.cancelled_caught


# ----------------------------------------------------------------------------- lifecycle


async def test_calls_after_close_are_refused() -> None:
    @tool
    def noop() -> str:
        return ""

    async with open_tool_executor([noop]) as executor:
        pass
    with pytest.raises(trio.ClosedResourceError):
        await executor.call(call("noop"))


async def test_an_exception_in_the_block_passes_through_unwrapped() -> None:
    @tool
    def noop() -> str:
        return ""

    with pytest.raises(LookupError, match="from the body"):
        async with open_tool_executor([noop]):
            raise LookupError("from the body")


@pytest.mark.parametrize(
    ("tools", "thread_limit", "message"),
    [
        ("duplicate", 16, "two tools are named"),
        ("not_a_tool", 16, "expected tools made with"),
        ("ok", 0, "thread_limit"),
    ],
)
async def test_bad_configuration_is_rejected(tools: str, thread_limit: int, message: str) -> None:
    @tool
    def noop() -> str:
        return ""

    @tool(name="noop")
    def other() -> str:
        return ""

    registry: dict[str, list[Any]] = {
        "duplicate": [noop, other],
        "not_a_tool": [noop.function],
        "ok": [noop],
    }
    with pytest.raises(ConfigError, match=message):
        async with open_tool_executor(registry[tools], thread_limit=thread_limit):
            pass


def test_statistics_are_frozen_values() -> None:
    async def scenario() -> None:
        @tool
        async def noop() -> str:
            return ""

        async with open_tool_executor([noop]) as executor:
            await executor.call(call("noop"))
            stats = executor.statistics()
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            stats.requests = 0  # type: ignore[misc]
        with pytest.raises(TypeError):
            stats.tools["noop"] = stats.tools["noop"]  # type: ignore[index]
        assert stats.tools["noop"].requests == 1
        assert executor.statistics() == stats

    run_virtual(scenario)


def test_tool_type_is_the_decorator_product() -> None:
    @tool
    def noop() -> str:
        return ""

    assert isinstance(noop, Tool)


async def test_cache_keeps_at_most_cache_size_results_dropping_the_least_recently_used(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runs: Counter[int] = Counter()

    @tool(cache=True)
    async def square(n: int) -> int:
        runs[n] += 1
        return n * n

    async with open_tool_executor([square], cache_size=3) as executor:
        for n in (1, 2, 3):
            await executor.call(call("square", n=n))
        await executor.call(call("square", n=1))  # a hit: 1 is now the most recently used
        await executor.call(call("square", n=4))  # evicts 2, the least recently used
        assert executor.statistics().cached_results == 3
        for n in (1, 3, 4):
            await executor.call(call("square", n=n))
        assert runs == Counter({1: 1, 2: 1, 3: 1, 4: 1})
        await executor.call(call("square", n=2))
        assert runs[2] == 2
        for n in range(100, 1000):
            await executor.call(call("square", n=n))
        assert executor.statistics().cached_results == 3


@pytest.mark.parametrize("size", [0, -1, 1.5, True])
async def test_cache_size_must_be_a_positive_integer(size: Any) -> None:
    with pytest.raises(ConfigError, match="cache_size"):
        async with open_tool_executor([], cache_size=size):
            pass
