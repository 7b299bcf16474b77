"""The step journal of a distributed batch: the batch's keys on the Valkey/Redis server.

:class:`ValkeyStep` is the :class:`~agentcore._core.journal.StepJournal` of one step of one
agent, as a worker runs it (one per stream entry): the same interface as ``agentcore run``'s
SQLite journal, kept in the batch's keys (``docs/distributed.md``):

- :meth:`~ValkeyStep.load` reads the agent's committed step number, checkpoint and input in one
  round trip (``scripts.LOAD``), and the memos of the tool calls the checkpoint still owes
  (their idempotency keys follow from the snapshot alone): a :class:`Journaled` whose base is
  the checkpoint's snapshot and whose tool outcomes are the memos. The worker restores the
  loop from it with :func:`~agentcore._core.journal.replay`, as a resumed ``agentcore run``
  does from its file;
- :meth:`~ValkeyStep.tool_done` memoises an outcome under its idempotency key (``HSETNX``): an
  outcome memoised before, by an earlier execution of the same step, stands;
- :meth:`~ValkeyStep.replied` (a model step) and :meth:`~ValkeyStep.turn_done` (a tool step)
  commit the checkpoint with the compare-and-set on the step number (``scripts.COMMIT``), which
  also queues the agent's next step; :meth:`~ValkeyStep.ended` commits the result record.

A checkpoint store rather than an event log: a step's commit writes the loop's snapshot (the
transcript so far), so any worker can take the next step from one read.
"""

from __future__ import annotations

import time

import attrs

from .._codecs.serde import dumps, loads
from .._core.config import idempotency_key
from .._core.events import ModelResponded
from .._core.journal import EMPTY, Journaled, ToolOutcome
from .._core.loop import AgentLoop, LoopSnapshot, RunState
from .address import GROUP, Keys
from .connection import Connection
from .records import AgentClock, decode_checkpoint, decode_memo, encode_checkpoint, encode_memo

__all__ = ["ValkeyStep"]


@attrs.define(eq=False)
class ValkeyStep:
    """One step (``step``, delivered as ``entry_id``) of ``agent`` on the batch's server, as a
    step journal (module docstring). Used once: load, then the step's writes."""

    conn: Connection
    keys: Keys
    agent: str
    entry_id: str
    step: int
    compare: bool
    audit: bool
    version: int | None = attrs.field(default=None, init=False)
    """The agent's committed step number (``None``: the agent is not live)."""
    input: str | None = attrs.field(default=None, init=False)
    """The agent's input as admitted (JSON text)."""
    clock: AgentClock = attrs.field(factory=lambda: AgentClock(time.time()), init=False)
    """The agent's time so far (from its checkpoint), carried into the next one."""
    won: bool | None = attrs.field(default=None, init=False)
    """Whether the step's commit won the compare-and-set (``None``: not committed)."""
    repeats: int = attrs.field(default=0, init=False)
    """Tool outcomes found memoised by an earlier execution after this one ran the tool."""

    async def load(self, run: str) -> Journaled:
        """The agent's checkpoint and the memos of the calls it owes (module docstring)."""
        keys = self.keys
        version, checkpoint, raw_input = await self.conn.script(
            "LOAD", [keys.version, keys.checkpoint, keys.inputs], [self.agent]
        )
        self.version = None if version is None else int(version)
        self.input = raw_input
        if checkpoint is None:
            return EMPTY
        self.clock, data = decode_checkpoint(checkpoint, time.time())
        snapshot = loads(data, LoopSnapshot)
        if snapshot.state is not RunState.AWAITING_TOOLS:
            return Journaled(snapshot=snapshot)
        turn = snapshot.model_calls - 1
        owed = [
            idempotency_key(snapshot.run_id, turn, index)
            for index, result in enumerate(snapshot.results)
            if result is None
        ]
        memos = await self.conn.raw("HMGET", keys.memos(self.agent), *owed)
        tools = {
            key: decode_memo(key, memo)
            for key, memo in zip(owed, memos or (), strict=False)
            if memo is not None
        }
        return Journaled(snapshot=snapshot, tools=tools)

    async def replied(self, run: str, event: ModelResponded, loop: AgentLoop) -> None:
        """Commit the model step: the loop's checkpoint, its tool calls pending."""
        await self.commit_next(loop)

    async def tool_done(self, run: str, key: str, outcome: ToolOutcome) -> ToolOutcome:
        """Memoise ``outcome``; an outcome memoised earlier for ``key`` stands."""
        memos = self.keys.memos(self.agent)
        if await self.conn.command("HSETNX", memos, key, encode_memo(outcome)):
            return outcome
        self.repeats += 1
        stored = await self.conn.raw("HGET", memos, key)
        return outcome if stored is None else decode_memo(outcome.call_id, stored)

    async def turn_done(self, run: str, loop: AgentLoop) -> None:
        """Commit the tool step: the loop's checkpoint, awaiting the next model request."""
        await self.commit_next(loop)

    async def ended(self, run: str, result: bytes) -> None:
        """Commit the agent's end: its result record (written once)."""
        await self._commit("end", result)

    async def commit_next(self, loop: AgentLoop) -> None:
        """Commit the loop's checkpoint and queue the agent's next step."""
        await self._commit("next", encode_checkpoint(self.clock, dumps(loop.snapshot())))

    async def _commit(self, kind: str, payload: bytes) -> None:
        keys = self.keys
        won = await self.conn.script(
            "COMMIT",
            [
                keys.version, keys.checkpoint, keys.steps, keys.results, keys.done, keys.audit,
                keys.stats,
            ],
            [
                self.agent, str(self.step), self.entry_id, kind, payload,
                "1" if self.compare else "0", "1" if self.audit else "0", GROUP,
            ],
        )  # fmt: skip
        self.won = bool(won)
