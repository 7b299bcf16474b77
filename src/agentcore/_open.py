"""Opening a driver: the backend's model client, the slot limiter and the tool executor.

A backend given by URL is configured once here (``sim://`` starts the embedded server on a
free loopback port first, then binds the simulator's URL in the ``sim`` dialect), its transport
is made with one connection per inference slot, and everything opened is closed, in reverse
order, when the driver's block is left.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from ._backends import backend as make_backend
from ._codecs.codec import Backend
from ._codecs.http import Timeouts
from ._core.errors import ConfigError
from ._core.retry import RetryPolicy
from ._core.slots import SlotPolicy
from ._core.validators import check_choice
from ._driver import Driver
from ._model_client import HttpModelClient, ModelClient
from ._rate_limiter import RateLimiter
from ._sim import open_sim_server
from ._slot_limiter import SlotLimiter
from ._tool_executor import open_tool_executor
from ._tools import Tool
from ._transports.factory import TransportKind, make_transport

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
) -> ModelClient:
    configured = make_backend(target, model=model, api_key=api_key, **options)
    if configured.name == "sim":
        # The embedded simulator: start it on a free loopback port, then talk to it as an
        # OpenAI-compatible server in the ``sim`` dialect with the same options.
        config = configured.options.get("config")
        server = await stack.enter_async_context(open_sim_server(port=0, config=config))
        rest = {k: v for k, v in configured.options.items() if k != "config"}
        configured = make_backend(server.url, model=model, api_key=api_key, dialect="sim", **rest)
    kind = configured.transport if transport is None else transport
    check_choice("transport", kind, ("lean", "httpx"))
    moved = make_transport(configured.base_url, kind=kind, max_connections=max_inflight)
    client = HttpModelClient(
        configured.codec,
        moved,
        timeouts=timeouts,
        stream=configured.stream if stream is None else stream,
    )
    stack.push_async_callback(client.aclose)
    return client


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
    try:
        rates = RateLimiter(requests_per_minute, tokens_per_minute)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    # The tool executor keeps a nursery open around our ``yield``; an exception of the
    # caller's block is taken out before it would be wrapped in an exception group there,
    # and re-raised as itself once everything is closed.
    raised: BaseException | None = None
    async with AsyncExitStack() as stack:
        client: ModelClient
        if isinstance(backend, str | Backend):
            client = await _open_client(
                stack,
                backend,
                model=model,
                max_inflight=max_inflight,
                stream=stream,
                timeouts=timeouts,
                transport=transport,
                api_key=api_key,
                options=backend_options,
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
        executor = await stack.enter_async_context(open_tool_executor(tools))
        driver = Driver(
            client=client,
            limiter=SlotLimiter(max_inflight, policy=slot_policy, adaptive=adaptive),
            executor=executor,
            retry=retry,
            rng=random.Random(seed),
            rates=rates,
        )
        try:
            yield driver
        except BaseException as exc:  # re-raised below, once everything is closed
            raised = exc
        finally:
            driver._close()
    if raised is not None:
        raise raised
