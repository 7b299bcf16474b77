"""Fallback backends as values: :class:`Fallback`, and the names of a driver's routes.

A fallback backend is given to a driver as a value (``open_driver(..., fallback=[...])``): a
URL, a ``Backend``, a model client, or a :class:`Fallback` saying how that backend is opened
(its model, slots, key, name and backend options). :func:`fallback_specs` names them all and
checks them before anything opens; :mod:`agentcore._backends.stack` opens them. The trio side
of model fallback (the request path trying one backend after the other, and the circuit
breaker on trio time) runs runs, and stays with the driver (``agentcore._driver.fallback``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .._core.errors import ConfigError
from .._core.validators import optional_int_at_least, optional_nonempty_str
from .._transports.model_client import ModelClient
from .backend import Backend
from .options import NamedOptions, check_options

__all__ = ["Fallback", "fallback_specs"]


def _options(value: Any) -> Mapping[str, Any]:
    return check_options(value, "Fallback.options")


@attrs.frozen
class Fallback(metaclass=NamedOptions):
    """One fallback backend of a driver (``open_driver(..., fallback=[...])``).

    A plain URL, ``Backend`` or model client in the ``fallback`` list means the same as
    ``Fallback(that)``.

    Raises:
        ConfigError: a bad value, or a keyword that is no field (an option of the backend,
            such as ``service_tier``, goes in ``options``).
    """

    backend_field = "options"

    backend: Any
    """A backend URL, a ``Backend``, or a model client (stays the caller's to close)."""
    model: str = attrs.field(default="", kw_only=True)
    """The model name sent to this backend (``""``: the driver's ``model``)."""
    max_inflight: int | None = attrs.field(
        default=None, kw_only=True, validator=optional_int_at_least(1)
    )
    """This backend's inference slots (``None``: the driver's ``max_inflight``)."""
    api_key: str | None = attrs.field(default=None, kw_only=True)
    """The API key of this backend (never the primary's: it may be another vendor)."""
    name: str | None = attrs.field(default=None, kw_only=True, validator=optional_nonempty_str)
    """How results and statistics name it (default: the URL, else ``fallback-N``)."""
    options: Mapping[str, Any] = attrs.field(factory=dict, kw_only=True, converter=_options)
    """Options of this backend, as :func:`agentcore.wire.backend` takes them (its own, such as
    ``service_tier``, checked here; its dialect's, checked when it is configured)."""


def fallback_specs(
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
