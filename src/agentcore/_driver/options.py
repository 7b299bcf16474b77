"""The options of a driver, as one frozen value every entry point takes.

:class:`DriverOptions` holds everything :func:`~agentcore.open_driver` configures besides the
backend and the tools: the model, the slots, the transport, retries, rate limits, fallback,
observers, the prices of its cost ledger and the tool executor's limits. It is checked when
it is built (a bad value, or a keyword that is no field, raises :class:`~agentcore.ConfigError`
there, not when a driver opens), and every entry point that opens a driver (``open_driver``,
``open_batch``, ``run_batch``, ``map_reduce``, ``run_worker``) takes it as ``options=``. Their
keywords stay as sugar: each one given replaces that field of ``options``
(:func:`resolve_options`), and a keyword that is no field is an option of the backend
(``service_tier``, ``journal``, a dialect option...: what :func:`agentcore.wire.backend` takes),
added to ``backend_options`` and checked there by the backends layer's one table
(:mod:`agentcore._backends.options`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import attrs

from .._backends.backend import Backend
from .._backends.fallback import Fallback
from .._backends.options import NamedOptions, check_options
from .._codecs.http import Timeouts
from .._core.cost import PriceTable, merge_prices
from .._core.errors import ConfigError
from .._core.events import ErrorKind
from .._core.fallback import CircuitBreaker, FallbackPolicy
from .._core.retry import RetryPolicy
from .._core.slots import SlotPolicy
from .._core.validators import (
    check_items,
    int_at_least,
    is_bool,
    is_int,
    one_of,
    optional_int_at_least,
)
from .._tools.executor import DEFAULT_CACHE_SIZE, DEFAULT_THREAD_LIMIT
from .._tools.mcp import McpServer
from .._transports.factory import TransportKind
from .._transports.model_client import ModelClient

__all__ = ["OPTION_NAMES", "DriverOptions", "resolve_options"]

FallbackEntry = str | Backend | ModelClient | Fallback


def _fallbacks(value: Any) -> tuple[FallbackEntry, ...]:
    if isinstance(value, str | bytes | Backend | Fallback | ModelClient) or not isinstance(
        value, Iterable
    ):
        raise ConfigError(f"fallback must be a list of backends, got {value!r}")
    entries = tuple(value)
    for entry in entries:
        target = entry.backend if isinstance(entry, Fallback) else entry
        if not isinstance(target, str | Backend | ModelClient):
            raise ConfigError(
                f"a fallback must be a backend URL, a Backend or a model client; got {target!r}"
            )
    return entries


def _fallback_on(value: Any) -> frozenset[ErrorKind] | None:
    if value is None:
        return None
    try:
        return FallbackPolicy(value).on  # checks every kind
    except ConfigError as exc:
        raise ConfigError(f"DriverOptions.fallback_on: {exc}") from None


def _mcp(value: Any) -> tuple[McpServer, ...]:
    return check_items("mcp", value, McpServer, "McpServer values")


def _prices(value: Any) -> PriceTable | None:
    if value is None:
        return None
    try:
        return merge_prices(value, MappingProxyType({}))  # checked, as Price values
    except ConfigError as exc:
        raise ConfigError(f"DriverOptions.prices: {exc}") from None


def _instance_of(kind: type, *, optional: bool = False) -> Any:
    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if (value is None and optional) or isinstance(value, kind):
            return
        raise ConfigError(
            f"DriverOptions.{attribute.name} must be a {kind.__name__}, got {value!r}"
        )

    return check


def _trace(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, str | os.PathLike):
        raise ConfigError(f"DriverOptions.trace must be a path, got {value!r}")


def _secret(value: str | None) -> str:
    return "None" if value is None else "'***'"


@attrs.frozen(kw_only=True)
class DriverOptions(metaclass=NamedOptions):
    """How a driver is opened, besides its backend and tools; checked when built.

    ::

        options = agentcore.DriverOptions(model="m", max_inflight=64, thread_limit=32)
        async with agentcore.open_driver("vllm://127.0.0.1:8000", options=options) as driver:
            ...
        results = await agentcore.run_batch(task, inputs, backend="sim://", options=options)

    Every entry point that opens a driver takes it as ``options=``; a keyword given there as
    well replaces that field (``open_driver(url, options=options, max_inflight=8)``).

    Raises:
        ConfigError: a value of the wrong type or out of range, or a keyword that is no field
            (an option of the backend, such as ``service_tier``, goes in ``backend_options``).
    """

    backend_field = "backend_options"

    model: str = attrs.field(default="", validator=_instance_of(str))
    """The model name sent to the backend."""
    max_inflight: int = attrs.field(default=32, validator=int_at_least(1))
    """The hard cap on model requests in flight (inference slots); also the number of
    connections the transport keeps."""
    slot_policy: SlotPolicy | None = attrs.field(
        default=None, validator=one_of(None, "fifo", "priority", "attained")
    )
    """``"fifo"``; ``"priority"`` to serve the highest ``hints.priority`` first; or
    ``"attained"`` to serve the run that has received the fewest tokens so far first (and
    send that order as the request's priority hint). ``None``: the entry point's default
    (``"fifo"`` for ``open_driver`` and ``run_worker``, ``"priority"`` for batches)."""
    adaptive: bool = attrs.field(default=False, validator=is_bool)
    """Shrink the slot limit when the server signals overload and grow it back on success
    (never above ``max_inflight``)."""
    stream: bool | None = attrs.field(default=None, validator=one_of(None, True, False))
    """Stream replies (``None``: the backend's default). Needed for time to first token."""
    retry: RetryPolicy = attrs.field(factory=RetryPolicy, validator=_instance_of(RetryPolicy))
    """The retry policy for failed model requests."""
    timeouts: Timeouts = attrs.field(factory=Timeouts, validator=_instance_of(Timeouts))
    """Transport time limits per exchange."""
    transport: TransportKind | None = attrs.field(
        default=None, validator=one_of(None, "lean", "httpx")
    )
    """``"lean"`` or ``"httpx"`` (``None``: the backend's default)."""
    api_key: str | None = attrs.field(
        default=None, validator=_instance_of(str, optional=True), repr=_secret
    )
    """The API key for hosted backends (never shown by ``repr``)."""
    seed: int | None = attrs.field(default=None, validator=attrs.validators.optional(is_int))
    """Seeds the back-off jitter, for reproducible schedules."""
    fallback: Sequence[FallbackEntry] = attrs.field(default=(), converter=_fallbacks)
    """Backends (or models) to try, in order, when a request fails for good on the one
    before: URLs, ``Backend`` values, model clients, or :class:`~agentcore.Fallback`
    values."""
    fallback_on: frozenset[ErrorKind] | None = attrs.field(default=None, converter=_fallback_on)
    """The error kinds that send a request on to the next backend (``None``: the kinds whose
    row in the error table says so)."""
    circuit_breaker: CircuitBreaker | None = attrs.field(
        factory=CircuitBreaker, validator=_instance_of(CircuitBreaker, optional=True)
    )
    """With fallbacks: when a backend that keeps failing is passed over for a while (a
    :class:`~agentcore.CircuitBreaker` per backend but the last; ``None``: never)."""
    deps: Any = None
    """Any object, handed to tools in their :class:`~agentcore.RunContext` (``ctx.deps``)."""
    mcp: Sequence[McpServer] = attrs.field(default=(), converter=_mcp)
    """MCP tool servers whose tools are added to the driver's tools."""
    trace: str | os.PathLike[str] | None = attrs.field(default=None, validator=_trace)
    """Write the timeline to this file as Chrome trace-event JSON."""
    otel: bool = attrs.field(default=False, validator=is_bool)
    """Emit OpenTelemetry spans; needs ``trio-agentcore[otel]``."""
    requests_per_minute: int | None = attrs.field(default=None, validator=optional_int_at_least(1))
    """The backend's request limit (also learned from rate-limit headers; the lower wins)."""
    tokens_per_minute: int | None = attrs.field(default=None, validator=optional_int_at_least(1))
    """The backend's token limit; each request reserves its estimated tokens."""
    thread_limit: int = attrs.field(default=DEFAULT_THREAD_LIMIT, validator=int_at_least(1))
    """Worker threads running sync tools at once, over all tools."""
    cache_size: int = attrs.field(default=DEFAULT_CACHE_SIZE, validator=int_at_least(1))
    """Results of ``cache=True`` tools kept at most, over all tools (least recently used
    first out)."""
    prices: PriceTable | None = attrs.field(default=None, converter=_prices)
    """Prices laid over the default price table of the driver's cost ledger, model by model
    and tier by tier: ``{model: {tier: {"input", "output", "cached_input"}}}`` in USD per
    million tokens (``docs/batch.md``). Given, the driver counts every answered request's
    tokens (``driver.statistics().cost``)."""
    exact_cost: bool = attrs.field(default=False, validator=is_bool)
    """Refuse to open unless every backend's model has a price for each tier it may be
    answered on (and the standard tier, for the saving), and every model ``prices`` names is
    sent by some backend: the cost report then never leaves a model out."""
    backend_options: Mapping[str, Any] = attrs.field(
        factory=dict, converter=check_options, repr=lambda options: repr(sorted(options))
    )
    """Options of the backend, as :func:`agentcore.wire.backend` takes them: its own
    (``service_tier``, ``journal``, ``gather``, ``poll``, ``poll_max``, ``stream``,
    ``transport``, ``max_reply_bytes``, ``warm_up``, ``dialect``, ``config``), checked here,
    and its dialect's options, checked when the backend is configured. Given with a
    configured ``Backend``, its own options replace that field of it."""


OPTION_NAMES = frozenset(field.name for field in attrs.fields(DriverOptions))
"""The fields of :class:`DriverOptions`: the keywords of the entry points that are no option
of the backend."""


def resolve_options(options: DriverOptions | None, keywords: Mapping[str, Any]) -> DriverOptions:
    """``options`` (default: all defaults) with each keyword replacing its field; keywords that
    are no field are added to ``backend_options`` (options of the backend).

    Raises:
        ConfigError: ``options`` is not a :class:`DriverOptions`, or a value is invalid.
    """
    if options is None:
        options = DriverOptions()
    elif not isinstance(options, DriverOptions):
        raise ConfigError(f"options must be a DriverOptions, got {options!r}")
    if not keywords:
        return options
    fields = {name: value for name, value in keywords.items() if name in OPTION_NAMES}
    extra = {name: value for name, value in keywords.items() if name not in OPTION_NAMES}
    if extra:
        given = fields.get("backend_options", options.backend_options)
        fields["backend_options"] = {**check_options(given), **extra}
    return attrs.evolve(options, **fields)
