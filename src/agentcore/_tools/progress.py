""":class:`CallSteps`: what one observed tool call reports while it runs (its waits for caps,
the progress its tool reports), as step events.

Built only for a call somebody listens to (a run with a step sink); an unobserved call has
none, and ``RunContext.progress`` then returns at once. It never waits: each report is one
``push``. A tool running in a worker thread reports through the trio token: the latest report
is kept and one callback at most is queued to the trio thread, so a tight loop of reports
from a thread costs one callback per pass of the trio scheduler, not one per report. Reports
of one call closer together than :data:`PROGRESS_INTERVAL` seconds (trio time) are dropped,
except a report of completion (fraction 1). Once the call has ended (:attr:`CallSteps.done`),
nothing more is pushed: a shared execution that outlives the call that started it, or a
thread's late report, stays silent.
"""

from __future__ import annotations

import math
import threading

import trio

from .._observe.steps import StepSink, ToolCap, ToolProgress, ToolWaited

__all__ = ["PROGRESS_INTERVAL", "CallSteps"]

PROGRESS_INTERVAL = 0.1
"""Seconds between two progress events of one call, at least (a report of 1 always goes)."""


class CallSteps:
    """The step events one observed tool call pushes between its start and its end."""

    __slots__ = (
        "_call_id",
        "_last",
        "_latest",
        "_pending",
        "_run",
        "_steps",
        "_thread",
        "_token",
        "_tool",
        "done",
    )

    def __init__(self, steps: StepSink, run: int, call_id: str, tool: str) -> None:
        self._steps = steps
        self._run = run
        self._call_id = call_id
        self._tool = tool
        self._thread = threading.get_ident()
        self._token = trio.lowlevel.current_trio_token()
        self._last = -math.inf
        self._latest = (0.0, "")
        self._pending = False
        self.done = False
        """Set when the call has ended: later reports are dropped."""

    def waited(self, cap: ToolCap, since: float) -> None:
        """The call got through ``cap`` after waiting since trio time ``since``."""
        if not self.done:
            now = trio.current_time()
            self._steps.push(ToolWaited(self._run, self._call_id, self._tool, cap, since, now))

    def progress(self, fraction: float, message: str) -> None:
        """A report of the call's tool (any thread; checked by ``RunContext.progress``)."""
        if threading.get_ident() == self._thread:
            self._push(fraction, message)
            return
        self._latest = (fraction, message)
        if not self._pending:
            self._pending = True
            self._token.run_sync_soon(self._flush)

    def _flush(self) -> None:
        self._pending = False  # first: a report arriving from now on queues a new callback
        fraction, message = self._latest
        self._push(fraction, message)

    def _push(self, fraction: float, message: str) -> None:
        if self.done:
            return
        now = trio.current_time()
        if fraction < 1.0 and now - self._last < PROGRESS_INTERVAL:
            return
        self._last = now
        self._steps.push(ToolProgress(self._run, self._call_id, self._tool, fraction, message, now))
