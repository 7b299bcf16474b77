"""What a run ends with: :class:`Result`, its :class:`RunTimings` and :class:`Status`.

Plain frozen values, made by the driver when a run ends and read by everything that watches a
run (the step events, the observers, the results file).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, Literal

import attrs

from .events import AbortReason
from .messages import Message, Usage

__all__ = ["OutputT", "Result", "RunTimings", "Status"]

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    OutputT = TypeVar("OutputT", default=Any)
    """The type of a run's output; unknown (``Any``) for a bare :class:`Result`."""
else:  # type parameter defaults exist for type checkers only (PEP 696)
    from typing import TypeVar

    OutputT = TypeVar("OutputT")

Status = Literal["ok", "failed", "cancelled"]
"""How a run ended: with an output, without one, or because it was cancelled."""


@attrs.frozen
class RunTimings:
    """Where the time of one run went. Instants are the driver's clock (trio time)."""

    started: float
    ended: float
    model_time: float
    """Seconds of model exchanges (a slot held), retries included."""
    tool_time: float
    """Seconds during which at least one tool call was running."""
    slot_wait: float
    """Seconds spent waiting for slots."""
    ttft: tuple[float | None, ...]
    """Time to first token of each model request, in order (``None`` when not streamed)."""
    attempts: int
    """HTTP exchanges made, retries included."""

    @property
    def wall(self) -> float:
        """Seconds from start to end."""
        return self.ended - self.started


@attrs.frozen
class Result(Generic[OutputT]):
    """How one agent run ended; ``Result[T]`` for a task whose output type is ``T``.

    ``status`` is ``"ok"`` when the loop finished with an output, ``"cancelled"`` when the run
    was cancelled, ``"failed"`` otherwise (model failure, exhausted budgets, deadline); then
    ``error`` says why.
    """

    index: int
    """The run's index (its position in the input of a batch)."""
    status: Status
    output: OutputT | None
    """The loop's output (``None`` unless ``status == "ok"``): an instance of the task's
    output type, or the answer text for a task without one."""
    error: AbortReason | None
    transcript: tuple[Message, ...]
    usage: Usage
    timings: RunTimings
    turns: int
    """Model requests made (sent at least once)."""
    served_by: tuple[str, ...] = ()
    """With model fallback: the backend that gave each request its final reply or failure,
    in request order (empty without fallback)."""
