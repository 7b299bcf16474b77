"""Opening a driver: the backend's model client, the slot limiter and the tool executor.

A backend given by URL is configured once here (``sim://`` starts the embedded server on a
free loopback port first, then binds the simulator's URL in the ``sim`` dialect), its transport
is made with one connection per inference slot, and everything opened is closed, in reverse
order, when the driver's block is left.
"""

from __future__ import annotations

import os
import random
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._codecs.codec import Backend, says_schema_on_final
from .._codecs.http import Timeouts
from .._core.cost import CostLedger
from .._core.errors import ConfigError
from .._core.fallback import CircuitBreaker, FallbackPolicy
from .._core.retry import RetryPolicy
from .._core.slots import SlotPolicy
from .._core.validators import check_choice
from .._observe.steps import Listener
from .._observe.trace import TraceWriter
from .._tools.executor import open_tool_executor
from .._tools.mcp import open_mcp_tools
from .._tools.spec import AnyTool
from .._transports.backends import backend as make_backend
from .._transports.backends import bind_sim, is_sim
from .._transports.factory import TransportKind, make_transport
from .._transports.model_client import HttpModelClient, ModelClient
from .batch_backend import batch_client, batch_ledger, batch_slots, split_batch
from .driver import Driver
from .fallback import Fallback, FallbackRequests
from .options import DriverOptions, resolve_options
from .rate_limiter import RateLimiter
from .requests import ModelRequests
from .slot_limiter import SlotLimiter
from .tiers import ledger_for, split_prices, split_tier, tiered_client

if TYPE_CHECKING:
    from .._sim import SimConfig

__all__ = ["open_client", "open_driver"]


async def open_client(
    stack: AsyncExitStack,
    target: str | Backend,
    options: DriverOptions,
    ledger: CostLedger | None = None,
) -> tuple[ModelClient, Backend]:
    """The model client for the backend ``target`` configured by ``options`` (model, slots,
    stream, timeouts, transport, key, dialect options), closed with ``stack``; and the backend
    as configured."""
    return await _open_client(
        stack,
        target,
        model=options.model,
        max_inflight=options.max_inflight,
        stream=options.stream,
        timeouts=options.timeouts,
        transport=options.transport,
        api_key=options.api_key,
        options=dict(options.backend_options),
        ledger=ledger,
    )


async def _open_client(
    stack: AsyncExitStack,
    target: str | Backend,
    *,
    model: str,
    max_inflight: int,
    stream: bool | None,
    timeouts: Timeouts,
    transport: TransportKind | None,
    api_key: str | None,
    options: dict[str, Any],
    ledger: CostLedger | None = None,
) -> tuple[ModelClient, Backend]:
    """The model client for ``target``, and the backend as configured (with a cost
    ``ledger``, a tiered client: :mod:`agentcore._driver.tiers`)."""
    tier, options = split_tier(options)
    batch, options = split_batch(target, options)
    if isinstance(target, Backend) and is_sim(target):
        # A sim:// backend configured beforehand: start the simulator with its SimConfig,
        # then aim the backend (model, key, dialect options kept) at the started server.
        from .._sim import open_sim_server  # noqa: PLC0415 - the simulator, loaded when used

        server = await stack.enter_async_context(
            open_sim_server(port=0, config=_sim_config(target))
        )
        bound: tuple[str | Backend, dict[str, Any]] = (bind_sim(target, server.url), options)
    elif is_sim(target):
        # The embedded simulator: check the options, start it on a free loopback port, then
        # bind the backend once, as an OpenAI-compatible server in the ``sim`` dialect.
        assert isinstance(target, str)
        from .._sim import SimConfig, open_sim_server  # noqa: PLC0415

        rest = dict(options)
        config = rest.pop("config", None)
        if "dialect" in rest:
            raise ConfigError("sim:// speaks the sim dialect; dialect= does not apply to it")
        if config is not None and not isinstance(config, SimConfig):
            raise ConfigError(f"config must be a SimConfig, got {config!r}")
        server = await stack.enter_async_context(open_sim_server(port=0, config=config))
        bound = (server.url, {**rest, "dialect": "sim"})
    else:
        bound = (target, options)
    configured = make_backend(bound[0], model=model, api_key=api_key, **bound[1])
    kind = configured.transport if transport is None else transport
    check_choice("transport", kind, ("lean", "httpx"))
    moved = make_transport(
        configured.base_url,
        kind=kind,
        max_connections=max_inflight,
        max_reply_bytes=configured.max_reply_bytes,
        reuse_streams=configured.reuse_streams,
    )
    if batch is not None:  # a Batch API: :mod:`agentcore._driver.batch_backend`
        batched = batch_client(configured, moved, batch, ledger, model, stream)
        stack.push_async_callback(batched.aclose)
        return batched, configured
    client = HttpModelClient(
        configured.codec,
        moved,
        timeouts=timeouts,
        stream=configured.stream if stream is None else stream,
    )
    stack.push_async_callback(client.aclose)
    if ledger is not None and isinstance(bound[0], str):
        rebind = (bound[0], model, api_key, bound[1])
        return tiered_client(client, configured, rebind, tier, ledger), configured
    return client, configured


def _sim_config(configured: Backend) -> SimConfig | None:
    """The :class:`SimConfig` a ``sim://`` backend was configured with (``config=``)."""
    from .._sim import SimConfig  # noqa: PLC0415

    config = configured.options.get("config")
    if config is not None and not isinstance(config, SimConfig):
        raise ConfigError(f"config must be a SimConfig, got {config!r}")
    return config


def _fallback_specs(
    entries: Sequence[str | Backend | ModelClient | Fallback], primary_name: str
) -> list[tuple[str, Fallback]]:
    """Each fallback entry as a named :class:`Fallback`, checked before anything opens."""
    if isinstance(entries, str | bytes | Backend | Fallback | ModelClient):
        raise ConfigError(f"fallback must be a list of backends, got {entries!r}")
    specs: list[tuple[str, Fallback]] = []
    taken = {primary_name}
    for number, entry in enumerate(entries, start=1):
        spec = entry if isinstance(entry, Fallback) else Fallback(entry)
        target = spec.backend
        if not isinstance(target, str | Backend | ModelClient):
            raise ConfigError(
                f"a fallback must be a backend URL, a Backend or a model client; got {target!r}"
            )
        name = spec.name or (target if isinstance(target, str) else f"fallback-{number}")
        if name in taken:
            if spec.name is not None:
                raise ConfigError(f"two backends are named {name!r}")
            name = f"{name}#{number}"
        taken.add(name)
        specs.append((name, spec))
    return specs


async def _open_fallbacks(
    stack: AsyncExitStack,
    specs: list[tuple[str, Fallback]],
    *,
    model: str,
    max_inflight: int,
    limits: tuple[SlotPolicy, bool],
    stream: bool | None,
    timeouts: Timeouts,
    transport: TransportKind | None,
    ledger: CostLedger | None = None,
) -> tuple[list[tuple[str, ModelClient, SlotLimiter]], bool]:
    """A model client and a slot limiter per fallback backend, opened on ``stack``; and
    whether every one of them sends a typed run's output schema with its final request
    (:attr:`Backend.schema_on_final`; a model client given as such:
    :func:`~agentcore._codecs.codec.says_schema_on_final`)."""
    slot_policy, adaptive = limits
    routes: list[tuple[str, ModelClient, SlotLimiter]] = []
    schema_on_final = True
    for name, spec in specs:
        target = spec.backend
        client: ModelClient
        if isinstance(target, str | Backend):
            client, configured = await _open_client(
                stack,
                target,
                model=spec.model or model,
                max_inflight=spec.max_inflight or max_inflight,
                stream=stream,
                timeouts=timeouts,
                transport=transport,
                api_key=spec.api_key,
                options=dict(spec.options),
                ledger=ledger,
            )
            schema_on_final = schema_on_final and configured.schema_on_final
        else:
            client = target
            schema_on_final = schema_on_final and says_schema_on_final(client)
        slots = SlotLimiter(
            spec.max_inflight or max_inflight, policy=slot_policy, adaptive=adaptive
        )
        routes.append((name, client, slots))
    return routes, schema_on_final


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
    primary_name: str,
    fallbacks: Sequence[tuple[str, ModelClient, SlotLimiter]],
    policy: FallbackPolicy,
    retrying: tuple[RetryPolicy, random.Random],
    *,
    breaker: CircuitBreaker | None = None,
) -> FallbackRequests:
    retry, rng = retrying
    names = [name for name, _, _ in fallbacks]
    if primary_name in names or len(set(names)) != len(names):
        raise ConfigError(f"backend names must be distinct, got {[primary_name, *names]}")
    primary.name = primary_name
    routes = [(primary_name, primary)]
    for name, client, limiter in fallbacks:
        routes.append((name, ModelRequests(client, limiter, retry, rng.random, name)))
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
            :class:`~agentcore._codecs.codec.Backend`, or any model client (for example a
            ``ScriptedModel``; it stays the caller's to close).
        options: the driver's options (:class:`~agentcore.DriverOptions`: model, slots,
            transport, retries, rate limits, fallback, observers, tool-executor limits).
        tools: the tools agents may call (made with :func:`agentcore.tool`).
        **keywords: any field of :class:`~agentcore.DriverOptions` (``model=``,
            ``max_inflight=``, ``thread_limit=``...), replacing that field of ``options``;
            any other keyword is a dialect option passed to :func:`agentcore.wire.backend`.

    Yields:
        The :class:`Driver`. Leaving the block closes the tool executor and the transport
        (and stops the MCP servers of ``options.mcp``).

    Raises:
        ConfigError: an invalid option or backend.
    """
    opts = resolve_options(options, keywords)
    async with _open(backend, opts, tools) as driver:
        yield driver


@asynccontextmanager
async def _open(
    backend: str | Backend | ModelClient,
    opts: DriverOptions,
    tools: Iterable[AnyTool],
) -> AsyncIterator[Driver]:
    model, max_inflight = opts.model, opts.max_inflight
    slot_policy = opts.slot_policy or "fifo"
    primary_name = backend if isinstance(backend, str) else "primary"
    specs = _fallback_specs(opts.fallback, primary_name)
    prices, backend_options = split_prices(opts.backend_options)
    if prices is not None:
        opts = attrs.evolve(opts, backend_options=backend_options)
    tiers = [split_tier(opts.backend_options)[0]]
    tiers += [split_tier(spec.options)[0] for _, spec in specs]
    ledger = batch_ledger(backend, ledger_for(prices, tiers))
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
        if opts.mcp:
            tools = [*tools, *await stack.enter_async_context(open_mcp_tools(opts.mcp))]
        client: ModelClient
        configured: Backend | None = None
        if isinstance(backend, str | Backend):
            client, configured = await open_client(stack, backend, opts, ledger)
        elif isinstance(backend, ModelClient):
            given = (("stream", opts.stream), ("transport", opts.transport))
            extras = [name for name, value in given if value is not None]
            extras += ["api_key"] if opts.api_key is not None else []
            extras += list(opts.backend_options)
            if extras:
                raise ConfigError(
                    f"{', '.join(extras)} apply to backends given by URL, not to a model client"
                )
            client = backend
        else:
            raise ConfigError(
                f"expected a backend URL, a Backend or a model client; got {backend!r}"
            )
        routes, schema_on_final = await _open_fallbacks(
            stack,
            specs,
            model=model,
            max_inflight=max_inflight,
            limits=(slot_policy, opts.adaptive),
            stream=opts.stream,
            timeouts=opts.timeouts,
            transport=opts.transport,
            ledger=ledger,
        )
        executor = await stack.enter_async_context(
            open_tool_executor(tools, thread_limit=opts.thread_limit, cache_size=opts.cache_size)
        )
        slots = batch_slots(client, max_inflight)
        limiter = SlotLimiter(slots, policy=slot_policy, adaptive=opts.adaptive)
        rng = random.Random(opts.seed)
        primary = ModelRequests(client, limiter, opts.retry, rng.random, rates=rates)
        requests: ModelRequests | FallbackRequests = primary
        if routes:
            requests = _fallback_requests(
                primary,
                primary_name,
                routes,
                policy,
                (opts.retry, rng),
                breaker=opts.circuit_breaker,
            )
        observed = opts.trace is not None or opts.otel
        driver = Driver(
            client=client,
            limiter=limiter,
            executor=executor,
            requests=requests,
            rates=rates,
            backend=configured,
            schema_on_final=schema_on_final
            and (
                configured.schema_on_final
                if configured is not None
                else says_schema_on_final(client)
            ),
            deps=opts.deps,
            cost=ledger,
            listeners=_observers(opts.trace, opts.otel, model, client) if observed else (),
        )
        try:
            yield driver
        except BaseException as exc:  # re-raised below, once everything is closed
            raised = exc
        finally:
            driver.close()
    if raised is not None:
        raise raised
