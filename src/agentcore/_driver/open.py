"""Opening a driver: the backend's client stack, the slot limiters and the tool executor.

The model client of every backend (and the cost ledger) comes from the backends layer
(:mod:`agentcore._backends.stack`); here they get their slot limiters, request paths and the
tool executor, and everything opened is closed, in reverse order, when the driver's block is
left.
"""

from __future__ import annotations

import os
import random
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import trio

from .._backends.backend import Backend
from .._backends.stack import ClientStack, open_stack
from .._core.errors import ConfigError
from .._core.fallback import CircuitBreaker, FallbackPolicy
from .._core.retry import RetryPolicy
from .._core.slots import SlotPolicy
from .._observe.steps import Listener
from .._observe.trace import TraceWriter
from .._tools.executor import open_tool_executor
from .._tools.mcp import open_mcp_tools
from .._tools.spec import AnyTool
from .._transports.model_client import ModelClient
from .driver import Driver
from .fallback import FallbackRequests
from .options import DriverOptions, resolve_options
from .rate_limiter import RateLimiter
from .requests import ModelRequests
from .slot_limiter import SlotLimiter

__all__ = ["open_driver", "open_driver_with"]


def _observers(
    trace: str | os.PathLike[str] | None, otel: bool, model: str, client: ModelClient
) -> list[Listener]:
    found: list[Listener] = []
    if trace is not None:
        found.append(TraceWriter(trace, trio.current_time()))
    if otel:
        try:
            from .._observe.otel import OtelObserver  # noqa: PLC0415 - optional, loaded lazily
        except ImportError:
            raise ConfigError(
                "otel=True needs OpenTelemetry: pip install 'trio-agentcore[otel]'"
            ) from None
        codec = getattr(client, "codec", None)
        found.append(OtelObserver(model=model, base_url=getattr(codec, "base_url", None)))
    return found


def _fallback_requests(
    primary: ModelRequests,
    backends: ClientStack,
    policy: FallbackPolicy,
    retrying: tuple[RetryPolicy, random.Random],
    *,
    limits: tuple[SlotPolicy, bool],
    breaker: CircuitBreaker | None = None,
) -> FallbackRequests:
    retry, rng = retrying
    slot_policy, adaptive = limits
    primary_name = backends.primary.name
    names = [route.name for route in backends.fallbacks]
    if primary_name in names or len(set(names)) != len(names):
        raise ConfigError(f"backend names must be distinct, got {[primary_name, *names]}")
    primary.name = primary_name
    routes = [(primary_name, primary)]
    for route in backends.fallbacks:
        limiter = SlotLimiter(route.slots, policy=slot_policy, adaptive=adaptive)
        routes.append(
            (route.name, ModelRequests(route.client, limiter, retry, rng.random, route.name))
        )
    return FallbackRequests(routes, policy, breaker)


@asynccontextmanager
async def open_driver(
    backend: str | Backend | ModelClient,
    *,
    options: DriverOptions | None = None,
    tools: Iterable[AnyTool] = (),
    **keywords: Any,
) -> AsyncIterator[Driver]:
    """Open a driver: a slot limiter, a tool executor and a model client for one backend.

    ::

        async with agentcore.open_driver("vllm://127.0.0.1:8000", model="m") as driver:
            result = await driver.run(loop)

    Args:
        backend: a backend URL (``vllm://host:port``, ``sim://``...), a configured
            :class:`~agentcore.wire.Backend`, or any model client (for example a
            ``ScriptedModel``; it stays the caller's to close).
        options: the driver's options (:class:`~agentcore.DriverOptions`: model, slots,
            transport, retries, rate limits, fallback, prices, observers, tool-executor
            limits).
        tools: the tools agents may call (made with :func:`agentcore.tool`).
        **keywords: any field of :class:`~agentcore.DriverOptions` (``model=``,
            ``max_inflight=``, ``prices=``...), replacing that field of ``options``; any other
            keyword is an option of the backend (``service_tier=``, ``journal=``, a dialect
            option...), as :func:`agentcore.wire.backend` takes it, added to
            ``options.backend_options``.

    Yields:
        The :class:`Driver`. Leaving the block closes the tool executor and the transport
        (and stops the MCP servers of ``options.mcp``).

    Raises:
        ConfigError: an invalid option or backend, or an option the backend cannot use.
    """
    opts = resolve_options(options, keywords)
    async with open_driver_with(backend, opts, tools) as driver:
        yield driver


@asynccontextmanager
async def open_driver_with(
    backend: str | Backend | ModelClient,
    opts: DriverOptions,
    tools: Iterable[AnyTool],
    wrap: Callable[[ModelClient], ModelClient] | None = None,
) -> AsyncIterator[Driver]:
    """:func:`open_driver` with its options resolved; ``wrap``, if given, wraps the primary
    backend's model client (a distributed worker's shared back-off) before the driver uses it."""
    slot_policy = opts.slot_policy or "fifo"
    policy = FallbackPolicy() if opts.fallback_on is None else FallbackPolicy(opts.fallback_on)
    try:
        rates = RateLimiter(opts.requests_per_minute, opts.tokens_per_minute)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    # The tool executor keeps a nursery open around our ``yield``; an exception of the
    # caller's block is taken out before it would be wrapped in an exception group there,
    # and re-raised as itself once everything is closed.
    raised: BaseException | None = None
    async with AsyncExitStack() as stack:
        backends = await open_stack(
            stack,
            backend,
            model=opts.model,
            max_inflight=opts.max_inflight,
            stream=opts.stream,
            timeouts=opts.timeouts,
            transport=opts.transport,
            api_key=opts.api_key,
            backend_options=opts.backend_options,
            fallback=opts.fallback,
            prices=opts.prices,
            exact_cost=opts.exact_cost,
        )
        if opts.mcp:
            tools = [*tools, *await stack.enter_async_context(open_mcp_tools(opts.mcp))]
        client = backends.primary.client
        if wrap is not None:
            client = wrap(client)
        executor = await stack.enter_async_context(
            open_tool_executor(tools, thread_limit=opts.thread_limit, cache_size=opts.cache_size)
        )
        limiter = SlotLimiter(backends.primary.slots, policy=slot_policy, adaptive=opts.adaptive)
        rng = random.Random(opts.seed)
        primary = ModelRequests(client, limiter, opts.retry, rng.random, rates=rates)
        requests: ModelRequests | FallbackRequests = primary
        if backends.fallbacks:
            requests = _fallback_requests(
                primary,
                backends,
                policy,
                (opts.retry, rng),
                limits=(slot_policy, opts.adaptive),
                breaker=opts.circuit_breaker,
            )
        observed = opts.trace is not None or opts.otel
        driver = Driver(
            client=client,
            limiter=limiter,
            executor=executor,
            requests=requests,
            rates=rates,
            backend=backends.backend,
            schema_on_final=backends.schema_on_final,
            deps=opts.deps,
            cost=backends.ledger,
            listeners=_observers(opts.trace, opts.otel, opts.model, client) if observed else (),
        )
        try:
            yield driver
        except BaseException as exc:  # re-raised below, once everything is closed
            raised = exc
        finally:
            driver.close()
    if raised is not None:
        raise raised
