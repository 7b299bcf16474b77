"""Frozen statistics values of the driver, and the bounded aggregates behind their summaries.

Everything public here is a plain value: :meth:`Driver.statistics` builds a fresh
:class:`DriverStatistics` from the driver's counters each time it is called, so a value can be
kept, compared and logged without changing under the caller.

A driver may stay open for days, so nothing it keeps grows with the number of requests:
each measured quantity is a :class:`Distribution` (exact count, mean and maximum, and a
DDSketch for the percentiles, within :data:`RELATIVE_ACCURACY` of the exact value), and only
the last :data:`RECENT_REQUESTS` requests are kept in detail.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence

import attrs
from ddsketch import LogCollapsingLowestDenseDDSketch

from .._core.cost import CostReport
from .._core.events import ErrorKind
from .._core.results import Status
from .._tools.executor import ToolExecutorStatistics
from .rate_limiter import RateLimiterStatistics
from .slot_limiter import SlotStatistics

__all__ = [
    "Distribution",
    "DriverStatistics",
    "RECENT_REQUESTS",
    "RELATIVE_ACCURACY",
    "RequestStats",
    "RequestTotals",
    "Summary",
    "TURN_BUCKETS",
    "TurnCache",
    "collect",
    "percentile",
]

RELATIVE_ACCURACY = 0.01
"""Percentiles of :meth:`Distribution.summary` are within 1 % of the exact value of their rank."""

RECENT_REQUESTS = 100
"""How many of the latest requests :attr:`DriverStatistics.recent_requests` keeps in detail."""

_BIN_LIMIT = 2048
"""Sketch bins at most (a sketch then holds at most about 64 KiB); past it the *lowest* bins
merge, so the accuracy of the high percentiles is kept. At 1 % accuracy 2048 bins span 17
orders of magnitude, so in practice nothing merges."""


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
    """The distribution of one measurement (seconds), ``None`` fields when nothing was measured.

    In :class:`DriverStatistics`, ``count``, ``mean`` and ``max`` are exact and the
    percentiles are within 1 % (:data:`RELATIVE_ACCURACY`) of the exact value of their rank;
    :meth:`Summary.of` computes every field exactly.
    """

    count: int = 0
    mean: float | None = None
    p50: float | None = None
    p95: float | None = None
    max: float | None = None
    p99: float | None = None

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
            p99=percentile(data, 99.0),
        )


class Distribution:
    """A bounded, mergeable record of one measurement: O(1) memory whatever the count.

    Count, mean and maximum are exact; percentiles come from a DDSketch (the ``ddsketch``
    library) and are within :data:`RELATIVE_ACCURACY` of the exact value of their rank.
    """

    __slots__ = ("_count", "_max", "_sketch", "_total")

    def __init__(self) -> None:
        self._count = 0
        self._total = 0.0
        self._max = -math.inf
        self._sketch = LogCollapsingLowestDenseDDSketch(RELATIVE_ACCURACY, _BIN_LIMIT)

    @property
    def count(self) -> int:
        """Values added."""
        return self._count

    def add(self, value: float) -> None:
        """Record ``value``."""
        self._count += 1
        self._total += value
        self._max = max(self._max, value)
        self._sketch.add(value)

    def merge(self, other: Distribution) -> None:
        """Add every value of ``other`` to this one (``other`` is left as it was)."""
        if other._count == 0:
            return
        self._count += other._count
        self._total += other._total
        self._max = max(self._max, other._max)
        self._sketch.merge(other._sketch)

    def quantile(self, q: float) -> float | None:
        """The ``q``-quantile (``0 <= q <= 1``), ``None`` when nothing was added."""
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile must be within [0, 1], got {q}")
        if self._count == 0:
            return None
        value = self._sketch.get_quantile_value(q)
        # The sketch answers with its bin's representative, which may exceed the maximum.
        return None if value is None else min(float(value), self._max)

    def summary(self) -> Summary:
        """A :class:`Summary` of what was added."""
        if self._count == 0:
            return Summary()
        return Summary(
            count=self._count,
            mean=self._total / self._count,
            p50=self.quantile(0.5),
            p95=self.quantile(0.95),
            max=self._max,
            p99=self.quantile(0.99),
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
    backend: str = ""
    """The backend that made it, with model fallback (``""`` without): a request that fell
    over has one entry per backend it visited."""

    finish_reason: str | None = None
    """The reply's finish reason (``stop``, ``tool_calls``, ``length``...), when it said."""


TURN_BUCKETS = 16
"""Turns the per-turn cache counters keep apart; later turns share the last bucket."""


@attrs.frozen
class TurnCache:
    """The prefix cache as seen by the requests of one turn index (0 = every run's first)."""

    turn: int
    """0-based request index within a run; the last bucket (``TURN_BUCKETS - 1``) also holds
    every later turn."""
    requests: int
    """Requests of this turn whose reply said how many prompt tokens were cached."""
    prompt_tokens: int
    cached_tokens: int

    @property
    def ratio(self) -> float | None:
        """Cached / prompt tokens (``None`` for no prompt tokens)."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None


_RequestFields = tuple[
    str, int | None, int, float, float, float, float | None, int, int, int | None,
    ErrorKind | None, str, str | None,
]  # fmt: skip
"""The fields of one :class:`RequestStats`, in order."""


class RequestTotals:
    """Aggregates of every finished model request: counters, bounded distributions, the
    latest requests in detail and, with model fallback, the successes per backend. Its size
    does not grow with the number of requests (the backends are the configured ones)."""

    def __init__(self) -> None:
        self.attempts = 0
        """Exchanges made, retries included."""
        self.requests = 0
        """Requests that ended."""
        self.failed = 0
        """Requests that failed for good."""
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cached_tokens = 0
        """Summed over the requests whose cached count is known."""
        self.known_prompt_tokens = 0
        """Prompt tokens of the requests whose cached count is known."""
        self.latency = Distribution()
        self.ttft = Distribution()
        self.slot_wait = Distribution()
        self._recent: deque[_RequestFields] = deque(maxlen=RECENT_REQUESTS)
        """The fields of the latest requests (a ``RequestStats`` each once read)."""
        self.served_by: dict[str, int] = {}
        """Successful requests per backend name (model fallback only)."""
        self.truncated = 0
        """Replies cut by the token limit (``finish_reason == "length"``)."""
        self._turns: list[list[int]] = []
        """Per turn index: requests, prompt tokens, cached tokens (known counts only)."""

    def add_turn(self, turn: int, prompt_tokens: int, cached_tokens: int | None) -> None:
        """Count a reply of turn ``turn`` in the per-turn cache counters (ignored when the
        server did not say how many prompt tokens were cached)."""
        if cached_tokens is None:
            return
        bucket = min(max(turn, 0), TURN_BUCKETS - 1)
        turns = self._turns
        while len(turns) <= bucket:
            turns.append([0, 0, 0])
        counts = turns[bucket]
        counts[0] += 1
        counts[1] += prompt_tokens
        counts[2] += cached_tokens

    def cache_by_turn(self) -> tuple[TurnCache, ...]:
        """The per-turn cache counters, turn 0 first (turns no reply reported are left out)."""
        return tuple(
            TurnCache(turn, *counts) for turn, counts in enumerate(self._turns) if counts[0]
        )

    @property
    def recent(self) -> tuple[RequestStats, ...]:
        """The latest requests in detail, oldest first."""
        return tuple(RequestStats(*fields) for fields in self._recent)

    def add(self, request: _RequestFields, turn: int = 0) -> None:
        """Count one finished request of turn ``turn``, given the fields of its
        :class:`RequestStats` in order (the value is built only when :attr:`recent` is read);
        a known cached count also goes to the per-turn counters (:meth:`add_turn`)."""
        (_, _, _, slot_wait, latency, _, ttft, prompt_tokens, completion_tokens, cached_tokens,
         error, backend, finish_reason) = request  # fmt: skip
        self.requests += 1
        if error is not None:
            self.failed += 1
        elif backend:
            self.served_by[backend] = self.served_by.get(backend, 0) + 1
        if finish_reason == "length":
            self.truncated += 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        if cached_tokens is not None:
            self.cached_tokens += cached_tokens
            self.known_prompt_tokens += prompt_tokens
            self.add_turn(turn, prompt_tokens, cached_tokens)
        self.latency.add(latency)
        self.slot_wait.add(slot_wait)
        if ttft is not None:
            self.ttft.add(ttft)
        self._recent.append(request)


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
    requests: int
    """Model requests that ended (``CallModel`` effects and ``call_model`` calls)."""
    recent_requests: tuple[RequestStats, ...]
    """The last :data:`RECENT_REQUESTS` model requests in detail, in completion order."""
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
    """Busy slot-seconds / (``max_inflight`` x wall time); on a Batch API backend, whose slots
    are not a capacity (a hop takes every waiting call), / (the most calls in flight at once x
    wall time): the share of the peak hop kept in flight, as the timeline picture draws it."""
    served_by: Mapping[str, int] = attrs.field(factory=dict)
    """With model fallback: requests answered, per backend name (empty without fallback)."""
    rates: RateLimiterStatistics | None = None
    """Request and token limits in force, waits for budget and 429s."""
    cost: CostReport | None = None
    """Tokens per service tier, their cost and the saving against the standard tier
    (``None`` unless a backend of the driver has a service tier or is a Batch API backend, or
    the driver was given prices: ``docs/batch.md``)."""
    cache_by_turn: tuple[TurnCache, ...] = ()
    """The prefix cache per turn index (cached / prompt tokens of every run's first request,
    second request...): from the second turn on, a server with prefix caching should report
    nearly all of a request's prompt cached (its history is the previous request's prompt and
    reply, replayed byte for byte)."""


def collect(  # noqa: PLR0917 - one call site, the driver's
    wall: float,
    ends: Mapping[Status, int],
    requests: RequestTotals,
    tools: ToolExecutorStatistics,
    slots: SlotStatistics,
    rates: RateLimiterStatistics,
    cost: CostReport | None,
    *,
    batch_api: bool = False,
) -> DriverStatistics:
    """A driver's :class:`DriverStatistics` over ``wall`` seconds: its runs' ends by status,
    its request totals and the statistics of its parts (``batch_api``: the backend is a Batch
    API, whose utilisation is counted against its peak, see
    :attr:`DriverStatistics.slot_utilisation`)."""
    known_prompt = requests.known_prompt_tokens
    cached = requests.cached_tokens
    capacity = (slots.peak_in_use if batch_api else slots.max_inflight) * wall
    return DriverStatistics(
        wall_time=wall,
        runs=sum(ends.values()),
        runs_ok=ends["ok"],
        runs_failed=ends["failed"],
        runs_cancelled=ends["cancelled"],
        requests=requests.requests,
        recent_requests=requests.recent,
        attempts=requests.attempts,
        failed_requests=requests.failed,
        latency=requests.latency.summary(),
        ttft=requests.ttft.summary(),
        slot_wait=requests.slot_wait.summary(),
        prompt_tokens=requests.prompt_tokens,
        completion_tokens=requests.completion_tokens,
        cached_tokens=cached,
        cached_ratio=cached / known_prompt if known_prompt else None,
        truncated_replies=requests.truncated,
        tool_calls=tools.requests,
        tool_executions=tools.executions,
        dedup_ratio=tools.dedup_ratio if tools.requests else None,
        tools=tools,
        slots=slots,
        slot_utilisation=slots.busy_time / capacity if capacity > 0 else None,
        served_by=dict(requests.served_by),
        rates=rates,
        cost=cost,
        cache_by_turn=requests.cache_by_turn(),
    )
