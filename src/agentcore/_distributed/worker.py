"""The worker: runs one step of an agent per stream entry and commits it with a compare-and-set.

Theory of operation
-------------------
The step stream holds one entry per runnable step ``(agent, n)``; ``n`` is the agent's step
number, also stored in the ``version`` hash. A step is one durable half of an agent turn:

- *model step*: the loop (restored from the agent's checkpoint, or compiled from its input at
  step 0) owes a ``CallModel``; the worker's driver makes it (slots, retries), the reply is fed
  to the loop, and the new snapshot, with the tool calls the reply asked for still pending, is
  committed. No tool runs before that commit, so the model is never asked again for a
  decision already committed;
- *tool step*: the loop owes ``CallTool`` effects; each is looked up in the agent's memo hash
  by its idempotency key and run only when absent (the outcome is then memoised with
  ``HSETNX``). All outcomes are fed and the snapshot awaiting the next model request is
  committed. A recovered tool step re-runs the same calls with the same keys; the memo makes
  a tool run again only when a worker died between the tool's return and the memo write.

The commit (``scripts.COMMIT``) advances ``version`` from ``n`` to ``n + 1`` only if it still
reads ``n``, writes the checkpoint and adds the entry of step ``n + 1`` (or, at the end,
writes the result record once and announces it on the ``done`` stream), and acknowledges and
deletes the entry, all atomically. A second execution of the same step (a zombie that woke up
after its lease, a redelivered entry) fails the compare and only acknowledges: exactly one
committed transition per (agent, step).

Leases: an entry read through the consumer group stays in the group's pending list, owned by
this worker's consumer, until the commit acknowledges it. A heartbeat task in the worker's
nursery renews the entries still being worked on every ``lease / 3`` with an owner-checked
script, so a frozen process (SIGSTOP, a stalled event loop) stops renewing and loses them; an
entry found owned by someone else has its step cancelled. Every worker runs a reclaimer that
takes over entries idle for more than the lease (``XAUTOCLAIM``), dead-letters those
delivered more than ``max_deliveries`` times (the agent gets a failed result naming why), and
every few rounds removes consumers idle for ten leases with nothing pending.

The blocking reader has its own client (a blocking read would hold up every other command on
a shared GLIDE connection) and reads at most as many entries as the worker has free step
slots. It is never cancelled mid-read: on shutdown it lets its short ``BLOCK`` expire, then
the steps in progress finish and the worker leaves.

The worker says what it does on the ``agentcore.distributed`` logger (INFO): when it starts,
every :data:`PROGRESS_EVERY` seconds while its counters move, and when it stops
(``agentcore worker`` shows these lines on stderr).
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import socket
import time
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from typing import Any

import attrs
import orjson
import trio

from .._backends.backend import Backend
from .._core.errors import ConfigError
from .._core.events import (
    Abort,
    AbortKind,
    CallModel,
    CallTool,
    Effect,
    Event,
    Finish,
    ModelResponded,
)
from .._core.journal import replay
from .._core.loop import AgentLoop
from .._driver.driver import Driver
from .._driver.limit_scope import LimitScope
from .._driver.open import open_driver_with
from .._driver.options import DriverOptions, resolve_options
from .._observe.log import DISTRIBUTED
from .._tasks.fingerprint import task_fingerprint
from .._tasks.results_file import ResultRecord
from .._tasks.task import RenderError, Task, compile_job
from .._transports.model_client import ModelClient
from .address import GROUP, Keys, QueueAddress
from .backoff import SharedBackoff
from .budget import FleetBudget
from .connection import Connection, is_server_error, open_connection, retrying
from .journal import ValkeyStep

__all__ = [
    "COUNTED_BY_SCRIPTS",
    "WorkerStatistics",
    "drop_consumers",
    "ensure_batch",
    "run_worker",
    "stream_entries",
]


@attrs.define
class WorkerStatistics:
    """What one worker did. The batch's ``stats`` hash gets the commit counters from the commit
    script itself (:data:`COUNTED_BY_SCRIPTS`) and the others from the worker every
    ``lease / 2`` and when it stops (a killed worker loses at most that last half lease of
    them)."""

    steps_committed: int = 0
    """Steps whose commit won the compare-and-set."""
    steps_rejected: int = 0
    """Steps run to the end whose commit lost the compare (another execution committed)."""
    steps_stale: int = 0
    """Entries dropped before running: their step was already committed."""
    steps_abandoned: int = 0
    """Steps stopped midway: the lease was lost, or the server failed (left for reclaiming)."""
    reclaimed: int = 0
    """Entries taken over from other (dead or frozen) consumers."""
    model_calls: int = 0
    tool_executions: int = 0
    tool_memo_hits: int = 0
    """Tool calls answered from the memo instead of running the tool."""
    tool_repeats: int = 0
    """Tool executions whose memo was already written: the tool ran twice for one key."""
    server_errors: int = 0
    """Commands that failed (connection lost, timeout) and were retried or abandoned."""
    consumers_removed: int = 0
    budget_reservations: int = 0
    """Model attempts reserved from the fleet's rate budget."""
    budget_calls: int = 0
    """Round trips to the server for them (one serves every attempt then in line)."""
    budget_local: int = 0
    """Of the reservations, those granted from the local share while the server could not be
    reached."""


COUNTED_BY_SCRIPTS = frozenset({"steps_committed", "steps_rejected"})
"""Counters the commit script adds to the batch's ``stats`` hash in the commit's own
transaction (with ``agents_finished`` and the reclaimer's ``steps_dead_lettered``, which
only the server counts): the worker never adds them, so they survive its death exact."""

PROGRESS_EVERY = 10.0
"""Seconds between a worker's progress lines (only while its counters move)."""


def _consumer_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


async def ensure_batch(conn: Connection, address: QueueAddress, task: Task) -> None:
    """Create the step stream's group and record the task fingerprint, or check it.

    Raises:
        ConfigError: the batch was created with a different task.
    """
    keys = address.keys
    try:
        await conn.command("XGROUP", "CREATE", keys.steps, GROUP, "0", "MKSTREAM")
    except Exception as exc:
        if "BUSYGROUP" not in str(exc):
            raise
    fingerprint = task_fingerprint(task)
    await conn.command("HSETNX", keys.meta, "task", fingerprint)
    stored = await conn.command("HGET", keys.meta, "task")
    if stored != fingerprint:
        raise ConfigError(
            f"batch {address.batch!r} was submitted with another task (fingerprint {stored}, "
            f"this one is {fingerprint}): start the worker with the batch's task file"
        )


def stream_entries(reply: Any) -> list[tuple[str, list[Any]]]:
    """``(entry id, flat field list)`` of an ``XREAD``/``XREADGROUP`` reply, whatever its
    shape (GLIDE gives RESP3 maps of id -> field pairs; RESP2 gives nested lists). Entries
    deleted while pending (no fields) are left out."""
    if not reply:
        return []
    streams = reply.values() if isinstance(reply, dict) else [s[1] for s in reply]
    found: list[tuple[str, list[Any]]] = []
    for entries in streams:
        items = entries.items() if isinstance(entries, dict) else entries
        for entry_id, fields in items:
            if not fields:
                continue
            flat: list[Any] = []
            for part in fields:
                flat.extend(part if isinstance(part, list) else [part])
            found.append((entry_id, flat))
    return found


def _entries(reply: Any) -> list[tuple[str, str, int]]:
    """``(entry id, agent, step)`` of an ``XREADGROUP`` reply on the step stream."""
    return [(entry_id, fields[1], int(fields[3])) for entry_id, fields in stream_entries(reply)]


@attrs.define(eq=False)
class _Worker:
    address: QueueAddress
    task: Task
    driver: Driver
    conn: Connection
    reader: Connection
    concurrency: int = attrs.field(kw_only=True)
    lease: float = attrs.field(kw_only=True)
    max_deliveries: int = attrs.field(kw_only=True)
    block_ms: int = attrs.field(kw_only=True)
    exit_when_done: bool = attrs.field(kw_only=True)
    audit: bool = attrs.field(kw_only=True)
    compare: bool = attrs.field(kw_only=True)
    heartbeat: bool = attrs.field(kw_only=True)
    name: str = attrs.field(kw_only=True)
    budget: FleetBudget | None = attrs.field(kw_only=True)
    keys: Keys = attrs.field(
        init=False, default=attrs.Factory(lambda self: self.address.keys, takes_self=True)
    )
    stats: WorkerStatistics = attrs.field(init=False, factory=WorkerStatistics)
    _flushed: WorkerStatistics = attrs.field(init=False, factory=WorkerStatistics)
    _inflight: dict[str, trio.CancelScope] = attrs.field(init=False, factory=dict)
    _freed: trio.Event = attrs.field(init=False, factory=trio.Event)
    _stopping: bool = attrs.field(init=False, default=False)
    _nursery: trio.Nursery | None = attrs.field(init=False, default=None)

    # ------------------------------------------------------------------ main loop

    async def run(self) -> None:
        DISTRIBUTED.info(
            "worker %s started on batch %s at %s:%d (%d steps at once, lease %g s)",
            self.name,
            self.address.batch,
            self.address.host,
            self.address.port,
            self.concurrency,
            self.lease,
            extra={"worker": self.name, "batch": self.address.batch},
        )
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            if self.heartbeat:
                nursery.start_soon(self._heartbeat)
            nursery.start_soon(self._reclaimer)
            nursery.start_soon(self._progress)
            await self._read()
            while self._inflight:
                await self._wait_freed()
            await self._leave()
            nursery.cancel_scope.cancel()
        self._log_progress("stopped")

    async def _progress(self) -> None:
        shown = attrs.evolve(self.stats)
        while True:
            await trio.sleep(PROGRESS_EVERY)
            if self.stats != shown:
                shown = attrs.evolve(self.stats)
                self._log_progress("progress")

    def _count_budget(self) -> None:
        if self.budget is not None:
            counts = self.budget.stats
            self.stats.budget_reservations = counts.reservations
            self.stats.budget_calls = counts.calls
            self.stats.budget_local = counts.local

    def _log_progress(self, what: str) -> None:
        self._count_budget()
        stats = self.stats
        DISTRIBUTED.info(
            "worker %s %s: %d steps committed (%d model calls, %d tool executions), %d in "
            "progress, %d reclaimed, %d abandoned, %d server errors",
            self.name,
            what,
            stats.steps_committed,
            stats.model_calls,
            stats.tool_executions,
            len(self._inflight),
            stats.reclaimed,
            stats.steps_abandoned,
            stats.server_errors,
            extra={"worker": self.name, "batch": self.address.batch},
        )

    def stop(self) -> None:
        """Stop reading after the current short ``BLOCK``; finish the steps in progress."""
        self._stopping = True
        self._signal_freed()

    async def _wait_freed(self) -> None:
        await self._freed.wait()
        self._freed = trio.Event()

    def _signal_freed(self) -> None:
        self._freed.set()

    async def _read(self) -> None:
        while not self._stopping:
            free = self.concurrency - len(self._inflight)
            if free <= 0:
                await self._wait_freed()
                continue
            try:
                reply = await self.reader.command(
                    "XREADGROUP", "GROUP", GROUP, self.name, "COUNT", free,
                    "BLOCK", self.block_ms, "STREAMS", self.keys.steps, ">",
                )  # fmt: skip
            except Exception as exc:
                if not is_server_error(exc):
                    raise
                await self._server_error()
                continue
            entries = _entries(reply)
            for entry_id, agent, step in entries:
                self._spawn(entry_id, agent, step)
            if not entries and self.exit_when_done and await self._batch_finished():
                self._stopping = True

    async def _batch_finished(self) -> bool:
        try:
            return bool(await self.conn.command("HGET", self.keys.meta, "finished"))
        except Exception as exc:
            if not is_server_error(exc):
                raise
            await self._server_error()
            return False

    async def _server_error(self) -> None:
        self.stats.server_errors += 1
        await trio.sleep(0.2)

    def _spawn(self, entry_id: str, agent: str, step: int) -> None:
        assert self._nursery is not None
        scope = trio.CancelScope()
        self._inflight[entry_id] = scope
        self._nursery.start_soon(self._step, scope, entry_id, agent, step)

    # ------------------------------------------------------------------ one step

    async def _step(self, scope: trio.CancelScope, entry_id: str, agent: str, step: int) -> None:
        try:
            with scope:
                await self._run_step(entry_id, agent, step)
            if scope.cancelled_caught:
                self.stats.steps_abandoned += 1
        except Exception as exc:
            if not is_server_error(exc):
                raise
            # The entry stays pending; the reclaimer of some worker runs it again later.
            self.stats.steps_abandoned += 1
            self.stats.server_errors += 1
        finally:
            self._inflight.pop(entry_id, None)
            self._signal_freed()

    async def _run_step(self, entry_id: str, agent: str, step: int) -> None:
        # The step journal of this step (docs/distributed.md): the same interface, and the
        # same restore (``replay``), as a resumed ``agentcore run``'s journal file.
        journal = ValkeyStep(self.conn, self.keys, agent, entry_id, step, self.compare, self.audit)
        try:
            await self._step_through(journal, agent, step)
        finally:
            if journal.won is not None:
                # Committed (or rejected): the entry is gone; the heartbeat must not miss it.
                self._inflight.pop(entry_id, None)
                if journal.won:
                    self.stats.steps_committed += 1
                else:
                    self.stats.steps_rejected += 1
            self.stats.tool_repeats += journal.repeats

    async def _step_through(self, journal: ValkeyStep, agent: str, step: int) -> None:
        journaled = await journal.load(agent)
        if self.compare and journal.version != step:
            await self.conn.command("XACK", self.keys.steps, GROUP, journal.entry_id)
            await self.conn.command("XDEL", self.keys.steps, journal.entry_id)
            self.stats.steps_stale += 1
            return
        index = int(agent)
        try:
            value = orjson.loads(journal.input) if journal.input is not None else None
            fresh = compile_job(
                self.task,
                value,
                run_id=f"{self.address.batch}-{agent}",
                schema_on_final=self.driver.schema_on_final,
            )
        except (RenderError, orjson.JSONDecodeError) as exc:
            record = ResultRecord.not_run(index, AbortKind.INVALID_INPUT, str(exc))
            await journal.ended(agent, record.encode())
            return
        replayed = replay(fresh, journaled)
        loop, owed = replayed.loop, replayed.effects
        self.stats.tool_memo_hits += replayed.tools
        began = trio.current_time()
        effects: Sequence[Effect]
        if replayed.end is not None:
            effects = owed
        elif replayed.tools and not any(isinstance(e, CallTool) for e in owed):
            # Every call the checkpoint owed was memoised: the tool step only commits.
            await journal.turn_done(agent, loop)
            return
        elif len(owed) == 1 and isinstance(owed[0], CallModel):
            self.stats.model_calls += 1
            event = await self.driver.call_model(owed[0])
            effects = loop.handle(event)
            journal.clock = attrs.evolve(
                journal.clock, model_time=journal.clock.model_time + trio.current_time() - began
            )
            if isinstance(event, ModelResponded) and not _ends(effects):
                await journal.replied(agent, event, loop)
                return
        else:
            effects = await self._run_tools(
                journal, loop, agent, [e for e in owed if isinstance(e, CallTool)]
            )
            journal.clock = attrs.evolve(
                journal.clock, tool_time=journal.clock.tool_time + trio.current_time() - began
            )
        end = _ends(effects)
        if end is None:
            await journal.turn_done(agent, loop)
        else:
            turns = loop.statistics().model_calls
            timings = journal.clock.timings(time.time())
            record = ResultRecord.of_end(index, end, turns, timings, loop.tool_failures)
            await journal.ended(agent, record.encode())

    async def _run_tools(
        self, journal: ValkeyStep, loop: AgentLoop, agent: str, calls: list[CallTool]
    ) -> Sequence[Effect]:
        if not calls:
            raise ConfigError(f"agent {agent}: the checkpoint owes no effect")
        send, receive = trio.open_memory_channel[Event](math.inf)
        async with trio.open_nursery() as nursery:
            for call in calls:
                nursery.start_soon(self._tool, journal, agent, call, send)
        effects: Sequence[Effect] = ()
        for _ in calls:
            effects = loop.handle(receive.receive_nowait())
        return effects

    async def _tool(
        self,
        journal: ValkeyStep,
        agent: str,
        call: CallTool,
        send: trio.MemorySendChannel[Event],
    ) -> None:
        event = await self.driver.executor.call(call)
        self.stats.tool_executions += 1
        send.send_nowait(await journal.tool_done(agent, call.idempotency_key, event))

    # ------------------------------------------------------------------ leases

    async def _heartbeat(self) -> None:
        while True:
            await trio.sleep(self.lease / 3)
            ids = list(self._inflight)
            if not ids:
                continue
            try:
                kept = set(
                    await self.conn.script("RENEW", [self.keys.steps], [GROUP, self.name, *ids])
                )
            except Exception as exc:
                if not is_server_error(exc):
                    raise
                self.stats.server_errors += 1
                continue
            for entry_id in ids:
                scope = self._inflight.get(entry_id)
                if entry_id not in kept and scope is not None:
                    scope.cancel()  # someone else owns it now: stop working on it

    async def _reclaimer(self) -> None:
        cursor = "0-0"
        rounds = 0
        while True:
            await trio.sleep(max(0.05, self.lease / 2))
            rounds += 1
            try:
                await self._flush_stats()
                free = self.concurrency - len(self._inflight)
                if free > 0 and not self._stopping:
                    cursor = await self._reclaim(cursor, free)
                if rounds % 10 == 0:
                    await self._remove_dead_consumers()
            except Exception as exc:
                if not is_server_error(exc):
                    raise
                self.stats.server_errors += 1

    async def _reclaim(self, cursor: str, count: int) -> str:
        keys = self.keys
        following, entries = await self.conn.script(
            "RECLAIM",
            [
                keys.steps, keys.dead, keys.version, keys.results, keys.done, keys.checkpoint,
                keys.stats,
            ],
            [
                GROUP, self.name, str(int(self.lease * 1000)), cursor, str(count),
                str(self.max_deliveries),
            ],
        )  # fmt: skip
        for entry_id, agent, step, _deliveries in entries:
            if entry_id in self._inflight:
                continue  # our own step, whose heartbeat was late: it is still running
            self.stats.reclaimed += 1
            self._spawn(entry_id, agent, int(step))
        return str(following)

    async def _remove_dead_consumers(self) -> None:
        self.stats.consumers_removed += await drop_consumers(
            self.conn, self.keys.steps, idle_ms=10 * self.lease * 1000, keep=self.name
        )

    async def _leave(self) -> None:
        """Best effort on a clean stop: the last counters, and this worker's consumer name
        out of the group (it owns nothing now; a killed worker's name is removed by the
        others, or by the submitter when the batch is finished)."""
        with contextlib.suppress(Exception):
            await self._flush_stats()
        with contextlib.suppress(Exception):
            await self.conn.script("DROP_CONSUMERS", [self.keys.steps], [GROUP, self.name])

    async def _flush_stats(self) -> None:
        self._count_budget()
        now = attrs.asdict(self.stats)
        before = attrs.asdict(self._flushed)
        for name, value in now.items():
            if value != before[name] and name not in COUNTED_BY_SCRIPTS:
                await self.conn.command("HINCRBY", self.keys.stats, name, value - before[name])
            setattr(self._flushed, name, value)


async def drop_consumers(conn: Connection, steps: str, *, idle_ms: float, keep: str = "") -> int:
    """Remove the group's consumers idle for over ``idle_ms`` that own no pending entry (but
    ``keep``); the pending check and the removal are one script. Returns how many went."""
    consumers = await conn.command("XINFO", "CONSUMERS", steps, GROUP)
    names = []
    for consumer in consumers or ():
        info = consumer if isinstance(consumer, dict) else dict(_pairs(consumer))
        name = str(info.get("name"))
        if name != keep and info.get("pending") == 0 and info.get("idle", 0) >= idle_ms:
            names.append(name)
    if not names:
        return 0
    return int(await conn.script("DROP_CONSUMERS", [steps], [GROUP, *names]))


def _ends(effects: Sequence[Effect]) -> Finish | Abort | None:
    """The effect that ends the run, if ``effects`` hold one."""
    return next((e for e in effects if isinstance(e, Finish | Abort)), None)


def _pairs(flat: list[Any]) -> list[tuple[Any, Any]]:
    return list(zip(flat[::2], flat[1::2], strict=False))


def _wrap(
    backoff: tuple[Connection, str] | None,
    budget: FleetBudget | None = None,
    *,
    configured: bool = False,
) -> Callable[[ModelClient], ModelClient] | None:
    """How a worker's driver wraps its model client: in a :class:`SharedBackoff` on the
    batch's pause key, reserving from ``budget`` if given, its limits known shared from the
    start if ``configured`` (``None``: not wrapped)."""
    if backoff is None:
        return None
    conn, key = backoff
    return lambda client: SharedBackoff(
        client, conn, key, budget=budget, scope=LimitScope.of(client, configured=configured)
    )


async def run_worker(
    queue: str | QueueAddress,
    task: Task,
    *,
    backend: str | Backend | ModelClient | None = None,
    options: DriverOptions | None = None,
    driver: Driver | None = None,
    concurrency: int | None = None,
    lease: float = 30.0,
    max_deliveries: int = 5,
    block_ms: int = 500,
    exit_when_done: bool = False,
    audit: bool = False,
    compare: bool = True,
    heartbeat: bool = True,
    shared_backoff: bool = True,
    fleet_budget: bool = True,
    task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
    **driver_options: Any,
) -> WorkerStatistics:
    """Work on a distributed batch: run its agents' steps until stopped.

    ::

        await agentcore.run_worker("redis://127.0.0.1:6379/b1", task, backend="sim://")

    Args:
        queue: ``redis://host:port/BATCH`` (or a :class:`QueueAddress`).
        task: the batch's task (workers refuse a batch submitted with a different one).
        backend, options, **driver_options: the worker's own driver, as for
            :func:`agentcore.open_driver` (:class:`~agentcore.DriverOptions`, and its fields
            as keywords).
        driver: an open driver to use instead (then no driver option is taken but
            ``max_inflight``, which sets the default ``concurrency``).
        concurrency: steps in progress at once (default ``2 * max_inflight``); the reader
            never takes more entries than this leaves free.
        lease: seconds an entry stays with this worker without a heartbeat before any
            worker may reclaim it. Heartbeats go every ``lease / 3``.
        max_deliveries: deliveries after which a step is dead-lettered and its agent fails.
        block_ms: how long one blocking read waits (and how long shutdown may take to notice).
        exit_when_done: return once the submitter has marked the batch finished.
        audit: count commits per (agent, step) in the batch's ``audit`` hash (tests).
        shared_backoff: when the backend answers 429 or "overloaded" and its limits are
            known to be shared (configured, published by a successful reply, or a provider
            that documents them so: docs/distributed.md, "Shared back-off"), pause every
            worker of the batch for its ``retry-after`` (a key on the server), not only this
            one. Not applied to a ``driver`` passed in.
        fleet_budget: with ``shared_backoff``, reserve every attempt from one rate budget
            that all the batch's workers share on the server: ``requests_per_minute`` and
            ``tokens_per_minute`` are then the fleet's limits, and limits learned from the
            headers of any worker's successful replies apply to all (docs/distributed.md,
            "One rate budget").
        compare, heartbeat: turn the compare-and-set or the heartbeat off. Only for the
            chaos suite's negative controls, which show that either breaks exactly-once.
        task_status: for ``nursery.start``: started once connected and checked.

    Returns:
        The worker's statistics once it stops (a trio cancellation stops it at once; its
        entries are then reclaimed after the lease).

    Raises:
        ConfigError: bad arguments, valkey-glide missing, server unreachable, another task.
    """
    address = queue if isinstance(queue, QueueAddress) else QueueAddress.parse(queue)
    if lease <= 0 or max_deliveries < 1 or block_ms < 1:
        raise ConfigError("lease must be > 0, max_deliveries >= 1 and block_ms >= 1")
    if concurrency is not None and concurrency < 1:
        raise ConfigError("concurrency must be >= 1")
    if driver is not None:
        given = {k: v for k, v in driver_options.items() if k != "max_inflight"}
        if backend is not None or options is not None or given:
            raise ConfigError("pass either driver= or backend options, not both")
    opts = resolve_options(options, driver_options)
    if driver is None and backend is None:
        raise ConfigError("a backend is needed: pass backend= (a URL such as 'sim://') or driver=")
    async with AsyncExitStack() as stack:
        conn = await stack.enter_async_context(open_connection(address, name="agentcore-worker"))
        reader = await stack.enter_async_context(
            open_connection(address, name="agentcore-reader", timeout_ms=block_ms + 5000)
        )
        name = _consumer_name()
        budget = None
        if driver is None:
            assert backend is not None
            backoff = (conn, address.keys.pause) if shared_backoff else None
            configured = opts.requests_per_minute is not None or opts.tokens_per_minute is not None
            if shared_backoff and fleet_budget:
                budget = FleetBudget(
                    conn, address.keys, name, requests_per_minute=opts.requests_per_minute,
                    tokens_per_minute=opts.tokens_per_minute,
                )  # fmt: skip
            opened = await stack.enter_async_context(
                open_driver_with(
                    backend, opts, task.tools, _wrap(backoff, budget, configured=configured)
                )
            )
        else:
            opened = driver
        await retrying(lambda: ensure_batch(conn, address, task))
        worker = _Worker(
            address,
            task,
            opened,
            conn,
            reader,
            concurrency=concurrency or 2 * opts.max_inflight,
            lease=lease,
            max_deliveries=max_deliveries,
            block_ms=block_ms,
            exit_when_done=exit_when_done,
            audit=audit,
            compare=compare,
            heartbeat=heartbeat,
            name=name,
            budget=budget,
        )
        task_status.started(worker)
        await worker.run()
        worker._count_budget()
        return worker.stats
