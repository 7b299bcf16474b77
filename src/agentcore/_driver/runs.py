"""The bookkeeping of runs in progress: :class:`Run`, :class:`Group`, and the queue and stream
of a batch's results."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from .._core.budgets import BudgetExceeded
from .._core.events import CallModel, CallTool, Effect, ModelFailed, ModelResponded, ToolFailed
from .._core.journal import StepJournal
from .._core.loop import AgentLoop
from .._core.ratebudget import Reservation
from .._core.replay import HistoryDigest
from .._core.results import Result
from .._tools.caps import Cap
from .._tools.context import RunContext
from .slot_limiter import Parked, Slot

__all__ = [
    "BatchGuard",
    "Granted",
    "Group",
    "Ready",
    "ResultQueue",
    "ResultStream",
    "Run",
    "RunFeed",
]

if TYPE_CHECKING:
    from .._observe.steps import StepSink

Granted = tuple[Slot, Reservation | None]
"""A slot taken for a request's first attempt, with its rate reservation."""


@attrs.define(eq=False)
class Ready:
    """An item of a feed's ready line: a run that can go on, and where it resumes.

    One is built per resumption (a plain slotted record, not a frozen value: building a frozen
    attrs instance costs several times as much).
    """

    run: Run
    effects: tuple[Effect, ...] | None = None
    """``None``: the run resumes from its start; else its pending request."""
    granted: Granted | None = None
    """The slot (and rate reservation) granted for ``effects``, if any."""
    woken: bool = False
    """It was withdrawn from the slot line without a slot (cancelled or past its deadline)."""


class RunFeed(Protocol):
    """What the runs of a result stream need of the feed carrying them
    (:class:`~agentcore._driver.feed.Feed`; typed here so this module imports no module that
    imports it)."""

    def push(self, ready: Ready) -> None: ...

    def parked(self, parked: Parked, deadline: float) -> None: ...

    def abandon(self) -> list[Ready]: ...


class BatchGuard(Protocol):
    """What the runs of a batch with a usage budget need of its guard
    (:class:`~agentcore._driver.budget_guard.BudgetGuard`)."""

    def refuses_run(self) -> BudgetExceeded | None: ...

    async def before_request(self, run: Run, call: CallModel) -> None: ...

    def after_request(self, event: ModelResponded | ModelFailed) -> None: ...

    def release(self, call: CallModel) -> None: ...

    async def before_tool_call(self, call: CallTool) -> ToolFailed | None: ...


@attrs.define(eq=False)
class Run:
    """The mutable bookkeeping of one run, owned by its task."""

    index: int
    loop: AgentLoop
    scope: trio.CancelScope | None
    """The cancel scope of the run's task (``None`` while it has none: parked for a slot)."""
    started: float
    deadline: float = math.inf
    cancelled: bool = False
    parked: Parked | None = None
    """The run's place in the slot line while it waits there without a task."""
    admitted: bool = False
    """The run holds room in its stream's ``max_active`` limiter."""
    feed: RunFeed | None = None
    """The feed carrying the run (runs of a result stream)."""
    reservation: Reservation | None = None
    """The rate reservation of the request the run is parked with."""
    pending_model: CallModel | None = None
    turns: int = 0
    attempts: int = 0
    model_time: float = 0.0
    slot_wait: float = 0.0
    ttft: tuple[float | None, ...] = ()
    """Time to first token of each request so far (a tuple: no list object per run)."""
    tools_running: int = 0
    tools_since: float = 0.0
    tool_time: float = 0.0
    guard: BatchGuard | None = None
    """The batch's usage budget, when it has one."""
    served_by: list[str] | None = None
    """With model fallback: the backend of each request so far."""
    budget: BudgetExceeded | None = None
    """The batch budget that ran out, when that is why the run was cancelled."""

    steps: StepSink | None = None
    """Where the run's step events go (``None``: not observed, nothing is built)."""
    id: int = 0
    """The run's id in its step events: unique among its driver's runs."""
    input_index: int | None = None
    """The index of the run's input in the caller's inputs (``None``: ``index``)."""
    input: Any = None
    """The run's input, as the caller gave it (any value)."""
    deps: Any = None
    """The ``deps`` handed to tools (any value the caller gave)."""
    context: RunContext[Any] | None = None
    """Built on the first call of a tool that takes it."""
    tool_cap: Cap | None = None
    """The batch's cap on tool calls in progress at once (``max_tool_concurrency``)."""
    journal: StepJournal | None = None
    """Where the run's steps are journaled (``None``: nowhere)."""

    def tool_context(self) -> RunContext[Any]:
        """The :class:`RunContext` handed to tools that take one."""
        context = self.context
        if context is None:
            config = self.loop.config
            context = self.context = RunContext(
                index=self.index if self.input_index is None else self.input_index,
                run_id=config.run_id,
                session_id=config.session_id,
                input=self.input,
                deps=self.deps,
                history=_ToolHistory(self.loop),
            )
        return context

    def cancel(self) -> None:
        self.cancelled = True
        if self.scope is not None:
            self.scope.cancel()
        parked = self.parked
        if parked is not None:
            self.parked = None
            parked.withdraw()  # wakes the run with no slot: it ends as cancelled

    def tool_started(self) -> None:
        if self.tools_running == 0:
            self.tools_since = trio.current_time()
        self.tools_running += 1

    def tool_ended(self) -> None:
        self.tools_running -= 1
        if self.tools_running == 0:
            self.tool_time += trio.current_time() - self.tools_since


class _ToolHistory:
    """The digest of a run's tool calls and results before the turn in progress, for its
    :class:`RunContext` (``replay_safe=("history",)`` keys): folded incrementally from the
    first call that asks for it (made with the context, so a run holds nothing for it)."""

    __slots__ = ("_digest", "_loop")

    def __init__(self, loop: AgentLoop) -> None:
        self._loop = loop
        self._digest: HistoryDigest | None = None

    def __call__(self) -> str:
        digest = self._digest
        if digest is None:
            digest = self._digest = HistoryDigest()
        # The last message is the reply that asked for this turn's calls.
        transcript = self._loop.transcript
        return digest.up_to(transcript, max(digest.digested, len(transcript) - 1))


@attrs.define(eq=False)
class Group:
    """Runs that are cancelled together (one batch, or the whole driver)."""

    runs: set[Run] = attrs.field(factory=set)
    cancelled: bool = False
    guard: BatchGuard | None = None
    """The usage budget of a batch that has one."""

    steps: StepSink | None = None
    """Where the step events of the group's runs go, if anywhere."""
    deps: Any = None
    """The ``deps`` of the group's runs (``None``: the driver's)."""
    describe: Callable[[int], tuple[int, Any]] | None = None
    """Maps a run's index to its input's index and the input (called once per run)."""
    tool_cap: Cap | None = None
    """The cap on the group's tool calls in progress at once, over all tools."""
    journal: StepJournal | None = None
    """Where the steps of the group's runs are journaled (``None``: nowhere)."""
    feed: RunFeed | None = None
    """The feed carrying the runs of a result stream (once the stream has started)."""

    def cancel(self) -> None:
        self.cancelled = True
        for run in list(self.runs):
            run.cancel()


class ResultQueue:
    """The results of one stream that its consumer has not taken yet, in completion order.

    Runs put their results here as they end, from whichever task ends them, without waiting
    for the consumer (a slow consumer holds no slot or task back); :class:`ResultStream`
    takes them. ``close()`` says no result will follow.
    """

    __slots__ = ("_closed", "_items", "_taken", "_waiting")

    def __init__(self) -> None:
        self._items: deque[Result] = deque()
        self._waiting = trio.lowlevel.ParkingLot()
        self._closed = False
        self._taken = 0

    def put(self, result: Result) -> None:
        """Add a result, waking the consumer if it waits."""
        self._items.append(result)
        if self._waiting:
            self._waiting.unpark()

    def close(self) -> None:
        """No result will follow: the consumer ends its iteration once it has taken the rest."""
        self._closed = True
        self._waiting.unpark_all()

    async def take(self) -> Result | None:
        """The next result, waiting for one if needed; ``None`` once closed and empty.

        A result already there is taken without a task switch, but once per
        :data:`_YIELD_EVERY` such results the consumer yields to other tasks: it keeps up
        with many runs ending at once, yet never holds the scheduler for long.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        items = self._items
        if items:
            result = items.popleft()
            self._taken += 1
            if self._taken % _YIELD_EVERY == 0:
                await trio.lowlevel.cancel_shielded_checkpoint()
            return result
        while not items:
            if self._closed:
                return None
            await self._waiting.park()
        return items.popleft()


_YIELD_EVERY = 64


class ResultStream:
    """Results of a batch in completion order; iterate with ``async for``.

    Made by :meth:`Driver.stream`. The iteration ends once every run has reported.
    """

    def __init__(self, queue: ResultQueue, group: Group) -> None:
        self._queue = queue
        self._group = group

    def __aiter__(self) -> ResultStream:
        return self

    async def __anext__(self) -> Result:
        result = await self._queue.take()
        if result is None:
            raise StopAsyncIteration
        return result

    def cancel(self) -> None:
        """End every run of this batch promptly.

        Runs still going (or not started yet) report a ``cancelled`` result; results that
        finished before stay as they were. Iteration goes on until every run has reported.
        """
        self._group.cancel()

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` (or :meth:`Driver.cancel`) was called."""
        return self._group.cancelled
