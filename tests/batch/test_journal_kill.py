"""A process killed (SIGKILL) while it writes its step journal, mid-commit included, leaves a
journal that opens, passes SQLite's integrity check and holds every step it had committed.

The writer, a child process, appends large tool outcomes (4 MB per transaction, so that
commits take long enough to be interrupted) and after each group ends a run, printing the
run's number once its end is committed. It is killed five times, each time resuming the
same journal: after a random wait, the moment its write-ahead log is seen growing (a commit in
progress).
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

WRITER = """
import sys

import trio

from agentcore._tasks.journal import open_step_journal
from agentcore.core import ToolReturned


async def main(path):
    async with open_step_journal(path, {"name": "writer"}, commit_every=0.001) as journal:
        number = len(journal.runs)
        print("open", number, flush=True)
        while True:
            run = f"r{number}"
            for call in range(200):
                outcome = ToolReturned(f"c{call}", "x" * 20000)
                await journal.tool_done(run, f"{run}/0/{call}", outcome)
            await journal.ended(run, b"end %d" % number)
            print("committed", number, flush=True)
            number += 1


trio.run(main, sys.argv[1])
"""


def _written(wal: Path) -> tuple[int, int]:
    try:
        stat = wal.stat()
    except FileNotFoundError:
        return (0, 0)
    return (stat.st_size, stat.st_mtime_ns)


def test_a_journal_killed_at_any_point_opens_with_every_committed_step(tmp_path: Path) -> None:
    writer = tmp_path / "writer.py"
    writer.write_text(WRITER)
    path = tmp_path / "steps.journal"
    rng = random.Random(20240611)
    committed: list[int] = []
    for _ in range(5):
        proc = subprocess.Popen(
            [sys.executable, str(writer), str(path)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("open")
        time.sleep(rng.uniform(0.3, 2.0))
        wal = Path(f"{path}-wal")
        seen = _written(wal)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _written(wal) == seen:
            time.sleep(0.0005)  # until a commit is being written
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
        committed += [int(line.split()[1]) for line in out.splitlines() if line.startswith("c")]
        conn = sqlite3.connect(path)
        try:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            ends = dict(conn.execute("SELECT run, data FROM ends").fetchall())
            partial = conn.execute("SELECT DISTINCT run FROM steps").fetchall()
        finally:
            conn.close()
        for number in committed:
            assert ends[f"r{number}"] == b"end %d" % number
        # A run's steps are gone once it is compacted to its end (the same transaction).
        assert not {run for (run,) in partial} & set(ends)
    assert len(committed) >= 5
