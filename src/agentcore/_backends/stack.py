"""Opening a backend's model client stack: the client of each route, and the cost ledger.

A backend given by URL is configured once here (``sim://`` starts the embedded server on a
free loopback port first, then binds the simulator's URL in the ``sim`` dialect), its transport
is made with one connection per inference slot, and its client is wrapped as its options say
(a Batch API client, a tiered client counting into the ledger). Everything opened is closed
with the caller's exit stack, in reverse order.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from .._codecs.codec import says_schema_on_final
from .._codecs.http import Timeouts
from .._core.cost import CostLedger
from .._core.errors import ConfigError
from .._core.validators import check_choice
from .._transports.factory import TransportKind, make_transport
from .._transports.model_client import HttpModelClient, ModelClient
from .backend import Backend
from .batch import batch_client, split_batch
from .fallback import Fallback
from .tiers import split_tier, tiered_client
from .urls import backend as make_backend
from .urls import bind_sim, is_sim

if TYPE_CHECKING:
    from .._sim import SimConfig

__all__ = ["open_client", "open_fallbacks"]


async def open_client(
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
    ``ledger``, a tiered client: :mod:`agentcore._backends.tiers`)."""
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
    if batch is not None:  # a Batch API: :mod:`agentcore._backends.batch`
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


async def open_fallbacks(
    stack: AsyncExitStack,
    specs: list[tuple[str, Fallback]],
    *,
    model: str,
    max_inflight: int,
    stream: bool | None,
    timeouts: Timeouts,
    transport: TransportKind | None,
    ledger: CostLedger | None = None,
) -> tuple[list[tuple[str, ModelClient, int]], bool]:
    """A model client and its number of slots per fallback backend, opened on ``stack``; and
    whether every one of them sends a typed run's output schema with its final request
    (:attr:`Backend.schema_on_final`; a model client given as such:
    :func:`~agentcore._codecs.codec.says_schema_on_final`)."""
    routes: list[tuple[str, ModelClient, int]] = []
    schema_on_final = True
    for name, spec in specs:
        target = spec.backend
        client: ModelClient
        if isinstance(target, str | Backend):
            client, configured = await open_client(
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
        routes.append((name, client, spec.max_inflight or max_inflight))
    return routes, schema_on_final
