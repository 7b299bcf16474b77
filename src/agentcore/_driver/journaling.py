"""The driver's side of the step journal: a run's steps journaled at its boundaries, and its
result at its end (see :mod:`agentcore._core.journal` for what a journal holds).

- :func:`attach` gives a run its journal. A loop the journal restored is the same run
  continued: its requests made before the restore count among its turns.
- :func:`handle_journaled` is ``loop.handle(event)`` for a run with a journal: a tool outcome
  is journaled first (the journaled outcome is the one the loop gets), then a reply, or the
  outcome that completes a turn, is journaled; each returns once the run may go on.
- :func:`journal_end` compacts the run to its result before the result is handed on (by the
  run's own task, so runs ending together wait for one commit together, not in a line).
- :func:`encode_result` / :func:`decode_result`: a run's :class:`~agentcore.Result` as the
  journal keeps it (``agentcore.core.dumps``, compressed with zlib; the output in its JSON
  form, structured again into the output type when read).
"""

from __future__ import annotations

import zlib
from typing import Any

import attrs

from .._codecs.serde import dumps, loads
from .._codecs.values import json_value
from .._core.errors import DecodeError, JournalMismatch
from .._core.events import CallTool, Effect, Event, ModelResponded, ToolFailed, ToolReturned
from .._core.journal import StepJournal
from .._core.loop import RunState
from .._core.results import Result
from .._core.schema import ValidationFailed, structure
from .runs import Run

__all__ = ["attach", "decode_result", "encode_result", "handle_journaled", "journal_end"]


def attach(run: Run, journal: StepJournal) -> None:
    """Journal ``run``'s steps in ``journal``."""
    run.journal = journal
    loop = run.loop
    if loop.state is not RunState.IDLE:
        run.turns = loop.statistics().model_calls - (loop.state is RunState.AWAITING_MODEL)


async def handle_journaled(
    run: Run, event: Event, call: CallTool | dict[str, str] | Any
) -> tuple[Effect, ...]:
    """``run.loop.handle(event)``, journaled (module docstring). ``call``: the call a tool
    outcome answers, or the idempotency keys of a parallel turn's calls by call id."""
    journal = run.journal
    assert journal is not None
    loop = run.loop
    kind = type(event)
    if kind is ToolReturned or kind is ToolFailed:
        assert isinstance(event, ToolReturned | ToolFailed)
        if isinstance(call, dict):
            key = call[event.call_id]
        else:
            assert isinstance(call, CallTool)
            key = call.idempotency_key
        event = await journal.tool_done(loop.run_id, key, event)
        effects = loop.handle(event)
        if effects:
            await journal.turn_done(loop.run_id, loop)
        return effects
    effects = loop.handle(event)
    if kind is ModelResponded:
        assert isinstance(event, ModelResponded)
        await journal.replied(loop.run_id, event, loop)
    return effects


async def journal_end(run: Run, result: Result[Any]) -> None:
    """Compact ``run``'s journal to ``result`` (a cancelled run keeps its steps: it goes on
    from them when resumed)."""
    if run.journal is not None and result.status != "cancelled":
        await run.journal.ended(run.loop.run_id, encode_result(result))


def encode_result(result: Result[Any]) -> bytes:
    """A run's result as its journal keeps it (compressed: a transcript repeats the task's
    system prompt and output schema, and its turns repeat each other)."""
    return zlib.compress(dumps(attrs.evolve(result, output=json_value(result.output))), 1)


def decode_result(data: bytes, output: type[Any] | None, where: str) -> Result[Any]:
    """A result kept by :func:`encode_result`, its output structured into ``output``.

    Raises:
        JournalMismatch: the result does not decode, or its output does not fit ``output``
            (``where`` names the journal and the run).
    """
    try:
        result: Result[Any] = loads(zlib.decompress(data), Result[Any])
        if output is not None and result.status == "ok":
            result = attrs.evolve(result, output=structure(result.output, output))
    except (DecodeError, ValidationFailed, zlib.error) as exc:
        problem = f"{where}: the journaled result does not fit the task: {exc}"
        raise JournalMismatch(problem) from None
    return result
