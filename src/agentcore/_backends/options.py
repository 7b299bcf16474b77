"""A backend's options by name, and their checks: one table for every entry point.

A backend is configured with keywords, ``wire.backend(url, model=..., service_tier="flex",
journal=...)``, and every other entry point that configures one takes the same keywords and
hands them to it: the keywords of ``open_driver`` (and of the batch functions and
``run_worker``) that are no :class:`~agentcore.DriverOptions` field,
``DriverOptions.backend_options``, ``Fallback.options`` and the CLI's flags. There are two
kinds:

- the backend's own options (:data:`OWN_OPTIONS`): ``stream``, ``transport``,
  ``max_reply_bytes``, ``warm_up``, ``align_prefix``, ``verify``, ``service_tier``, the
  Batch API settings (``journal``, ``gather``, ``poll``, ``poll_max``), and for some schemes
  ``dialect`` (``http(s)://``) and ``config`` (``sim://``). Each is checked by its function in
  the table, wherever it is given, when the value carrying it is built;
- the codec's dialect options (``docs/backends.md``): which ones a backend takes depends on
  its dialect, known once the URL is read, and the codec checks them then. Before that, a name
  is checked against the options of every dialect (:data:`DIALECT_OPTIONS`), so a misspelt one
  fails where it was written.

:func:`check_options` checks a mapping of them (``backend_options``, ``Fallback.options``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

import attrs

from .._codecs.anthropic import AnthropicCodec
from .._codecs.codec import WARM_UPS
from .._codecs.dialects import COMMON_OPTIONS, DIALECTS
from .._codecs.reply_limit import check_max_reply_bytes
from .._core.errors import ConfigError
from .._core.service_tier import check_service_tier
from .._core.validators import check_choice
from .backend import BatchSettings, check_align_prefix, check_verify

__all__ = ["BEDROCK_OPTIONS", "DIALECT_OPTIONS", "OWN_OPTIONS", "NamedOptions", "check_options"]


def _stream(value: object) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"stream must be True or False, got {value!r}")
    return value


def _transport(value: object) -> object:
    check_choice("transport", value, ("lean", "httpx"))
    return value


def _warm_up(value: object) -> object:
    if value not in WARM_UPS:
        raise ConfigError(f"warm_up must be one of {list(WARM_UPS)}, got {value!r}")
    return value


def _dialect(value: object) -> object:
    known = [*DIALECTS, "anthropic"]
    if value not in known:
        raise ConfigError(f"unknown dialect {value!r}; expected one of {known}")
    return value


def _config(value: object) -> object:
    if value is None:
        return None
    from .._sim.config import SimConfig  # noqa: PLC0415 - the simulator, loaded when used

    if not isinstance(value, SimConfig):
        raise ConfigError(f"config must be a SimConfig, got {value!r}")
    return value


def _batch_setting(name: str) -> Callable[[object], object]:
    def check(value: Any) -> object:
        return getattr(BatchSettings(**{name: value}), name)

    return check


OWN_OPTIONS: Final[Mapping[str, Callable[[Any], Any]]] = MappingProxyType(
    {
        "stream": _stream,
        "transport": _transport,
        "max_reply_bytes": check_max_reply_bytes,
        "warm_up": _warm_up,
        "verify": check_verify,
        "align_prefix": check_align_prefix,
        "service_tier": check_service_tier,
        **{name.name: _batch_setting(name.name) for name in attrs.fields(BatchSettings)},
        "dialect": _dialect,
        "config": _config,
    }
)
"""The backend's own options (fields of :class:`~agentcore.wire.Backend`, or read when it is
built), each with the check that gives its value or raises :class:`~agentcore.ConfigError`
naming it and what it accepts."""

BEDROCK_OPTIONS: Final = frozenset({"endpoint_url", "profile", "cache_prompt", "max_tokens"})
"""The options of ``bedrock://`` backends."""

DIALECT_OPTIONS: Final = frozenset(
    COMMON_OPTIONS.union(*(record.options for record in DIALECTS.values()))
    | {field.name for field in attrs.fields(AnthropicCodec) if field.kw_only}
    | BEDROCK_OPTIONS
)
"""Every option some dialect's codec takes (a given backend takes those of its dialect)."""

_ELSEWHERE: Final = {
    "model": "the model is DriverOptions.model (or Fallback.model)",
    "api_key": "the key is DriverOptions.api_key (or Fallback.api_key)",
}


def check_options(value: object, where: str = "backend_options") -> Mapping[str, Any]:
    """``value`` as a read-only mapping of backend options, each checked (module docstring).

    Raises:
        ConfigError: not a mapping of names, an own option with a bad value, or a name that
            is no option of any backend.
    """
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a mapping of backend options, got {value!r}")
    checked: dict[str, Any] = {}
    for name, option in value.items():
        if name in _ELSEWHERE:
            raise ConfigError(f"{where} may not hold {name!r}: {_ELSEWHERE[name]}")
        check = OWN_OPTIONS.get(name)
        if check is not None:
            checked[name] = check(option)
        elif name in DIALECT_OPTIONS:
            checked[name] = option  # the codec checks it once the backend's dialect is known
        else:
            raise ConfigError(
                f"{where}: {name!r} is no option of any backend; a backend takes "
                f"{sorted(OWN_OPTIONS)} and its dialect's options (docs/backends.md)"
            )
    return MappingProxyType(checked)


class NamedOptions(type):
    """The metaclass of an options value (``DriverOptions``, ``Fallback``) holding a mapping of
    backend options in its field ``backend_field``: a keyword that is no field is a
    :class:`~agentcore.ConfigError` naming it (and, for an option of the backend, saying
    where it goes), not a ``TypeError``. Type checkers still see the attrs signature."""

    backend_field: str

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        fields = attrs.fields_dict(cls)  # type: ignore[arg-type]
        unknown = sorted(set(kwargs) - set(fields))
        if unknown:
            own = [name for name in unknown if name in OWN_OPTIONS]
            if own:
                raise ConfigError(
                    f"{own} are options of the backend, not fields of {cls.__name__}: give "
                    f"them in {cls.__name__}({cls.backend_field}={{...}}), or as keywords of "
                    f"the entry point or of wire.backend (wire.backend(url, {own[0]}=...))"
                )
            raise ConfigError(
                f"{cls.__name__} has no option {unknown}; its fields are {sorted(fields)}"
            )
        return super().__call__(*args, **kwargs)
