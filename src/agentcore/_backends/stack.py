"""Opening a backend's model client stack: a client per route, and the cost ledger.

:func:`open_stack` is the one place a driver's model clients are made. It configures every
backend first, with nothing opened yet (a URL and its options become a
:class:`~agentcore.wire.Backend`; a configured ``Backend`` takes the own options given with
it; a model client is used as it is), so a mistake in any of them raises
:class:`~agentcore.ConfigError` before anything starts. Then the cost ledger is made if it is
wanted (:func:`~agentcore._backends.tiers.ledger_for`), and each route's client is opened:
``sim://`` starts the embedded server on a free loopback port and binds the backend to it,
the transport gets one connection per inference slot, and the client is wrapped as the backend
says (a Batch API client for :attr:`Backend.batch`, a tiered client counting into the ledger).
Everything opened is closed with the caller's exit stack, in reverse order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any

import attrs

from .._codecs.codec import says_schema_on_final
from .._codecs.http import Timeouts
from .._core.cost import CostLedger, PriceTable
from .._core.errors import ConfigError
from .._transports.factory import TransportKind, make_transport
from .._transports.model_client import HttpModelClient, ModelClient
from .backend import Backend
from .batch import batch_client, batch_slots
from .fallback import Fallback, fallback_specs
from .tiers import ledger_for, tiered_client
from .urls import backend as configure
from .urls import bind_sim, is_sim

__all__ = ["ClientStack", "Route", "open_stack"]


@attrs.frozen
class Route:
    """One backend of a driver, opened: its name, its model client and its slot limit."""

    name: str
    client: ModelClient = attrs.field(eq=False)
    slots: int
    """Inference slots (``max_inflight``; a Batch API backend admits a whole batch)."""


@attrs.frozen
class ClientStack:
    """The model clients of a driver's backends, opened by :func:`open_stack`."""

    primary: Route
    fallbacks: tuple[Route, ...]
    """The fallback backends, in order."""
    backend: Backend | None
    """The primary backend as configured (bound to the started simulator for ``sim://``);
    ``None`` for a model client."""
    ledger: CostLedger | None
    """The cost ledger every route counts into (``None``: no prices, tier or batch)."""
    schema_on_final: bool
    """Whether every route sends a typed run's output schema with its final request."""


@attrs.frozen
class _Planned:
    """A route configured and not opened yet."""

    name: str
    target: Backend | ModelClient
    max_inflight: int


async def open_stack(
    stack: AsyncExitStack,
    target: str | Backend | ModelClient,
    *,
    model: str,
    max_inflight: int,
    stream: bool | None,
    timeouts: Timeouts,
    transport: TransportKind | None,
    api_key: str | None,
    backend_options: Mapping[str, Any],
    fallback: Sequence[str | Backend | ModelClient | Fallback] = (),
    prices: PriceTable | None = None,
    exact_cost: bool = False,
) -> ClientStack:
    """Configure the backend ``target`` and each ``fallback``, then open their clients with
    ``stack`` (see the module docstring).

    ``model``, ``api_key`` and ``backend_options`` configure a primary given by URL (a
    configured ``Backend`` takes only its own options, and the model it was built with);
    ``stream``, ``transport`` and ``timeouts`` apply to every route given by URL or
    ``Backend``; a :class:`Fallback` gives its own model, slots, key and options.

    Raises:
        ConfigError: an invalid backend, an option one of them cannot use, or an option
            given with a model client.
    """
    primary_name = target if isinstance(target, str) else "primary"
    plan = [
        _Planned(
            primary_name,
            _configured(target, model, api_key, backend_options, stream, transport),
            max_inflight,
        )
    ]
    for name, spec in fallback_specs(fallback, primary_name):
        # A configured Backend sends its own model unless the Fallback names one; stream and
        # transport are checked once, with the primary.
        if spec.model and not isinstance(spec.backend, str | Backend):
            raise ConfigError(
                f"Fallback {name!r}: a model client sends its own model; model= applies to "
                "a backend given by URL or Backend"
            )
        sends = spec.model or (model if isinstance(spec.backend, str) else "")
        found = _configured(spec.backend, sends, spec.api_key, spec.options, None, None)
        plan.append(_Planned(name, found, spec.max_inflight or max_inflight))
    backends = [p.target if isinstance(p.target, Backend) else None for p in plan]
    ledger = ledger_for(prices, backends, exact=exact_cost)
    routes: list[Route] = []
    opened_backends: list[Backend | None] = []
    for planned in plan:
        given = planned.target
        if isinstance(given, Backend):
            client, given = await _open_client(
                stack, given, planned.max_inflight, stream, timeouts, transport, ledger
            )
            opened_backends.append(given)
        else:
            client = given
            opened_backends.append(None)
        routes.append(Route(planned.name, client, batch_slots(client, planned.max_inflight)))
    schema_on_final = all(
        says_schema_on_final(route.client) if opened is None else opened.schema_on_final
        for route, opened in zip(routes, opened_backends, strict=True)
    )
    return ClientStack(routes[0], tuple(routes[1:]), opened_backends[0], ledger, schema_on_final)


def _configured(  # noqa: PLR0917 - the call site's values, in its order
    target: object,
    model: str,
    api_key: str | None,
    options: Mapping[str, Any],
    stream: bool | None,
    transport: TransportKind | None,
) -> Backend | ModelClient:
    """``target`` configured: a URL with its model and options, a ``Backend`` with its own
    options (and, if one is given, the model it was built with), or a model client, which
    takes none."""
    if isinstance(target, str):
        return configure(target, model=model, api_key=api_key, **options)
    if isinstance(target, Backend):
        return configure(target, model=model or None, api_key=api_key, **options)
    if isinstance(target, ModelClient):
        given = [name for name, value in (("stream", stream), ("transport", transport),
                                          ("api_key", api_key)) if value is not None]  # fmt: skip
        given += list(options)
        if given:
            raise ConfigError(
                f"{', '.join(given)} apply to backends given by URL, not to a model client"
            )
        return target
    raise ConfigError(f"expected a backend URL, a Backend or a model client; got {target!r}")


async def _open_client(  # noqa: PLR0917 - the call site's values, in its order
    stack: AsyncExitStack,
    configured: Backend,
    max_inflight: int,
    stream: bool | None,
    timeouts: Timeouts,
    transport: TransportKind | None,
    ledger: CostLedger | None,
) -> tuple[ModelClient, Backend]:
    """The model client of ``configured``, closed with ``stack``, and the backend as it was
    opened (a ``sim://`` backend bound to the simulator started for it)."""
    if is_sim(configured):
        # The embedded simulator: start it with the backend's SimConfig on a free loopback
        # port, then aim the backend (model, dialect options kept) at the started server.
        from .._sim import open_sim_server  # noqa: PLC0415 - the simulator, loaded when used

        config = configured.options.get("config")
        server = await stack.enter_async_context(open_sim_server(port=0, config=config))
        configured = bind_sim(configured, server.url)
    kind = configured.transport if transport is None else transport
    moved = make_transport(
        configured.base_url,
        kind=kind,
        max_connections=max_inflight,
        verify=configured.verify,
        # A Batch API's results files are read line by line under the cap (batching.py).
        max_reply_bytes=None if configured.batch is not None else configured.max_reply_bytes,
        reuse_streams=configured.reuse_streams,
    )
    if configured.batch is not None:  # a Batch API: :mod:`agentcore._backends.batch`
        batched = batch_client(configured, moved, ledger, stream)
        stack.push_async_callback(batched.aclose)
        return batched, configured
    client = HttpModelClient(
        configured.codec,
        moved,
        timeouts=timeouts,
        stream=configured.stream if stream is None else stream,
    )
    stack.push_async_callback(client.aclose)
    return tiered_client(client, configured, ledger), configured
