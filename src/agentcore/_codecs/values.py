"""JSON values of user types: the one converter between what users hand agentcore and JSON.

Users give agentcore values of their own types: a run's output (an attrs class, a dataclass, a
TypedDict, a pydantic model), a tool's return value, a task's parameters, a tool's validated
arguments. Wherever such a value leaves the process as JSON (the results file, a distributed
result record, the text a tool shows the model, the key that coalesces equal tool calls, the
fingerprint of a distributed task, the answers a ``map_reduce`` reducer reads), it goes
through :func:`json_value`, so it has one JSON form everywhere:

- attrs and dataclass instances become objects (field names as keys);
- pydantic models become ``model_dump(mode="json")`` (pydantic is never imported: a model is
  recognised by its methods);
- tuples, lists, sets and frozensets become arrays; mappings become objects (non-string keys
  as strings); ``bytes`` become base 85 text; enums their values; dates ISO 8601 text.

:func:`from_json_value` reads such data back into a plain value type (the results file's
records). It is lenient (no strict scalar checks, extra keys ignored): the strict reading of
what a *model* wrote is :mod:`agentcore._core.schema`'s, and the round-trip encoding of
agentcore's own values is :mod:`agentcore._codecs.serde`'s.
"""

from __future__ import annotations

from typing import Any, TypeVar

from cattrs.preconf.orjson import make_converter

from .._core.schema import is_pydantic_model

__all__ = ["from_json_value", "json_dumps", "json_value"]

T = TypeVar("T")

# One of the three cattrs converters, each with its own job: this one gives user values their
# one JSON form (and reads the results file back). ``_core/schema.py``'s reads what a model
# wrote into user types, strictly; ``serde.py``'s round-trips agentcore's own values.
_VALUES = make_converter()
_VALUES.register_unstructure_hook_func(
    is_pydantic_model, lambda model: model.model_dump(mode="json")
)


def json_value(value: Any) -> Any:
    """``value`` as data JSON can hold (see the module docstring for the forms)."""
    return _VALUES.unstructure(value)


def json_dumps(value: Any) -> bytes:
    """``value`` as compact JSON text.

    Raises:
        TypeError: the value has no JSON form.
    """
    return _VALUES.dumps(value)


def from_json_value(data: Any, tp: type[T]) -> T:
    """Decoded JSON ``data`` as an instance of ``tp`` (an attrs class, usually).

    Raises:
        cattrs.BaseValidationError: ``data`` does not have the shape of ``tp``.
    """
    return _VALUES.structure(data, tp)
