"""The driver: the facade users hold over one backend's runs, streams and requests.

:class:`Driver` performs the effects of many agent loops against one shared backend. It holds
the parts and hands each call to the one that does the work:

- :class:`~agentcore._driver.runner.Runner` drives one run's effects (model requests through
  the slot line, tool calls through the executor), tells an interrupted loop why, and builds
  its :class:`Result` (theory of operation, cancellation and deadlines: :mod:`.runner`);
- :class:`~agentcore._driver.scheduler.StreamScheduler` runs result streams, whose runs wait
  for a slot parked in the slot line as data rather than in a task (:mod:`.scheduler`,
  :mod:`.feed`);
- :class:`~agentcore._driver.requests.ModelRequests` (or, with fallback backends,
  :class:`~agentcore._driver.fallback.FallbackRequests`) makes one model request with its
  slot, rate budget and retries; ``generate`` and ``call_model`` use it outside any run.

Slots
-----
The slot limiter (:mod:`agentcore._driver.slot_limiter` over the pure :mod:`agentcore._core.slots`)
is the only place that bounds model requests; ``max_inflight`` is a hard cap whatever the policy or
the adaptive limit does.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import trio

from .._backends.backend import Backend
from .._backends.batch import is_batch_client
from .._codecs.classify import deadline_error
from .._core.budgets import UsageLimits
from .._core.cost import CostLedger
from .._core.events import CallModel, ModelFailed, ModelResponded
from .._core.loop import AgentLoop
from .._core.messages import Message, ModelParams, ToolSpec
from .._core.results import Result
from .._observe.log_sink import LOGS
from .._observe.steps import Listener, StepSink, StepStream, open_step_channel, tee
from .._tools.executor import ToolExecutor
from .._tools.spec import AnyTool
from .._transports.model_client import ModelClient
from .budget_guard import OnBudget
from .fallback import FallbackRequests
from .generate import Generation, GenerationStream, build_call
from .generate import generate as _generate
from .generate import generate_stream as _generate_stream
from .rate_limiter import RateLimiter
from .requests import ModelRequests
from .runner import Runner
from .runs import ResultStream
from .scheduler import StreamScheduler, body_nursery
from .slot_limiter import SlotLimiter
from .stats import DriverStatistics, collect

__all__ = ["Driver"]

_NO_PARAMS = ModelParams()


class Driver:
    """Runs agent loops against one backend. Open it with :func:`open_driver`."""

    def __init__(
        self,
        *,
        client: ModelClient,
        limiter: SlotLimiter,
        executor: ToolExecutor,
        requests: ModelRequests | FallbackRequests,
        rates: RateLimiter,
        backend: Backend | None = None,
        schema_on_final: bool = False,
        deps: Any = None,
        listeners: Sequence[Listener] = (),
        cost: CostLedger | None = None,
    ) -> None:
        self._client = client
        self.cost = cost
        """The cost ledger (``None`` unless a backend has a service tier or is a Batch API
        backend, or prices were given)."""
        self.backend = backend
        """The configured backend (``None`` when the driver was given a model client)."""
        self._schema_on_final = schema_on_final
        self._limiter = limiter
        self._executor = executor
        self._requests = requests
        self._rates = rates
        """The primary backend's request and token budgets."""
        self._listeners = tuple(listeners)
        """The driver's own listeners of every run and request (a trace file, OpenTelemetry),
        closed with it."""
        shared = tee(*self._listeners)
        requests.sink = None if shared is None else tee(shared, LOGS)
        if is_batch_client(client):  # a Batch API's hops are shown to the same listeners
            client.steps = shared  # type: ignore[attr-defined]
        # Runs of result streams park for a slot without a task, except with model fallback,
        # whose runs wait in their tasks.
        parker = requests if isinstance(requests, ModelRequests) else None
        self._runner = Runner(requests, parker, executor, deps, shared)
        self.streams = StreamScheduler(self._runner, limiter.statistics().max_inflight)
        """The result streams (for the batch layer: groups of runs with their inputs)."""
        self._opened = trio.current_time()
        self._closed_at: float | None = None

    @property
    def client(self) -> ModelClient:
        """The primary backend's model client."""
        return self._client

    @property
    def limiter(self) -> SlotLimiter:
        """The inference-slot limiter (its ``statistics()`` shows slots in use and holders)."""
        return self._limiter

    @property
    def self_hosted(self) -> bool:
        """Whether the backend is a server we run (vLLM, SGLang, Dynamo, ``sim://``...):
        batches warm the shared prefix by default. ``False`` for hosted APIs and model
        clients."""
        return self.backend is not None and self.backend.self_hosted

    @property
    def schema_on_final(self) -> bool:
        """Whether every backend of this driver (fallbacks included) sends a typed run's
        output schema with its final request, for the server to constrain the reply to it
        (:attr:`agentcore.wire.Backend.schema_on_final`). Where it does, a task's default
        final instruction is left out (:attr:`agentcore.Task.final_instruction`). A model
        client given as such counts only when it says so with a ``schema_on_final`` of its
        own (:class:`~agentcore.wire.ModelClient`)."""
        return self._schema_on_final

    @property
    def executor(self) -> ToolExecutor:
        """The tool executor."""
        return self._executor

    @property
    def deps(self) -> Any:
        """The ``deps`` handed to the tools of runs given none (``open_driver(deps=...)``)."""
        return self._runner.deps

    # ------------------------------------------------------------------------ runs

    async def run(
        self,
        loop: AgentLoop,
        *,
        index: int = 0,
        deadline: float | None = None,
        deps: Any = None,
    ) -> Result:
        """Drive ``loop`` to its end.

        Args:
            loop: a fresh agent loop (``start()`` is called here), or one restored from a
                snapshot (its outstanding effects are performed again).
            index: reported as :attr:`Result.index`.
            deadline: trio time (``trio.current_time()`` scale) after which the run ends
                with a ``failed`` result.
            deps: the ``deps`` of this run's :class:`~agentcore.RunContext` (``None``: the
                driver's).

        Returns:
            The run's :class:`Result`; failures of the model or the tools are inside it.

        Raises:
            trio.Cancelled: a cancel scope of the caller was cancelled.
            LocalProtocolError: the loop had already ended, or it rejected an event (a bug
                in the loop or the driver).
        """
        return await self._runner.run(loop, index, deadline, deps=deps)

    @asynccontextmanager
    async def stream(
        self,
        loops: Iterable[AgentLoop],
        *,
        timeout: float | None = None,
        max_active: int | None = None,
        budget: UsageLimits | None = None,
        on_budget: OnBudget = "finish",
        steps: StepSink | None = None,
        deps: Any = None,
    ) -> AsyncIterator[ResultStream]:
        """Run many loops at once; results arrive in completion order.

        ::

            async with driver.stream(loops) as results:
                async for result in results:
                    ...

        Leaving the block early cancels the runs still going (without reporting them) and
        waits for nothing but their prompt exit. :meth:`ResultStream.cancel` instead ends every
        remaining run with a ``cancelled`` result, which the iteration still delivers.

        Args:
            loops: fresh agent loops; run ``i`` gets index ``i``. Consumed lazily.
            timeout: seconds each run may take from its own start (``None``: no limit).
            max_active: runs in progress at once (``None``: all). Slots bound the model
                requests either way; this bounds memory for very large batches.
            budget: usage limits of the whole batch (see :class:`~agentcore.UsageLimits`):
                once one has no room, no further run starts (each reports ``failed`` with
                ``AbortKind.BUDGET_EXHAUSTED``).
            on_budget: what a spent batch budget does to the runs already going:
                ``"finish"`` lets them end on their own, ``"cancel"`` ends them at once
                (``failed``, with the budget as the reason).
            steps: a :class:`StepSink` that receives the step events of every run (see
                docs/watching.md); ``None``: no events are built.
            deps: the ``deps`` of these runs' :class:`~agentcore.RunContext` (``None``: the
                driver's).

        Yields:
            The :class:`ResultStream`.
        """
        group = self.streams.group(steps=steps, deps=deps, budget=budget, on_budget=on_budget)
        async with self.streams.open(
            loops, group, timeout=timeout, max_active=max_active
        ) as results:
            yield results

    @asynccontextmanager
    async def watch(
        self,
        loop: AgentLoop,
        *,
        deltas: bool = False,
        buffer: int = 64,
        index: int = 0,
        deadline: float | None = None,
        deps: Any = None,
    ) -> AsyncIterator[StepStream]:
        """Run ``loop`` and receive its step events as they happen.

        ::

            async with driver.watch(loop) as steps:
                async for step in steps:
                    print(step)
            result = steps.result

        The events come in the run's order, through a channel of ``buffer`` events. A slow
        consumer slows this run only: events produced while a slot is held never wait (they
        queue), and the run waits for the consumer only where it holds no slot. Leaving the
        block before the last event cancels the run.

        Args:
            loop: as for :meth:`run`.
            deltas: also stream each model reply as :class:`ModelDelta` events.
            buffer: events the channel holds.
            index: reported as the run's index.
            deadline: as for :meth:`run`.
            deps: as for :meth:`run`.

        Yields:
            The :class:`StepStream`; its ``result`` is set once the run has ended.
        """
        channel, stream = open_step_channel(buffer, deltas=deltas)

        async def watched() -> None:
            stream.result = await self._runner.run(loop, index, deadline, channel, deps)
            await channel.aclose()

        async with body_nursery() as nursery:
            nursery.start_soon(watched)
            try:
                yield stream
            finally:
                nursery.cancel_scope.cancel()

    def cancel(self) -> None:
        """End every run of this driver promptly, now and from now on.

        Each run reports a ``cancelled`` result (see :class:`ResultStream`); runs that
        already finished keep their results.
        """
        self._runner.everything.cancel()
        self.streams.cancel()

    def close(self) -> None:
        """Cancel every run and stop the clock of :meth:`statistics` (``open_driver`` calls
        this when its block is left)."""
        self.cancel()
        self._closed_at = trio.current_time()
        for listener in self._listeners:
            listener.close()

    # ------------------------------------------------------------------------ model requests

    async def call_model(
        self, call: CallModel, *, deadline: float | None = None
    ) -> ModelResponded | ModelFailed:
        """Make one model request through a slot, with retries, outside any agent run.

        Args:
            call: the request.
            deadline: trio time after which the request fails with ``ErrorKind.DEADLINE``.

        Returns:
            The reply, or the final failure.
        """
        with trio.CancelScope(deadline=math.inf if deadline is None else deadline):
            return await self._requests.send(call, None)
        return ModelFailed(call.request_id, deadline_error())

    async def generate(
        self,
        messages: str | Iterable[Message],
        *,
        tools: Iterable[AnyTool | ToolSpec] = (),
        output: Any = None,
        params: ModelParams = _NO_PARAMS,
        priority: int = 0,
        deadline: float | None = None,
        request_id: str | None = None,
    ) -> Generation:
        """Ask the model once, through a slot, with retries and statistics, outside any run.

        ::

            reply = await driver.generate("Name three primes.")
            print(reply.text)

        Args:
            messages: the conversation (a string is one user message).
            tools: tools the model may ask for (the calls come back in the reply; they are
                not run).
            output: a type the reply must structure into (:attr:`Generation.output`).
            params: sampling parameters.
            priority: the request's priority (for ``slot_policy="priority"`` and servers).
            deadline: trio time after which the request fails with ``ErrorKind.DEADLINE``.
            request_id: the request's id (default: a fresh ``generate-N``).

        Returns:
            The :class:`Generation`.

        Raises:
            GenerationError: the request failed for good, or the reply did not fit
                ``output``.
            ConfigError: invalid messages, tools or output type.
        """
        call = build_call(
            messages,
            tools=tools,
            output=output,
            params=params,
            priority=priority,
            request_id=request_id,
        )
        return await _generate(self._requests, call, output, deadline)

    def generate_stream(
        self,
        messages: str | Iterable[Message],
        *,
        tools: Iterable[AnyTool | ToolSpec] = (),
        output: Any = None,
        params: ModelParams = _NO_PARAMS,
        priority: int = 0,
        deadline: float | None = None,
        request_id: str | None = None,
        buffer: int = 16,
    ) -> AbstractAsyncContextManager[GenerationStream]:
        """Like :meth:`generate`, with the reply's deltas as they arrive.

        ::

            async with driver.generate_stream("Tell me a story.") as deltas:
                async for delta in deltas:
                    if isinstance(delta, agentcore.wire.TextDelta):
                        print(delta.text, end="")

        The request is streamed whatever the backend's default. It is retried only until
        its first delta reached the stream; a failure after that ends the iteration with
        :class:`GenerationError`. Leaving the block (at the end, early, or cancelled) stops
        the request and releases its slot.

        Args:
            buffer: deltas the stream holds before the request waits for the caller.
            (the others as for :meth:`generate`)

        Yields:
            The :class:`GenerationStream`.
        """
        call = build_call(
            messages,
            tools=tools,
            output=output,
            params=params,
            priority=priority,
            request_id=request_id,
        )
        return _generate_stream(self._requests, call, output, deadline, buffer)

    def statistics(self) -> DriverStatistics:
        """Everything measured since the driver opened, as a frozen value.

        O(1) in the number of requests: percentiles come from bounded sketches (see
        :class:`~agentcore._driver.stats.Summary`), and only the latest requests are kept in detail.
        """
        now = trio.current_time() if self._closed_at is None else self._closed_at
        return collect(
            now - self._opened,
            self._runner.ends,
            self._requests.stats,
            self._executor.statistics(),
            self._limiter.statistics(),
            self._rates.statistics(),
            None if self.cost is None else self.cost.report(),
            batch_api=is_batch_client(self._client),
        )
