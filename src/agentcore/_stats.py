"""Frozen statistics values of the driver, and the percentile helper behind their summaries.

Everything here is a plain value: :meth:`Driver.statistics` builds a fresh
:class:`DriverStatistics` from the driver's counters each time it is called, so a value can be
kept, compared and logged without changing under the caller.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import attrs

from ._events import ErrorKind
from ._slot_limiter import SlotStatistics
from ._tool_executor import ToolExecutorStatistics

__all__ = ["DriverStatistics", "RequestStats", "Summary", "percentile"]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile of ``values`` (``0 <= q <= 100``), ``None`` when empty.

    Linear interpolation between the two nearest ranks (the default of NumPy and of
    ``statistics.quantiles(method="inclusive")``): the 0th percentile is the minimum, the
    100th the maximum, and the 50th the median.

    Raises:
        ValueError: ``q`` is outside ``[0, 100]``.
    """
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be within [0, 100], got {q}")
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    fraction = position - low
    return ordered[low] + (ordered[high] - ordered[low]) * fraction


@attrs.frozen
class Summary:
    """The distribution of one measurement (seconds), ``None`` fields when nothing was measured."""

    count: int = 0
    mean: float | None = None
    p50: float | None = None
    p95: float | None = None
    max: float | None = None

    @classmethod
    def of(cls, values: Iterable[float]) -> Summary:
        """Summarise ``values``."""
        data = list(values)
        if not data:
            return cls()
        return cls(
            count=len(data),
            mean=sum(data) / len(data),
            p50=percentile(data, 50.0),
            p95=percentile(data, 95.0),
            max=max(data),
        )


@attrs.frozen
class RequestStats:
    """One model request (a ``CallModel``), over all its attempts."""

    request_id: str
    index: int | None
    """The agent's index, ``None`` for a request made through ``Driver.call_model``."""
    attempts: int
    slot_wait: float
    """Seconds spent waiting for a slot, over all attempts."""
    latency: float
    """Seconds the last attempt's exchange took (a slot was held throughout)."""
    elapsed: float
    """Seconds from the first slot request to the final event (waits and back-offs included)."""
    ttft: float | None
    """Time to first token of the last attempt (streamed replies only)."""
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None
    """``None`` when the server did not say."""
    error: ErrorKind | None
    """Why the request failed for good, ``None`` when it succeeded."""
    finish_reason: str | None = None
    """The reply's finish reason (``stop``, ``tool_calls``, ``length``...), when it said."""


@attrs.frozen
class DriverStatistics:
    """A snapshot of everything a driver measured since it was opened."""

    wall_time: float
    """Seconds since the driver opened."""
    runs: int
    """Agent runs that ended (any status)."""
    runs_ok: int
    runs_failed: int
    runs_cancelled: int
    requests: tuple[RequestStats, ...]
    """Every model request, in completion order."""
    attempts: int
    """HTTP exchanges made, retries included."""
    failed_requests: int
    latency: Summary
    """Of the final attempt of each request."""
    ttft: Summary
    slot_wait: Summary
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    """Summed over the requests whose cached count is known."""
    cached_ratio: float | None
    """Cached / prompt tokens over the requests whose cached count is known (``None`` if
    none is): the share of prompt tokens served from the prefix cache."""
    truncated_replies: int
    """Replies cut by the token limit (``finish_reason == "length"``)."""
    tool_calls: int
    """Tool calls answered by the executor."""
    tool_executions: int
    """Tool function executions started (coalesced and cached calls do not execute)."""
    dedup_ratio: float | None
    """``1 - executions / calls``: the share of tool calls that did not need their own
    execution (``None`` before the first call)."""
    tools: ToolExecutorStatistics
    """The tool executor's own statistics value."""
    slots: SlotStatistics
    slot_utilisation: float | None
    """Busy slot-seconds / (``max_inflight`` x wall time)."""
