"""A batch's runs restored from its step journal: finished ones as their results, the others
replayed to their last journaled step.

:func:`restore` turns what the journal holds of one run into what the batch does with it:
nothing journaled (the fresh loop runs), a result (delivered as it is), or a loop replayed by
:func:`~agentcore._core.journal.replay` (run on from what it still owes, or, when the journal
took it to its end, delivered at once).
"""

from __future__ import annotations

from typing import Any

import attrs

from .._core.errors import ConfigError, JournalMismatch, LocalProtocolError
from .._core.events import Finish
from .._core.journal import Journaled, replay
from .._core.loop import AgentLoop
from .._core.results import Result, RunTimings
from .._driver.journaling import decode_result

__all__ = ["restore"]


def restore(  # noqa: PLR0917 - private helper, one call site
    loop: AgentLoop,
    journaled: Journaled,
    index: int,
    output: type[Any] | None,
    where: str,
    now: float,
) -> AgentLoop | Result[Any]:
    """What a batch does with a run its journal holds ``journaled`` of: run ``loop`` (the
    fresh loop, or the replayed one) or deliver a result (``index``: its input's index;
    ``now``: the driver's time, the start and end of a run the journal took to its end).

    Raises:
        JournalMismatch: the journal's steps or result do not fit the run (``where`` names
            the journal and the run).
    """
    if journaled.result is not None:
        return attrs.evolve(decode_result(journaled.result, output, where), index=index)
    if journaled.empty:
        return loop
    try:
        replayed = replay(loop, journaled)
    except (LocalProtocolError, ConfigError) as exc:
        raise JournalMismatch(f"{where}: the journaled steps do not fit the run: {exc}") from None
    end = replayed.end
    if end is None:
        return replayed.loop
    # The journal took the run to its end (it was killed before its result was journaled):
    # its requests and tools were all made before, by the process that was killed.
    stats = replayed.loop.statistics()
    ok = isinstance(end, Finish)
    return Result(
        index=index,
        status="ok" if ok else "failed",
        output=end.output if isinstance(end, Finish) else None,
        error=None if isinstance(end, Finish) else end.reason,
        transcript=end.transcript,
        usage=end.usage,
        timings=RunTimings(now, now, 0.0, 0.0, 0.0, (), 0),
        turns=stats.model_calls,
        tool_failures=replayed.loop.tool_failures,
    )
