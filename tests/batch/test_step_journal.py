"""The step journal of a batch (``open_batch(step_journal=...)``) and of one agent run
(``Agent.run(step_journal=..., run_id=...)``): resumed at the last journaled step, nothing
journaled computed twice; grouped commits off the event loop; compaction; and the faults: a
full disk, a journal of another task or format, two processes on one journal."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import agentcore
from agentcore import JournalFull, JournalLocked, JournalMismatch, Task
from agentcore._tasks.fingerprint import task_description
from agentcore._tasks.journal import COMMIT_EVERY, SqliteJournal, open_step_journal
from tests.batch.journal_kit import World, run_journaled, run_killed, same_runs, steps_of


@pytest.fixture
def clock() -> trio.testing.MockClock:
    """Virtual time that jumps only once every task has been idle for 20 ms of real time:
    the journal's commits run in worker threads, and a clock that jumped while one ran would
    make it last until the next timer."""
    return trio.testing.MockClock(autojump_threshold=0.02)


def _rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


async def test_a_killed_batch_resumes_at_its_last_journaled_steps(
    tmp_path: Path, autojump_clock: object
) -> None:
    reference = await World(12).run()
    world = World(12)
    path = tmp_path / "batch.journal"
    delivered: dict[int, agentcore.Result] = {}
    assert await run_killed(world, path, 2.3, delivered)
    # The kill came in the middle: some agents had finished, the others had journaled steps.
    journaled_keys = {k for (k,) in _rows(path, "SELECT key FROM steps WHERE key != ''")}
    ended = {r for (r,) in _rows(path, "SELECT run FROM ends")}
    assert journaled_keys and len(delivered) < 12
    requests_before = sum(world.requests.values())
    executions_before = dict(world.executions)

    assert not await run_killed(world, path, None, delivered)
    assert sorted(delivered) == list(range(12))
    assert same_runs(list(delivered.values()), reference) == []
    # Nothing journaled was computed again: no journaled tool ran a second time, and no
    # finished agent made a request.
    for key in journaled_keys:
        assert world.executions[key] == executions_before[key] == 1, key
    assert not any(
        world.requests[rid] > 1 for rid in world.requests if rid.rpartition("/")[0] in ended
    )
    requests, tools = world.needed()
    assert sum(world.requests.values()) - requests <= 4  # at most the requests in flight
    assert sum(world.executions.values()) >= tools
    assert requests_before < requests


async def test_a_finished_batch_is_delivered_from_its_journal_without_running(
    tmp_path: Path, autojump_clock: object
) -> None:
    world = World(40, max_inflight=40)
    path = tmp_path / "batch.journal"
    first = await run_journaled(world, path)
    made = sum(world.requests.values()), sum(world.executions.values())
    again = await run_journaled(world, path)
    assert (sum(world.requests.values()), sum(world.executions.values())) == made
    assert same_runs(again, first) == []
    # Finished agents are compacted to their results: no step is left, and the pages the
    # steps held went back to the file system when the journal was closed.
    assert _rows(path, "SELECT count(*) FROM steps") == [(0,)]
    assert _rows(path, "SELECT count(*) FROM ends") == [(40,)]
    assert _rows(path, "PRAGMA freelist_count") == [(0,)]


async def test_a_busy_batch_commits_a_few_times_a_second_off_the_event_loop(
    tmp_path: Path, clock: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: set[int] = set()
    write = SqliteJournal._write

    def spy(self: SqliteJournal, batch: list[Any]) -> None:
        threads.add(threading.get_ident())
        write(self, batch)

    monkeypatch.setattr(SqliteJournal, "_write", spy)
    world = World(300, model_latency=2.0, tool_latency=0.2, max_inflight=300)
    path = tmp_path / "batch.journal"
    began = trio.current_time()
    async with open_step_journal(path, task_description(world.task), new_batch_id="b") as journal:
        results = await world.run(journal)
        stats = journal.statistics()
    wall = trio.current_time() - began
    assert [r.status for r in results] == ["ok"] * 300
    requests, tools = world.needed()
    # Every reply and tool outcome, but a run's last reply: its end holds it.
    assert stats.steps == requests + tools - 300
    assert stats.ends == 300
    assert stats.commits <= wall / COMMIT_EVERY + 2
    assert stats.commits < stats.steps / 20
    assert threading.get_ident() not in threads  # every transaction ran in a worker thread
    assert _rows(path, "PRAGMA journal_mode") == [("wal",)]


async def test_a_full_disk_stops_the_batch_and_keeps_every_committed_step(
    tmp_path: Path, autojump_clock: object
) -> None:
    world = World(40, model_latency=1.0, tool_latency=0.5)
    path = tmp_path / "batch.journal"
    committed = 0
    with pytest.raises(JournalFull, match="full"):
        async with open_step_journal(
            path, task_description(world.task), new_batch_id="b", threads=False
        ) as journal:
            pages = journal._conn.execute("PRAGMA page_count").fetchone()[0]
            journal._conn.execute(f"PRAGMA max_page_count = {pages + 3}")  # room for a few
            try:
                await world.run(journal)
            finally:
                committed = journal.statistics().steps
    assert committed > 0
    # Every step committed before the disk filled is there (or in the result it was
    # compacted to), and nothing else.
    stored = _rows(path, "SELECT count(*) FROM steps")[0][0]
    ended = [int(run.rpartition("-")[2]) for (run,) in _rows(path, "SELECT run FROM ends")]
    assert stored + sum(steps_of(i) for i in ended) == committed
    assert _rows(path, "PRAGMA integrity_check") == [("ok",)]
    # The journal still opens and resumes (without the limit) from what it committed.
    world.requests.clear()
    results = await run_journaled(world, path)
    assert [r.status for r in results] == ["ok"] * 40


async def test_a_journal_of_another_task_is_refused_naming_what_changed(
    tmp_path: Path, clock: object
) -> None:
    world = World(2)
    path = tmp_path / "batch.journal"
    await run_journaled(world, path)
    other = Task(system="You look things up.", prompt="Agent no. {input}", tools=[world.tool])
    with pytest.raises(JournalMismatch, match="prompt changed"):
        await agentcore.run_batch(other, [0], driver=None, backend=world.model, step_journal=path)
    fewer = Task(system="You look things up.", prompt="Agent {input}", max_turns=4)
    with pytest.raises(JournalMismatch, match=r"tools \(lookup\) changed"):
        await agentcore.run_batch(fewer, [0], backend=world.model, step_journal=path)
    with pytest.raises(JournalMismatch, match="batch 'b"):
        await agentcore.run_batch(world.task, [0], backend=world.model, step_journal=path,
                                  batch_id="other")  # fmt: skip
    # Forced, it is emptied and the task starts afresh.
    async with open_step_journal(path, task_description(other), force=True) as journal:
        assert journal.runs == frozenset()


@pytest.mark.parametrize("version", ["0", "2"])
async def test_a_journal_of_another_format_version_is_refused_by_name(
    tmp_path: Path, version: str
) -> None:
    world = World(1)
    path = tmp_path / "batch.journal"
    async with open_step_journal(path, task_description(world.task)):
        pass
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'format'", (version,))
    conn.commit()
    conn.close()
    with pytest.raises(JournalMismatch, match=f"format {version}; .* reads format 1"):
        async with open_step_journal(path, task_description(world.task)):
            pass


async def test_a_file_that_is_no_journal_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("these are my notes, not a database\n" * 100)
    with pytest.raises(agentcore.JournalError, match="not a step journal"):
        async with open_step_journal(path, task_description(World(1).task)):
            pass
    assert path.read_text().startswith("these are my notes")


async def test_two_openers_of_one_journal_get_a_lock_error(tmp_path: Path) -> None:
    description = task_description(World(1).task)
    path = tmp_path / "batch.journal"
    async with open_step_journal(path, description):
        with pytest.raises(JournalLocked, match="in use by another agentcore process"):
            async with open_step_journal(path, description):
                pass
    async with open_step_journal(path, description):  # free again once closed
        pass


async def test_an_agent_run_killed_midway_resumes_from_its_journal(tmp_path: Path) -> None:
    # Real time (the journal's commits run in threads): the run is killed once its journal
    # holds its first tool turn, whenever that is.
    world = World(1, model_latency=0.05, tool_latency=0.05)
    agent = agentcore.Agent(instructions="You look things up.", tools=[world.tool])
    path = tmp_path / "agent.journal"

    async def run_agent(kill_after_steps: int | None) -> agentcore.Result | None:
        outcome: list[agentcore.Result] = []
        async with (
            agentcore.open_driver(world.model, tools=[world.tool]) as driver,
            trio.open_nursery() as nursery,
        ):

            async def run() -> None:
                outcome.append(
                    await agent.run("Agent 5", driver=driver, step_journal=path, run_id="ticket-5")
                )
                nursery.cancel_scope.cancel()

            nursery.start_soon(run)
            while kill_after_steps is not None:
                await trio.sleep(0.01)
                if path.exists() and _steps(path) >= kill_after_steps:
                    nursery.cancel_scope.cancel()  # the journal closes: a clean stop
                    break
        return outcome[0] if outcome else None

    # ``ticket-5`` ends in ``-5``: the scripted model gives it tool_turns(5) == 3 tool turns.
    assert await run_agent(2) is None  # stopped once its first reply and tool were journaled
    journaled = _steps(path)
    tools_held = {str(key) for (key,) in _rows(path, "SELECT key FROM steps WHERE key != ''")}
    before = dict(world.requests), dict(world.executions)
    result = await run_agent(None)
    assert result is not None and result.status == "ok"
    assert result.turns == 4
    # No tool the journal held ran again; a call in flight at the stop (its turn holds two
    # at most) ran once more.
    twice = {key for key, n in world.executions.items() if n > 1}
    assert tools_held and not twice & tools_held
    assert len(twice) <= 2 and all(n <= 2 for n in world.executions.values())
    repeated = {rid for rid, n in world.requests.items() if n > 1}
    assert len(repeated) <= 1  # at most the request in flight at the stop
    assert sum(before[0].values()) + sum(before[1].values()) >= journaled
    again = await run_agent(None)  # finished: its result comes from the journal
    assert again is not None and again.output == result.output
    assert sum(world.requests.values()) == 4 + len(repeated)


def _steps(path: Path) -> int:
    try:
        return int(_rows(path, "SELECT count(*) FROM steps")[0][0])
    except sqlite3.Error:
        return 0


async def test_an_agent_journal_needs_a_run_id(tmp_path: Path) -> None:
    world = World(1)
    agent = agentcore.Agent(tools=[world.tool])
    async with agentcore.open_driver(world.model, tools=[world.tool]) as driver:
        with pytest.raises(agentcore.ConfigError, match="run_id"):
            await agent.run("x", driver=driver, step_journal=tmp_path / "j")
