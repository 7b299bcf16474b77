"""The driver's side of step events: a run's first and last events, the deltas of one
attempt, and a tool call reported as it runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import trio

from .._core.events import Abort, CallModel, CallTool, Finish, ToolFailed, ToolReturned
from .._observe.log_sink import failure_sink
from .._observe.steps import (
    ModelDelta,
    RunAborted,
    RunFinished,
    RunStarted,
    StepSink,
    ToolEnded,
    ToolStarted,
)
from .._tools.context import with_reporter
from .._tools.executor import CallReport
from .._tools.progress import CallSteps

if TYPE_CHECKING:
    from .._codecs.codec import Delta
    from .._core.events import ToolError
    from .._tools.context import RunContext
    from .._tools.executor import ToolExecutor
    from .runs import Run


class _StepDeltas:
    """The delta sink of one attempt of a watched run: deltas become :class:`ModelDelta`."""

    __slots__ = ("_attempt", "_request_id", "_run", "_steps")

    delivered = False
    """Deltas of an agent run are never a reason not to retry: observers see the attempt."""

    def __init__(self, steps: StepSink, run: int | None, request_id: str, attempt: int) -> None:
        self._steps = steps
        self._run = run
        self._request_id = request_id
        self._attempt = attempt

    async def __call__(self, deltas: Sequence[Delta]) -> None:
        push = self._steps.push
        for delta in deltas:
            push(ModelDelta(self._run, self._request_id, self._attempt, delta))


def step_deltas(steps: StepSink, run: int | None, call: CallModel, attempt: int) -> _StepDeltas:
    """The delta sink for one attempt of ``call`` in the run with id ``run``."""
    return _StepDeltas(steps, run, call.request_id, attempt)


async def tool_call(
    executor: ToolExecutor,
    run: Run,
    call: CallTool,
    context: Callable[[], RunContext[Any]] | None = None,
) -> ToolReturned | ToolFailed:
    """``executor.call(call, context)`` for a run with a step sink, reporting
    :class:`ToolStarted` and :class:`ToolEnded` there, and in between the call's wait for its
    tool's cap and its tool's progress (:class:`~agentcore._tools.progress.CallSteps`)."""
    steps = run.steps
    assert steps is not None
    await steps.settle()
    started = trio.current_time()
    steps.push(ToolStarted(run.id, call.call_id, call.name, call.arguments, started))
    listener = CallSteps(steps, run.id, call.call_id, call.name)
    report = CallReport()
    report.on_wait = listener.waited
    if context is not None:
        run_context = context

        def context() -> RunContext[Any]:
            return with_reporter(run_context(), listener.progress)

    try:
        event = await executor.call(call, context, report)
    finally:
        listener.done = True
    content, error = (
        (event.content, None) if isinstance(event, ToolReturned) else (None, event.error)
    )
    steps.push(_tool_ended(run, call, report, started, content=content, error=error))
    return event


def _tool_ended(
    run: Run,
    call: CallTool,
    report: CallReport,
    started: float,
    *,
    content: str | None,
    error: ToolError | None,
) -> ToolEnded:
    """The :class:`ToolEnded` of a run's tool call that began at ``started``, ending now."""
    now = trio.current_time()
    return ToolEnded(
        run.id,
        call.call_id,
        call.name,
        content,
        error,
        report.source,
        now - started,
        now,
        report.calls,
        report.exception,
        report.failures,
    )


def tool_failed(
    run: Run, call: CallTool, event: ToolFailed, report: CallReport, started: float
) -> None:
    """Report the failed tool call of a run without a step sink (to the log sink)."""
    failure_sink(None).push(
        _tool_ended(run, call, report, started, content=None, error=event.error)
    )


def run_started(run: Run) -> None:
    """Report the start of ``run`` to its sink (if it has one)."""
    if run.steps is not None:
        run.steps.push(RunStarted(run.id, run.index, run.started))


def run_ended(run: Run, end: Finish | Abort, status: str, now: float) -> None:
    """Report the end of ``run`` at ``now`` (a run that did not finish: to the log sink if it
    has no sink; a run that finished and has none is not reported)."""
    if isinstance(end, Finish):
        if run.steps is not None:
            run.steps.push(RunFinished(run.id, end.output, end.usage, run.turns, now))
        return
    aborted: Literal["failed", "cancelled"] = "cancelled" if status == "cancelled" else "failed"
    failure_sink(run.steps).push(RunAborted(run.id, aborted, end.reason, end.usage, run.turns, now))
