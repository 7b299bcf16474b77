"""The ``agentcore.driver`` and ``agentcore.tools`` log lines, written by a step sink.

Theory of operation
-------------------
:data:`LOGS` is a :class:`~agentcore._observe.steps.StepSink` that turns step events into log
records (the table in :mod:`agentcore._observe.log`). It joins a run's sink in two ways:

- every run that has a sink anyway (a watcher, a batch's ``steps=``, a trace file,
  OpenTelemetry) gets it too (:func:`run_sink`), so it sees every event of the run;
- a run with no other listener gets it only while ``agentcore.driver`` or
  ``agentcore.tools`` is enabled for DEBUG (the level of the per-attempt and per-execution
  lines), so that nothing is built per step otherwise. The facts logged at INFO and WARNING
  are failures (a retry, a request failed for good, a failed tool execution, a failed run):
  the driver builds those events anyway and hands them to :func:`failure_sink`, which is the
  run's sink or, when it has none, this one.

Failed tool executions are bounded by :attr:`ToolEnded.failures` (the tool's failed executions
so far in its driver): the first :data:`TRACEBACKS_LOGGED` of each tool are logged at WARNING
with the run and the traceback, then only the 10th, 100th, 1000th... (at WARNING, one line
each, no traceback), the others at DEBUG; a batch of 10,000 failing calls writes seven
warnings, and every failure is still counted in its run's ``Result.tool_failures``.

Each record's fields are also given as ``extra=`` (``run``, ``request_id``, ``attempt``,
``error_kind``, ``status``, ``wait``, ``latency``, ``ttft``, ``tool``, ``error_type``,
``duration``, ``reason``, ``failures``) for structured formatters. It keeps the start of the
attempts in flight (for their latency), bounded by :data:`_STARTS_KEPT`.
"""

from __future__ import annotations

import logging
from typing import Any

from .._core.events import ModelError, ToolError
from .log import DRIVER, TOOLS
from .steps import (
    ModelReplied,
    RequestFailed,
    RequestStarted,
    RetryScheduled,
    RunAborted,
    StepEvent,
    StepSink,
    ToolEnded,
    tee,
)

__all__ = ["LOGS", "TRACEBACKS_LOGGED", "LogSink", "failure_sink", "run_sink"]

_DEBUG, _INFO, _WARNING = logging.DEBUG, logging.INFO, logging.WARNING
_STARTS_KEPT = 4096
"""Attempt starts kept for the latency field (a cancelled attempt never reports its end)."""
_NOT_EXECUTED = frozenset({"invalid_arguments", "unknown_tool", "cancelled"})
"""Tool errors that are no execution's failure (nothing ran, or the caller left)."""
TRACEBACKS_LOGGED = 3
"""Failed executions of each tool (per driver) logged at WARNING with their traceback."""


def _milestone(n: int) -> bool:
    """Whether the ``n``-th failure is a power of ten (10, 100, 1000...)."""
    while n >= 10 and n % 10 == 0:
        n //= 10
    return n == 1


def _fields(run: int | None, request_id: str, attempt: int, error: ModelError | None) -> Any:
    return {
        "run": run,
        "request_id": request_id,
        "attempt": attempt,
        "error_kind": None if error is None else error.kind.value,
        "status": None if error is None else error.status,
    }


class LogSink:
    """Step events as ``agentcore.driver`` / ``agentcore.tools`` log records."""

    deltas = False

    def __init__(self) -> None:
        self._starts: dict[tuple[int | None, str], float] = {}

    @staticmethod
    def detailed() -> bool:
        """Whether a DEBUG line would be seen: runs then report every step here."""
        return DRIVER.isEnabledFor(_DEBUG) or TOOLS.isEnabledFor(_DEBUG)

    def push(self, event: StepEvent) -> None:
        kind = type(event)
        if kind is RequestStarted:
            if DRIVER.isEnabledFor(_DEBUG):
                starts = self._starts
                if len(starts) >= _STARTS_KEPT:
                    del starts[next(iter(starts))]
                starts[event.run, event.request_id] = event.at  # type: ignore[union-attr]
        elif kind is ModelReplied or kind is RetryScheduled or kind is RequestFailed:
            self._attempt_ended(event)  # type: ignore[arg-type]
        elif kind is ToolEnded:
            self._tool_ended(event)  # type: ignore[arg-type]
        elif kind is RunAborted and DRIVER.isEnabledFor(_INFO):
            assert isinstance(event, RunAborted)
            DRIVER.info(
                "run %d %s: %s",
                event.run,
                event.status,
                event.reason.message,
                extra={"run": event.run, "status": event.status, "reason": event.reason.kind.value},
            )

    def _attempt_ended(self, event: ModelReplied | RetryScheduled | RequestFailed) -> None:
        attempt = event.attempts if not isinstance(event, RetryScheduled) else event.attempt
        error = None if isinstance(event, ModelReplied) else event.error
        started = self._starts.pop((event.run, event.request_id), None)
        if started is not None and DRIVER.isEnabledFor(_DEBUG):
            latency = event.at - started
            DRIVER.debug(
                "model request %s attempt %d: %s in %.3f s",
                event.request_id,
                attempt,
                "ok" if error is None else error.kind.value,
                latency,
                extra={
                    **_fields(event.run, event.request_id, attempt, error),
                    "latency": latency,
                    "ttft": event.ttft if isinstance(event, ModelReplied) else None,
                },
            )
        if isinstance(event, RetryScheduled) and DRIVER.isEnabledFor(_INFO):
            DRIVER.info(
                "model request %s attempt %d failed (%s); retrying in %.2f s",
                event.request_id,
                attempt,
                event.error.kind.value,
                event.delay,
                extra={**_fields(event.run, event.request_id, attempt, error), "wait": event.delay},
            )
        elif isinstance(event, RequestFailed) and DRIVER.isEnabledFor(_WARNING):
            DRIVER.warning(
                "model request %s failed after %d attempt(s): %s: %s",
                event.request_id,
                attempt,
                event.error.kind.value,
                event.error.message,
                extra=_fields(event.run, event.request_id, attempt, error),
            )

    @staticmethod
    def _tool_ended(event: ToolEnded) -> None:
        if event.source != "executed":
            return  # the execution it shared (or the cache) is reported by its own call
        error = event.error
        extra = {"run": event.run, "tool": event.tool, "duration": event.duration}
        if error is not None and error.type not in _NOT_EXECUTED:
            _tool_failed(event, error, extra)
        if TOOLS.isEnabledFor(_DEBUG):
            TOOLS.debug("tool %s ran %.3f s", event.tool, event.duration, extra=extra)

    async def settle(self) -> None:
        pass


def _tool_failed(event: ToolEnded, error: ToolError, extra: dict[str, Any]) -> None:
    """Log a failed execution: with its traceback while the tool has failed at most
    :data:`TRACEBACKS_LOGGED` times (0: not counted, an event made elsewhere), then one line
    at each power of ten, else at DEBUG."""
    n = event.failures
    first = n <= TRACEBACKS_LOGGED
    level = _WARNING if first or _milestone(n) else _DEBUG
    if not TOOLS.isEnabledFor(level):
        return
    extra = {**extra, "error_type": error.type, "failures": n}
    what = error.message if error.type == "timeout" else f"{error.type}: {error.message}"
    if first:
        later = (
            "; its later failures are logged at DEBUG (and its 10th, 100th... at WARNING)"
            if n == TRACEBACKS_LOGGED
            else ""
        )
        TOOLS.log(
            level,
            "run %s: tool %s failed: %s%s",
            event.run,
            event.tool,
            what,
            later,
            exc_info=event.exception,
            extra=extra,
        )
    else:
        TOOLS.log(
            level,
            "run %s: tool %s failed: %s (failure %d of this tool; see Result.tool_failures)",
            event.run,
            event.tool,
            what,
            n,
            extra=extra,
        )


LOGS = LogSink()
"""The one log sink (the loggers are process-wide)."""


def failure_sink(sink: StepSink | None) -> StepSink:
    """Where a failure event goes: the run's sink, or the log sink when it has none."""
    return LOGS if sink is None else sink


def run_sink(own: StepSink | None = None, shared: StepSink | None = None) -> StepSink | None:
    """The sink of a run whose listeners are ``own`` (a watcher, a batch's sink) and
    ``shared`` (the driver's: a trace file, OpenTelemetry), with the log sink added; ``None``
    when nobody listens and no DEBUG line would be seen."""
    if own is None and shared is None:
        return LOGS if LOGS.detailed() else None
    return tee(own, shared, LOGS)
