"""What a run ends with: :class:`Result`, its :class:`RunTimings` and :class:`Status`.

Plain frozen values, made by the driver when a run ends and read by everything that watches a
run (the step events, the observers, the results file).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Generic, Literal

import attrs

from .events import AbortReason, ToolError
from .messages import Message, Usage

__all__ = ["NO_TOOL_FAILURES", "OutputT", "Result", "RunTimings", "Status", "ToolFailures"]

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    OutputT = TypeVar("OutputT", default=Any)
    """The type of a run's output; unknown (``Any``) for a bare :class:`Result`."""
else:  # type parameter defaults exist for type checkers only (PEP 696)
    from typing import TypeVar

    OutputT = TypeVar("OutputT")

Status = Literal["ok", "failed", "cancelled"]
"""How a run ended: with an output, without one, or because it was cancelled."""


_FIRST_CHARS: Final = 200
"""The first error of a tool is kept cut to this many characters."""
_TYPES_KEPT: Final = 16
"""Error types counted apart per tool; further types are counted under ``"other"``."""


@attrs.frozen
class ToolFailures:
    """The tool calls of one run that failed (answered ``ToolFailed``: the tool raised, timed
    out, or the executor refused the call), by tool and error type.

    Invalid calls the loop answered itself (an unknown tool, arguments that are not valid)
    are not here: they count toward ``LoopConfig.max_tool_errors``. What is kept is bounded:
    one count per tool and error type (at most 16 types per tool, the rest under
    ``"other"``) and the first error of each tool.
    """

    counts: Mapping[str, Mapping[str, int]] = attrs.field(factory=dict, hash=False)
    """Failed calls by tool name, then by error type (the exception's class name,
    ``"timeout"``, ``"invalid_arguments"``...)."""
    first: Mapping[str, str] = attrs.field(factory=dict, hash=False)
    """The first error of each tool, ``type: message`` on one line, cut to 200 characters."""

    @property
    def total(self) -> int:
        """Failed calls, over all tools."""
        return sum(n for by_type in self.counts.values() for n in by_type.values())

    def added(self, tool: str, error: ToolError) -> ToolFailures:
        """These failures and one more: a call of ``tool`` that failed with ``error``."""
        counts = {name: dict(by_type) for name, by_type in self.counts.items()}
        by_type = counts.setdefault(tool, {})
        kind = error.type
        if kind not in by_type and len(by_type) >= _TYPES_KEPT:
            kind = "other"
        by_type[kind] = by_type.get(kind, 0) + 1
        first = dict(self.first)
        if tool not in first:
            first[tool] = str(error)[:_FIRST_CHARS]
        return ToolFailures(counts, first)

    def merged(self, other: ToolFailures) -> ToolFailures:
        """The failures of both (the first error of a tool is taken from ``self`` if it has
        one): what a batch summary adds up."""
        counts = {name: dict(by_type) for name, by_type in self.counts.items()}
        for name, by_type in other.counts.items():
            mine = counts.setdefault(name, {})
            for kind, n in by_type.items():
                mine[kind] = mine.get(kind, 0) + n
        return ToolFailures(counts, {**other.first, **self.first})

    def describe(self, tools: int = 5) -> str:
        """One line: the failed calls by tool (the ``tools`` with most failures) and the first
        error of each, e.g. ``read_file 79 (FileNotFoundError: ...)``; ``""`` for none."""
        ranked = sorted(self.counts.items(), key=lambda item: -sum(item[1].values()))
        parts = [
            f"{name} {sum(by_type.values())} ({self.first.get(name, '?')})"
            for name, by_type in ranked[:tools]
        ]
        if len(ranked) > tools:
            parts.append(f"and {len(ranked) - tools} more tools")
        return "; ".join(parts)


NO_TOOL_FAILURES: Final = ToolFailures()
"""No failed tool call (shared: the value is never changed)."""


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
    tool_failures: ToolFailures = NO_TOOL_FAILURES
    """The run's tool calls that failed (the model was told each time), by tool and error
    type, with the first error of each tool. A run can end ``ok`` with failed tool calls;
    ``Task(max_tool_failures=N)`` makes it fail past N."""
