"""Backend selection: a URL (or a ready :class:`~agentcore.wire.Backend`) to a configured backend.

===============================  =========  ======================================  =========
URL                              dialect    base URL                                transport
===============================  =========  ======================================  =========
``openai://``                    openai     ``https://api.openai.com/v1``           httpx
``openai://host[:port][/path]``  openai     ``https://host[:port]/path`` (``/v1``)  httpx
``https://host[:port][/path]``   dialect=   as given (``/v1`` when no path)         httpx
``http://host:port[/path]``      dialect=   as given (``/v1`` when no path)         lean
``vllm://host[:port][/path]``    vllm       ``http://host:8000/v1``                 lean
``sglang://host[:port][/path]``  sglang     ``http://host:30000/v1``                lean
``dynamo://host[:port][/path]``  dynamo     ``http://host:8000/v1``                 lean
``llamacpp://host[:port][/path]``  llamacpp   ``http://host:8080/v1``                 lean
``anthropic://``                 anthropic  ``https://api.anthropic.com``           httpx
``sim://``                       sim        started by the driver                   lean
``openai-batch://[host]``        openai     OpenAI's Batch API (``/v1/batches``)    httpx
``anthropic-batch://[host]``     anthropic  Anthropic's Message Batches API         httpx
===============================  =========  ======================================  =========

The ``*-batch`` schemes send every model call through the provider's Batch API
(``docs/batch.md``); with a host they address a compatible server (plain HTTP on a loopback
host, as the simulator serves it; HTTPS otherwise).

``dialect=`` picks the dialect of a plain ``http(s)://`` URL (``openai`` by default; any
OpenAI-compatible dialect, or ``anthropic``). The key for ``openai://`` and ``anthropic://``
defaults to ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY``.

Four options configure the backend itself on every scheme: ``max_reply_bytes`` (the cap on
one reply body, 16 MiB by default, ``None`` for none), ``warm_up`` (how a batch warms the
shared prefix: ``off``, ``check`` or ``request``, or ``slots`` for llama-server; the default
is the dialect record's ``warm_up`` on a self-hosted server, ``off`` for hosted APIs),
``align_prefix`` (pad a batch's shared prefix to the engine's cache blocks: ``"auto"`` where
the dialect record says how to measure them, else ``False``) and ``verify`` (how an
``https://`` server's certificate is checked: ``True``, ``False`` or an ``ssl.SSLContext``).

Every dialect fact used here (a scheme's default port, the transport, self-hosting, warm-up,
stream reuse) is read from the dialect's record in :data:`agentcore._codecs.dialects.DIALECTS`.

API keys are read from the environment only for the vendors' own hosts, so a key meant for
OpenAI is never sent to another server, and they are never stored in ``Backend.options``.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import SplitResult, urlsplit

import attrs

from .._codecs.anthropic import AnthropicCodec
from .._codecs.codec import AlignPrefix, Codec, TransportKind, WarmUp
from .._codecs.dialects import DIALECTS, ROUTER_SESSION_HEADERS
from .._codecs.openai import OpenAICodec
from .._codecs.reply_limit import DEFAULT_MAX_REPLY_BYTES
from .._core.errors import ConfigError
from .._core.service_tier import ServiceTier
from .._core.validators import check_header_value
from .backend import BATCH_SETTINGS, Backend, BatchSettings
from .options import BEDROCK_OPTIONS, OWN_OPTIONS

__all__ = ["BATCH_SCHEMES", "backend", "bind_sim", "is_batch", "is_sim"]

OPENAI_BASE_URL = "https://api.openai.com/v1"
ANTHROPIC_BASE_URL = "https://api.anthropic.com"
SIM_BASE_URL = "sim://"

_SIM_KEYS = frozenset({"config"})
"""``sim://`` options read by the driver when it starts the embedded server."""


def backend(
    url_or_backend: str | Backend,
    *,
    model: str | None = None,
    api_key: str | None = None,
    service_tier: ServiceTier | None = None,
    journal: str | os.PathLike[str] | None = None,
    gather: float | None = None,
    poll: float | None = None,
    poll_max: float | None = None,
    **options: Any,
) -> Backend:
    """Configure a backend from a URL (or change the own options of a configured one).

    ::

        agentcore.wire.backend("vllm://127.0.0.1:8000", model="Qwen/Qwen2.5-7B-Instruct")
        agentcore.wire.backend("dynamo://127.0.0.1:8000", model="m", extra_fields=["timing"])
        agentcore.wire.backend("http://10.0.0.5:9000/v1", model="m", dialect="sglang")
        agentcore.wire.backend("openai://", model="o4-mini", service_tier="flex")
        agentcore.wire.backend("openai-batch://", model="gpt-4o-mini", journal="hops.jsonl")

    Args:
        url_or_backend: a URL (see the table in ``docs/backends.md``) or a configured
            :class:`Backend`, returned with the own options given replaced (its dialect
            options, key and model were fixed when it was built).
        model: the model name sent in every request (required with a URL).
        api_key: the API key; for ``openai://`` and ``anthropic://`` it defaults to
            ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY``.
        service_tier: ``"standard"``, ``"flex"`` or ``"flex-then-standard"``
            (:attr:`Backend.service_tier`; ``docs/batch.md``).
        journal, gather, poll, poll_max: a Batch API backend's settings
            (:class:`BatchSettings`).
        **options: ``stream`` (stream replies by default), ``transport`` (``"lean"`` or
            ``"httpx"``), ``max_reply_bytes``, ``warm_up``, ``align_prefix``, ``verify``,
            ``dialect`` (for ``http(s)://`` URLs), ``config`` (a ``SimConfig``, for ``sim://``),
            and the codec's dialect options (``docs/backends.md``).

    Returns:
        The configured backend.

    Raises:
        ConfigError: unknown scheme, malformed URL, missing API key for a hosted API, or an
            option the backend does not take (a tier on a Batch API backend, Batch API
            settings on another one, flex on an API without it); each names the option and
            what it accepts.
    """
    typed = {"service_tier": service_tier, "journal": journal, "gather": gather,
             "poll": poll, "poll_max": poll_max}  # fmt: skip
    options.update((name, value) for name, value in typed.items() if value is not None)
    own = {name: OWN_OPTIONS[name](options.pop(name)) for name in list(options)
           if name in OWN_OPTIONS}  # fmt: skip
    if api_key is not None:
        check_header_value("the API key (api_key=)", api_key, secret=True)
    if isinstance(url_or_backend, Backend):
        return _reconfigure(url_or_backend, model, api_key, own, options)
    if not isinstance(url_or_backend, str):
        raise ConfigError(f"backend must be a URL string or a Backend, got {url_or_backend!r}")
    if model is None:
        raise ConfigError(f"model= is required to configure {url_or_backend!r}")
    try:
        parts = urlsplit(url_or_backend.strip())
    except ValueError as exc:
        raise ConfigError(f"malformed backend URL {url_or_backend!r}: {exc}") from None
    stream: bool = own.get("stream", False)
    transport: TransportKind | None = own.get("transport")
    max_reply: int | None = own.get("max_reply_bytes", DEFAULT_MAX_REPLY_BYTES)
    warm_up: WarmUp | None = own.get("warm_up")
    align: AlignPrefix | None = own.get("align_prefix")
    given = dict(options)
    if "dialect" in own:
        options["dialect"] = given["dialect"] = own["dialect"]
    if "config" in own:
        options["config"] = given["config"] = own["config"]
    if stream:
        given["stream"] = stream
    if transport is not None:
        given["transport"] = transport
    if max_reply != DEFAULT_MAX_REPLY_BYTES:
        given["max_reply_bytes"] = max_reply
    if warm_up is not None:
        given["warm_up"] = warm_up
    if align is not None:
        given["align_prefix"] = align
    batch = {name: own[name] for name in BATCH_SETTINGS if name in own}
    asked = _Asked(url_or_backend, parts, model, api_key, stream, transport, options, given)
    configured = _configure(asked)
    if configured.name in BATCH_SCHEMES:
        configured = attrs.evolve(configured, batch=BatchSettings(**batch))
    elif batch:
        raise ConfigError(
            f"{sorted(batch)} apply to openai-batch:// and anthropic-batch:// backends, "
            f"not to {parts.scheme}://"
        )
    record = DIALECTS.get(configured.name)  # Anthropic and Bedrock have none: their defaults
    default: WarmUp = "off"
    if configured.self_hosted:
        default = "request" if record is None else record.warm_up
    blocks = record is not None and record.prefix_blocks is not None
    return attrs.evolve(
        configured,
        max_reply_bytes=max_reply,
        warm_up=default if warm_up is None else warm_up,
        verify=own.get("verify", True),
        align_prefix=("auto" if blocks else False) if align is None else align,
        reuse_streams=True if record is None else record.reuse_streams,
        model=_sent_model(configured.codec, model),
        service_tier=own.get("service_tier"),
    )


def _sent_model(codec: Codec, asked: str) -> str:
    """The model name ``codec`` sends (a dialect's default when ``asked`` is empty)."""
    sent = getattr(codec, "model", asked)
    return sent if isinstance(sent, str) else asked


_FIXED = ("dialect", "config")
"""Own options that shape the codec or the simulator: fixed once the backend is built."""


def _reconfigure(
    configured: Backend,
    model: str | None,
    api_key: str | None,
    own: dict[str, Any],
    codec_options: dict[str, Any],
) -> Backend:
    """``configured`` with the own options in ``own`` replaced (see :func:`backend`)."""
    fixed = sorted(codec_options) + [name for name in _FIXED if name in own]
    fixed += ["api_key"] if api_key is not None else []
    if fixed:
        raise ConfigError(
            f"{fixed} are fixed when a Backend is built from its URL; give them to "
            "wire.backend(url, ...) rather than with a configured Backend"
        )
    if model is not None and model != configured.model:
        raise ConfigError(
            f"the Backend was configured for model {configured.model!r}; it cannot send "
            f"{model!r} (configure another Backend for that model)"
        )
    changes = {name: value for name, value in own.items() if name not in BATCH_SETTINGS}
    batch = {name: value for name, value in own.items() if name in BATCH_SETTINGS}
    if batch:
        if configured.batch is None:
            raise ConfigError(
                f"{sorted(batch)} apply to openai-batch:// and anthropic-batch:// backends, "
                f"not to the {configured.name} backend"
            )
        changes["batch"] = attrs.evolve(configured.batch, **batch)
    return attrs.evolve(configured, **changes) if changes else configured


@attrs.define
class _Asked:
    """What :func:`backend` was asked for a URL, for the builders below: the URL and its parts,
    the model and key, the backend's own options, the codec's options (consumed as they are
    read) and the options as given (kept on the :class:`Backend`)."""

    url: str
    parts: SplitResult
    model: str
    api_key: str | None
    stream: bool
    transport: TransportKind | None
    options: dict[str, Any]
    given: dict[str, Any]

    def backend(
        self, name: str, base: str, codec: Codec, kind: TransportKind, self_hosted: bool
    ) -> Backend:
        """The configured :class:`Backend`, with the stream default and options asked for."""
        return Backend(name, base, codec, kind, self_hosted, self.stream, self.given)


def _configure(asked: _Asked) -> Backend:
    parts, model, api_key, options = asked.parts, asked.model, asked.api_key, asked.options
    scheme = parts.scheme.lower()

    record = DIALECTS.get(scheme)
    if scheme == "sim":
        codec_options = {k: v for k, v in options.items() if k not in _SIM_KEYS}
        _no_dialect(codec_options, "sim")
        codec: Codec = _openai_codec(SIM_BASE_URL, model, api_key, "sim", codec_options)
        return _dialect_backend(scheme, SIM_BASE_URL, codec, asked)
    _check_url(asked.url, parts)
    if scheme == "bedrock":
        return _bedrock_backend(asked)
    if record is not None and record.port is not None:  # a self-hosted engine's own scheme
        if not parts.hostname:
            raise ConfigError(f"{scheme}:// needs a host, e.g. {scheme}://127.0.0.1:{record.port}")
        _no_dialect(options, scheme)
        base = _base_url("http", parts, record.port)
        codec = _openai_codec(base, model, api_key, scheme, options)
        return _dialect_backend(scheme, base, codec, asked)
    if scheme in BATCH_SCHEMES:
        return _batch_backend(scheme, asked)
    if scheme == "openai":
        _no_dialect(options, "openai")
        if parts.hostname:
            base = _base_url("https", parts, None)
        else:
            base = OPENAI_BASE_URL
            api_key = _key(api_key, "OPENAI_API_KEY", "openai://")
            options.setdefault("max_tokens_field", "max_completion_tokens")
            # OpenAI routes requests by prefix and this key: one key per shared prefix sends
            # a batch's requests to the machines that hold its prefix.
            options.setdefault("prompt_cache_key", True)
        codec = _openai_codec(base, model, api_key, "openai", options)
        return _dialect_backend(scheme, base, codec, asked)
    if scheme == "anthropic":
        _no_dialect(options, "anthropic")
        if parts.hostname:
            base = _base_url("https", parts, None, default_path="")
        else:
            base = ANTHROPIC_BASE_URL
            api_key = _key(api_key, "ANTHROPIC_API_KEY", "anthropic://")
        codec = _anthropic_codec(base, model, api_key, options)
        return asked.backend("anthropic", base, codec, asked.transport or "httpx", False)
    if scheme in ("http", "https"):
        if not parts.hostname:
            raise ConfigError(f"backend URL {asked.url!r} has no host")
        dialect = options.pop("dialect", "openai")
        plain = scheme == "http"
        kind: TransportKind = asked.transport or ("lean" if plain else "httpx")
        if dialect == "anthropic":
            base = _base_url(scheme, parts, None, default_path="")
            codec = _anthropic_codec(base, model, api_key, options)
        else:
            if dialect not in DIALECTS:
                raise ConfigError(
                    f"unknown dialect {dialect!r}; expected one of {[*DIALECTS, 'anthropic']}"
                )
            base = _base_url(scheme, parts, None)
            if dialect == "openai":
                # An OpenAI-compatible server that is not OpenAI (vLLM, SGLang, llama-server
                # behind a plain URL) applies a schema as a grammar over the whole reply, which
                # forbids tool calls: send it only where no tools are offered.
                options.setdefault("response_format", "without_tools")
                if plain:  # a self-hosted server, maybe replicas behind a router
                    options.setdefault("session_key_header", ROUTER_SESSION_HEADERS)
            codec = _openai_codec(base, model, api_key, dialect, options)
        return asked.backend(dialect, base, codec, kind, plain)
    raise ConfigError(
        f"unknown backend scheme {parts.scheme!r} in {asked.url!r}; use "
        f"{', '.join(f'{name}://' for name in _schemes())}, http:// or https://"
    )


def _schemes() -> list[str]:
    """The URL schemes :func:`backend` takes besides ``http`` and ``https``."""
    own = [name for name, record in DIALECTS.items() if record.port is not None]
    return ["openai", "anthropic", "bedrock", *own, "sim", *BATCH_SCHEMES]


BATCH_SCHEMES = ("openai-batch", "anthropic-batch")
"""The URL schemes of the providers' Batch APIs."""
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def is_batch(target: object) -> bool:
    """Whether ``target`` is a Batch API URL (``openai-batch://``, ``anthropic-batch://``)."""
    return isinstance(target, str) and _scheme(target) in BATCH_SCHEMES


def _batch_backend(scheme: str, asked: _Asked) -> Backend:
    """A Batch API backend: the synchronous dialect's codec (each batch line is the body the
    synchronous endpoint would get) at the provider's base URL."""
    parts, model, api_key, options = asked.parts, asked.model, asked.api_key, asked.options
    vendor = scheme.removesuffix("-batch")
    _no_dialect(options, vendor)
    if asked.stream:
        raise ConfigError(f"{scheme}:// answers whole replies; stream=True does not apply")
    loopback = parts.hostname in _LOOPBACK
    if vendor == "openai":
        if parts.hostname:
            base = _base_url("http" if loopback else "https", parts, None)
        else:
            base = OPENAI_BASE_URL
            api_key = _key(api_key, "OPENAI_API_KEY", f"{scheme}://")
            options.setdefault("max_tokens_field", "max_completion_tokens")
        codec = _openai_codec(base, model, api_key, "openai", options)
    else:
        if parts.hostname:
            base = _base_url("http" if loopback else "https", parts, None, default_path="")
        else:
            base = ANTHROPIC_BASE_URL
            api_key = _key(api_key, "ANTHROPIC_API_KEY", f"{scheme}://")
        codec = _anthropic_codec(base, model, api_key, options)
    kind: TransportKind = asked.transport or ("lean" if loopback else "httpx")
    return asked.backend(scheme, base, codec, kind, False)


def _dialect_backend(name: str, base: str, codec: Codec, asked: _Asked) -> Backend:
    """The backend of a dialect's own URL scheme, with its record's transport and hosting."""
    record = DIALECTS[name]
    kind = asked.transport or record.transport
    return asked.backend(name, base, codec, kind, record.self_hosted)


def _scheme(url: str) -> str:
    try:
        return urlsplit(url.strip()).scheme.lower()
    except ValueError:
        return ""


def is_sim(target: object) -> bool:
    """Whether ``target`` names the embedded simulator, without building it: a ``sim://`` URL,
    or a :class:`Backend` configured from one (``backend("sim://", config=SimConfig(...))``)."""
    if isinstance(target, Backend):
        return target.base_url == SIM_BASE_URL
    return isinstance(target, str) and _scheme(target) == "sim"


def bind_sim(configured: Backend, url: str) -> Backend:
    """The ``sim://`` backend ``configured``, bound to the started simulator at ``url``
    (its model, key, dialect options and transport kept)."""
    codec = configured.codec
    if not isinstance(codec, OpenAICodec):  # pragma: no cover - built by backend() above
        raise ConfigError(f"not a sim:// backend: {configured!r}")
    return attrs.evolve(configured, base_url=url, codec=codec.with_base_url(url))


def _bedrock_backend(asked: _Asked) -> Backend:
    """``bedrock://REGION``: the Converse API, signed with the AWS credentials chain."""
    parts, options = asked.parts, asked.options
    region = parts.hostname or ""
    if not region or parts.port is not None or parts.path not in ("", "/"):
        raise ConfigError("bedrock:// URLs name a region only, e.g. bedrock://us-east-1")
    if asked.api_key is not None:
        raise ConfigError("bedrock:// signs with AWS credentials; it takes no api_key")
    unknown = set(options) - BEDROCK_OPTIONS
    if unknown:
        raise ConfigError(
            f"unknown bedrock:// options {sorted(unknown)}; expected {sorted(BEDROCK_OPTIONS)}"
        )
    from .._codecs.bedrock import BedrockCodec  # noqa: PLC0415 - optional extra, loaded on use
    from .._transports.sigv4 import BedrockSigner  # noqa: PLC0415

    signer = BedrockSigner(region, profile=options.get("profile"))
    codec = BedrockCodec(
        region,
        asked.model,
        signer,
        endpoint_url=options.get("endpoint_url"),
        cache_prompt=bool(options.get("cache_prompt", False)),
        max_tokens=options.get("max_tokens"),
    )
    return asked.backend("bedrock", codec.endpoint_url, codec, asked.transport or "httpx", False)


def _check_url(url: str, parts: SplitResult) -> None:
    if parts.query or parts.fragment:
        raise ConfigError(f"backend URL {url!r} must not have a query or fragment")
    if parts.username is not None or parts.password is not None:
        raise ConfigError(
            "backend URL must not carry credentials; pass api_key= (or use the environment)"
        )
    try:
        parts.port  # noqa: B018  (validates the port)
    except ValueError:
        raise ConfigError(f"backend URL {url!r} has an invalid port") from None


def _base_url(
    scheme: str, parts: SplitResult, default_port: int | None, default_path: str = "/v1"
) -> str:
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = parts.port if parts.port is not None else default_port
    netloc = host if port is None else f"{host}:{port}"
    path = parts.path.rstrip("/") or default_path
    return f"{scheme}://{netloc}{path}"


def _key(api_key: str | None, env: str, scheme: str) -> str:
    if api_key is not None:
        return api_key  # checked with every other key in ``backend``
    key = os.environ.get(env)
    if not key:
        raise ConfigError(f"{scheme} needs an API key: pass api_key= or set {env}")
    check_header_value(f"the API key in ${env}", key, secret=True)
    return key


def _no_dialect(options: dict[str, Any], scheme: str) -> None:
    dialect = options.pop("dialect", scheme)
    if dialect != scheme:
        raise ConfigError(
            f"dialect={dialect!r} conflicts with the {scheme}:// scheme; use an http(s):// URL "
            "to choose the dialect"
        )


def _openai_codec(
    base: str, model: str, api_key: str | None, dialect: str, options: dict[str, Any]
) -> Codec:
    return OpenAICodec(base_url=base, model=model, api_key=api_key, dialect=dialect, **options)


def _anthropic_codec(base: str, model: str, api_key: str | None, options: dict[str, Any]) -> Codec:
    try:
        return AnthropicCodec(base_url=base, model=model, api_key=api_key, **options)
    except TypeError as exc:
        raise ConfigError(f"invalid option for the anthropic backend: {exc}") from None
