"""The simulator's knobs, and the timing they imply.

Defaults describe a mid-sized model on one GPU, scaled so that a laptop run of a few hundred
agents finishes in seconds: prefill at ~20 µs per uncached prompt token (50k tokens/s), decode
at ~1 ms per output token, 64 concurrent sequences (vLLM's ``max_num_seqs`` defaults to a few
hundred; fewer slots keep queueing visible in small demos), 16-token KV blocks (vLLM's
default block size) and room for 16,384 of them (262,144 cached tokens).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import attrs

from .._core.errors import ConfigError

__all__ = ["SimConfig"]


_Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def _number(low: float, high: float = float("inf"), *, integer: bool = False) -> _Validator:
    """A validator for a number (an ``int`` if ``integer``) within ``[low, high]``."""
    kinds = (int,) if integer else (int, float)
    kind = "an int" if integer else "a number"

    def check(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, kinds) or not low <= value <= high:
            bounds = f">= {low}" if high == float("inf") else f"within [{low}, {high}]"
            raise ConfigError(f"SimConfig.{attribute.name} must be {kind} {bounds}, got {value!r}")

    return check


_count = _number(1, integer=True)
_size = _number(0, integer=True)
_share = _number(0.0, 1.0)
_duration = _number(0.0)


def _positive(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"SimConfig.{attribute.name} must be a number > 0, got {value!r}")


def _non_empty(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"SimConfig.{attribute.name} must be a non-empty string")


def _flag(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"SimConfig.{attribute.name} must be True or False, got {value!r}")


def _scheduling(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in ("fifo", "priority"):
        raise ConfigError(f"SimConfig.scheduling must be 'fifo' or 'priority', got {value!r}")


def _optional_names(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    try:
        return tuple(value)
    except TypeError:
        return value


def _names(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, tuple) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(
            f"SimConfig.{attribute.name} must be None or a list of non-empty strings, got {value!r}"
        )


_FAIL_TYPES = (
    "rate_limit_error",
    "api_error",
    "overloaded_error",
    "timeout_error",
    "billing_error",
)


def _fail_type(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and value not in _FAIL_TYPES:
        raise ConfigError(
            f"SimConfig.{attribute.name} must be None or one of {list(_FAIL_TYPES)}, got {value!r}"
        )


def _batch_numbers(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, tuple) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value
    ):
        raise ConfigError(
            f"SimConfig.{attribute.name} must be a list of batch numbers >= 1, got {value!r}"
        )


def _refusal_status(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in (429, 498) or isinstance(value, bool):
        raise ConfigError(f"SimConfig.{attribute.name} must be 429 or 498, got {value!r}")


@attrs.frozen(kw_only=True)
class SimConfig:
    """Configuration of the simulated OpenAI-compatible backend.

    Every value is checked on construction; a bad one raises :class:`~agentcore.ConfigError`.
    Simulated time is trio time divided by ``speedup``: with ``speedup=10`` a reply that would
    take 300 ms takes 30 ms.
    """

    model: str = attrs.field(default="agentcore-sim", validator=_non_empty)
    """The model name listed by ``GET /v1/models`` (requests may name any model)."""
    slots: int = attrs.field(default=64, validator=_count)
    """Concurrent sequences the engine runs; further requests wait for a slot."""
    scheduling: Literal["fifo", "priority"] = attrs.field(default="fifo", validator=_scheduling)
    """``"fifo"``: arrival order. ``"priority"``: the request body's vLLM-style ``priority``
    (lower = sooner) or Dynamo's ``nvext.agent_hints.priority`` (higher = sooner) orders the
    waiting requests, ties in arrival order."""
    prefill_us_per_token: float = attrs.field(default=20.0, validator=_duration)
    """Prefill cost of each prompt token not found in the prefix cache, in microseconds."""
    decode_ms_per_token: float = attrs.field(default=1.0, validator=_duration)
    """Decode cost of each output token, in milliseconds."""
    block_size: int = attrs.field(default=16, validator=_count)
    """Tokens per KV block: the unit of prefix caching (only full blocks are cached)."""
    cache_blocks: int = attrs.field(default=16384, validator=_size)
    """Prefix-cache capacity in blocks, least recently used evicted first (0 disables it)."""
    tool_rounds: int = attrs.field(default=1, validator=_size)
    """Assistant turns that call tools before the model answers."""
    max_parallel_calls: int = attrs.field(default=2, validator=_count)
    """Most tool calls in one assistant turn (each turn makes 1 to this many)."""
    repeat_share: float = attrs.field(default=0.5, validator=_share)
    """Share of tool calls whose arguments come from a small pool shared by every
    conversation, so that identical calls happen across agents."""
    pool_size: int = attrs.field(default=4, validator=_count)
    """Argument sets in the shared pool, per tool."""
    seed: int = attrs.field(default=0, validator=_number(float("-inf"), integer=True))
    """Mixed into every random choice; the same seed and request give the same reply."""
    answer_tokens: int = attrs.field(default=48, validator=_count)
    """Length of a plain-text answer, in tokens."""
    reasoning_tokens: int = attrs.field(default=0, validator=_size)
    """Hidden tokens decoded before every reply (a reasoning model's thinking): they cost
    decode time and count in ``completion_tokens``, never appear in the text."""
    stream_chunk_tokens: int = attrs.field(default=4, validator=_count)
    """Tokens per streamed content or arguments chunk."""
    fail_rate: float = attrs.field(default=0.0, validator=_share)
    """Share of requests answered with an injected 429 (``retry-after: 1``) or 500 error,
    chosen by a hash of the request content and the number of times it failed before."""
    requests_per_minute: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(_count)
    )
    """Requests admitted per simulated minute, as a hosted API limits them (``None``: no
    limit). Past it a request gets a 429 with ``retry-after``; every chat answer carries
    OpenAI's ``x-ratelimit-*`` headers."""
    tokens_per_minute: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(_count)
    )
    """Tokens (prompt at admission, completion once decoded) per simulated minute (``None``:
    no limit)."""
    speedup: float = attrs.field(default=1.0, validator=_positive)
    """Divides every simulated duration (and the ``retry-after-ms`` hint)."""
    ignore_stream: bool = attrs.field(default=False, validator=_flag)
    """Answer every request with one ``application/json`` reply, even when it asks for
    ``stream: true`` (as some OpenAI-compatible servers and proxies do)."""
    flex_refuse_rate: float = attrs.field(default=0.0, validator=_share)
    """Share of ``service_tier: "flex"`` requests refused for capacity, as the providers'
    flex tiers do (see :mod:`agentcore._sim.tiers`); the standard tier is never refused."""
    flex_models: tuple[str, ...] | None = attrs.field(
        default=None, converter=_optional_names, validator=_names
    )
    """The models that offer the flex tier (``None``: every model); a flex request for another
    model is refused with HTTP 400, as OpenAI refuses a model without flex."""
    flex_refusal_status: Literal[429, 498] = attrs.field(default=429, validator=_refusal_status)
    """How a capacity refusal is answered: ``429`` "Resource Unavailable" (OpenAI) or ``498``
    ``capacity_exceeded`` (Groq)."""
    batch_delay: float = attrs.field(default=1.0, validator=_number(0.0))
    """Simulated seconds from a batch's creation until it ends (``/v1/batches``,
    ``/v1/messages/batches``; see :mod:`agentcore._sim.batches`)."""
    batch_fail_rate: float = attrs.field(default=0.0, validator=_share)
    """Share of batch lines that fail (a 500 or 429 line in OpenAI's error file, an
    ``errored`` result in Anthropic's); a line sent again gets a fresh draw."""
    batch_fail_type: str | None = attrs.field(default=None, validator=_fail_type)
    """The error every failed batch line reports, as Anthropic names it (``rate_limit_error``,
    ``api_error``, ``overloaded_error``, ``timeout_error``, ``billing_error``; OpenAI lines
    carry the matching status and code); ``None``: a 429 or a 500, drawn per line."""
    batch_delay_max: float | None = attrs.field(
        default=None, validator=attrs.validators.optional(_number(0.0))
    )
    """With it, each batch lasts a duration drawn (per batch, by the seed) between
    ``batch_delay`` and this many simulated seconds."""
    batch_window: float = attrs.field(default=86400.0, validator=_positive)
    """Simulated seconds a batch may run (both providers: 24 h); a batch still running then
    expires, its unfinished lines expired."""
    batch_expire: tuple[int, ...] = attrs.field(
        default=(), converter=_optional_names, validator=_batch_numbers
    )
    """The batches (1 for the first created, 2 for the second...) that run past their window:
    half their lines are answered by then, the rest expire."""
    batch_enqueued_tokens: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(_count)
    )
    """OpenAI's enqueued-token limit: prompt tokens per model in batches not yet ended; a
    batch that would pass it fails (``token_limit_exceeded``). ``None``: no limit."""
    batch_max_requests: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(_count)
    )
    """Most lines a batch may hold (``None``: the provider's, 50,000 for OpenAI and 100,000
    for Anthropic)."""
    batch_max_bytes: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(_count)
    )
    """Most bytes a batch's input may hold (``None``: the provider's, 200 MB for OpenAI's
    input file and 256 MB for an Anthropic batch, as 10**6 bytes each)."""
    batch_retention: float = attrs.field(default=29 * 86400.0, validator=_positive)
    """Simulated seconds after its creation during which an Anthropic batch's results can be
    downloaded (29 days); later they answer 404."""
    api_keys: tuple[str, ...] | None = attrs.field(
        default=None, converter=_optional_names, validator=_names
    )
    """The API keys accepted (``Authorization: Bearer``, ``x-api-key``); any other gets a 401
    on every route but ``/health``. ``None``: any key, or none."""
    models: tuple[str, ...] | None = attrs.field(
        default=None, converter=_optional_names, validator=_names
    )
    """The models served; a request for another gets a 404 (``model_not_found``), a batch line
    too. ``None``: any model."""

    def prefill_seconds(self, uncached_tokens: int) -> float:
        """Simulated seconds to prefill ``uncached_tokens`` prompt tokens."""
        return uncached_tokens * self.prefill_us_per_token * 1e-6 / self.speedup

    def decode_seconds(self, output_tokens: int) -> float:
        """Simulated seconds to decode ``output_tokens`` tokens."""
        return output_tokens * self.decode_ms_per_token * 1e-3 / self.speedup
