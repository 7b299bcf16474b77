"""The submitter: admits a batch's inputs through a bounded window and collects results.

Theory of operation
-------------------
The output file is the durable record of what is finished; the server holds only live
agents. The submitter loops over two duties:

- *admission*: while fewer than ``window`` agents are live (``HLEN version``), admit the next
  inputs with ``scripts.ADMIT``, which gives each step number 0 and one runnable entry and
  moves the admission cursor (``meta.next``) in the same transaction. Server memory is thus
  proportional to the window, not to the batch.
- *collection*: read the ``done`` stream (announced by the commit that ends an agent), append
  each result record (a :class:`ResultRecord` line, as the worker encoded it) to the output
  file, ``fsync`` it, and only then forget the agent on the server (``scripts.CLEANUP``: its
  version, input, result, checkpoint, memos and the ``done`` entry).

Killed at any point, a new submitter with the same output file resumes: it reads the
indices already in the file (cutting off a torn last line), reads the ``done`` stream from
its start (entries of agents whose line was written but not yet forgotten are only
forgotten now), and continues admission from the cursor. Each result reaches the file once.
When every input has a line, the submitter sets ``meta.finished``, which lets workers started
with ``exit_when_done`` leave, and removes the consumer names that own nothing from the group
(those of workers that died; a live one is added again by its next read).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import attrs
import orjson
import trio

from .._core.errors import ConfigError
from .._tasks.results_file import ResultRecord, finished_indices
from .._tasks.task import Task
from .address import Keys, QueueAddress
from .connection import Connection, is_server_error, open_connection, retrying
from .worker import drop_consumers, ensure_batch, stream_entries

__all__ = ["SubmitReport", "submit_batch"]

_ADMIT_CHUNK = 256
_READ_COUNT = 512


@attrs.frozen
class SubmitReport:
    """What :func:`submit_batch` did."""

    total: int
    """Inputs in the batch."""
    already_done: int
    """Results that were in the output file before this call."""
    written: int
    """Results this call wrote."""
    ok: int
    """Of those written, how many finished ``ok``."""


@attrs.define(eq=False)
class _Submitter:
    """The submitter's state: what it admits, where it writes, what it has written."""

    keys: Keys
    inputs: Sequence[Any]
    out: IO[bytes]
    done: set[int]
    window: int
    on_result: Callable[[dict[str, Any]], None] | None
    written: int = attrs.field(default=0, init=False)
    ok: int = attrs.field(default=0, init=False)
    last_id: str = attrs.field(default="0-0", init=False)

    async def admit(self, conn: Connection) -> None:
        keys = self.keys
        total = len(self.inputs)
        cursor = int(await conn.command("HGET", keys.meta, "next") or 0)
        live = int(await conn.command("HLEN", keys.version))
        while cursor < total and live < self.window:
            args: list[str | bytes] = []
            room = min(self.window - live, _ADMIT_CHUNK)
            while cursor < total and len(args) < 2 * room:
                if cursor not in self.done:
                    args += [str(cursor), orjson.dumps(self.inputs[cursor])]
                cursor += 1
            live += int(
                await conn.script(
                    "ADMIT",
                    [keys.version, keys.inputs, keys.steps, keys.meta],
                    [str(cursor), *args],
                )
            )

    async def collect(self, conn: Connection, reader: Connection, block_ms: int) -> None:
        keys = self.keys
        reply = await reader.command(
            "XREAD", "COUNT", _READ_COUNT, "BLOCK", block_ms, "STREAMS", keys.done, self.last_id
        )
        entries = [(entry_id, fields[1]) for entry_id, fields in stream_entries(reply)]
        if not entries:
            return
        agents = [agent for _, agent in entries]
        records = await conn.raw("HMGET", keys.results, *agents)
        for (_, agent), record in zip(entries, records, strict=True):
            index = int(agent)
            if index in self.done or record is None:
                continue
            self.out.write(bytes(record) + b"\n")
            self.done.add(index)
            self.written += 1
            self.ok += ResultRecord.decode(record).status == "ok"
            if self.on_result is not None:
                self.on_result(orjson.loads(record))
        self.out.flush()
        os.fsync(self.out.fileno())
        await conn.script(
            "CLEANUP",
            [
                keys.version, keys.inputs, keys.results, keys.checkpoint, keys.done,
                *(keys.memos(agent) for agent in agents),
            ],
            [part for entry_id, agent in entries for part in (agent, entry_id)],
        )  # fmt: skip
        self.last_id = entries[-1][0]


async def submit_batch(
    queue: str | QueueAddress,
    task: Task,
    inputs: Sequence[Any],
    output: str | Path,
    *,
    window: int = 1000,
    block_ms: int = 500,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> SubmitReport:
    """Submit ``inputs`` to a distributed batch and write every result to ``output`` once.

    Workers (:func:`agentcore.run_worker`, ``agentcore worker``) run the agents. Calling this
    again with the same queue and output file (after a crash, or to wait for a batch) resumes:
    inputs whose result is in the file are not admitted again and no result is written twice.

    Args:
        queue: ``redis://host:port/BATCH`` (or a :class:`QueueAddress`).
        task: what every agent does (workers must run the same task).
        inputs: one value per agent; the index of an input is its position.
        output: the JSONL results file (appended to; one record per input, with ``index``).
        window: agents live on the server at once (admitted, not yet written out).
        block_ms: how long one blocking read of the ``done`` stream waits.
        on_result: called with each record as it is written.

    Returns:
        A :class:`SubmitReport`, once every input has its line in ``output``.

    Raises:
        ConfigError: bad arguments, valkey-glide missing, server unreachable, the batch was
            submitted with another task or another number of inputs, or it is finished and
            ``output`` lacks its results.
    """
    address = queue if isinstance(queue, QueueAddress) else QueueAddress.parse(queue)
    if window < 1:
        raise ConfigError("window must be >= 1")
    path = Path(output)
    done = finished_indices(path)
    already = len(done)
    total = len(inputs)
    keys = address.keys
    async with (
        open_connection(address, name="agentcore-submitter") as conn,
        open_connection(address, name="agentcore-collector", timeout_ms=block_ms + 5000) as reader,
    ):
        await retrying(lambda: ensure_batch(conn, address, task))
        await retrying(lambda: conn.command("HSETNX", keys.meta, "total", total))
        stored = int(await retrying(lambda: conn.command("HGET", keys.meta, "total")))
        if stored != total:
            raise ConfigError(
                f"batch {address.batch!r} has {stored} inputs, this submission {total}"
            )
        finished = await retrying(lambda: conn.command("HGET", keys.meta, "finished"))
        if finished and len(done) < total:
            raise ConfigError(
                f"batch {address.batch!r} is finished and its results were written elsewhere "
                f"({len(done)} of {total} are in {path}): submit to a new batch name"
            )
        with path.open("ab") as out:
            submitter = _Submitter(keys, inputs, out, done, window, on_result)
            while len(done) < total:
                try:
                    await submitter.admit(conn)
                    await submitter.collect(conn, reader, block_ms)
                except Exception as exc:
                    if not is_server_error(exc):
                        raise
                    await trio.sleep(0.2)
        await retrying(lambda: conn.command("HSET", keys.meta, "finished", 1))
        # Every step is committed: the consumer names left in the group are of workers that
        # died (or are leaving); none owns a pending entry.
        with contextlib.suppress(Exception):
            await drop_consumers(conn, keys.steps, idle_ms=0)
    return SubmitReport(total, already, submitter.written, submitter.ok)
