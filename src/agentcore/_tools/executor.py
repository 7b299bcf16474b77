"""The trio tool executor: runs ``CallTool`` effects and answers ``ToolReturned``/``ToolFailed``.

Theory of operation
-------------------
One executor serves every agent of a driver. ``call(effect)`` goes through these steps:

1. *Lookup and validation.* An unknown tool name, or arguments the tool's validator rejects,
   become ``ToolFailed`` at once (``unknown_tool`` / ``invalid_arguments``). Arguments are
   validated here even if the loop validated them already: a ``CallTool`` may come from a
   deserialised effect, and model-supplied input is untrusted wherever it comes from.
2. *Reuse* (tools declared ``replay_safe=...`` or ``cache=True`` only). A successful result
   kept for the same key and not yet expired (``ttl``, in trio time) answers the call without
   running anything. The key is the coalescing key below plus, for a tool declaring context
   fields, their canonical values and, if declared, the run's tool-history digest
   (:mod:`agentcore._core.replay`, the safety rule): runs that differ in a declared field
   never share a result, and a call whose declared field has no canonical value, or leads
   nowhere, gets no key and runs on its own. The first call of each input and deps type
   checks that every declared path leads somewhere (``ConfigError`` if not: a typo would key
   every run alike). Failures are never kept. The store holds at most ``cache_size``
   results over all tools; past it the least recently used one is dropped.
3. *Coalescing* (tools declared ``coalesce=True``, ``cache=True`` or ``replay_safe`` only: a
   tool with side effects must run once per call). A tool that takes the
   :class:`~agentcore.RunContext` and shares must declare ``replay_safe`` (the tool refuses
   otherwise), and shares only under its full reuse key, also with ``cache=False``; a shared
   execution sees the context of the call that started it. The key is the tool name plus the
   canonical JSON of the validated arguments. The pure :class:`SingleflightTable` decides
   whether this call *leads* (it starts the one shared execution, in a task of the
   executor's nursery) or *joins* an execution already in flight. Either way the caller then
   parks until the execution hands it the outcome: every waiter gets the same result or the
   same error. When the execution ends the key is forgotten: coalescing shares work that is
   in the air, it never replays old results (that is what step 2 is for, and only where
   declared). A waiter that is cancelled (its run's deadline, its batch cancelled) leaves the
   flight at once, the leader included; the execution goes on for the others, and it is
   cancelled only when its last waiter is gone, so a flight starts the tool exactly once.
   The execution's own task is the price of that (one task per shared execution, none per
   waiter). With ``coalesce=False`` the execution runs in the caller's own task, once per
   call.
4. *Limits*, per execution and in this order: the tool's ``max_concurrency`` cap (a
   :class:`~agentcore._tools.caps.Cap`, FIFO; a wait for it is told to the call's
   :class:`CallReport`, which reports it as a ``ToolWaited`` step event), then a token from
   its rate limiter (a token bucket in trio time, FIFO), then the ``timeout`` clock starts.
   Time spent queueing for the cap or a token does not count against the timeout. (The
   per-turn and per-batch caps are the runner's: they are waited for before the call gets
   here.)
5. *Running.* ``async def`` tools run in the execution's task. Plain functions run in a
   worker thread (``trio.to_thread.run_sync``) bounded by one limiter shared by all sync
   tools (``thread_limit``). A thread cannot be killed, so each thread is owned by a small
   *keeper* task in the executor's nursery that waits for it uninterruptibly. When a sync
   tool's caller gives up (timeout, or its last waiter was cancelled) the caller gets its
   answer at once, the keeper is cancelled (a thread not yet started is then never started;
   a running thread sees the cancellation through ``trio.from_thread.check_cancelled()`` if
   it cares to look), and the thread's eventual result is dropped. The thread keeps its slot
   of the thread limiter until it returns, so hung threads cannot pile up beyond
   ``thread_limit``, and closing the executor waits for every thread it started: no thread
   outlives the ``async with`` block. ``statistics()`` reports running and abandoned threads.
6. *Outcome.* A return value becomes text (:func:`encode_result`); an ``Exception`` becomes
   ``ToolError(type(exc).__name__, str(exc))``; a timeout becomes ``ToolError("timeout", ...)``.
   ``BaseException`` (``trio.Cancelled``, ``KeyboardInterrupt``) is never caught, and a failing
   tool never disturbs other executions or the executor. A failed execution also tells the
   call that ran it (its :class:`CallReport`) the exception, with its traceback, and how many
   executions of the tool have failed so far, this one included: the log lines are bounded
   by that count (:mod:`agentcore._observe.log_sink`).
"""

from __future__ import annotations

import types
import typing
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Literal, final

import attrs
import trio

from .._codecs.values import json_value
from .._core.errors import ConfigError
from .._core.events import CallTool, ToolError, ToolFailed, ToolReturned
from .._core.replay import ResultStore, replay_key
from .._core.schema import ValidationFailed
from .._core.singleflight import SingleflightTable, tool_key
from .._core.tokenbucket import TokenBucket
from .._observe.steps import ToolCap
from .caps import Cap
from .context import MISSING, RunContext, context_value, for_call, history_of, value_path_problem
from .spec import HISTORY, AnyTool, Tool, encode_result

__all__ = [
    "CallReport",
    "ToolExecutor",
    "ToolExecutorStatistics",
    "ToolStatistics",
    "open_tool_executor",
]

DEFAULT_THREAD_LIMIT = 16
# Sync tools are usually I/O-bound wrappers (HTTP clients, subprocesses, file reads); 16
# threads overlap plenty of such waits while keeping memory and GIL contention modest. It is
# the cap for *all* sync tools together; per-tool caps are max_concurrency.

_CHECKED = 1024
"""(tool, input type, deps type) combinations whose paths are remembered as checked; past it
each new combination is checked at every call (a bound on memory, not on correctness)."""

DEFAULT_CACHE_SIZE = 10_000
"""Cached tool results kept at most, over all tools (the least recently used goes first)."""


class _Failed:
    """The outcome of an execution that raised or timed out."""

    __slots__ = ("error", "exception", "failures")

    def __init__(self, error: ToolError, exception: Exception | None, failures: int) -> None:
        self.error = error
        self.exception = exception
        """What the tool raised (``None`` for a timeout)."""
        self.failures = failures
        """Failed executions of the tool so far, this one included."""


_Outcome = str | ToolError | _Failed
"""Text for the model on success; a ``ToolError`` for a call that did not run (unknown tool,
invalid arguments, cancelled), a :class:`_Failed` for an execution that failed."""

_SCALARS = (str, int, bool)

_NO_RUN: RunContext[Any] = RunContext(index=0, run_id="", session_id="", input=None, deps=None)
"""The context of a call made on the executor directly, outside any run."""


def _keyed_by_value(tool: Tool[..., Any]) -> bool:
    """Whether the validated arguments of ``tool`` can be their own coalescing key.

    True when every parameter is a ``str``, ``int`` or ``bool``, optionally ``| None``, with a
    default of that exact type (or none). The validator produces values of exactly the
    declared type (it rejects ``True`` for an ``int`` and converts nothing), and for such
    values Python equality is JSON equality, so two argument instances are equal exactly
    when their canonical JSON texts are: the instance is a key with the same meaning, without
    encoding anything.
    """
    for field in attrs.fields(tool.arguments_type):
        kind = field.type
        allowed: tuple[type, ...]
        if kind in _SCALARS:
            allowed = (kind,)
        else:
            members = typing.get_args(kind)
            if (
                typing.get_origin(kind) not in (typing.Union, types.UnionType)
                or len(members) != 2
                or type(None) not in members
            ):
                return False
            (kind,) = (m for m in members if m is not type(None))
            if kind not in _SCALARS:
                return False
            allowed = (kind, type(None))
        default = field.default
        if default is not attrs.NOTHING and type(default) not in allowed:
            return False  # a Factory, or a default of another type than the annotation
    return True


@attrs.frozen
class ToolStatistics:
    """Counters of one tool since the executor opened."""

    requests: int
    """Calls received (including invalid ones)."""
    invalid_arguments: int
    """Calls rejected by the validator."""
    executions: int
    """Times the function actually started."""
    coalesced: int
    """Calls that joined an execution already in flight instead of starting one."""
    cache_hits: int
    """Calls answered from the result cache."""
    failures: int
    """Executions that raised or timed out (counted once, however many waiters shared them)."""
    timeouts: int
    """Executions that timed out (also counted in ``failures``)."""
    execution_time: float
    """Total seconds (trio time) of executions, from start to end or abandonment."""
    running: int
    """Executions running now."""


@attrs.frozen
class ToolExecutorStatistics:
    """A snapshot of a :class:`ToolExecutor`."""

    tools: Mapping[str, ToolStatistics] = attrs.field(hash=False)
    """Per-tool counters, by tool name."""
    requests: int
    """Calls received, for all tools (unknown tools included)."""
    executions: int
    """Executions started, for all tools."""
    unknown_tool: int
    """Calls naming no registered tool."""
    dedup_ratio: float
    """Share of valid calls answered without an execution of their own (coalesced or cache
    hit), between 0 and 1; 0 when there were none."""
    flights: int
    """Shared (coalesced) executions in flight now."""
    cached_results: int
    """Results held in the cache now (some may have expired and not been swept yet)."""
    threads_running: int
    """Worker threads running a sync tool now."""
    threads_abandoned: int
    """Threads still running whose caller already gave up (timeout or cancellation)."""


@attrs.define
class _Counters:
    requests: int = 0
    invalid_arguments: int = 0
    executions: int = 0
    coalesced: int = 0
    cache_hits: int = 0
    failures: int = 0
    timeouts: int = 0
    execution_time: float = 0.0
    running: int = 0

    def freeze(self) -> ToolStatistics:
        return ToolStatistics(**attrs.asdict(self))


@attrs.define(eq=False)
class _RateLimiter:
    bucket: TokenBucket
    lock: trio.Lock = attrs.field(factory=trio.Lock)

    async def acquire(self) -> None:
        # The lock queues callers FIFO; a caller cancelled while waiting takes no token.
        async with self.lock:
            while (delay := self.bucket.wait(trio.current_time(), 1.0)) > 0:
                await trio.sleep(delay)
            self.bucket.take(trio.current_time(), 1.0)


_CANCELLED = ToolError("cancelled", "the call was cancelled")


class CallReport:
    """How one call got its outcome: filled in by :meth:`ToolExecutor.call` when given one
    (the driver passes one to report the call as a step event)."""

    __slots__ = ("calls", "exception", "failures", "on_wait", "source")

    def __init__(self) -> None:
        self.source: Literal["executed", "coalesced", "cached"] = "executed"
        """``"executed"``: its own execution; ``"coalesced"``: a concurrent identical call's;
        ``"cached"``: the result cache."""
        self.calls = 1
        """The calls the execution answered (its waiters; 1 for an execution of its own)."""
        self.exception: Exception | None = None
        """For the call that ran a failed execution: what the tool raised (``None`` for a
        timeout, and for every other call)."""
        self.failures = 0
        """For the call that ran a failed execution: the tool's failed executions so far in
        this executor, this one included (0 for every other call)."""
        self.on_wait: Callable[[ToolCap, float], None] | None = None
        """Told ``("tool", since)`` when the call's execution got the tool's
        ``max_concurrency`` cap after waiting for it since trio time ``since``."""


class _Flight:
    """One shared execution, run in a task of the executor's nursery. Its waiters are the
    tasks the singleflight table lists for ``key``; each is parked until the execution hands
    it the outcome. ``abandoned``: its last waiter left, so its outcome belongs to nobody."""

    __slots__ = ("abandoned", "calls", "outcome", "report", "scope")

    def __init__(self) -> None:
        self.outcome: _Outcome = _CANCELLED
        self.scope = trio.CancelScope()
        self.abandoned = False
        self.calls = 0
        """The waiters the outcome was handed to."""
        self.report: CallReport | None = None
        """The report of the call that started the execution (told of its wait for a cap)."""


@attrs.define(eq=False)
class _ThreadCall:
    """One sync tool call and the keeper task that owns its worker thread."""

    function: Callable[[], Any]
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    done: trio.Event = attrs.field(factory=trio.Event)
    value: Any = None
    error: Exception | None = None
    abandoned: bool = False


def _reply(call_id: str, outcome: _Outcome, report: CallReport | None) -> ToolReturned | ToolFailed:
    if isinstance(outcome, str):
        return ToolReturned(call_id, outcome)
    if type(outcome) is _Failed:
        if report is not None and report.source == "executed":
            report.exception = outcome.exception
            report.failures = outcome.failures
        return ToolFailed(call_id, outcome.error)
    assert isinstance(outcome, ToolError)
    return ToolFailed(call_id, outcome)


@final
class ToolExecutor:
    """Runs tool calls with coalescing, caching and limits; see the module's theory of operation.

    Create it with :func:`open_tool_executor`. Every method must be called from the trio
    thread, by any task.
    """

    def __init__(
        self,
        tools: Mapping[str, Tool[..., Any]],
        nursery: trio.Nursery,
        thread_limit: int,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        by_name = dict(tools)
        self._tools = by_name
        self._nursery = nursery
        self._closed = False
        self._thread_limiter = trio.CapacityLimiter(thread_limit)
        self._threads_abandoned = 0
        self._unknown_tool = 0
        self._table: SingleflightTable[trio.lowlevel.Task] = SingleflightTable()
        self._flights: dict[Hashable, _Flight] = {}
        self._store = ResultStore(cache_size)
        self._counters = {name: _Counters() for name in by_name}
        self._replay = {
            name: t.options.replay_safe
            for name, t in by_name.items()
            if t.options.coalesce and t.options.replay_safe
        }
        """The declared context fields of each ``replay_safe`` tool that declares some."""
        self._checked: set[tuple[str, type, type]] = set()
        """(tool, input type, deps type) whose ``replay_safe`` paths were found to lead
        somewhere in a call's context. Bounded by :data:`_CHECKED`."""
        self._value_keyed = {
            name for name, t in by_name.items() if _keyed_by_value(t) and name not in self._replay
        }
        self._limiters = {
            name: Cap(t.options.max_concurrency)
            for name, t in by_name.items()
            if t.options.max_concurrency is not None
        }
        self.turn_caps: Mapping[str, int] = types.MappingProxyType(
            {
                name: t.options.max_per_turn
                for name, t in by_name.items()
                if t.options.max_per_turn is not None
            }
        )
        """The per-turn cap of each tool that has one (the runner applies them; empty when
        no tool has one)."""
        self._rates = {
            name: _RateLimiter(TokenBucket(t.options.rate, float(t.options.burst or 1)))
            for name, t in by_name.items()
            if t.options.rate is not None
        }

    @property
    def tools(self) -> Mapping[str, Tool[..., Any]]:
        """The registered tools, by name."""
        return types.MappingProxyType(self._tools)

    async def call(
        self,
        effect: CallTool,
        context: Callable[[], RunContext[Any]] | None = None,
        report: CallReport | None = None,
    ) -> ToolReturned | ToolFailed:
        """Run one tool call and report its outcome for ``effect.call_id``.

        Never raises for anything the tool or the model did: unknown tools, invalid
        arguments, exceptions and timeouts come back as :class:`~agentcore.core.ToolFailed`.

        Args:
            effect: the call; ``arguments`` are validated again against the tool's schema.
            context: builds the calling run's :class:`~agentcore.RunContext`, called only
                for a tool that takes one (default: a context with index 0, empty ids and
                no input or deps).
            report: if given, told how the call got its outcome (its own execution, a
                shared one, the cache) and how many calls an execution answered.

        Returns:
            ``ToolReturned`` with the result text, or ``ToolFailed`` with a ``ToolError``
            whose ``type`` is ``"unknown_tool"``, ``"invalid_arguments"``, ``"timeout"`` or
            the name of the exception the tool raised.

        Raises:
            trio.ClosedResourceError: the executor is closed.
            trio.Cancelled: the calling task was cancelled (a shared execution goes on for
                the other callers still waiting for it).
        """
        if self._closed:
            raise trio.ClosedResourceError("the tool executor is closed")
        tool = self._tools.get(effect.name)
        if tool is None:
            self._unknown_tool += 1
            await trio.lowlevel.checkpoint()
            known = ", ".join(sorted(self._tools)) or "none"
            return ToolFailed(
                effect.call_id,
                ToolError("unknown_tool", f"unknown tool {effect.name!r}; available: {known}"),
            )
        counters = self._counters[tool.name]
        counters.requests += 1
        raw = effect.arguments
        if type(raw) is not dict and isinstance(raw, Mapping):
            raw = dict(raw)
        try:
            arguments = tool.spec.validator(raw)
        except Exception as exc:  # any validator failure means: the model sent bad arguments
            counters.invalid_arguments += 1
            message = exc.message if isinstance(exc, ValidationFailed) else str(exc)
            await trio.lowlevel.checkpoint()
            return ToolFailed(effect.call_id, ToolError("invalid_arguments", message))
        run_context: RunContext[Any] | None = None
        if tool.takes_context:
            run_context = _NO_RUN if context is None else context()
            if effect.idempotency_key:
                run_context = for_call(run_context, effect.idempotency_key)
        key: Hashable | None
        if not tool.options.coalesce:
            key = None
        elif tool.name in self._value_keyed:
            key = (tool.name, arguments)
        else:
            key = self._key(tool, raw, arguments)
            fields = self._replay.get(tool.name)
            if fields is not None and key is not None:
                if run_context is None:
                    run_context = _NO_RUN if context is None else context()
                self._check_paths(tool.name, fields, run_context)
                key = _reuse_key(key, fields, run_context)
        if key is None:
            outcome = await self._execute(tool, arguments, run_context, report)
            return _reply(effect.call_id, outcome, report)
        if tool.options.cache:
            content = self._store.get(key, trio.current_time())
            if content is not None:
                counters.cache_hits += 1
                if report is not None:
                    report.source = "cached"
                await trio.lowlevel.checkpoint()
                return ToolReturned(effect.call_id, content)
        return _reply(
            effect.call_id,
            await self._wait_for_flight(tool, key, arguments, run_context, report),
            report,
        )

    def statistics(self) -> ToolExecutorStatistics:
        """A frozen snapshot of the executor's counters."""
        tools = {name: c.freeze() for name, c in self._counters.items()}
        valid = sum(s.requests - s.invalid_arguments for s in tools.values())
        shared = sum(s.coalesced + s.cache_hits for s in tools.values())
        return ToolExecutorStatistics(
            tools=types.MappingProxyType(tools),
            requests=sum(s.requests for s in tools.values()) + self._unknown_tool,
            executions=sum(s.executions for s in tools.values()),
            unknown_tool=self._unknown_tool,
            dedup_ratio=shared / valid if valid else 0.0,
            flights=len(self._table),
            cached_results=len(self._store),
            threads_running=self._thread_limiter.statistics().borrowed_tokens,
            threads_abandoned=self._threads_abandoned,
        )

    def check_context(self, context: RunContext[Any]) -> None:
        """Refuse, before anything runs, the tools whose ``replay_safe`` paths lead nowhere in
        ``context`` (a batch checks its first input's; each later input and deps type is
        checked at its first call).

        Raises:
            ConfigError: a path that leads nowhere, naming it and what is there.
        """
        for name, fields in self._replay.items():
            self._check_paths(name, fields, context)

    def _check_paths(self, name: str, fields: tuple[str, ...], context: RunContext[Any]) -> None:
        """Refuse ``replay_safe`` paths that lead nowhere in the first call's context of each
        input and deps type (a typo, or ``input.user`` on inputs that are plain strings):
        such a path would key every call alike."""
        seen = (name, type(context.input), type(context.deps))
        if seen in self._checked:
            return
        for field in fields:
            problem = None if field == HISTORY else value_path_problem(context, field)
            if problem is not None:
                raise ConfigError(
                    f"tool {name!r}: replay_safe entry {field!r} leads nowhere in the context "
                    f"of run {context.run_id!r}: {problem}; a key without it would hand one "
                    "run's result to another"
                )
        if len(self._checked) < _CHECKED:
            self._checked.add(seen)

    # ------------------------------------------------------------------------- coalescing

    @staticmethod
    def _key(tool: Tool[..., Any], raw: Any, arguments: Any) -> Hashable | None:
        try:
            # The validated arguments (attrs instances, enums, tuples) back as JSON values, so
            # calls that differ only in spelling (an omitted default, key order) share one key.
            return tool_key(tool.name, json_value(arguments))
        except (TypeError, ValueError):
            pass
        try:
            return tool_key(tool.name, raw)
        except (TypeError, ValueError):
            return None  # not JSON at all: such a call runs on its own

    async def _wait_for_flight(
        self,
        tool: Tool[..., Any],
        key: Hashable,
        arguments: Any,
        context: RunContext[Any] | None,
        report: CallReport | None = None,
    ) -> _Outcome:
        me = trio.lowlevel.current_task()
        if self._table.join(key, me):
            flight = self._flights[key] = _Flight()
            flight.report = report
            self._nursery.start_soon(self._fly, flight, key, tool, arguments, context)
        else:
            flight = self._flights[key]
            self._counters[tool.name].coalesced += 1
            if report is not None:
                report.source = "coalesced"

        def abort(_: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
            if self._table.leave(key, me):  # the last waiter: nobody wants the outcome
                del self._flights[key]
                flight.abandoned = True
                flight.scope.cancel()
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)
        if report is not None:
            report.calls = flight.calls
        return flight.outcome

    async def _fly(
        self,
        flight: _Flight,
        key: Hashable,
        tool: Tool[..., Any],
        arguments: Any,
        context: RunContext[Any] | None,
    ) -> None:
        """Run one shared execution and hand its outcome to every waiter still there."""
        outcome: _Outcome | None = None
        try:
            with flight.scope:
                outcome = await self._execute(tool, arguments, context, flight.report)
        finally:
            if not flight.abandoned:  # else the key is free already, maybe flying again
                # Finished, or the executor itself is closing: the waiters get the outcome
                # (``cancelled`` when there is none) and the key is free again.
                del self._flights[key]
                waiters = self._table.complete(key)
                if outcome is not None:
                    flight.outcome = outcome
                    if tool.options.cache and isinstance(outcome, str):
                        self._store.put(key, outcome, trio.current_time(), tool.options.ttl)
                flight.calls = len(waiters)
                for waiter in waiters:
                    trio.lowlevel.reschedule(waiter)

    # ------------------------------------------------------------------------- execution

    def _execute(
        self,
        tool: Tool[..., Any],
        arguments: Any,
        context: RunContext[Any] | None,
        report: CallReport | None = None,
    ) -> Awaitable[_Outcome]:
        # A plain function returning the coroutine: no frame of its own for unlimited tools.
        limiter = self._limiters.get(tool.name)
        if limiter is None:
            return self._start(tool, arguments, context)
        return self._limited(limiter, tool, arguments, context, report)

    async def _limited(
        self,
        limiter: Cap,
        tool: Tool[..., Any],
        arguments: Any,
        context: RunContext[Any] | None,
        report: CallReport | None,
    ) -> _Outcome:
        since = await limiter.acquire()
        try:
            if since is not None and report is not None and report.on_wait is not None:
                report.on_wait("tool", since)
            return await self._start(tool, arguments, context)
        finally:
            limiter.release()

    async def _start(
        self, tool: Tool[..., Any], arguments: Any, context: RunContext[Any] | None
    ) -> _Outcome:
        rate = self._rates.get(tool.name)
        if rate is not None:
            await rate.acquire()
        counters = self._counters[tool.name]
        timeout = tool.options.timeout
        counters.executions += 1
        counters.running += 1
        started = trio.current_time()
        try:
            if timeout is None:
                return encode_result(await self._invoke(tool, arguments, context))
            with trio.move_on_after(timeout):
                return encode_result(await self._invoke(tool, arguments, context))
            counters.timeouts += 1
            counters.failures += 1
            message = f"tool {tool.name!r} did not finish within {timeout:g} s"
            return _Failed(ToolError("timeout", message), None, counters.failures)
        except Exception as exc:  # a failing tool is reported to the model, never raised
            counters.failures += 1
            error = ToolError(type(exc).__name__, str(exc) or type(exc).__name__)
            return _Failed(error, exc, counters.failures)
        finally:
            counters.running -= 1
            counters.execution_time += trio.current_time() - started

    def _invoke(
        self, tool: Tool[..., Any], arguments: Any, context: RunContext[Any] | None
    ) -> Awaitable[Any]:
        # A plain function returning the awaitable (rather than a coroutine awaiting it) keeps
        # one frame fewer between the execution task and the tool's checkpoints.
        function = tool.bind(arguments, context)
        if tool.is_async:
            return function()  # type: ignore[no-any-return]
        return self._in_thread(function, tool.name)

    async def _in_thread(self, function: Callable[[], Any], name: str) -> Any:
        call = _ThreadCall(function)
        self._nursery.start_soon(self._keep_thread, call, name, name=f"agentcore thread {name}")
        try:
            await call.done.wait()
        finally:
            if not call.done.is_set():
                call.abandoned = True
                self._threads_abandoned += 1
                call.scope.cancel()
        if call.error is not None:
            raise call.error
        return call.value

    async def _keep_thread(self, call: _ThreadCall, name: str) -> None:
        try:
            with call.scope:
                try:
                    call.value = await trio.to_thread.run_sync(
                        call.function,
                        limiter=self._thread_limiter,
                        thread_name=f"agentcore tool {name}",
                    )
                except Exception as exc:  # handed over to the waiting task
                    call.error = exc
        finally:
            if call.abandoned:
                self._threads_abandoned -= 1
            call.done.set()


def _reuse_key(key: Hashable, fields: tuple[str, ...], context: RunContext[Any]) -> Hashable | None:
    """The reuse key of a ``replay_safe`` call (the safety rule: :mod:`agentcore._core.replay`)."""
    values: list[Any] = []
    for field in fields:
        if field == HISTORY:
            values.append(history_of(context))
            continue
        value = context_value(context, field)
        if value is not MISSING:
            try:
                value = json_value(value)
            except (TypeError, ValueError):
                return None  # no canonical form: neither reused nor shared
        values.append(value)
    return replay_key(key, values, MISSING)  # a path that leads nowhere: no key either


def _registry(tools: Iterable[AnyTool], thread_limit: int) -> dict[str, Tool[..., Any]]:
    by_name: dict[str, Tool[..., Any]] = {}
    for t in tools:
        if not isinstance(t, Tool):
            raise ConfigError(f"expected tools made with @agentcore.tool, got {t!r}")
        if t.name in by_name:
            raise ConfigError(f"two tools are named {t.name!r}")
        by_name[t.name] = t
    if isinstance(thread_limit, bool) or not isinstance(thread_limit, int) or thread_limit < 1:
        raise ConfigError(f"thread_limit must be a positive integer, got {thread_limit!r}")
    return by_name


@asynccontextmanager
async def open_tool_executor(
    tools: Iterable[AnyTool],
    *,
    thread_limit: int = DEFAULT_THREAD_LIMIT,
    cache_size: int = DEFAULT_CACHE_SIZE,
) -> AsyncIterator[ToolExecutor]:
    """Open a tool executor for ``tools``.

    ::

        async with open_tool_executor([web_search, read_file]) as executor:
            reply = await executor.call(CallTool("call_1", "web_search", {"query": "trio"}))

    The executor owns a nursery for shared executions and worker-thread keepers. Leaving the
    block waits for executions still running and for every worker thread it started, so no
    task or thread outlives it (a sync tool that never returns therefore keeps the block from
    exiting: give blocking calls their own timeouts). Calls after the block raise
    ``trio.ClosedResourceError``.

    Args:
        tools: tools made with :func:`agentcore.tool`; names must be unique.
        thread_limit: worker threads running sync tools at once, over all tools.
        cache_size: results of ``cache=True`` and ``replay_safe`` tools kept at most, over all
            tools (the least recently used goes first).

    Yields:
        The :class:`ToolExecutor`.

    Raises:
        ConfigError: duplicate tool names, a non-tool, or a bad ``thread_limit`` or
            ``cache_size``.
    """
    registry = _registry(tools, thread_limit)
    if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 1:
        raise ConfigError(f"cache_size must be a positive integer, got {cache_size!r}")
    single: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            executor = ToolExecutor(registry, nursery, thread_limit, cache_size)
            try:
                yield executor
            finally:
                executor._closed = True
    except BaseExceptionGroup as group:
        # The executor's own tasks never raise, so a group holding one exception carries the
        # exception of the ``async with`` body: pass it on unwrapped, as if no nursery were
        # involved.
        if len(group.exceptions) != 1:
            raise
        single = group.exceptions[0]
    if single is not None:
        raise single
