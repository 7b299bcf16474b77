"""The configured backend: the value a backend URL and its options become.

:class:`Backend` is what :func:`agentcore.wire.backend` returns and what every entry point
that opens a driver takes in place of a URL: where the server is, the codec that speaks its
dialect, the transport to reach it, and the backend's own options as typed fields (its
service tier, a Batch API backend's :class:`BatchSettings`). Every field is checked when the
value is built, by ``wire.backend`` and by ``attrs.evolve`` alike: an option the backend
cannot use (a tier on a Batch API backend, flex on an API without it) is a
:class:`~agentcore.ConfigError` there.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from typing import Any, Final

import attrs

from .._codecs.codec import AlignPrefix, Codec, TransportKind, WarmUp, says_schema_on_final
from .._codecs.dialects import DIALECTS
from .._codecs.openai import OpenAICodec
from .._codecs.reply_limit import DEFAULT_MAX_REPLY_BYTES
from .._core.errors import ConfigError
from .._core.service_tier import ServiceTier, check_service_tier

__all__ = ["BATCH_SETTINGS", "Backend", "BatchSettings", "check_align_prefix", "check_verify"]


def _journal(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, str | os.PathLike):
        raise ConfigError(f"journal must be a file path or None, got {value!r}")


def _seconds(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ConfigError(f"{attribute.name} must be a number of seconds >= 0, got {value!r}")


def _tokens(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"{attribute.name} must be a positive integer or None, got {value!r}")


def _flag(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"{attribute.name} must be True or False, got {value!r}")


@attrs.frozen(kw_only=True)
class BatchSettings:
    """How a Batch API backend (``openai-batch://``, ``anthropic-batch://``) gathers its
    model calls into hops, polls them and journals them (``docs/batch.md``).

    Given to :func:`agentcore.wire.backend` (and every entry point that configures a
    backend) as the keywords ``journal``, ``replace_journal``, ``gather``, ``poll``,
    ``poll_max``, ``max_enqueued_tokens`` and ``clean_up``.

    Raises:
        ConfigError: a journal that is no path, a negative or non-numeric number of seconds,
            an enqueued-token limit that is no positive integer, or a flag that is no bool.
    """

    journal: str | os.PathLike[str] | None = attrs.field(default=None, validator=_journal)
    """The journal file of the hops, so a restarted process resumes a hop instead of
    submitting it again (``None``: no journal)."""
    gather: float = attrs.field(default=1.0, validator=_seconds)
    """A hop closes once no new call has arrived for this many seconds."""
    poll: float = attrs.field(default=5.0, validator=_seconds)
    """Seconds before the first poll of a submitted hop (then half as long again each time)."""
    poll_max: float = attrs.field(default=60.0, validator=_seconds)
    """The longest wait between two polls."""
    replace_journal: bool = attrs.field(default=False, validator=_flag)
    """Start the journal anew instead of resuming it, first cancelling the provider batches
    the old journal left in flight (they would run, and be billed, for nothing)."""
    max_enqueued_tokens: int | None = attrs.field(default=None, validator=_tokens)
    """The provider's limit on input tokens enqueued at once for the model (OpenAI's batch
    queue limit, per model and usage tier): hops are packed under it (``None``: no limit)."""
    clean_up: bool = attrs.field(default=False, validator=_flag)
    """Delete an ended hop's files at the provider (OpenAI's input, output and error files;
    Anthropic's batch) once its answers are in the journal."""


BATCH_SETTINGS: Final = tuple(field.name for field in attrs.fields(BatchSettings))
"""The keywords that configure a Batch API backend's :class:`BatchSettings`."""


def check_verify(value: object) -> bool | ssl.SSLContext:
    """``value`` as a backend's ``verify`` option.

    Raises:
        ConfigError: neither a bool nor an ``ssl.SSLContext``.
    """
    if not isinstance(value, bool | ssl.SSLContext):
        raise ConfigError(f"verify must be True, False or an ssl.SSLContext, got {value!r}")
    return value


def _tier(value: object) -> ServiceTier | None:
    return None if value is None else check_service_tier(value)


def check_align_prefix(value: object) -> AlignPrefix:
    """``value`` as an ``align_prefix`` option (``"auto"``, ``True`` or ``False``).

    Raises:
        ConfigError: any other value.
    """
    if value is True or value is False or value == "auto":
        return value
    raise ConfigError(f"align_prefix must be 'auto', True or False, got {value!r}")


def _batch(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, BatchSettings):
        raise ConfigError(f"Backend.batch must be a BatchSettings or None, got {value!r}")


@attrs.frozen
class Backend:
    """A configured inference backend: where it is, how to talk to it, what it supports.

    Built by :func:`agentcore.wire.backend` from a URL such as ``vllm://127.0.0.1:8000``.

    Raises:
        ConfigError: an option the backend cannot use: a service tier on a Batch API backend,
            a flex tier on an API without one, streaming on a Batch API backend.
    """

    name: str
    """Dialect name: one of :data:`agentcore._codecs.dialects.DIALECTS` (``openai``, ``vllm``,
    ``sglang``, ``dynamo``, ``sim``, ``llamacpp``), ``anthropic`` or ``bedrock``; or the
    Batch API scheme (``openai-batch``, ``anthropic-batch``)."""
    base_url: str
    """``http(s)://host[:port][/base path]`` that request paths are appended to."""
    codec: Codec = attrs.field(eq=False, repr=False)
    transport: TransportKind = "httpx"
    """Default transport: the lean h11 one for self-hosted plain-HTTP servers, httpx for
    hosted APIs."""
    self_hosted: bool = False
    """``True`` for servers we run (prefix warming on by default, no per-token cost)."""
    stream: bool = False
    """Whether requests are streamed by default."""
    options: Mapping[str, Any] = attrs.field(factory=dict, eq=False)
    """Dialect options as given (never holds the API key)."""
    max_reply_bytes: int | None = DEFAULT_MAX_REPLY_BYTES
    """The cap on one reply body; a larger reply fails with ``ErrorKind.REPLY_TOO_LARGE``."""
    reuse_streams: bool = True
    """Whether a connection is kept after a streamed reply (the dialect record's
    ``reuse_streams``: ``False`` for llama-server, which closes it right after every streamed
    reply, so reusing it races that close)."""
    verify: bool | ssl.SSLContext = attrs.field(default=True, converter=check_verify)
    """How an ``https://`` server's certificate is checked: ``True`` against the system's CA
    store (the lean transport) or the CA bundle httpx uses, ``False`` not at all, or with the
    ``ssl.SSLContext`` given (a private CA, client certificates)."""
    warm_up: WarmUp = "off"
    """How a batch warms the shared prefix before its fan-out (``docs/backends.md``):
    ``off``, ``check`` (vLLM: one one-token request without the prefix, which only checks the
    backend serves: the engine shares the prefix between the first requests themselves),
    ``request`` (one one-token request carrying the prefix) or ``slots`` (llama-server: one
    request, then the warm slot copied into every slot). Defaults to the dialect record's
    ``warm_up`` on a self-hosted server, ``off`` on a hosted API."""
    model: str = ""
    """The model name every request is sent with (the codec's)."""
    service_tier: ServiceTier | None = attrs.field(default=None, converter=_tier)
    """The service tier of the backend's requests (``docs/batch.md``): ``"standard"``,
    ``"flex"`` (each request asks for the flex tier) or ``"flex-then-standard"``; ``None``:
    the API's default tier, and no tier accounting. Flex needs an OpenAI-compatible API."""
    batch: BatchSettings | None = attrs.field(default=None, validator=_batch)
    """A Batch API backend's settings; ``None`` on every other backend."""
    align_prefix: AlignPrefix = attrs.field(default=False, converter=check_align_prefix)
    """Whether a batch pads its shared prefix to the engine's prefix-cache blocks
    (``docs/backends.md``): ``"auto"`` (the default where the engine reports its block size
    and tokenizes requests: vLLM) pads where blocks hold 64 tokens or more, ``True`` whatever
    their size, ``False`` never."""

    def __attrs_post_init__(self) -> None:
        if self.align_prefix is True:
            record = DIALECTS.get(self.name)
            if record is None or record.prefix_blocks is None:
                raise ConfigError(
                    "align_prefix=True needs an engine that reports its cache blocks and "
                    f"tokenizes requests (vllm); the {self.name} backend does not"
                )
        if self.batch is not None:
            if self.service_tier is not None:
                raise ConfigError(
                    f"service_tier={self.service_tier!r} does not apply to {self.name}://: "
                    "a Batch API answers at its own batch tier"
                )
            if self.stream:
                raise ConfigError(
                    f"{self.name}:// answers whole replies; stream=True does not apply"
                )
        if self.service_tier in ("flex", "flex-then-standard") and not isinstance(
            self.codec, OpenAICodec
        ):
            raise ConfigError(
                f"service_tier={self.service_tier!r}: the {self.name} backend has no flex tier "
                "(OpenAI-compatible APIs do; for Anthropic use anthropic-batch://)"
            )

    @property
    def schema_on_final(self) -> bool:
        """Whether a typed run's final request carries the output schema for the server to
        constrain the reply with (``response_format`` on the OpenAI-compatible dialects, unless
        ``response_format="never"``): the codec's own ``schema_on_final``, ``False`` for a
        codec without one (Anthropic, Bedrock: the schema is in the system prompt only)."""
        return says_schema_on_final(self.codec)
