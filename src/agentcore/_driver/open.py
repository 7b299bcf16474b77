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
from typing import Any

import trio

from .._codecs.codec import Backend
from .._codecs.http import Timeouts
from .._core.cost import CostLedger
from .._core.errors import ConfigError
from .._core.events import ErrorKind
from .._core.fallback import FallbackPolicy
from .._core.retry import RetryPolicy
from .._core.slots import SlotPolicy
from .._core.validators import check_choice
from .._observe.steps import Listener
from .._observe.trace import TraceWriter
from .._sim import SimConfig, open_sim_server
from .._tools.executor import open_tool_executor
from .._tools.mcp import McpServer, open_mcp_tools
from .._tools.spec import Tool
from .._transports.backends import backend as make_backend
from .._transports.backends import is_sim
from .._transports.factory import TransportKind, make_transport
from .._transports.model_client import HttpModelClient, ModelClient
from .driver import Driver
from .fallback import Fallback, FallbackRequests
from .rate_limiter import RateLimiter
from .requests import ModelRequests
from .slot_limiter import SlotLimiter
from .tiers import ledger_for, split_prices, split_tier, tiered_client

__all__ = ["open_driver"]

_DEFAULT_RETRY = RetryPolicy()
_DEFAULT_TIMEOUTS = Timeouts()


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
    if is_sim(target):
        # The embedded simulator: check the options, start it on a free loopback port, then
        # bind the backend once, as an OpenAI-compatible server in the ``sim`` dialect.
        assert isinstance(target, str)
        rest = dict(options)
        config = rest.pop("config", None)
        if "dialect" in rest:
            raise ConfigError("sim:// speaks the sim dialect; dialect= does not apply to it")
        if config is not None and not isinstance(config, SimConfig):
            raise ConfigError(f"config must be a SimConfig, got {config!r}")
        server = await stack.enter_async_context(open_sim_server(port=0, config=config))
        bound: tuple[str | Backend, dict[str, Any]] = (server.url, {**rest, "dialect": "sim"})
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
) -> list[tuple[str, ModelClient, SlotLimiter]]:
    """A model client and a slot limiter per fallback backend, opened on ``stack``."""
    slot_policy, adaptive = limits
    routes: list[tuple[str, ModelClient, SlotLimiter]] = []
    for name, spec in specs:
        target = spec.backend
        client: ModelClient
        if isinstance(target, str | Backend):
            client, _ = await _open_client(
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
        else:
            client = target
        slots = SlotLimiter(
            spec.max_inflight or max_inflight, policy=slot_policy, adaptive=adaptive
        )
        routes.append((name, client, slots))
    return routes


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
) -> FallbackRequests:
    retry, rng = retrying
    names = [name for name, _, _ in fallbacks]
    if primary_name in names or len(set(names)) != len(names):
        raise ConfigError(f"backend names must be distinct, got {[primary_name, *names]}")
    primary.name = primary_name
    routes = [(primary_name, primary)]
    for name, client, limiter in fallbacks:
        routes.append((name, ModelRequests(client, limiter, retry, rng.random, name)))
    return FallbackRequests(routes, policy)


@asynccontextmanager
async def open_driver(
    backend: str | Backend | ModelClient,
    *,
    model: str = "",
    max_inflight: int = 32,
    slot_policy: SlotPolicy = "fifo",
    adaptive: bool = False,
    tools: Iterable[Tool[..., Any]] = (),
    stream: bool | None = None,
    retry: RetryPolicy = _DEFAULT_RETRY,
    timeouts: Timeouts = _DEFAULT_TIMEOUTS,
    transport: TransportKind | None = None,
    api_key: str | None = None,
    seed: int | None = None,
    fallback: Sequence[str | Backend | ModelClient | Fallback] = (),
    fallback_on: Iterable[ErrorKind] | None = None,
    deps: Any = None,
    mcp: Sequence[McpServer] = (),
    trace: str | os.PathLike[str] | None = None,
    otel: bool = False,
    requests_per_minute: int | None = None,
    tokens_per_minute: int | None = None,
    **backend_options: Any,
) -> AsyncIterator[Driver]:
    """Open a driver: a slot limiter, a tool executor and a model client for one backend.

    ::

        async with agentcore.open_driver("vllm://127.0.0.1:8000", model="m") as driver:
            result = await driver.run(loop)

    Args:
        backend: a backend URL (``vllm://host:port``, ``sim://``...), a configured
            :class:`~agentcore._codecs.codec.Backend`, or any model client (for example a
            ``ScriptedModel``; it stays the caller's to close).
        model: the model name sent to the backend.
        max_inflight: the hard cap on model requests in flight (inference slots); also the
            number of connections the transport keeps.
        slot_policy: ``"fifo"``, or ``"priority"`` to serve the highest ``hints.priority``
            first.
        adaptive: shrink the slot limit when the server signals overload and grow it back
            on success (never above ``max_inflight``).
        tools: the tools agents may call (made with :func:`agentcore.tool`).
        stream: stream replies (``None``: the backend's default). Needed for time to first
            token.
        retry: the retry policy for failed model requests.
        timeouts: transport time limits per exchange.
        transport: ``"lean"`` or ``"httpx"`` (``None``: the backend's default).
        api_key: the API key for hosted backends.
        seed: seeds the back-off jitter, for reproducible schedules.
        fallback: backends (or models) to try, in order, when a request fails for good on
            the one before (see docs/backends.md): URLs, ``Backend`` values, model clients,
            or :class:`~agentcore.Fallback` values with their own model, slots and key.
        fallback_on: the error kinds that send a request on to the next backend (default:
            :data:`~agentcore._core.fallback.DEFAULT_FALLBACK_ON`).
        deps: any object, handed to tools in their :class:`~agentcore.RunContext`
            (``ctx.deps``); a batch may give its own.
        mcp: MCP tool servers (:class:`~agentcore.McpServer`) whose tools are added to
            ``tools``; they are connected (stdio servers started) before anything else and
            closed (stopped) when the block is left. ``driver.executor.tools`` lists them.
        trace: write the timeline to this file as Chrome trace-event JSON while the driver
            runs (one track per inference slot; see ``docs/observability.md``).
        otel: emit OpenTelemetry spans (GenAI semantic conventions) through the global
            tracer provider; needs ``agentcore[otel]``.
        requests_per_minute: the backend's request limit. Requests wait for budget before
            they queue for a slot, holding nothing. Limits are also learned from the
            ``x-ratelimit-*`` / ``anthropic-ratelimit-*`` headers of replies (the lower wins).
        tokens_per_minute: the backend's token limit; each request reserves its estimated
            tokens, corrected by the reply's usage.
        **backend_options: dialect options passed to :func:`agentcore.wire.backend`.

    Yields:
        The :class:`Driver`. Leaving the block closes the tool executor and the transport.

    Raises:
        ConfigError: an invalid option or backend.
    """
    if isinstance(max_inflight, bool) or not isinstance(max_inflight, int) or max_inflight < 1:
        raise ConfigError(f"max_inflight must be a positive integer, got {max_inflight!r}")
    check_choice("slot_policy", slot_policy, ("fifo", "priority"))
    primary_name = backend if isinstance(backend, str) else "primary"
    specs = _fallback_specs(fallback, primary_name)
    prices, backend_options = split_prices(backend_options)
    tiers = [split_tier(backend_options)[0]]
    tiers += [split_tier(spec.options)[0] for _, spec in specs]
    ledger = ledger_for(prices, tiers)
    policy = FallbackPolicy() if fallback_on is None else FallbackPolicy(fallback_on)
    try:
        rates = RateLimiter(requests_per_minute, tokens_per_minute)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    # The tool executor keeps a nursery open around our ``yield``; an exception of the
    # caller's block is taken out before it would be wrapped in an exception group there,
    # and re-raised as itself once everything is closed.
    raised: BaseException | None = None
    async with AsyncExitStack() as stack:
        if mcp:
            tools = [*tools, *await stack.enter_async_context(open_mcp_tools(mcp))]
        client: ModelClient
        configured: Backend | None = None
        if isinstance(backend, str | Backend):
            client, configured = await _open_client(
                stack,
                backend,
                model=model,
                max_inflight=max_inflight,
                stream=stream,
                timeouts=timeouts,
                transport=transport,
                api_key=api_key,
                options=backend_options,
                ledger=ledger,
            )
        elif isinstance(backend, ModelClient):
            given = (("stream", stream), ("transport", transport), ("api_key", api_key))
            extras = [name for name, value in given if value is not None]
            extras += list(backend_options)
            if extras:
                raise ConfigError(
                    f"{', '.join(extras)} apply to backends given by URL, not to a model client"
                )
            client = backend
        else:
            raise ConfigError(
                f"expected a backend URL, a Backend or a model client; got {backend!r}"
            )
        routes = await _open_fallbacks(
            stack,
            specs,
            model=model,
            max_inflight=max_inflight,
            limits=(slot_policy, adaptive),
            stream=stream,
            timeouts=timeouts,
            transport=transport,
            ledger=ledger,
        )
        executor = await stack.enter_async_context(open_tool_executor(tools))
        limiter = SlotLimiter(max_inflight, policy=slot_policy, adaptive=adaptive)
        rng = random.Random(seed)
        primary = ModelRequests(client, limiter, retry, rng.random, rates=rates)
        requests: ModelRequests | FallbackRequests = primary
        if routes:
            requests = _fallback_requests(primary, primary_name, routes, policy, (retry, rng))
        driver = Driver(
            client=client,
            limiter=limiter,
            executor=executor,
            requests=requests,
            rates=rates,
            backend=configured,
            deps=deps,
            cost=ledger,
            listeners=_observers(trace, otel, model, client) if trace is not None or otel else (),
        )
        try:
            yield driver
        except BaseException as exc:  # re-raised below, once everything is closed
            raised = exc
        finally:
            driver.close()
    if raised is not None:
        raise raised
