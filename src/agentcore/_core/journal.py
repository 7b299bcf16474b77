"""The step journal: what a run's journal holds, and how a run is restored from it.

Theory of operation
-------------------
A run is journaled at its *step boundaries*: a model reply the loop accepted, a tool call's
outcome, a tool turn whose outcomes are all in, the run's end. What a restore needs, and
nothing more, is kept (:class:`Journaled`):

- the replies (``ModelResponded``), by request id;
- the tool outcomes (``ToolReturned`` / ``ToolFailed``), by the call's idempotency key, in the
  order they arrived;
- optionally a base snapshot (:class:`~agentcore._core.loop.LoopSnapshot`) the replies and
  outcomes follow (a store that checkpoints keeps one; a store that keeps events has none);
- once the run has ended, its result as the caller encoded it (the journal is then compacted
  to that).

Restoring (:func:`replay`) starts from the base, or from the fresh loop, and answers every
effect the loop owes from the journal: a ``CallModel`` whose request id has a reply gets it,
the ``CallTool`` effects whose keys have an outcome get theirs, until the loop owes something
the journal lacks or ends. The loop is pure and its ids are data (a request id and an
idempotency key depend only on the run id, the turn and the call's place), so the restored
loop is the loop of the original run at its last journaled boundary, and what it still owes
is exactly what had not been journaled: the driver sends that model request again with the
same request id, and runs those tool calls again with the same idempotency keys. Nothing the
journal holds is computed twice.

Stores
------
:class:`StepJournal` is the one interface a driver writes through and reads from; a store
decides how each boundary is made durable. The SQLite store (``agentcore._tasks.journal``)
appends events and commits them in groups from a worker thread; the distributed batch's
Valkey/Redis keys (``agentcore._distributed.journal``) keep a checkpoint per committed step
(a compare-and-set on the step number) and a memo per tool call. Both are read back as a
:class:`Journaled` and restored by :func:`replay`.

Every write returns once the effects that follow it may be performed: a reply that asked for
tools is durable before any of them runs (the model is never asked again for a decision it
made), and a tool turn's outcomes are durable before the next model request is sent (a
resumed run sends the same bytes, so a request already in a provider's batch is found there,
not paid again).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Protocol

import attrs

from .events import (
    Abort,
    CallModel,
    CallTool,
    Effect,
    Finish,
    ModelResponded,
    ToolFailed,
    ToolReturned,
)
from .loop import AgentLoop, LoopSnapshot, RunState

__all__ = [
    "EMPTY",
    "JOURNAL_FORMAT",
    "Journaled",
    "Replayed",
    "StepJournal",
    "ToolOutcome",
    "replay",
]

JOURNAL_FORMAT: Final = 1
"""The version of the journal's format (what a step record holds). A store refuses, by name,
a journal written in a version it does not read."""

ToolOutcome = ToolReturned | ToolFailed
"""What a tool call ended with."""


@attrs.frozen
class Journaled:
    """What a journal holds of one run (module docstring)."""

    snapshot: LoopSnapshot | None = None
    """The base the replies and outcomes follow (``None``: the run's start)."""
    replies: Mapping[str, ModelResponded] = attrs.field(factory=dict)
    """Model replies the loop accepted, by request id."""
    tools: Mapping[str, ToolOutcome] = attrs.field(factory=dict)
    """Tool outcomes by idempotency key, in the order they arrived."""
    result: bytes | None = None
    """The run's end, as its caller encoded it (``None``: it has not ended)."""

    @property
    def empty(self) -> bool:
        """Whether nothing of the run was journaled."""
        return self.snapshot is None and not self.replies and not self.tools and self.result is None

    @property
    def steps(self) -> int:
        """The replies and outcomes it holds."""
        return len(self.replies) + len(self.tools)


EMPTY: Final = Journaled()
"""A run of which nothing was journaled."""


@attrs.frozen
class Replayed:
    """A loop restored from its journal (:func:`replay`)."""

    loop: AgentLoop
    effects: tuple[Effect, ...]
    """What the loop still owes (a ``CallModel``, or the ``CallTool`` effects not journaled),
    or, when the journal took it to its end, its ``Finish`` / ``Abort``."""
    replies: int
    """Journaled replies fed to the loop."""
    tools: int
    """Journaled tool outcomes fed to the loop."""

    @property
    def end(self) -> Finish | Abort | None:
        """The loop's end, when the journal took it there."""
        for effect in self.effects:
            if isinstance(effect, Finish | Abort):
                return effect
        return None


def replay(loop: AgentLoop, journaled: Journaled) -> Replayed:
    """Restore ``loop``'s run at its last journaled boundary (module docstring).

    Args:
        loop: the run's loop as compiled afresh (its config, its first messages); not started.
        journaled: what the journal holds of the run.

    Returns:
        The restored loop (``loop`` itself, fed, or a loop restored from the base snapshot)
        and what it still owes.

    Raises:
        ConfigError: the base snapshot belongs to another run or is inconsistent.
        LocalProtocolError: a journaled reply or outcome does not fit the loop (a journal of
            another task).
    """
    if journaled.snapshot is not None:
        loop = AgentLoop.restore(loop.config, journaled.snapshot)
    effects = loop.start() if loop.state is RunState.IDLE else loop.outstanding()
    replies, tools = journaled.replies, journaled.tools
    order: dict[str, int] | None = None
    fed_replies = fed_tools = 0
    while effects:
        first = effects[0]
        if isinstance(first, CallModel):
            reply = replies.get(first.request_id)
            if reply is None:
                break
            effects = loop.handle(reply)
            fed_replies += 1
            continue
        if not isinstance(first, CallTool):
            break  # the run ended
        owed = [e for e in effects if isinstance(e, CallTool) and e.idempotency_key in tools]
        if not owed:
            break
        if order is None:
            order = {key: n for n, key in enumerate(tools)}
        owed.sort(key=lambda call: order[call.idempotency_key])
        after: tuple[Effect, ...] = ()
        for call in owed:
            outcome = tools[call.idempotency_key]
            if outcome.call_id != call.call_id:
                outcome = attrs.evolve(outcome, call_id=call.call_id)
            after = loop.handle(outcome)
            fed_tools += 1
            if after:
                break  # the turn is complete, or a tool failure too many ended the run
        effects = after if after else loop.outstanding()
        if not after:
            break  # some calls of the turn were never journaled: they are owed
    return Replayed(loop, effects, fed_replies, fed_tools)


class StepJournal(Protocol):
    """Where the steps of runs are journaled: one interface, two stores (module docstring).

    ``run`` is the run id (``AgentLoop.run_id``). Each write returns once the effects that
    follow it may be performed.
    """

    async def load(self, run: str) -> Journaled:
        """What the journal holds of ``run`` (:data:`EMPTY` when nothing)."""
        ...

    async def replied(self, run: str, event: ModelResponded, loop: AgentLoop) -> None:
        """The loop accepted the reply ``event`` (``loop`` is the loop after it)."""
        ...

    async def tool_done(self, run: str, key: str, outcome: ToolOutcome) -> ToolOutcome:
        """A tool call ended with ``outcome``; ``key`` is its idempotency key. Returns the
        outcome journaled for the key: ``outcome``, or one journaled before it (that one
        stands)."""
        ...

    async def turn_done(self, run: str, loop: AgentLoop) -> None:
        """Every outcome of a tool turn is in (``loop`` has handled them)."""
        ...

    async def ended(self, run: str, result: bytes) -> None:
        """The run ended; ``result`` is what :attr:`Journaled.result` will hold. The run's
        steps are compacted to it."""
        ...
