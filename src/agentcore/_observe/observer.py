"""What the driver tells an observer (a trace file, OpenTelemetry, logs), and the fan-out.

The driver, the model-request path and the tool executor hold one optional observer each
(``None`` unless asked for): every hook call site is guarded by ``if observer is not None``, so
a driver without observers pays one attribute test per event and nothing else.

Hooks receive plain values and trio times (``trio.current_time()``); they must not block or
raise (some run between a task joining a shared tool execution and parking, where an exception
would corrupt the hand-over), and must keep at most what is in flight (bounded by slots and
running tools).

- ``run_started`` / ``run_ended``: one agent run, from its first effect to its result.
- ``queued``: a model-request attempt starts waiting for an inference slot.
- ``attempt_started`` / ``attempt_ended``: an attempt holds a slot; the token returned by
  ``attempt_started`` comes back to ``attempt_ended`` with the exchange's outcome (``None``
  when the attempt was cancelled).
- ``backoff``: a failed attempt will be retried after ``wait`` seconds (no slot held).
- ``request_ended``: the request's final outcome (after its last attempt).
- ``tool_started`` / ``tool_ended``: one tool execution (shared by ``waiters`` calls when
  coalesced); ``tool_joined``: a call joined an execution already running.

Hooks without a run index (the tool hooks) find the run they belong to in ``CURRENT_RUN``:
the driver sets it in each task that carries a run (a stream's worker sets it whenever it
takes up a run), and trio copies it into the tasks a run starts.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .._codecs.exchange import Exchange
    from .._core.events import CallModel, ModelError, ModelFailed, ModelResponded, ToolError
    from .._core.results import Result

__all__ = ["CURRENT_RUN", "Observer", "Observers", "combine"]

CURRENT_RUN: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "agentcore_run", default=None
)
"""The index of the run the current task is carrying (set only while an observer listens)."""


class Observer(Protocol):
    """Receives the driver's lifecycle events (see the module documentation)."""

    def run_started(self, index: int, now: float) -> None: ...

    def run_ended(self, result: Result, now: float) -> None: ...

    def queued(self, call: CallModel, run: int | None, now: float) -> None: ...

    def attempt_started(
        self, call: CallModel, run: int | None, attempt: int, wait: float, now: float
    ) -> Any: ...

    def attempt_ended(self, token: Any, exchange: Exchange | None, now: float) -> None: ...

    def backoff(
        self, call: CallModel, run: int | None, error: ModelError, wait: float, now: float
    ) -> None: ...

    def request_ended(
        self, call: CallModel, event: ModelResponded | ModelFailed, now: float
    ) -> None: ...

    def tool_started(self, name: str, now: float) -> Any: ...

    def tool_joined(self, token: Any, now: float) -> None: ...

    def tool_ended(self, token: Any, error: ToolError | None, waiters: int, now: float) -> None: ...

    def close(self) -> None: ...


class Observers:
    """Several observers as one (each hook goes to every observer, in order)."""

    def __init__(self, observers: Sequence[Observer]) -> None:
        self._all = tuple(observers)

    def run_started(self, index: int, now: float) -> None:
        for o in self._all:
            o.run_started(index, now)

    def run_ended(self, result: Result, now: float) -> None:
        for o in self._all:
            o.run_ended(result, now)

    def queued(self, call: CallModel, run: int | None, now: float) -> None:
        for o in self._all:
            o.queued(call, run, now)

    def attempt_started(
        self, call: CallModel, run: int | None, attempt: int, wait: float, now: float
    ) -> Any:
        return [o.attempt_started(call, run, attempt, wait, now) for o in self._all]

    def attempt_ended(self, token: Any, exchange: Exchange | None, now: float) -> None:
        for o, t in zip(self._all, token, strict=True):
            o.attempt_ended(t, exchange, now)

    def backoff(
        self, call: CallModel, run: int | None, error: ModelError, wait: float, now: float
    ) -> None:
        for o in self._all:
            o.backoff(call, run, error, wait, now)

    def request_ended(
        self, call: CallModel, event: ModelResponded | ModelFailed, now: float
    ) -> None:
        for o in self._all:
            o.request_ended(call, event, now)

    def tool_started(self, name: str, now: float) -> Any:
        return [o.tool_started(name, now) for o in self._all]

    def tool_joined(self, token: Any, now: float) -> None:
        for o, t in zip(self._all, token, strict=True):
            o.tool_joined(t, now)

    def tool_ended(self, token: Any, error: ToolError | None, waiters: int, now: float) -> None:
        for o, t in zip(self._all, token, strict=True):
            o.tool_ended(t, error, waiters, now)

    def close(self) -> None:
        for o in self._all:
            o.close()


def combine(observers: Sequence[Observer]) -> Observer | None:
    """``None`` for no observer, the observer itself for one, else an :class:`Observers`."""
    if not observers:
        return None
    if len(observers) == 1:
        return observers[0]
    return Observers(observers)
