"""The step journal on this machine: one SQLite file (the standard library's ``sqlite3``).

Theory of operation
-------------------
:class:`SqliteJournal` is the :class:`~agentcore._core.journal.StepJournal` that ``agentcore
run`` keeps beside its results file and that ``open_batch(step_journal=...)`` and
``Agent.run(step_journal=...)`` keep where they are told. It holds events, not snapshots: a
step costs the bytes of its own reply or tool result, never the transcript so far. Tables:

- ``meta``: the format version (:data:`~agentcore._core.journal.JOURNAL_FORMAT`), the task's
  description (:func:`~agentcore._tasks.fingerprint.task_description`), the batch id, and
  what the batch decided once for all its runs (:meth:`SqliteJournal.record`: the padding of
  its shared prefix, so a resumed batch sends the bytes its first run sent);
- ``steps``: one row per reply (``key`` empty) or tool outcome (``key``: the call's
  idempotency key) of a live run, in the order they were written, the event as
  ``agentcore.core.dumps`` writes it (indexed by run). A reply that ends its run is not a
  row: the run's end follows it into the same transaction and holds it;
- ``ends``: one row per finished run, its result; the run's steps are deleted in the same
  transaction (the journal of a finished agent is compacted to its result). The pages they
  held are given back to the file system when the journal is closed (incremental vacuum).

Writes are appended, in order, to a list in memory and returned from at once; one task of
the journal's nursery commits them in groups: at most once per :data:`COMMIT_EVERY` seconds,
each group one transaction, written by a worker thread (never on the event loop). A write
that its run must not get ahead of (a reply whose tools come next, a finished tool turn, a
run's end) waits for the commit that holds it. A busy batch therefore makes at most 50
transactions a second (each an fsync of about 5 ms here), whatever its number of agents, and
a step waits 20 ms at most before its commit starts. The database is in WAL mode with
``synchronous=FULL``: a commit is on disk when it returns, and a process killed at any moment,
mid-commit included, leaves the journal as of its last commit (SQLite's atomic commit). A
commit that fails (a full disk: :class:`~agentcore.JournalFull`) stops the run; what was
committed before is intact.

The file is locked (``flock``, :class:`~agentcore._tasks.locks.FileLock`) while it is open:
a second process gets :class:`~agentcore.JournalLocked`. A journal of another format version,
task or batch is refused with :class:`~agentcore.JournalMismatch` naming what differs; opened
``fresh`` it is emptied instead (in place: the lock stays on the same file).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import attrs
import orjson
import trio

from .._codecs.serde import dumps, loads
from .._core.errors import DecodeError, JournalError, JournalFull, JournalMismatch
from .._core.events import Event, ModelResponded, ToolFailed, ToolReturned
from .._core.journal import EMPTY, JOURNAL_FORMAT, Journaled, ToolOutcome
from .._core.loop import AgentLoop, RunState
from .._driver.scheduler import body_nursery
from .fingerprint import changes
from .locks import FileLock

__all__ = ["COMMIT_EVERY", "JournalStatistics", "SqliteJournal", "open_step_journal"]

COMMIT_EVERY: Final = 0.02
"""Seconds between two commits of a busy journal (the longest a run waits for its step to be
durable, and 1 / the transactions per second)."""

_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # Rowid tables: their rows (a step's event, a result) are too large for WITHOUT ROWID,
    # which would give many of them an overflow page each.
    "CREATE TABLE IF NOT EXISTS steps (seq INTEGER PRIMARY KEY, run TEXT NOT NULL, "
    "key TEXT NOT NULL, data BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS steps_of_run ON steps (run)",
    "CREATE TABLE IF NOT EXISTS ends (run TEXT PRIMARY KEY, data BLOB NOT NULL)",
)

_GOES_ON: Final = frozenset({RunState.AWAITING_MODEL, RunState.AWAITING_TOOLS})
"""Loop states with effects still to perform: the step before them must be durable first."""

_ENDED: Final = frozenset({RunState.FINISHED, RunState.ABORTED, RunState.ERROR})
"""Loop states a reply may leave a run in that end it."""

_SQLITE_FULL: Final = 13

_SETTING: Final = "setting:"
"""The prefix of the ``meta`` keys of :meth:`SqliteJournal.record`, apart from the journal's
own (format, task, batch)."""


@attrs.frozen
class JournalStatistics:
    """What a journal wrote."""

    commits: int
    """Transactions committed."""
    steps: int
    """Replies and tool outcomes written (not a run's last reply: its end holds it)."""
    ends: int
    """Finished runs compacted to their result."""
    step_bytes: int
    """Bytes of the steps' events (the rows' payloads)."""


class SqliteJournal:
    """A step journal in one SQLite file (module docstring). Made by :func:`open_step_journal`."""

    def __init__(  # noqa: PLR0917 - private, made by ``_open`` only
        self,
        path: Path,
        conn: sqlite3.Connection,
        lock: FileLock,
        meta: dict[str, str],
        rows: dict[str, list[tuple[str, bytes]]],
        ends: dict[str, bytes],
        next_seq: int,
        commit_every: float,
        threads: bool = True,
    ) -> None:
        self.path = path
        self.commit_every = commit_every
        self.threads = threads
        """Whether commits run in a worker thread (``False``: on the event loop, blocking it;
        for tests under virtual time, where a thread's work would let the clock jump)."""
        self._conn = conn
        self._lock = lock
        self._meta = meta
        self._rows = rows
        self._ends = ends
        self._seq = next_seq - 1
        """The last sequence number handed out."""
        self._committed = self._seq
        """Every write up to this sequence number is durable."""
        self._pending: list[tuple[str, str, int, str, bytes]] = []
        self._wanted = trio.Event()
        self._commit_done = trio.Event()
        self._commit_lock = trio.Lock()
        self._last_commit = -float("inf")
        self._failed: JournalError | None = None
        self._commits = self._steps = self._ends_written = self._bytes = 0

    # ------------------------------------------------------------------ what it holds

    @property
    def batch_id(self) -> str | None:
        """The batch id the journal was written for (``None``: none recorded)."""
        return self._meta.get("batch")

    @property
    def runs(self) -> frozenset[str]:
        """The runs it holds steps or a result of, not loaded yet."""
        return frozenset(self._rows) | frozenset(self._ends)

    def setting(self, name: str) -> str | None:
        """What the batch recorded under ``name`` (:meth:`record`; ``None``: nothing)."""
        return self._meta.get(_SETTING + name)

    def record(self, name: str, value: str) -> None:
        """Record ``value`` under ``name`` for the runs of the batch that resume from this
        journal; committed no later than the first step written after it."""
        self._meta[_SETTING + name] = value
        self._append("meta", _SETTING + name, "", value.encode())

    def statistics(self) -> JournalStatistics:
        """What the journal wrote since it was opened."""
        return JournalStatistics(self._commits, self._steps, self._ends_written, self._bytes)

    # ------------------------------------------------------------------ StepJournal

    def forget(self, run: str) -> None:
        """Drop everything the journal holds of ``run`` (it will run again from its start)."""
        self._rows.pop(run, None)
        self._ends.pop(run, None)
        self._append("forget", run, "", b"")

    async def load(self, run: str) -> Journaled:
        """What the journal holds of ``run`` (:meth:`take`)."""
        return self.take(run)

    def take(self, run: str) -> Journaled:
        """What the journal holds of ``run``, given once (the journal lets go of it)."""
        end = self._ends.pop(run, None)
        rows = self._rows.pop(run, None)
        if end is not None:
            return Journaled(result=end)
        if not rows:
            return EMPTY
        replies: dict[str, ModelResponded] = {}
        tools: dict[str, ToolOutcome] = {}
        for key, data in rows:
            try:
                event = loads(data, Event)
            except DecodeError as exc:
                raise JournalError(
                    f"{self.path}: a step of run {run} is unreadable: {exc}"
                ) from None
            if type(event) is ModelResponded:
                replies[event.request_id] = event
            elif type(event) is ToolReturned or type(event) is ToolFailed:
                tools[key] = event
        return Journaled(replies=replies, tools=tools)

    async def replied(self, run: str, event: ModelResponded, loop: AgentLoop) -> None:
        """Journal a reply; wait until it is durable when its effects follow."""
        if loop.state in _ENDED:
            # The driver journals the run's end right after, with no pause between: both
            # would land in one transaction, and the end deletes the run's steps. The end
            # holds the reply; writing it as a step too would cost its bytes twice.
            return
        if event.timing is not None:
            event = attrs.evolve(event, timing=None)  # the server's timing restores nothing
        seq = self._append("step", run, "", dumps(event))
        if loop.state in _GOES_ON:
            await self._durable(seq)

    async def tool_done(self, run: str, key: str, outcome: ToolOutcome) -> ToolOutcome:
        """Journal a tool outcome (not waited for: the turn's end is)."""
        self._append("step", run, key, dumps(outcome))
        return outcome

    async def turn_done(self, run: str, loop: AgentLoop) -> None:
        """Wait until the turn's outcomes are durable, when the run goes on."""
        if loop.state in _GOES_ON:
            await self._durable(self._seq)

    async def ended(self, run: str, result: bytes) -> None:
        """Compact ``run`` to ``result``; wait until that is durable."""
        await self._durable(self._append("end", run, "", result))

    # ------------------------------------------------------------------ commits

    def _append(self, kind: str, run: str, key: str, data: bytes) -> int:
        if self._failed is not None:
            raise self._failed
        self._seq += 1
        self._pending.append((kind, run, self._seq, key, data))
        self._wanted.set()
        return self._seq

    async def _durable(self, seq: int) -> None:
        while self._committed < seq:
            if self._failed is not None:
                raise self._failed
            await self._commit_done.wait()
        if self._failed is not None and self._committed < seq:
            raise self._failed

    async def commit_forever(self) -> None:
        """Commit what is written, in groups, until cancelled (module docstring)."""
        while True:
            if not self._pending:
                self._wanted = trio.Event()
                await self._wanted.wait()
            wait = self._last_commit + self.commit_every - trio.current_time()
            if wait > 0:
                await trio.sleep(wait)
            await self.commit()

    async def commit(self) -> None:
        """Commit everything written so far (one transaction, in a worker thread)."""
        async with self._commit_lock:
            batch, self._pending = self._pending, []
            upto = self._seq
            if batch:
                try:
                    if self.threads:
                        await trio.to_thread.run_sync(self._write, batch)
                    else:
                        self._write(batch)
                        await trio.lowlevel.checkpoint()
                except JournalError as exc:
                    self._failed = exc
                    self._wake()
                    raise
            self._last_commit = trio.current_time()
            self._committed = upto
            self._wake()

    def _wake(self) -> None:
        done, self._commit_done = self._commit_done, trio.Event()
        done.set()

    def _write(self, batch: list[tuple[str, str, int, str, bytes]]) -> None:
        """One transaction (in a worker thread)."""
        conn = self._conn
        steps: list[tuple[int, str, str, bytes]] = []
        size = ends = 0
        try:
            conn.execute("BEGIN IMMEDIATE")
            for kind, run, seq, key, data in batch:
                if kind == "step":
                    steps.append((seq, run, key, data))
                    size += len(data)
                    continue
                if kind == "meta":  # ``run`` is the key
                    conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (run, data.decode()))
                    continue
                if steps:
                    conn.executemany("INSERT INTO steps VALUES (?, ?, ?, ?)", steps)
                    steps = []
                conn.execute("DELETE FROM steps WHERE run = ?", (run,))
                if kind == "end":
                    conn.execute("INSERT OR REPLACE INTO ends VALUES (?, ?)", (run, data))
                    ends += 1
                else:  # forget
                    conn.execute("DELETE FROM ends WHERE run = ?", (run,))
            if steps:
                conn.executemany("INSERT INTO steps VALUES (?, ?, ?, ?)", steps)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise _journal_error(self.path, exc, "write") from None
        self._commits += 1
        self._steps += sum(1 for kind, *_ in batch if kind == "step")
        self._ends_written += ends
        self._bytes += size

    def _close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            if self._failed is None:
                # executescript steps the pragma to its end; execute would free one page.
                self._conn.executescript("PRAGMA incremental_vacuum;")
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()
        self._lock.release()

    def _abandon(self) -> None:
        """Forget every write not committed yet, as a process killed now would (tests)."""
        self._pending.clear()
        self._seq = self._committed


def _journal_error(path: Path, exc: sqlite3.Error, doing: str) -> JournalError:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF == _SQLITE_FULL:
        return JournalFull(
            f"cannot {doing} the step journal {path}: the disk (or the journal's size limit) "
            f"is full ({exc}); every step committed before is kept: make room, then resume"
        )
    return JournalError(f"cannot {doing} the step journal {path}: {exc}")


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        # Pages freed by compaction go back to the file system on close (a new file only:
        # the mode of an existing one is kept).
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()
        if mode is None or str(mode[0]).lower() != "wal":
            raise JournalError(f"{path}: SQLite refused WAL mode (journal_mode={mode})")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA busy_timeout=0")
    except BaseException:
        conn.close()
        raise
    return conn


def _read_meta(conn: sqlite3.Connection) -> dict[str, str] | None:
    """The meta table, or ``None`` for an empty database. Raises sqlite3 errors."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables:
        return None
    if "meta" not in tables:
        raise sqlite3.DatabaseError("it has no meta table")
    return {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta")}


def _reset(conn: sqlite3.Connection, meta: Mapping[str, str]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    for statement in _SCHEMA:
        conn.execute(statement)
    for table in ("meta", "steps", "ends"):
        conn.execute(f"DELETE FROM {table}")  # the table names above, not data
    conn.executemany("INSERT INTO meta VALUES (?, ?)", sorted(meta.items()))
    conn.execute("COMMIT")


def _mismatch(
    path: Path, meta: Mapping[str, str], description: Mapping[str, Any], batch: str | None
) -> str | None:
    """What differs between the journal's meta and this run, in words (``None``: nothing)."""
    fmt = meta.get("format")
    if fmt != str(JOURNAL_FORMAT):
        return (
            f"{path} is a step journal of format {fmt}; this version of agentcore reads format "
            f"{JOURNAL_FORMAT} only: finish it with the agentcore that wrote it, or start afresh"
        )
    try:
        stored = orjson.loads(meta.get("task", "null"))
    except orjson.JSONDecodeError:
        stored = None
    if not isinstance(stored, dict):
        return f"{path}: the journal does not say which task it was written for"
    changed = changes(stored, description)
    if changed:
        return (
            f"{path} was written for another task: {', '.join(changed)} changed since "
            "(resuming would feed its agents replies and tool results of the old task)"
        )
    if batch is not None and meta.get("batch") not in (None, batch):
        return f"{path} was written for batch {meta.get('batch')!r}, not {batch!r}"
    return None


def _open(  # noqa: PLR0917 - private, one call site
    path: Path,
    description: Mapping[str, Any],
    batch_id: str | None,
    new_batch_id: str | None,
    fresh: bool,
    force: bool,
    commit_every: float,
) -> SqliteJournal:
    """Lock, open, check and read the journal (in a worker thread)."""
    lock = FileLock(path, "journal")
    conn: sqlite3.Connection | None = None
    try:
        meta: dict[str, str] | None
        try:
            conn = _connect(path)
            meta = _read_meta(conn)
        except sqlite3.DatabaseError as exc:
            if not fresh:
                raise JournalError(
                    f"{path} is not a step journal ({exc}): move it away, or start afresh"
                ) from None
            if conn is not None:
                conn.close()
            os.ftruncate(lock.fd, 0)  # the same file: the lock stays on it
            for extra in ("-wal", "-shm"):
                Path(f"{path}{extra}").unlink(missing_ok=True)
            conn = _connect(path)
            meta = None
        if meta is not None and not fresh:
            problem = _mismatch(path, meta, description, batch_id)
            if problem is not None and not force:
                raise JournalMismatch(problem)
            fresh = problem is not None
        if meta is None or fresh:
            meta = {
                "format": str(JOURNAL_FORMAT),
                "task": orjson.dumps(description, option=orjson.OPT_SORT_KEYS).decode(),
                "created": str(time.time()),
            }
            if batch_id or new_batch_id:
                meta["batch"] = batch_id or new_batch_id or ""
            _reset(conn, meta)
        rows: dict[str, list[tuple[str, bytes]]] = {}
        last = 0
        for seq, run, key, data in conn.execute(
            "SELECT seq, run, key, data FROM steps ORDER BY seq"
        ):
            rows.setdefault(run, []).append((key, bytes(data)))
            last = max(last, seq)
        ends = {run: bytes(data) for run, data in conn.execute("SELECT run, data FROM ends")}
    except sqlite3.Error as exc:
        if conn is not None:
            conn.close()
        lock.release()
        raise _journal_error(path, exc, "open") from None
    except BaseException:
        if conn is not None:
            conn.close()
        lock.release()
        raise
    return SqliteJournal(path, conn, lock, meta, rows, ends, last + 1, commit_every)


@asynccontextmanager
async def open_step_journal(
    path: str | os.PathLike[str],
    description: Mapping[str, Any],
    *,
    batch_id: str | None = None,
    new_batch_id: str | None = None,
    fresh: bool = False,
    force: bool = False,
    commit_every: float = COMMIT_EVERY,
    threads: bool = True,
) -> AsyncIterator[SqliteJournal]:
    """Open (or create) the step journal at ``path`` for a task, committing while the block
    runs; on leaving, what was written is committed and the file unlocked.

    Args:
        path: the journal's file.
        description: the task's :func:`~agentcore._tasks.fingerprint.task_description`.
        batch_id: the batch it belongs to (a journal of another batch is refused), if known.
        new_batch_id: the batch id a new (or emptied) journal records when ``batch_id`` is
            not given.
        fresh: empty the journal instead of resuming from it.
        force: empty a journal written for another task instead of refusing it.
        commit_every: seconds between two commits of a busy journal.
        threads: run the file's work in worker threads (``False``: on the event loop; for
            tests under virtual time only).

    Raises:
        JournalLocked: another process has it open.
        JournalMismatch: another task, batch or format version (names what differs).
        JournalError: it cannot be read or written.
    """
    opening = (Path(path), description, batch_id, new_batch_id, fresh, force, commit_every)
    if threads:
        journal = await trio.to_thread.run_sync(_open, *opening)
    else:
        journal = _open(*opening)
    journal.threads = threads
    try:
        async with body_nursery() as nursery:
            nursery.start_soon(journal.commit_forever)
            try:
                yield journal
            finally:
                with trio.CancelScope(shield=True):
                    if journal._failed is None:
                        await journal.commit()
                nursery.cancel_scope.cancel()
    except BaseException:
        if journal._failed is not None:
            raise journal._failed from None  # the failed commit is why the run stopped
        raise
    finally:
        with trio.CancelScope(shield=True):
            if threads:
                await trio.to_thread.run_sync(journal._close)
            else:
                journal._close()
