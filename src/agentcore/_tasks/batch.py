"""The batch layer: a task over many inputs, results in input or completion order.

``run_batch`` and ``open_batch`` compile one agent loop per input (see :mod:`._task`), warm
the shared prefix with the backend's warm-up strategy (:mod:`._warmup`: one one-token request,
or for llama-server that request copied into every slot), and hand the loops to a driver. An
input that does not fit the task fails on its own (``status="failed"``,
``AbortKind.INVALID_INPUT``); nothing an input, a tool or the model does fails the batch.
``map_reduce`` chains three tasks: a plan whose output lists items, one map agent per item,
and a reduce agent over the answers.
"""

from __future__ import annotations

import itertools
import os
import secrets
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Generic, NamedTuple, TypeVar, cast

import attrs
import orjson
import trio

from .._backends.backend import Backend
from .._backends.tiers import carry_cost
from .._codecs.codec import WARM_UPS, WarmUp
from .._codecs.values import json_value
from .._core.budgets import UsageLimits
from .._core.caps import check_cap
from .._core.errors import ConfigError, JournalError, JournalMismatch
from .._core.events import AbortKind, AbortReason
from .._core.loop import AgentLoop
from .._core.messages import Usage
from .._core.results import Result, RunTimings
from .._core.slots import SlotPolicy
from .._driver.budget_guard import OnBudget
from .._driver.driver import Driver
from .._driver.journaling import encode_result
from .._driver.open import open_driver
from .._driver.options import DriverOptions, resolve_options
from .._driver.runs import ResultStream
from .._observe.log import BATCH
from .._observe.steps import StepSink
from .._tools.context import RunContext
from .._tools.spec import ToolBase
from .._transports.model_client import ModelClient
from .align import (
    PrefixAlignment,
    align_prefix,
    alignment_record,
    journaled_alignment,
    sample_inputs,
)
from .fingerprint import task_description
from .journal import SqliteJournal, open_step_journal
from .resume import restore
from .task import Deps_contra, RenderError, Task, common_opening, compile_job, job_run_id
from .warmup import BackendUnavailable, WarmUpReport, check_tier, warm_prefix
from .warmup import warm_up as warm_up_cache

T = TypeVar("T")
P = TypeVar("P")
M = TypeVar("M")
R = TypeVar("R")

__all__ = [
    "BatchStream",
    "MapReduceResult",
    "map_reduce",
    "open_batch",
    "run_batch",
    "warm_prefix",
]


ALIGNMENT_SETTING = "prefix_alignment"
"""The name under which a batch's step journal records the padding of its shared prefix."""

BATCH_SLOT_POLICY: SlotPolicy = "priority"
"""The slot policy of batches unless ``slot_policy=`` says otherwise: agents nearer the end
(higher turn) are served first, so results arrive from the start of the run instead of after
every agent's first turn (``bench/bench_slot_policy.py``, docs/benchmarks.md)."""


def new_batch_id() -> str:
    """A fresh batch id. Session ids derive from it, and servers (Dynamo) must not see a
    finished session id again, so every batch gets its own."""
    return "b" + secrets.token_hex(4)


def _invalid_input(index: int, error: RenderError, now: float) -> Result[Any]:
    return Result(
        index=index,
        status="failed",
        output=None,
        error=AbortReason(AbortKind.INVALID_INPUT, str(error)),
        transcript=(),
        usage=Usage(),
        timings=RunTimings(now, now, 0.0, 0.0, 0.0, (), 0),
        turns=0,
    )


class _Early(NamedTuple):
    """A result known before its run would start (an input the template refuses, a run the
    journal holds the end of), and whether it must still be journaled."""

    result: Result[Any]
    journal: bool = False


class BatchStream(Generic[T]):
    """Results of a batch in completion order; iterate with ``async for``.

    ``BatchStream[T]`` yields ``Result[T]`` for a ``Task[T]``. Each
    :class:`~agentcore.Result` carries its input's index. :meth:`cancel` ends every
    remaining run promptly with a ``cancelled`` result, which the iteration still delivers.
    """

    def __init__(
        self,
        results: ResultStream,
        indices: list[int],
        early: deque[_Early],
        warm_up: WarmUpReport | None = None,
        *,
        journal: SqliteJournal | None = None,
        batch_id: str = "",
    ) -> None:
        self._results = results
        self._indices = indices
        self._early = early
        self._journal = journal
        self._batch_id = batch_id
        self.warm_up = warm_up
        """What the warm-up did and the tokens its request used (those are in the driver's
        statistics and in no ``Result``), and how the shared prefix was aligned to the
        engine's cache blocks (``alignment``); ``None`` when the batch neither warmed up nor
        aligned."""

    def __aiter__(self) -> BatchStream[T]:
        return self

    async def __anext__(self) -> Result[T]:
        # The driver runs untyped loops; the task's output type is what the loop structured.
        if self._early:
            return await self._deliver(*self._early.popleft())
        try:
            result = await self._results.__anext__()
        except StopAsyncIteration:
            if self._early:
                return await self._deliver(*self._early.popleft())
            raise
        index = self._indices[result.index]
        if index != result.index:
            result = attrs.evolve(result, index=index)
        return cast("Result[T]", result)  # its run journaled it as it ended

    async def _deliver(self, result: Result[Any], journaled: bool) -> Result[T]:
        """An early ``result``, once the journal (if any) holds it when ``journaled`` (a run
        the journal took to its end): a run is compacted to its result before anyone sees
        it, so no result is lost between the two."""
        if journaled and self._journal is not None:
            run = job_run_id(self._batch_id, result.index)
            await self._journal.ended(run, encode_result(result))
        return cast("Result[T]", result)

    def cancel(self) -> None:
        """End every remaining run promptly (each reports ``cancelled``)."""
        self._results.cancel()


def _loops(  # noqa: PLR0917 - private helper, called twice
    task: Task[Any, Any],
    inputs: Iterable[Any],
    batch_id: str,
    indices: list[int],
    early: deque[_Early],
    parent_session_id: str | None,
    described: dict[int, tuple[int, Any]],
    schema_on_final: bool,
    journal: SqliteJournal | None = None,
    numbers: Iterable[int] | None = None,
    client: ModelClient | None = None,
) -> Iterator[AgentLoop]:
    # Consumed lazily by the driver, so a huge input list is never compiled all at once.
    # ``described`` holds each compiled loop's input until the driver opens its run (the
    # run's ``RunContext`` carries it), so it never holds more than the loops in hand.
    # ``numbers``: each input's index (default 0, 1, 2...); a journaled run resumes where its
    # journal left it, or is delivered from it.
    for index, value in zip(
        itertools.count() if numbers is None else numbers, inputs, strict=False
    ):
        try:
            loop = compile_job(
                task,
                value,
                run_id=job_run_id(batch_id, index),
                parent_session_id=parent_session_id,
                schema_on_final=schema_on_final,
            )
        except RenderError as exc:
            early.append(_Early(_invalid_input(index, exc, trio.current_time())))
            continue
        if journal is not None:
            where = f"{journal.path}, run {loop.run_id}"
            journaled = journal.take(loop.run_id)
            if client is not None and journaled.replies:
                carry_cost(client, loop.run_id, journaled.replies.values())
            restored = restore(loop, journaled, index, task.output, where, trio.current_time())
            if isinstance(restored, Result):
                early.append(_Early(restored, journaled.result is None))
                continue
            loop = restored
        described[len(indices)] = (index, value)
        indices.append(index)
        yield loop


def _first_checked(
    driver: Driver, inputs: Iterable[Any], deps: Any, batch_id: str
) -> Iterable[Any]:
    """``inputs``, once the context of the first run has been checked against the tools'
    ``replay_safe`` paths (a path that leads nowhere is a ``ConfigError`` before anything
    runs). Takes the first input only; a sequence is returned as it is, so the prefix
    alignment still samples it across (:func:`.align.sample_inputs`)."""

    def check(first: Any) -> None:
        run_id = job_run_id(batch_id, 0)
        context = RunContext(
            index=0,
            run_id=run_id,
            session_id=run_id,
            input=first,
            deps=driver.deps if deps is None else deps,
        )
        driver.executor.check_context(context)

    if isinstance(inputs, Sequence) and not isinstance(inputs, str | bytes):
        if inputs:
            check(inputs[0])
        return inputs
    values = iter(inputs)
    for first in values:
        check(first)
        return itertools.chain((first,), values)
    return ()


async def _prepare(  # noqa: PLR0917 - private helper
    driver: Driver,
    task: Task[T, Any],
    inputs: Iterable[object],
    batch_id: str,
    strategy: WarmUp,
    journal: SqliteJournal | None = None,
) -> tuple[Task[T, Any], Iterable[object], WarmUpReport | None]:
    """What a batch does before its fan-out: pad the shared prefix to the engine's cache
    blocks (:mod:`._align`, as the backend's ``align_prefix`` says; as the step ``journal``
    recorded when the batch resumes, else recorded there), then warm it with the text the
    inputs open with (a ``check`` warm-up, which carries no prefix, goes at the same time as
    the alignment), or check the flex tier when not warming. Returns the task to run (padded
    or not), the inputs to run (an iterator's sampled head chained back in) and the report
    (``None`` when the batch neither aligned nor warmed up).

    Raises:
        BackendUnavailable: the warm-up request failed for good.
        JournalError: the journal's record of the alignment is unreadable.
    """
    samples, inputs, every_input = sample_inputs(inputs)
    opening = common_opening(task, samples)
    aligned: list[tuple[Task[T, Any], PrefixAlignment | None]] = []
    checked: list[WarmUpReport] = []
    unavailable: list[BackendUnavailable] = []
    restored: tuple[Task[T, Any], PrefixAlignment | None] | None = None
    recorded = None if journal is None else journal.setting(ALIGNMENT_SETTING)
    if journal is not None and recorded is not None:
        try:
            restored = journaled_alignment(task, recorded)
        except ValueError as exc:
            raise JournalError(
                f"{journal.path}: the batch's prefix alignment is unreadable: {exc}"
            ) from None

    async def align() -> None:
        found = await align_prefix(
            driver,
            task,
            samples,
            opening=opening,
            every_input=every_input,
            warm=strategy in ("request", "slots"),
        )
        if journal is not None:  # before any step: a resumed batch pads as this one
            journal.record(ALIGNMENT_SETTING, alignment_record(found[1]))
        aligned.append(found)

    async def check() -> None:
        try:
            checked.append(await warm_up_cache(driver, task, batch_id=batch_id, strategy="check"))
        except BackendUnavailable as exc:  # raised once the alignment is done too
            unavailable.append(exc)

    async with trio.open_nursery() as nursery:
        if restored is None:
            nursery.start_soon(align)
        else:
            aligned.append(restored)
        if strategy == "check":
            nursery.start_soon(check)
    if unavailable:
        raise unavailable[0]
    run_task, alignment = aligned[0]
    report = checked[0] if checked else None
    if strategy not in ("off", "check"):
        report = await warm_up_cache(
            driver, run_task, batch_id=batch_id, strategy=strategy, opening=opening
        )
    elif strategy == "off":
        await check_tier(driver, run_task, batch_id=batch_id)
    if alignment is not None:
        report = attrs.evolve(report or WarmUpReport("off", "off"), alignment=alignment)
    return run_task, inputs, report


def _strategy(warm: bool | str | None, driver: Driver) -> WarmUp:
    """The warm-up to perform. ``None``: the strategy of the driver's backend (whether the
    driver was opened here or given); ``True``: that strategy, at least ``request``;
    ``False``: off."""
    configured = driver.backend.warm_up if driver.backend is not None else "off"
    if warm is None:
        return configured
    if warm is True:
        return "request" if configured in ("off", "check") else configured
    if warm is False:
        return "off"
    if warm not in WARM_UPS:
        raise ConfigError(f"warm must be a bool, None or one of {list(WARM_UPS)}; got {warm!r}")
    return warm


def _check_driver_tools(driver: Driver, tools: Sequence[ToolBase[Any]]) -> None:
    """Refuse a driver that lacks a task's tools: every call would fail as ``unknown_tool``
    while the runs still end ``ok``."""
    has = driver.executor.tools
    missing = [
        t.name if t.name not in has else f"{t.name} (the driver has another tool of that name)"
        for t in tools
        if has.get(t.name) is not t
    ]
    if missing:
        raise ConfigError(
            f"the driver was opened without the task's tools: {', '.join(missing)} "
            f"(it has: {', '.join(sorted(has)) or 'none'}); pass them to open_driver(tools=...)"
        )


@asynccontextmanager
async def _driver_for(
    stack_tools: Sequence[ToolBase[Any]],
    *,
    driver: Driver | None,
    backend: str | Backend | ModelClient | None,
    warm: bool | str | None,
    options: DriverOptions | None,
    keywords: Mapping[str, Any],
) -> AsyncIterator[tuple[Driver, WarmUp]]:
    """The given driver or a newly opened one, and the warm-up to perform (see
    :func:`_strategy`)."""
    if driver is not None:
        if backend is not None or options is not None or keywords:
            raise ConfigError("pass either driver= or backend options, not both")
        _check_driver_tools(driver, stack_tools)
        yield driver, _strategy(warm, driver)
        return
    opts = resolve_options(options, keywords)
    if backend is None:
        raise ConfigError("a backend is needed: pass backend= (a URL such as 'sim://') or driver=")
    if opts.slot_policy is None:
        opts = attrs.evolve(opts, slot_policy=BATCH_SLOT_POLICY)
    async with open_driver(backend, options=opts, tools=stack_tools) as opened:
        yield opened, _strategy(warm, opened)


@asynccontextmanager
async def open_batch(
    task: Task[T, Deps_contra],
    inputs: Iterable[object],
    *,
    backend: str | Backend | ModelClient | None = None,
    options: DriverOptions | None = None,
    driver: Driver | None = None,
    warm: bool | str | None = None,
    batch_id: str | None = None,
    timeout: float | None = None,
    max_active: int | None = None,
    budget: UsageLimits | None = None,
    on_budget: OnBudget = "finish",
    steps: StepSink | None = None,
    deps: Deps_contra | None = None,
    max_tool_concurrency: int | None = None,
    step_journal: str | os.PathLike[str] | SqliteJournal | None = None,
    indices: Sequence[int] | None = None,
    **driver_options: Any,
) -> AsyncIterator[BatchStream[T]]:
    """Run ``task`` over ``inputs``; results arrive in completion order.

    ::

        async with agentcore.open_batch(task, inputs, backend="sim://") as results:
            async for result in results:
                print(result.index, result.status, result.output)

    Args:
        task: what every agent does.
        inputs: one value per agent (mappings fill the template's placeholders); consumed
            lazily.
        backend: a backend URL (``sim://``, ``vllm://host:port``...), a ``Backend`` or a model
            client. Not needed when ``driver`` is given.
        options: the options of the driver opened here (:class:`~agentcore.DriverOptions`;
            ``slot_policy`` ``None`` means ``"priority"`` here: near-done agents first,
            earlier results, same wall time).
        driver: an open driver to use instead of opening one (its tools must include the
            task's).
        warm: warm the shared prefix before the fan-out: ``"off"``, ``"check"`` (vLLM:
            one one-token request without the prefix, only to check the backend),
            ``"request"`` (one one-token request carrying the prefix) or ``"slots"``
            (llama-server: that request's slot copied into every slot). ``None``: the
            strategy of the driver's backend (``backend(warm_up=...)``; off for hosted APIs
            and model clients), whether the driver is opened here or given; ``True``: that
            strategy, at least ``"request"``; ``False``: off. Before it, the shared prefix is
            padded to the engine's cache blocks where the backend's ``align_prefix`` says so
            (``BatchStream.warm_up.alignment``). A warm-up request that fails for good raises
            :class:`~agentcore.BackendUnavailable` before any agent runs.
        batch_id: the prefix of run and session ids (default: a fresh random id).
        timeout: seconds each agent may take.
        max_active: agents in progress at once (bounds memory for huge batches).
        budget: usage limits of the whole batch (:class:`~agentcore.UsageLimits`; the
            per-agent limits are ``Task.limits``). Once one has no room, no further agent
            starts; each remaining input reports ``failed`` with
            ``AbortKind.BUDGET_EXHAUSTED``.
        on_budget: ``"finish"`` lets the agents already going end on their own;
            ``"cancel"`` ends them at once with the budget as their reason.
        deps: any object, handed to tools that take a :class:`~agentcore.RunContext`
            (``ctx.deps``), with the run's index and input.
        steps: receives every agent's step events (``Driver.stream``; docs/watching.md).
        max_tool_concurrency: tool calls of the batch in progress at once, over all its agents
            and tools, at most (the others wait in the order they came, holding no
            inference slot; ``None``: no cap). docs/tools.md, "Caps".
        step_journal: a file (SQLite) where every agent's steps are journaled: created when
            absent; when present, the batch resumes from it: finished agents are delivered
            from it without running, the others go on from their last journaled step (a
            journaled reply is not requested again, a journaled tool result is not computed
            again). It fixes the batch id. docs/batch.md, "Resuming from the last step".
        indices: the index of each input (its results' ``index``, its run id and journal
            entry); default 0, 1, 2... Give the original indices when running part of a
            batch again.
        **driver_options: fields of :class:`~agentcore.DriverOptions` (``model=``,
            ``max_inflight=``...) replacing those of ``options``, or dialect options, as for
            :func:`agentcore.open_driver`.

    Yields:
        A :class:`BatchStream`. Leaving the block early cancels what is still running.

    Raises:
        ConfigError: ``driver`` lacks some of the task's tools, or options conflict.
        BackendUnavailable: the warm-up request failed for good (no agent was run).
        JournalLocked: another process has the ``step_journal`` open.
        JournalMismatch: the ``step_journal`` was written for another task or batch (the
            message names what differs), or in a format this version does not read.
        JournalError: the ``step_journal`` cannot be read or written (:class:`JournalFull`:
            the disk is full; every step committed before is kept).
    """
    check_cap("max_tool_concurrency", max_tool_concurrency)  # before any work
    numbers = None if indices is None else list(indices)
    if numbers is not None and len(set(numbers)) != len(numbers):
        raise ConfigError("indices must not repeat an index")
    order: list[int] = []  # the input index of each run the driver gets
    early: deque[_Early] = deque()
    if task.fallback:
        if driver is not None:
            raise ConfigError(
                "the task has fallbacks, but an open driver= was given: give the fallbacks "
                "to open_driver"
            )
        if "fallback" not in driver_options and (options is None or not options.fallback):
            driver_options = {**driver_options, "fallback": task.fallback}
    async with AsyncExitStack() as stack:
        journal: SqliteJournal | None = None
        if isinstance(step_journal, SqliteJournal):
            journal = step_journal
        elif step_journal is not None:
            journal = await stack.enter_async_context(
                open_step_journal(
                    step_journal,
                    task_description(task),
                    batch_id=batch_id,
                    new_batch_id=batch_id or new_batch_id(),
                )
            )
        if journal is not None:
            if journal.batch_id is None:
                raise JournalMismatch(f"{journal.path} records no batch: it is not a batch's")
            if batch_id is not None and journal.batch_id != batch_id:
                raise JournalMismatch(
                    f"{journal.path} was written for batch {journal.batch_id!r}, not {batch_id!r}"
                )
            batch_id = journal.batch_id
        batch_id = batch_id or new_batch_id()
        opened, warm_up = await stack.enter_async_context(
            _driver_for(
                task.tools,
                driver=driver,
                backend=backend,
                warm=warm,
                options=options,
                keywords=driver_options,
            )
        )
        inputs = _first_checked(opened, inputs, deps, batch_id)  # before anything is sent
        run_task, inputs, report = await _prepare(opened, task, inputs, batch_id, warm_up, journal)
        described: dict[int, tuple[int, Any]] = {}
        loops = _loops(
            run_task,
            inputs,
            batch_id,
            order,
            early,
            None,
            described,
            opened.schema_on_final,
            journal,
            numbers,
            opened.client,
        )
        group = opened.streams.group(
            steps=steps,
            deps=deps,
            describe=described.pop,
            budget=budget,
            on_budget=on_budget,
            max_tool_concurrency=max_tool_concurrency,
            journal=journal,
        )
        results = await stack.enter_async_context(
            opened.streams.open(loops, group, timeout=timeout, max_active=max_active)
        )
        BATCH.info("batch %s (%s) started", batch_id, task.name, extra={"batch_id": batch_id})
        yield BatchStream[T](results, order, early, report, journal=journal, batch_id=batch_id)
        stats = opened.statistics()
        BATCH.info(
            "batch %s (%s) ended: %d ok, %d failed, %d cancelled",
            batch_id,
            task.name,
            stats.runs_ok,
            stats.runs_failed + len(early),
            stats.runs_cancelled,
            extra={"batch_id": batch_id},
        )


async def run_batch(
    task: Task[T, Deps_contra],
    inputs: Iterable[object],
    *,
    backend: str | Backend | ModelClient | None = None,
    on_result: Callable[[Result[T]], None] | None = None,
    deps: Deps_contra | None = None,
    **keywords: Any,
) -> list[Result[T]]:
    """Run ``task`` over ``inputs`` and return one :class:`~agentcore.Result` per input, in
    input order. Takes the same options as :func:`open_batch` (``options=`` a
    :class:`~agentcore.DriverOptions`, and the keywords).

    Args:
        on_result: called with each result as it completes (for progress reporting).
    """
    collected: list[Result[T]] = []
    async with open_batch(task, inputs, backend=backend, deps=deps, **keywords) as results:
        async for result in results:
            collected.append(result)
            if on_result is not None:
                on_result(result)
    collected.sort(key=lambda r: r.index)
    return collected


class MapReduceResult(NamedTuple, Generic[P, M, R]):
    """The three stages of :func:`map_reduce`. Unpacks as ``plan, answers, summary``.

    ``MapReduceResult[P, M, R]`` holds the results of a ``Task[P]`` plan, ``Task[M]`` map
    agents and a ``Task[R]`` reducer; unpacked, each name keeps its own type.
    """

    plan: Result[P]
    answers: tuple[Result[M], ...]
    """One result per planned item, in plan order (failed ones included)."""
    summary: Result[R] | None
    """The reduce agent's result; ``None`` when the plan failed."""


def _default_items(output: Any) -> list[Any]:
    """The items of a plan output: itself if it is a list, else its first list-valued field."""
    if isinstance(output, list | tuple):
        return list(output)
    if attrs.has(type(output)):
        for field in attrs.fields(type(output)):
            value = getattr(output, field.name)
            if isinstance(value, list | tuple):
                return list(value)
    raise ConfigError(
        f"cannot find the items of a plan output of type {type(output).__name__}: "
        "give map_reduce an items= function"
    )


async def map_reduce(
    *,
    plan: Task[P, Deps_contra],
    map: Task[M, Deps_contra],
    reduce: Task[R, Deps_contra],
    input: object,
    items: Callable[[P], Iterable[object]] | None = None,
    backend: str | Backend | ModelClient | None = None,
    options: DriverOptions | None = None,
    driver: Driver | None = None,
    warm: bool | str | None = None,
    batch_id: str | None = None,
    timeout: float | None = None,
    deps: Deps_contra | None = None,
    **driver_options: Any,
) -> MapReduceResult[P, M, R]:
    """Plan, then map over the plan's items, then reduce the answers.

    - ``plan`` runs once on ``input``; its output lists the items (``items(output)``, by
      default the output itself when it is a list, else its first list-valued field).
    - ``map`` runs once per item (an item that is a mapping fills the template's
      placeholders, anything else fills ``{input}``); map agents carry the plan's session id
      as their parent session.
    - ``reduce`` runs once with ``{input}`` (the original input), ``{answers}`` (the JSON
      list of successful map outputs) and ``{failed}`` (how many items failed).

    A failed item never fails the whole: the reducer sees the answers that exist. The driver
    (``backend``, ``options``, ``driver``, ``**driver_options``) is as for :func:`open_batch`.

    Returns:
        ``MapReduceResult(plan, answers, summary)``; unpack it as a tuple.
    """
    batch_id = batch_id or new_batch_id()
    tools: dict[str, ToolBase[Any]] = {}
    for stage in (plan, map, reduce):
        for t in stage.tools:
            tools.setdefault(t.spec.name, t)
    async with _driver_for(
        list(tools.values()),
        driver=driver,
        backend=backend,
        warm=warm,
        options=options,
        keywords=driver_options,
    ) as (opened, warm_up):

        async def run_once(task: Task[T, Deps_contra], value: object, hop: str) -> Result[T]:
            """``task`` on one input, as the batch ``{batch_id}{hop}`` on the opened driver."""
            results = await run_batch(
                task,
                [value],
                driver=opened,
                warm=False,
                batch_id=f"{batch_id}{hop}",
                timeout=timeout,
                deps=deps,
            )
            return results[0]

        plan_result = await run_once(plan, input, "p")
        if plan_result.status != "ok":
            return MapReduceResult(plan_result, (), None)
        split: Callable[[P], Iterable[object]] = items or _default_items
        planned = list(split(cast("P", plan_result.output)))
        indices: list[int] = []
        early: deque[_Early] = deque()
        mapper, items_run, _ = await _prepare(opened, map, planned, f"{batch_id}m", warm_up)
        answers: list[Result[M]] = []
        described: dict[int, tuple[int, Any]] = {}
        planner = job_run_id(f"{batch_id}p", 0)
        loops = _loops(
            mapper,
            items_run,
            f"{batch_id}m",
            indices,
            early,
            planner,
            described,
            opened.schema_on_final,
        )
        group = opened.streams.group(deps=deps, describe=described.pop)
        async with opened.streams.open(loops, group, timeout=timeout) as stream:
            async for result in BatchStream[M](stream, indices, early):
                answers.append(result)
        answers.sort(key=lambda r: r.index)
        ok = [json_value(r.output) for r in answers if r.status == "ok"]
        reduce_input = {
            "input": input,
            "answers": orjson.dumps(ok, option=orjson.OPT_INDENT_2).decode(),
            "failed": sum(r.status != "ok" for r in answers),
        }
        reduced = await run_once(reduce, reduce_input, "r")
        return MapReduceResult(plan_result, tuple(answers), reduced)
