"""The driver's side of step events: deltas of one attempt, a tool call reported as it runs,
and a run's last event."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import trio

from .._core.events import Abort, CallModel, CallTool, Finish, ToolFailed, ToolReturned
from .._observe.steps import (
    ModelDelta,
    RunAborted,
    RunFinished,
    StepSink,
    ToolEnded,
    ToolSource,
    ToolStarted,
)

if TYPE_CHECKING:
    from .._codecs.codec import Delta
    from .._tools.context import RunContext
    from .._tools.executor import ToolExecutor


class _StepDeltas:
    """The delta sink of one attempt of a watched run: deltas become :class:`ModelDelta`."""

    __slots__ = ("_attempt", "_request_id", "_run", "_steps")

    delivered = False
    """Deltas of an agent run are never a reason not to retry: observers see the attempt."""

    def __init__(self, steps: StepSink, run: int, request_id: str, attempt: int) -> None:
        self._steps = steps
        self._run = run
        self._request_id = request_id
        self._attempt = attempt

    async def __call__(self, deltas: Sequence[Delta]) -> None:
        push = self._steps.push
        for delta in deltas:
            push(ModelDelta(self._run, self._request_id, self._attempt, delta))


def step_deltas(steps: StepSink, run: int, call: CallModel, attempt: int) -> _StepDeltas:
    """The delta sink for one attempt of ``call`` in run ``run``."""
    return _StepDeltas(steps, run, call.request_id, attempt)


async def observed_tool_call(
    executor: ToolExecutor,
    steps: StepSink,
    run: int,
    call: CallTool,
    context: Callable[[], RunContext[Any]] | None = None,
) -> ToolReturned | ToolFailed:
    """``executor.call(call, context)``, reporting :class:`ToolStarted` and
    :class:`ToolEnded`."""
    started = trio.current_time()
    steps.push(ToolStarted(run, call.call_id, call.name, call.arguments, started))
    shared: list[str] = []
    event = await executor.call(call, context, shared)
    now = trio.current_time()
    source: ToolSource = "cached" if "cached" in shared else "coalesced" if shared else "executed"
    if isinstance(event, ToolReturned):
        content, error = event.content, None
    else:
        content, error = None, event.error
    steps.push(ToolEnded(run, call.call_id, call.name, content, error, source, now - started, now))
    return event


def run_ended(run: int, end: Finish | Abort, status: str, turns: int) -> RunFinished | RunAborted:
    """The last event of a run."""
    now = trio.current_time()
    if isinstance(end, Finish):
        return RunFinished(run, end.output, end.usage, turns, now)
    return RunAborted(
        run, "cancelled" if status == "cancelled" else "failed", end.reason, end.usage, turns, now
    )
