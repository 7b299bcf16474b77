"""JSON schemas for Python types, and strict validation of model-produced JSON against them.

Two halves that must agree:

- :func:`json_schema` describes a type to the model (tool parameters, structured outputs).
- :func:`structure` checks a parsed JSON value against the same type and builds the Python
  value, through one strictly configured cattrs converter: no coercion (``"3"`` is not an
  ``int``, ``true`` is not ``1``), no extra keys, lists only from JSON arrays. Errors are
  collected per field and reported as cattrs' ``transform_error`` lines (``... @ $.field``),
  which is what the loop quotes back to the model in a repair turn.

Supported types: ``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``, ``list[T]``,
``tuple[T, ...]``, fixed tuples, ``dict[str, T]``, unions (``X | Y``, ``Optional``),
``Literal`` of JSON scalars, ``Enum`` (by value), and attrs classes, dataclasses and
``TypedDict`` classes whose fields use these types (all three through cattrs, with the same
strict rules). Pydantic models are supported when pydantic is installed, with pydantic's own
``model_json_schema`` and ``model_validate``; they are recognised by those two methods, so
this module never imports pydantic. Anything else raises :class:`~agentcore.ConfigError`
naming the type.

:func:`parse_json_text` extracts JSON from a model's text answer (bare, or in a fenced block).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import json
import re
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, TypeVar, Union, is_typeddict

import attrs
import cattrs
from cattrs.cols import homogenous_tuple_structure_factory, list_structure_factory
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, make_mapping_structure_fn
from cattrs.v import transform_error

from .errors import ConfigError

__all__ = [
    "ValidationFailed",
    "field_types",
    "is_pydantic_model",
    "json_kind",
    "json_schema",
    "loads_json",
    "parse_json_text",
    "structure",
]

T = TypeVar("T")

_NoneType = type(None)
_SCALARS = (str, int, float, bool, _NoneType)


class ValidationFailed(Exception):
    """A JSON value did not fit the expected type (or a text held no JSON).

    Attributes:
        message: a human-readable, field-level explanation (one ``... @ $.path`` item per
            problem, joined with ``"; "``), suitable for quoting back to the model.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# ----------------------------------------------------------------------------- type helpers


def _type_name(tp: Any) -> str:
    if tp is _NoneType or tp is None:
        return "None"
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__name__
    return repr(tp).replace("typing.", "")


def _is_union(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    return origin is Union or origin is types.UnionType


def _is_enum(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, enum.Enum)


def _is_attrs(tp: Any) -> bool:
    return isinstance(tp, type) and attrs.has(tp)


def _is_dataclass(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp) and not attrs.has(tp)


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and is_typeddict(tp)


def is_pydantic_model(tp: Any) -> bool:
    """A pydantic (v2) model class, recognised without importing pydantic."""
    return (
        isinstance(tp, type)
        and callable(getattr(tp, "model_json_schema", None))
        and callable(getattr(tp, "model_validate", None))
        and hasattr(tp, "model_fields")
    )


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception as exc:  # NameError, TypeError: an annotation that does not resolve
        raise ConfigError(f"cannot resolve the annotations of {cls.__qualname__}: {exc}") from None


def field_types(tp: Any) -> dict[str, Any] | None:
    """The fields of a structured type (an attrs class, a dataclass, a ``TypedDict``, a
    pydantic model), by name, with their declared types (``Any`` where the annotations do not
    resolve); ``None`` for any other type."""
    if _is_attrs(tp):
        with contextlib.suppress(NameError):
            attrs.resolve_types(tp)
        return {
            a.name: Any if a.type is None or isinstance(a.type, str) else a.type
            for a in attrs.fields(tp)
        }
    if _is_dataclass(tp) or _is_typeddict(tp):
        names = (
            [f.name for f in dataclasses.fields(tp)]
            if _is_dataclass(tp)
            else list(tp.__annotations__)
        )
        try:
            hints = _hints(tp)
        except ConfigError:
            hints = {}
        return {name: hints.get(name, Any) for name in names}
    if is_pydantic_model(tp):
        return {name: info.annotation for name, info in tp.model_fields.items()}
    return None


def _resolved_fields(cls: type) -> tuple[attrs.Attribute[Any], ...]:
    try:
        attrs.resolve_types(cls)
    except NameError as exc:
        raise ConfigError(f"cannot resolve the annotations of {cls.__qualname__}: {exc}") from None
    return tuple(a for a in attrs.fields(cls) if a.init)


_SCALAR_JSON_TYPES: dict[type, str] = {
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    _NoneType: "null",
}
"""The JSON type name of each Python scalar type (``bool`` before ``int``, its base)."""

_JSON_TYPES: dict[type, str] = {**_SCALAR_JSON_TYPES, list: "array", dict: "object"}
"""The JSON type name of each Python type a parsed JSON value has."""


def json_kind(value: Any) -> str:
    """The JSON type name of a parsed JSON value (else the name of its Python type)."""
    for tp, name in _JSON_TYPES.items():
        if isinstance(value, tp):
            return name
    return type(value).__name__


# ----------------------------------------------------------------------------- json_schema

_PRIMITIVE_SCHEMAS: dict[Any, dict[str, Any]] = {
    **{tp: {"type": name} for tp, name in _SCALAR_JSON_TYPES.items()},
    None: {"type": "null"},
}


def _enum_schema(values: list[Any], what: str) -> dict[str, Any]:
    kinds: list[str] = []
    for v in values:
        kind = _SCALAR_JSON_TYPES.get(type(v))
        if kind is None:
            raise ConfigError(f"{what}: value {v!r} is not a JSON string, number, boolean or null")
        if kind not in kinds:
            kinds.append(kind)
    schema: dict[str, Any] = {"type": kinds[0] if len(kinds) == 1 else kinds}
    schema["enum"] = values
    return schema


def json_schema(tp: Any) -> dict[str, Any]:
    """Describe ``tp`` as a JSON schema.

    Args:
        tp: a supported type (see the module docstring).

    Returns:
        A fresh JSON schema dict (the caller may keep or modify it). Attrs classes become
        ``object`` schemas with ``properties``, ``required`` (fields without a default),
        ``additionalProperties: false`` and per-field ``description`` taken from
        ``attrs.field(metadata={"description": ...})``.

    Raises:
        ConfigError: ``tp`` (or a type nested in it) is not supported, or is recursive.
    """
    return _schema(tp, ())


def _schema(tp: Any, stack: tuple[type, ...]) -> dict[str, Any]:
    if tp is Any:
        return {}
    if tp in _PRIMITIVE_SCHEMAS:
        return dict(_PRIMITIVE_SCHEMAS[tp])
    if tp is list or tp is tuple:
        return {"type": "array"}
    if tp is dict:
        return {"type": "object"}
    if _is_enum(tp):
        return _enum_schema([m.value for m in tp], f"enum {tp.__qualname__}")
    if _is_attrs(tp):
        return _attrs_schema(tp, stack)
    if _is_dataclass(tp):
        return _dataclass_schema(tp, stack)
    if _is_typeddict(tp):
        return _typeddict_schema(tp, stack)
    if is_pydantic_model(tp):
        return _pydantic_schema(tp)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Literal:
        return _enum_schema(list(args), f"{_type_name(tp)}")
    if _is_union(tp):
        return {"anyOf": [_schema(a, stack) for a in args]}
    if origin is list and len(args) == 1:
        return {"type": "array", "items": _schema(args[0], stack)}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": _schema(args[0], stack)}
        if args == ((),):  # tuple[()]
            args = ()
        return {
            "type": "array",
            "prefixItems": [_schema(a, stack) for a in args],
            "items": False,
            "minItems": len(args),
            "maxItems": len(args),
        }
    if origin is dict and len(args) == 2:
        if args[0] is not str:
            raise ConfigError(
                f"unsupported type {_type_name(tp)}: JSON object keys are strings, "
                "use dict[str, ...]"
            )
        return {"type": "object", "additionalProperties": _schema(args[1], stack)}
    raise ConfigError(f"unsupported type for a JSON schema: {_type_name(tp)}")


def _attrs_schema(cls: type, stack: tuple[type, ...]) -> dict[str, Any]:
    if cls in stack:
        raise ConfigError(f"recursive type {cls.__qualname__} is not supported in a JSON schema")
    stack = (*stack, cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in _resolved_fields(cls):
        if field.type is None:
            raise ConfigError(f"field {cls.__qualname__}.{field.name} has no type annotation")
        prop = _schema(field.type, stack)
        description = field.metadata.get("description")
        if description is not None:
            prop = {"description": str(description), **prop}
        default = field.default
        if default is attrs.NOTHING:
            required.append(field.name)
        elif not isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            if isinstance(default, enum.Enum):
                default = default.value
            if type(default) in _SCALAR_JSON_TYPES:
                prop["default"] = default
        properties[field.name] = prop
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _enter(cls: type, stack: tuple[type, ...]) -> tuple[type, ...]:
    if cls in stack:
        raise ConfigError(f"recursive type {cls.__qualname__} is not supported in a JSON schema")
    return (*stack, cls)


def _dataclass_schema(cls: type, stack: tuple[type, ...]) -> dict[str, Any]:
    stack = _enter(cls, stack)
    hints = _hints(cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        prop = _schema(hints[field.name], stack)
        description = field.metadata.get("description")
        if description is not None:
            prop = {"description": str(description), **prop}
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            required.append(field.name)
        elif field.default is not dataclasses.MISSING:
            default: Any = field.default
            if isinstance(default, enum.Enum):
                default = default.value
            if type(default) in _SCALAR_JSON_TYPES:
                prop["default"] = default
        properties[field.name] = prop
    return _object_schema(properties, required)


def _typeddict_schema(cls: type, stack: tuple[type, ...]) -> dict[str, Any]:
    stack = _enter(cls, stack)
    hints = _hints(cls)
    properties = {name: _schema(tp, stack) for name, tp in hints.items()}
    required = _typeddict_required(cls)
    return _object_schema(properties, [n for n in hints if n in required])


def _typeddict_required(cls: type) -> frozenset[str]:
    """The required keys of a TypedDict class.

    ``__required_keys__`` misses ``NotRequired`` written as a string annotation (``from
    __future__ import annotations``) before Python 3.14; the resolved annotations do not.
    """
    marked = typing.get_type_hints(cls, include_extras=True)
    declared: frozenset[str] = getattr(cls, "__required_keys__", frozenset(marked))
    required = set()
    for name, tp in marked.items():
        origin = typing.get_origin(tp)
        if origin is typing.Required or (origin is not typing.NotRequired and name in declared):
            required.add(name)
    return frozenset(required)


def _pydantic_schema(cls: type) -> dict[str, Any]:
    """Pydantic's own schema, with its ``$defs`` inlined so it can be nested anywhere."""
    try:
        schema: dict[str, Any] = cls.model_json_schema()  # type: ignore[attr-defined]
    except Exception as exc:  # pydantic's own error for a model it cannot describe
        raise ConfigError(f"cannot derive the JSON schema of {cls.__qualname__}: {exc}") from None
    definitions: dict[str, Any] = schema.pop("$defs", {})

    def inline(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [inline(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            if name in seen or name not in definitions:
                raise ConfigError(
                    f"recursive type {name} (in {cls.__qualname__}) is not supported "
                    "in a JSON schema"
                )
            rest = {k: inline(v, seen) for k, v in node.items() if k != "$ref"}
            return {**inline(definitions[name], (*seen, name)), **rest}
        return {k: inline(v, seen) for k, v in node.items()}

    return inline(schema, ())  # type: ignore[no-any-return]


# ----------------------------------------------------------------------------- strict converter


class _Mismatch(TypeError):
    """A value of the wrong JSON type; its message is already the final wording."""


def _mismatch(expected: str, value: Any) -> _Mismatch:
    try:
        shown = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        shown = repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return _Mismatch(f"invalid value for type, expected {expected}, got {json_kind(value)} {shown}")


def _exact_hook(kind: type, expected: str) -> _Hook:
    """The hook for ``str``, ``int`` or ``bool``: a value of exactly that type (``True`` is
    not an ``int`` here), or else a mismatch that names ``expected``."""

    def structure(value: Any, tp: Any) -> Any:
        if tp is not kind:  # an IntEnum/StrEnum reaches this hook through class dispatch
            return _enum_hook(tp)(value, tp)
        if type(value) is not kind:
            raise _mismatch(expected, value)
        return value

    return structure


def _structure_float(value: Any, tp: Any) -> float:
    if tp is not float:  # an IntEnum/StrEnum reaches this hook through class dispatch
        return _enum_hook(tp)(value, tp)  # type: ignore[no-any-return]
    kind = type(value)
    if kind is float:
        return value  # type: ignore[no-any-return]
    if kind is int:
        return float(value)
    raise _mismatch("float", value)


def _structure_none(value: Any, _: Any) -> None:
    if value is not None:
        raise _mismatch("null", value)


_Hook = Callable[[Any, Any], Any]


def _accepted_kinds(tp: Any) -> frozenset[str] | None:
    """The JSON kinds a supported type can be structured from (``None``: any)."""
    if tp is Any:
        return None
    if tp is float:
        return frozenset({"integer", "number"})
    if tp in _SCALAR_JSON_TYPES:
        return frozenset({_SCALAR_JSON_TYPES[tp]})
    if tp is None:
        return frozenset({"null"})
    if _is_enum(tp):
        return frozenset(json_kind(m.value) for m in tp)
    if _is_attrs(tp) or _is_dataclass(tp) or _is_typeddict(tp) or is_pydantic_model(tp):
        return frozenset({"object"})
    origin = typing.get_origin(tp) or tp
    if origin is Literal:
        return frozenset(json_kind(a) for a in typing.get_args(tp))
    if _is_union(tp):
        kinds: set[str] = set()
        for arg in typing.get_args(tp):
            sub = _accepted_kinds(arg)
            if sub is None:
                return None
            kinds |= sub
        return frozenset(kinds)
    if origin in (list, tuple):
        return frozenset({"array"})
    if origin is dict:
        return frozenset({"object"})
    return None


def _union_factory(tp: Any, conv: cattrs.Converter) -> _Hook:
    members = typing.get_args(tp)
    kinds = [(m, _accepted_kinds(m)) for m in members]
    name = " | ".join(_type_name(m) for m in members)

    def structure_union(value: Any, _: Any) -> Any:
        kind = json_kind(value)
        candidates = [m for m, ks in kinds if ks is None or kind in ks]
        if not candidates:
            raise _mismatch(name, value)
        if len(candidates) == 1:
            return conv.structure(value, candidates[0])
        # Prefer a member of exactly the value's type (int over float for ``3``).
        candidates.sort(key=lambda m: 0 if m is type(value) else 1)
        problems: list[str] = []
        for member in candidates:
            try:
                return conv.structure(value, member)
            except Exception as exc:  # each member's failure is reported
                problems.append(f"{_type_name(member)}: {'; '.join(_error_lines(exc))}")
        raise _Mismatch(f"invalid value for type, expected {name} ({' | '.join(problems)})")

    return structure_union


def _is_literal(tp: Any) -> bool:
    return typing.get_origin(tp) is Literal


def _literal_factory(tp: Any, conv: cattrs.Converter) -> _Hook:
    allowed = typing.get_args(tp)
    shown = ", ".join(json.dumps(a) for a in allowed)

    def structure_literal(value: Any, _: Any) -> Any:
        for a in allowed:
            if type(a) is type(value) and a == value:
                return a
        raise _mismatch(f"one of {shown}", value)

    return structure_literal


_enum_hooks: dict[type, _Hook] = {}


def _enum_hook(tp: Any) -> _Hook:
    hook = _enum_hooks.get(tp)
    if hook is None:
        hook = _enum_hooks[tp] = _enum_factory(tp, _converter)
    return hook


def _enum_factory(tp: Any, conv: cattrs.Converter) -> _Hook:
    members = list(tp)
    shown = ", ".join(json.dumps(m.value) for m in members)

    def structure_enum(value: Any, _: Any) -> Any:
        for m in members:
            if type(m.value) is type(value) and m.value == value:
                return m
        raise _mismatch(f"one of {shown} ({tp.__name__})", value)

    return structure_enum


def _is_list(tp: Any) -> bool:
    return tp is list or typing.get_origin(tp) is list


def _only(json_type: type, expected: str, inner: _Hook) -> _Hook:
    """``inner`` for a value of exactly ``json_type`` (``list`` or ``dict``), or else a
    mismatch that names ``expected``."""

    def structure(value: Any, t: Any) -> Any:
        if type(value) is not json_type:
            raise _mismatch(expected, value)
        return inner(value, t)

    return structure


def _list_factory(tp: Any, conv: cattrs.Converter) -> _Hook:
    return _only(list, "array", list_structure_factory(tp, conv))


def _is_tuple(tp: Any) -> bool:
    return tp is tuple or typing.get_origin(tp) is tuple


def _tuple_factory(tp: Any, conv: cattrs.Converter) -> _Hook:
    args = typing.get_args(tp)
    if tp is tuple or (len(args) == 2 and args[1] is Ellipsis):
        return _only(list, "array", homogenous_tuple_structure_factory(tp, conv))

    if args == ((),):
        args = ()

    def structure_fixed_tuple(value: Any, t: Any) -> Any:
        if type(value) is not list:
            raise _mismatch("array", value)
        if len(value) != len(args):
            raise _Mismatch(
                f"invalid value for type, expected an array of {len(args)} items, got {len(value)}"
            )
        out: list[Any] = []
        errors: list[Exception] = []
        for i, (item, item_tp) in enumerate(zip(value, args, strict=True)):
            try:
                out.append(conv.structure(item, item_tp))
            except Exception as exc:  # collected like cattrs does
                note = IterableValidationNote(f"Structuring {t!r} @ index {i}", i, item_tp)
                exc.__notes__ = [*getattr(exc, "__notes__", []), note]
                errors.append(exc)
        if errors:
            raise IterableValidationError(f"While structuring {t!r}", errors, t)
        return tuple(out)

    return structure_fixed_tuple


def _is_dict(tp: Any) -> bool:
    return tp is dict or typing.get_origin(tp) is dict


def _dict_factory(tp: Any, conv: cattrs.Converter) -> _Hook:
    return _only(dict, "object", make_mapping_structure_fn(tp, conv, detailed_validation=True))


def _attrs_factory(tp: Any, conv: cattrs.Converter) -> _Hook:
    _resolved_fields(tp)
    return _only(dict, f"object ({tp.__name__})", make_dict_structure_fn(tp, conv))


def _dataclass_factory(tp: Any, conv: cattrs.Converter) -> _Hook:
    _hints(tp)
    return _only(dict, f"object ({tp.__name__})", make_dict_structure_fn(tp, conv))


def _typeddict_factory(tp: Any, conv: cattrs.Converter) -> _Hook:
    # Written here rather than cattrs' own, which trusts ``__required_keys__`` (see
    # :func:`_typeddict_required`); errors are reported the way cattrs reports them.
    hints = _hints(tp)
    required = _typeddict_required(tp)
    expected = f"object ({tp.__name__})"

    def structure_typeddict(value: Any, t: Any) -> Any:
        if type(value) is not dict:
            raise _mismatch(expected, value)
        out: dict[str, Any] = {}
        errors: list[Exception] = []
        for name, field_tp in hints.items():
            if name not in value:
                if name in required:
                    missing = KeyError(name)
                    missing.__notes__ = [
                        AttributeValidationNote(f"Required {name}", name, field_tp)
                    ]
                    errors.append(missing)
                continue
            try:
                out[name] = conv.structure(value[name], field_tp)
            except Exception as exc:  # collected like cattrs does
                note = AttributeValidationNote(f"Structuring {name}", name, field_tp)
                exc.__notes__ = [*getattr(exc, "__notes__", []), note]
                errors.append(exc)
        extra = set(value) - set(hints)
        if extra:
            errors.append(ForbiddenExtraKeysError("", t, extra))
        if errors:
            raise ClassValidationError(f"While structuring {tp.__name__}", errors, t)
        return out

    return structure_typeddict


def _pydantic_factory(tp: Any, conv: cattrs.Converter) -> _Hook:
    def structure_model(value: Any, _: Any) -> Any:
        try:
            return tp.model_validate(value)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            errors = getattr(exc, "errors", None)
            if not callable(errors):
                raise _Mismatch(f"invalid value for type, expected {tp.__name__} ({exc})") from None
            problems = [
                ".".join(map(str, item.get("loc", ()))) + ": " + item.get("msg", "invalid value")
                for item in errors()
            ]
            shown = "; ".join(p.removeprefix(": ") for p in problems) or str(exc)
            raise _Mismatch(f"invalid value for type, expected {tp.__name__} ({shown})") from None

    return structure_model


# One of the three cattrs converters, each with its own job: this one reads what a *model*
# wrote into the user's output and argument types, strictly (exact scalars, no extra keys,
# every problem with its path, fed back to the model). ``_codecs/serde.py``'s round-trips
# agentcore's own values; ``_codecs/values.py``'s gives user values their one JSON form.
def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    conv.register_structure_hook(str, _exact_hook(str, "str"))
    conv.register_structure_hook(int, _exact_hook(int, "int"))
    conv.register_structure_hook(float, _structure_float)
    conv.register_structure_hook(bool, _exact_hook(bool, "bool"))
    conv.register_structure_hook(_NoneType, _structure_none)
    conv.register_structure_hook_factory(_is_list, _list_factory)
    conv.register_structure_hook_factory(_is_tuple, _tuple_factory)
    conv.register_structure_hook_factory(_is_dict, _dict_factory)
    conv.register_structure_hook_factory(_is_attrs, _attrs_factory)
    conv.register_structure_hook_factory(_is_dataclass, _dataclass_factory)
    conv.register_structure_hook_factory(_is_typeddict, _typeddict_factory)
    conv.register_structure_hook_factory(is_pydantic_model, _pydantic_factory)
    conv.register_structure_hook_factory(_is_enum, lambda t, _: _enum_hook(t))
    conv.register_structure_hook_factory(_is_literal, _literal_factory)
    conv.register_structure_hook_factory(_is_union, _union_factory)
    return conv


_converter = _make_converter()
_supported: dict[Any, bool] = {}


def _format_exception(exc: BaseException, tp: Any) -> str:
    if isinstance(exc, _Mismatch):
        return str(exc)
    if isinstance(exc, KeyError):
        return "required field missing"
    if isinstance(exc, ForbiddenExtraKeysError):
        return f"extra fields found ({', '.join(sorted(exc.extra_fields))})"
    text = str(exc)
    if tp is not None and text:
        return f"invalid value for type, expected {_type_name(tp)} ({text})"
    if tp is not None:
        return f"invalid value for type, expected {_type_name(tp)}"
    return f"invalid value ({text})" if text else "invalid value"


def _error_lines(exc: BaseException) -> list[str]:
    return transform_error(exc, "$", _format_exception)


def structure(value: Any, tp: type[T]) -> T:
    """Validate a parsed JSON value against ``tp`` and build the Python value.

    Args:
        value: a value as produced by ``json.loads`` (dicts, lists, str, int, float, bool,
            ``None``).
        tp: a supported type (see the module docstring).

    Returns:
        The structured value (an attrs instance for an attrs class, a tuple for a tuple type...).

    Raises:
        ValidationFailed: the value does not fit; ``.message`` lists every problem with its
            JSON path.
        ConfigError: ``tp`` is not a supported type.
    """
    if tp is None:  # ``None`` as a type means ``NoneType``, as in annotations
        tp = _NoneType  # type: ignore[assignment]
    key: Any = tp
    try:
        known = _supported.get(key)
    except TypeError:  # unhashable type expression
        known, key = None, None
    if known is None:
        json_schema(tp)
        if key is not None:
            _supported[key] = True
    try:
        return _converter.structure(value, tp)
    except ConfigError:
        raise
    except (ClassValidationError, IterableValidationError, _Mismatch) as exc:
        raise ValidationFailed("; ".join(_error_lines(exc))) from None
    except Exception as exc:  # e.g. an attrs validator at top level
        raise ValidationFailed("; ".join(_error_lines(exc))) from None


# ----------------------------------------------------------------------------- parse_json_text

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[ \t]*\r?\n?(.*?)```", re.DOTALL)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_decode = json.JSONDecoder(parse_constant=_reject_constant).decode
_JSON_STARTS = frozenset('{["-0123456789tfn')


def loads_json(text: str) -> Any:
    """Parse strict JSON text (``NaN`` and ``Infinity`` are rejected).

    Raises:
        ValueError: the text is not one JSON value (``json.JSONDecodeError`` or a rejected
            constant).
    """
    return _decode(text)


def parse_json_text(text: str) -> Any:
    """Extract one JSON value from a model's text answer.

    Accepted, in this order: the whole text as JSON (surrounding whitespace ignored); the first
    fenced block tagged ``json`` (or untagged) that parses, anywhere in the text; the span from
    the first ``{`` to the last ``}`` (an object embedded in prose). ``NaN`` and ``Infinity``
    are rejected, as strict JSON requires.

    Args:
        text: the model's answer.

    Returns:
        The parsed JSON value.

    Raises:
        ValidationFailed: no JSON value could be found; the message says why.
    """
    stripped = text.strip()
    if not stripped:
        raise ValidationFailed("expected a JSON value, got an empty answer")
    first_error: str | None = None
    if stripped[0] in _JSON_STARTS:  # skip a costly failed parse of prose or a fence
        try:
            return loads_json(stripped)
        except ValueError as exc:
            first_error = f"{exc}"
    fenced_error: str | None = None
    for match in _FENCE.finditer(text):
        if match.group(1).lower() not in ("", "json"):
            continue
        try:
            return loads_json(match.group(2).strip())
        except ValueError as exc:
            if fenced_error is None:
                fenced_error = f"{exc}"
    if fenced_error is not None:
        raise ValidationFailed(f"the ```json block is not valid JSON: {fenced_error}")
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        try:
            return loads_json(stripped[start : end + 1])
        except ValueError:
            pass
    if first_error is None:
        try:
            loads_json(stripped)
        except ValueError as exc:
            first_error = f"{exc}"
    raise ValidationFailed(
        f"expected a JSON value (bare, or in a ```json fenced block); "
        f"the answer is not valid JSON: {first_error}"
    )
