"""The OpenAI-compatible dialects: one record per dialect, and what each adds to a request.

Every fact agentcore keeps about a dialect is a field of its :class:`Dialect` record in
:data:`DIALECTS`: its URL scheme's default port, whether such servers are self-hosted, the
default transport, the batch warm-up, whether streamed connections are reused, the options it
takes and their defaults, how it writes priority and the request id. The backend URLs
(:mod:`agentcore._backends.urls`), the option validation and the wire extras below read
the record and nothing else, so a new engine is one more record.

The OpenAI codec builds the common body (model, tools, messages, sampling parameters); this
module holds the per-dialect part: which options a dialect accepts, their validation, and the
extra body fields and headers each dialect puts on the wire.

- ``openai``: ``prompt_cache_key`` (opt-in, on by default for ``openai://`` itself): one key
  per shared prefix, so the provider routes the requests that share it to warm caches.
- ``vllm``: ``priority`` (lower = sooner, only with ``priority=True``: it takes effect only on a
  server started with ``--scheduling-policy priority``; vLLM 0.32 ignores it otherwise, older
  releases refused a non-zero priority there), ``cache_salt``,
  the request id in ``X-Request-Id``, and every tool marked ``"strict": true`` (``strict_tools``:
  vLLM constrains a tool call's arguments to the schema only for strict tools).
- ``sglang``: ``rid`` (the request id), ``priority`` (higher = sooner, opt-in for the same
  reason: it needs ``--enable-priority-scheduling``), ``cache_salt``.
- ``dynamo``: ``nvext.agent_hints`` (priority, expected output length, speculative prefill...),
  ``nvext.extra_fields``, ``nvext.annotations``, ``nvext.cache_salt``, the session contract
  (:class:`~agentcore.core.AgentHints`) in ``x-dynamo-session-*`` headers and the request id
  in ``x-request-id``. Dynamo rejects unknown
  ``nvext`` keys, unknown ``agent_hints`` keys and unknown top-level fields with HTTP 400, so
  everything emitted is checked against :data:`DYNAMO_APIS`, a table per Dynamo release.
- ``sim``: the embedded simulator; like ``vllm`` (priority is opt-in there too).
- ``llamacpp``: llama.cpp's llama-server. Nothing extra: it has no priority, cache salt or
  request-id field (it ignores unknown fields and headers, so sending them would promise
  something that does not happen); ``response_format`` only on calls without tools.

The session contract (which requests belong to one agent, its parent, its last request) is
sent only where the engine reads it (:attr:`Dialect.session`): Dynamo's session headers, and
OpenAI's ``prompt_cache_key``. vLLM's prefix cache is global, SGLang's sessions are a
token-append API of their own and llama-server picks the slot with the longest common prefix
itself: nothing is sent there (docs/backends.md, docs/decisions.md).

A router in front of several replicas is another reader: the agent's session id goes in the
headers a router hashes on (``session_key_header``, by default :data:`ROUTER_SESSION_HEADERS`
on self-hosted dialects: ``x-session-id`` for vllm-router, ``x-smg-routing-key`` for
sglang-router), so its ``consistent_hash`` or sticky policy keeps each agent on the replica
that holds its history.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import attrs
import orjson

from .._core.errors import ConfigError
from .._core.events import CallModel
from .._core.messages import SystemMessage
from .._core.validators import check_header_value
from .codec import TransportKind, WarmUp
from .common import json_default
from .prefix_blocks import PrefixBlocks

__all__ = [
    "DIALECTS",
    "DYNAMO_APIS",
    "Dialect",
    "DynamoApi",
    "OpenAIOptions",
    "ROUTER_SESSION_HEADERS",
    "dialect_body",
    "dialect_headers",
    "make_options",
    "prefix_key",
]

ResponseFormatMode = Literal["always", "without_tools", "never"]
Annotations = Sequence[str] | Callable[[CallModel], Sequence[str]]
"""Dynamo ``nvext.annotations``: a fixed list, or a function of the call giving its list."""

ROUTER_SESSION_HEADERS: tuple[str, ...] = ("x-session-id", "x-smg-routing-key")
"""The headers the routers in front of engine replicas hash a session on, as their sources
read them: vllm-router's ``consistent_hash`` and ``sticky_least_loaded`` take the first of
``x-session-id``, ``x-user-id``, ``x-tenant-id``, ``x-correlation-id``, ``x-request-id``,
``x-trace-id`` (so without ``x-session-id`` they hash agentcore's per-request
``x-request-id`` and scatter an agent's turns); sglang-router's ``consistent_hashing`` and
``manual`` read ``x-smg-routing-key`` (and forward it, where it drops other unknown headers)."""

_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9a-z-]+")
"""An HTTP header name (a token), lower case."""

_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1
_U32_MAX = 2**32 - 1

# The standard OpenAI chat request fields the codec writes itself.
_OPENAI_BODY = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "stop",
        "seed",
        "response_format",
        "stream",
        "stream_options",
    }
)

# ----------------------------------------------------------------------------- Dynamo table

# The OpenAI request fields the Dynamo frontend accepts at the top level (observed on 1.6.1:
# anything else, including vLLM's `priority`/`request_id` and SGLang's `rid`, is answered with
# 400 "Unsupported parameter(s)").
_DYNAMO_TOP_LEVEL = _OPENAI_BODY | {
    "parallel_tool_calls",
    "n",
    "user",
    "logprobs",
    "service_tier",
    "chat_template_kwargs",
    "nvext",
}


@attrs.frozen
class DynamoApi:
    """The request surface of one Dynamo release, as far as agentcore emits it."""

    version: tuple[int, int]
    nvext_keys: frozenset[str]
    """``nvext`` keys agentcore may send."""
    hint_keys: frozenset[str]
    """``nvext.agent_hints`` keys agentcore may send."""
    extra_fields: frozenset[str]
    """Values accepted in ``nvext.extra_fields`` that agentcore knows how to read back."""
    top_level_keys: frozenset[str]
    """Top-level body fields the frontend accepts."""


_HINTS_1_3 = frozenset(
    {"priority", "strict_priority", "osl", "speculative_prefill", "latency_sensitivity"}
)
_NVEXT_1_3 = frozenset({"agent_hints", "annotations", "extra_fields"})

DYNAMO_APIS: Mapping[str, DynamoApi] = {
    # 1.3 moved session identity from nvext.agent_context to x-dynamo-session-* headers and
    # added strict_priority; 1.6.1 was checked against a running frontend (including
    # nvext.cache_salt, which older releases are not known to accept).
    "1.3": DynamoApi((1, 3), _NVEXT_1_3, _HINTS_1_3, frozenset({"timing", "worker_id"}),
                     _DYNAMO_TOP_LEVEL),
    "1.4": DynamoApi((1, 4), _NVEXT_1_3, _HINTS_1_3, frozenset({"timing", "worker_id"}),
                     _DYNAMO_TOP_LEVEL),
    "1.5": DynamoApi((1, 5), _NVEXT_1_3, _HINTS_1_3, frozenset({"timing", "worker_id"}),
                     _DYNAMO_TOP_LEVEL),
    "1.6": DynamoApi((1, 6), _NVEXT_1_3 | {"cache_salt"}, _HINTS_1_3,
                     frozenset({"timing", "worker_id"}), _DYNAMO_TOP_LEVEL),
}  # fmt: skip
"""Supported Dynamo releases (major.minor). Releases before 1.3 carried session identity in
``nvext.agent_context``, which agentcore does not emit; they are refused."""


def dynamo_api(version: str) -> DynamoApi:
    """The table entry for a Dynamo release such as ``"1.6"`` or ``"1.6.1"``.

    A release newer than the newest entry uses the newest entry.

    Raises:
        ConfigError: unparsable version, or a release before 1.3.
    """
    parts = version.strip().split(".")
    try:
        major, minor = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        raise ConfigError(f"dynamo_version must look like '1.6', got {version!r}") from None
    known = sorted(DYNAMO_APIS.values(), key=lambda api: api.version)
    if (major, minor) < known[0].version:
        raise ConfigError(
            f"Dynamo {version} is not supported: releases before 1.3 take session identity "
            "in nvext.agent_context, which agentcore does not send; use Dynamo >= 1.3"
        )
    usable = [api for api in known if api.version <= (major, minor)]
    return usable[-1]


# ----------------------------------------------------------------------------- options


def _response_format_mode(value: object) -> ResponseFormatMode:
    if value is True:
        return "always"
    if value is False:
        return "never"
    if value in ("always", "without_tools", "never"):
        return value
    raise ConfigError(
        f"response_format must be 'always', 'without_tools', 'never' or a bool, got {value!r}"
    )


@attrs.frozen
class OpenAIOptions:
    """Validated options of an OpenAI-compatible codec (built by :func:`make_options`)."""

    record: Dialect
    """The dialect's record."""
    response_format: ResponseFormatMode = "always"
    """When to send ``response_format`` for a call with an output schema: ``always``,
    ``without_tools`` (only on calls that offer no tools: guided decoding on vLLM/SGLang
    would otherwise forbid tool calls), or ``never``."""
    strict_output: bool = False
    """Value of ``json_schema.strict`` (OpenAI's strict mode refuses schemas with optional
    properties, so it is off unless asked)."""
    strict_tools: bool = False
    """Mark every tool ``"strict": true``: vLLM then constrains a tool call's arguments to the
    tool's schema by guided decoding (without it only the call's envelope is constrained, and
    a forced call may come back with arguments that are not even an object)."""
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    stream_usage: bool = True
    """Ask for the final usage chunk in streams (``stream_options.include_usage``)."""
    extra_headers: tuple[tuple[str, str], ...] = ()
    extra_body: tuple[tuple[str, Any], ...] = ()
    request_id_header: bool = False
    """Send the request id as ``x-request-id``."""
    priority: bool = False
    """Send the hint priority in the dialect's own field."""
    cache_salt: str | None = None
    rid: bool = False
    """SGLang: send the request id as ``rid``."""
    prompt_cache_key: bool | str = False
    """OpenAI: ``True`` sends a key derived from the request's shared prefix (its tools and
    leading system messages), a string sends that key, ``False`` nothing."""
    dynamo: DynamoApi | None = None
    osl: bool = True
    speculative_prefill: bool = False
    latency_sensitivity: float | None = None
    strict_priority: int | None = None
    extra_fields: tuple[str, ...] = ()
    annotations: Annotations = attrs.field(default=(), eq=False)
    session_headers: bool = True
    session_key_header: tuple[str, ...] = ()
    """Headers that carry the agent's session id to a router in front of several replicas
    (empty: none)."""

    @property
    def dialect(self) -> str:
        """The dialect name."""
        return self.record.name


COMMON_OPTIONS = frozenset(
    {
        "response_format",
        "strict_output",
        "strict_tools",
        "max_tokens_field",
        "stream_usage",
        "extra_headers",
        "extra_body",
        "session_key_header",
    }
)
"""The options every OpenAI-compatible dialect takes."""


@attrs.frozen(kw_only=True)
class Dialect:
    """Everything agentcore knows about one OpenAI-compatible dialect (every field is required:
    a record is complete or it does not load)."""

    name: str
    """The dialect name, also its URL scheme where it has one (``vllm://``)."""
    port: int | None
    """Default port of the dialect's own ``name://host`` scheme of a self-hosted server;
    ``None`` when it has none (``openai://`` is the hosted API, ``sim://`` is started by the
    driver)."""
    self_hosted: bool
    """Servers reached through the dialect's own scheme are run by the user (batch warm-up on,
    no per-token cost). A plain ``http://`` URL is self-hosted whatever its dialect."""
    transport: TransportKind
    """The default transport on the dialect's own scheme."""
    warm_up: WarmUp
    """How a batch warms a self-hosted server of this dialect (hosted servers: ``off``)."""
    reuse_streams: bool
    """Whether a connection is kept after a streamed reply (``False`` for llama-server, which
    closes it after every streamed reply although it announced keep-alive)."""
    options: frozenset[str]
    """The options the dialect takes besides the common ones (:data:`COMMON_OPTIONS`)."""
    response_format: ResponseFormatMode
    """Default of the ``response_format`` option."""
    strict_tools: bool
    """Default of the ``strict_tools`` option (tools sent with ``"strict": true``)."""
    priority: Literal["lower_first", "higher_first"] | None
    """How the engine orders requests by the ``priority`` field agentcore writes from the
    hint priority (higher = sooner): ``lower_first`` gets it negated, ``higher_first`` as is;
    ``None``: the dialect has no priority field."""
    request_id: Literal["header", "rid"] | None
    """How the request id is sent by default: the ``x-request-id`` header, SGLang's ``rid``
    body field, or not at all."""
    nvext: bool
    """The extras go in Dynamo's ``nvext`` object, checked against :data:`DYNAMO_APIS`."""
    session: Literal["headers", "prompt_cache_key"] | None
    """Where the session contract goes: ``headers`` (Dynamo's ``x-dynamo-session-id``,
    ``-parent-session-id``, ``-final``), ``prompt_cache_key`` (one key per shared prefix), or
    nowhere (the engine reads no such field)."""
    session_key_header: tuple[str, ...]
    """Default of the ``session_key_header`` option: the headers that carry the agent's
    session id to a router in front of several replicas (:data:`ROUTER_SESSION_HEADERS` on
    the self-hosted engines; none for the hosted API, where ``prompt_cache_key`` routes, nor
    for Dynamo, whose frontend is the router and reads its own session headers)."""
    default_model: str | None
    """The model name sent when none is given (``None``: a model name is required; the
    simulator answers to any name)."""
    prefix_blocks: PrefixBlocks | None
    """How the engine reports its prefix cache's block size and tokenizes a chat request, for
    a batch to pad its shared prefix to a block boundary
    (:mod:`agentcore._codecs.prefix_blocks`); ``None``: it does not, or needs no padding
    (a cache that reuses any number of tokens)."""


_PRIORITY_OPTIONS = frozenset({"priority", "cache_salt", "request_id_header"})

DIALECTS: Mapping[str, Dialect] = {
    record.name: record
    for record in (
        Dialect(name="openai", port=None, self_hosted=False, transport="httpx",
                warm_up="request", reuse_streams=True, options=frozenset({"prompt_cache_key"}),
                response_format="always", strict_tools=False, priority=None, request_id=None,
                nvext=False, session="prompt_cache_key", session_key_header=(),
                default_model=None, prefix_blocks=None),
        # vLLM shares a prefix between requests scheduled together: the warm-up only checks
        # the backend (docs/backends.md).
        Dialect(name="vllm", port=8000, self_hosted=True, transport="lean", warm_up="check",
                reuse_streams=True, options=_PRIORITY_OPTIONS,
                response_format="without_tools", strict_tools=True, priority="lower_first",
                request_id="header", nvext=False, session=None,
                session_key_header=ROUTER_SESSION_HEADERS, default_model=None,
                prefix_blocks="vllm"),
        Dialect(name="sglang", port=30000, self_hosted=True, transport="lean",
                warm_up="request", reuse_streams=True,
                options=frozenset({"priority", "cache_salt", "rid"}),
                response_format="without_tools", strict_tools=False, priority="higher_first",
                request_id="rid", nvext=False, session=None,
                session_key_header=ROUTER_SESSION_HEADERS, default_model=None,
                prefix_blocks=None),
        # The Dynamo mocker ignores response_format, and a real engine behind Dynamo would
        # constrain tool-calling turns too: off unless asked.
        Dialect(name="dynamo", port=8000, self_hosted=True, transport="lean",
                warm_up="request", reuse_streams=True,
                options=_PRIORITY_OPTIONS | {"dynamo_version", "osl", "speculative_prefill",
                                             "latency_sensitivity", "strict_priority",
                                             "extra_fields", "annotations", "session_headers"},
                response_format="never", strict_tools=False, priority="higher_first",
                request_id="header", nvext=True, session="headers", session_key_header=(),
                default_model=None, prefix_blocks=None),
        Dialect(name="sim", port=None, self_hosted=True, transport="lean", warm_up="request",
                reuse_streams=True, options=_PRIORITY_OPTIONS, response_format="always",
                strict_tools=False, priority="lower_first", request_id="header", nvext=False,
                session=None, session_key_header=ROUTER_SESSION_HEADERS, default_model="sim",
                prefix_blocks=None),
        # llama-server keeps a prefix cache per slot: one warm request fills one slot only, so
        # the warm slot is copied into every slot (docs/backends.md).
        Dialect(name="llamacpp", port=8080, self_hosted=True, transport="lean",
                warm_up="slots", reuse_streams=False, options=frozenset(),
                response_format="without_tools", strict_tools=False, priority=None,
                request_id=None, nvext=False, session=None,
                session_key_header=ROUTER_SESSION_HEADERS, default_model=None,
                prefix_blocks=None),
    )
}  # fmt: skip
"""The OpenAI-compatible dialects, by name: the one table of dialect facts."""

# Body fields the codec writes itself; extra_body may not replace them.
_RESERVED_BODY = _OPENAI_BODY | {"priority", "rid", "cache_salt", "nvext", "prompt_cache_key"}


def make_options(dialect: str, options: Mapping[str, Any]) -> OpenAIOptions:
    """Validate ``options`` for ``dialect`` and fill in the dialect's defaults.

    Raises:
        ConfigError: unknown dialect, an option the dialect does not take, or a bad value.
    """
    record = DIALECTS.get(dialect)
    if record is None:
        raise ConfigError(
            f"unknown OpenAI-compatible dialect {dialect!r}; expected one of {list(DIALECTS)}"
        )
    allowed = COMMON_OPTIONS | record.options
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ConfigError(
            f"option(s) {unknown} not supported by the {dialect} dialect; "
            f"it takes {sorted(allowed)}"
        )
    get = options.get
    mode = _response_format_mode(get("response_format", record.response_format))
    max_tokens_field = get("max_tokens_field", "max_tokens")
    if max_tokens_field not in ("max_tokens", "max_completion_tokens"):
        raise ConfigError(
            f"max_tokens_field must be 'max_tokens' or 'max_completion_tokens', "
            f"got {max_tokens_field!r}"
        )
    cache_salt = get("cache_salt")
    if cache_salt is not None and (not isinstance(cache_salt, str) or not cache_salt):
        raise ConfigError(f"cache_salt must be a non-empty string, got {cache_salt!r}")
    dynamo = None
    if record.nvext:
        dynamo = dynamo_api(_str_option(get("dynamo_version", "1.6"), "dynamo_version"))
    fields: dict[str, Any] = {
        "record": record,
        "response_format": mode,
        "strict_output": _bool_option(get("strict_output", False), "strict_output"),
        "strict_tools": _bool_option(get("strict_tools", record.strict_tools), "strict_tools"),
        "max_tokens_field": max_tokens_field,
        "stream_usage": _bool_option(get("stream_usage", True), "stream_usage"),
        "extra_headers": _headers_option(get("extra_headers", {})),
        "extra_body": _body_option(get("extra_body", {}), dynamo),
        "request_id_header": _bool_option(
            get("request_id_header", record.request_id == "header"), "request_id_header"
        ),
        "cache_salt": cache_salt,
        "rid": _bool_option(get("rid", record.request_id == "rid"), "rid"),
        "prompt_cache_key": _cache_key_option(get("prompt_cache_key", False)),
        "dynamo": dynamo,
        "session_key_header": _session_key_header_option(
            get("session_key_header", record.session_key_header)
        ),
    }
    if dynamo is not None:
        fields.update(_dynamo_fields(dynamo, options))
    else:
        fields["priority"] = _bool_option(get("priority", False), "priority")
    return OpenAIOptions(**fields)


def _cache_key_option(value: object) -> bool | str:
    if isinstance(value, bool) or (isinstance(value, str) and value):
        return value
    raise ConfigError(f"prompt_cache_key must be a bool or a non-empty string, got {value!r}")


_CODEC_HEADERS = frozenset(
    {"content-type", "content-length", "authorization", "host", "x-request-id"}
)
"""Headers the codec or the transport writes itself: no session key may take their place."""


def _session_key_header_option(value: object) -> tuple[str, ...]:
    """The ``session_key_header`` option: a header name, a list of them, or ``None`` /
    ``False`` / an empty list for none."""
    if value is None or value is False:
        return ()
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, Sequence) or not all(isinstance(n, str) for n in names):
        raise ConfigError(
            f"session_key_header must be a header name, a list of them or None, got {value!r}"
        )
    lowered = tuple(dict.fromkeys(name.lower() for name in names))
    for name in lowered:
        if not _HEADER_NAME.fullmatch(name):
            raise ConfigError(f"session_key_header {name!r} is not an HTTP header name")
        if name in _CODEC_HEADERS or name.startswith("x-dynamo-"):
            raise ConfigError(
                f"session_key_header may not be {name!r}: agentcore writes that header itself"
            )
    return lowered


def _dynamo_fields(api: DynamoApi, options: Mapping[str, Any]) -> dict[str, Any]:
    get = options.get
    latency = get("latency_sensitivity")
    if latency is not None:
        if isinstance(latency, bool) or not isinstance(latency, int | float):
            raise ConfigError(f"latency_sensitivity must be a number, got {latency!r}")
        latency = float(latency)
    priority = get("priority")
    if priority is None:
        priority = latency is None
    priority = _bool_option(priority, "priority")
    if priority and latency is not None:
        raise ConfigError(
            "latency_sensitivity and priority must not be sent together (Dynamo treats "
            "latency_sensitivity as a deprecated alias used only without priority); "
            "pass priority=False to use latency_sensitivity"
        )
    strict = get("strict_priority")
    if strict is not None and (
        isinstance(strict, bool) or not isinstance(strict, int) or not 0 <= strict <= _U32_MAX
    ):
        raise ConfigError(f"strict_priority must be an integer >= 0, got {strict!r}")
    extra_fields = tuple(get("extra_fields", ()))
    unknown = sorted(set(extra_fields) - api.extra_fields)
    if unknown or not all(isinstance(f, str) for f in extra_fields):
        raise ConfigError(
            f"extra_fields {unknown or extra_fields!r} not supported; "
            f"choose from {sorted(api.extra_fields)}"
        )
    annotations = get("annotations", ())
    if isinstance(annotations, str):
        raise ConfigError("annotations must be a list of strings or a function, not a string")
    if not callable(annotations):
        annotations = _string_tuple(annotations, "annotations")
    if get("cache_salt") is not None and "cache_salt" not in api.nvext_keys:
        raise ConfigError(f"nvext.cache_salt is not known to be accepted by Dynamo {api.version}")
    return {
        "priority": priority,
        "osl": _bool_option(get("osl", True), "osl"),
        "speculative_prefill": _bool_option(
            get("speculative_prefill", False), "speculative_prefill"
        ),
        "latency_sensitivity": latency,
        "strict_priority": strict,
        "extra_fields": extra_fields,
        "annotations": annotations,
        "session_headers": _bool_option(get("session_headers", True), "session_headers"),
    }


def _bool_option(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be True or False, got {value!r}")
    return value


def _str_option(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be a string, got {value!r}")
    return value


def _string_tuple(value: object, name: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigError(f"{name} must be a list of strings, got {value!r}")
    if not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{name} must be a list of strings, got {value!r}")
    return tuple(value)


def _headers_option(value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"extra_headers must be a mapping of strings, got {value!r}")
    pairs = []
    for name, text in value.items():
        if not isinstance(name, str) or not isinstance(text, str):
            raise ConfigError(f"extra_headers must map strings to strings, got {name!r}")
        check_header_value(f"header {name!r}", text)
        pairs.append((name.lower(), text))
    return tuple(pairs)


def _body_option(value: object, dynamo: DynamoApi | None) -> tuple[tuple[str, Any], ...]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"extra_body must be a mapping, got {value!r}")
    reserved = sorted(k for k in value if k in _RESERVED_BODY)
    if reserved:
        raise ConfigError(f"extra_body may not set {reserved}: the codec writes these fields")
    if dynamo is not None:
        refused = sorted(k for k in value if k not in dynamo.top_level_keys)
        if refused:
            raise ConfigError(
                f"extra_body field(s) {refused} would be refused by Dynamo "
                f"(unknown top-level fields are answered with HTTP 400)"
            )
    return tuple((str(k), v) for k, v in value.items())


# ----------------------------------------------------------------------------- wire extras


def dialect_body(call: CallModel, opts: OpenAIOptions) -> list[tuple[str, Any]]:
    """The dialect's extra top-level body fields for ``call``, in wire order."""
    if opts.dynamo is not None:
        nvext = dynamo_nvext(call, opts)
        return [("nvext", nvext)] if nvext else []
    extra: list[tuple[str, Any]] = []
    if opts.rid:
        extra.append(("rid", call.request_id))
    if opts.priority:
        priority = call.hints.priority
        lower_first = opts.record.priority == "lower_first"
        extra.append(("priority", -priority if lower_first else priority))
    if opts.cache_salt is not None:
        extra.append(("cache_salt", opts.cache_salt))
    key = opts.prompt_cache_key
    if key:
        extra.append(("prompt_cache_key", key if isinstance(key, str) else prefix_key(call)))
    return extra


def prefix_key(call: CallModel) -> str:
    """A key naming the prefix ``call`` shares with its batch: a digest of its tools and of
    its leading system messages (the same for every request of every agent of one task, and
    different for another task)."""
    tools = [[tool.name, tool.description, tool.parameters] for tool in call.tools]
    systems = []
    for message in call.messages:
        if not isinstance(message, SystemMessage):
            break
        systems.append(message.content)
    digest = hashlib.sha256(orjson.dumps([tools, systems], default=json_default)).hexdigest()
    return f"agentcore-{digest[:24]}"


def dynamo_nvext(call: CallModel, opts: OpenAIOptions) -> dict[str, Any]:
    """The ``nvext`` object for ``call`` (empty when there is nothing to send)."""
    hints = call.hints
    agent_hints: dict[str, Any] = {}
    if opts.priority:
        agent_hints["priority"] = min(max(hints.priority, _I32_MIN), _I32_MAX)
    if opts.strict_priority is not None:
        agent_hints["strict_priority"] = opts.strict_priority
    expected = hints.expected_output_tokens
    if opts.osl and expected is not None and 0 <= expected <= _U32_MAX:
        agent_hints["osl"] = expected
    if opts.speculative_prefill:
        agent_hints["speculative_prefill"] = True
    if opts.latency_sensitivity is not None:
        agent_hints["latency_sensitivity"] = opts.latency_sensitivity
    nvext: dict[str, Any] = {}
    annotations = opts.annotations
    if callable(annotations):
        annotations = _string_tuple(annotations(call), "annotations returned by the hook")
    if annotations:
        nvext["annotations"] = list(annotations)
    if opts.extra_fields:
        nvext["extra_fields"] = list(opts.extra_fields)
    if opts.cache_salt is not None:
        nvext["cache_salt"] = opts.cache_salt
    if agent_hints:
        nvext["agent_hints"] = agent_hints
    return nvext


def dialect_headers(call: CallModel, opts: OpenAIOptions) -> list[tuple[str, str]]:
    """The dialect's per-call headers for ``call``.

    Raises:
        ConfigError: a session or request id holds CR, LF or NUL.
    """
    pairs: list[tuple[str, str]] = []
    if opts.request_id_header:
        pairs.append(("x-request-id", call.request_id))
    if opts.record.session == "headers" and opts.session_headers:
        hints = call.hints
        if hints.session_id:
            pairs.append(("x-dynamo-session-id", hints.session_id))
            parent = hints.parent_session_id
            if parent and parent != hints.session_id:
                pairs.append(("x-dynamo-parent-session-id", parent))
            if hints.final:
                pairs.append(("x-dynamo-session-final", "true"))
    if opts.session_key_header and call.hints.session_id:
        pairs.extend((name, call.hints.session_id) for name in opts.session_key_header)
    for name, value in pairs:
        check_header_value(f"header {name!r}", value)
    return pairs
