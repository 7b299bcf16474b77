"""JSON encoding of agentcore values: :func:`dumps` and :func:`loads`.

One cattrs converter (the orjson preconfiguration, so orjson does the byte work) serves every
agentcore value: messages, events, effects, their parts, and any attrs value built from them
(such as an ``AgentLoop`` snapshot). The module is pure: no I/O, no clock.

Wire format
-----------
- An attrs value is a JSON object with one key per field (the attribute name), in field order.
  Every field is written, defaults included, so the bytes do not depend on defaults; except a
  field added after its class's format was pinned (listed in ``_ONLY_WHEN_SET``), which is
  written only when it does not hold its default: values that do not use it
  keep their bytes, and bytes written before it existed load (the field takes its default).
- Messages, events and effects additionally carry a ``"type"`` tag, written first, with a
  stable snake_case name (see ``_TAGS``). The tag is written wherever the value appears, so a
  value encoded on its own decodes both as its class and as its union (``Message``, ``Event``,
  ``Effect``). Decoding into a union requires the tag; decoding into one class accepts it if it
  names that class and tolerates its absence.
- ``bytes`` (image data) are written as standard base64 text (RFC 4648, with padding); decoding
  accepts only valid base64.
- Enums are written by value; tuples, lists and sets as arrays (sets sorted when their items
  allow, so equal sets give equal bytes); mappings as objects; ``None`` as ``null``.
  ``Mapping[str, Any]`` fields (tool arguments, JSON schemas) hold JSON values.
- Fields that hold code (a ``Callable`` with a default, such as ``ToolSpec.validator``) are not
  written; on decoding they take their default.
- ``Any`` fields (``Finish.output``) are written by their runtime type: attrs instances and
  dataclasses become objects, tuples become arrays. Decoding gives the JSON value back (dicts,
  lists, strings, numbers, booleans, ``None``); ``loads(data, Finish, output_type=T)``
  rebuilds a typed output.

Strictness
----------
Decoding never coerces: a string field accepts only a JSON string, an integer field only a JSON
integer (not ``true``, not ``1.0``), a float field a JSON number, an array field only an array,
an object field only an object. Unknown keys, unknown tags and unknown enum values are errors.

Errors
------
Every failure of :func:`loads` caused by its input (not JSON, not UTF-8, wrong shape, unknown
tag, extra keys, wrong types, missing fields) raises :class:`~agentcore.DecodeError` with one
``problem @ $.path`` entry per problem, and the underlying orjson or cattrs exception as
``__cause__``. :func:`dumps` raises :class:`TypeError` for a value JSON cannot represent
exactly (an unsupported type, a non-finite float, an integer outside the 64-bit range, a string
with lone surrogates, a non-string mapping key). Asking for a type the converter cannot build
at all is a programming error and raises :class:`TypeError` too.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import enum
import json
import math
import re
import types
import typing
from collections.abc import Callable, Mapping, MutableSequence, Sequence
from typing import Any, TypeVar, get_args, get_origin, overload

import attrs
from cattrs.cols import (
    homogenous_tuple_structure_factory,
    is_any_set,
    is_mapping,
    is_sequence,
    list_structure_factory,
)
from cattrs.errors import (
    ClassValidationError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.preconf.orjson import OrjsonConverter, make_converter
from cattrs.v import format_exception, transform_error

from .._core import events, messages
from .._core.errors import ConfigError, DecodeError
from .._core.schema import json_kind
from .http import SECRET_HEADERS, HttpRequest
from .redact import REDACTED

__all__ = ["dumps", "loads"]

T = TypeVar("T")

_TAG_FIELD = "type"
"""The key holding the tag of a message, event or effect."""

# The wire names of the union members. They are part of the format: never rename one. A new
# member of ``Message``, ``Event`` or ``Effect`` needs an entry here (a test checks this).
_TAGS: dict[type, str] = {
    messages.SystemMessage: "system",
    messages.UserMessage: "user",
    messages.AssistantMessage: "assistant",
    messages.ToolMessage: "tool",
    events.ModelResponded: "model_responded",
    events.ModelFailed: "model_failed",
    events.ToolReturned: "tool_returned",
    events.ToolFailed: "tool_failed",
    events.CancelRequested: "cancel_requested",
    events.CallModel: "call_model",
    events.CallTool: "call_tool",
    events.Finish: "finish",
    events.Abort: "abort",
}

# Names used in error messages for the public unions.
_UNION_NAMES: dict[Any, str] = {
    messages.Message: "Message",
    events.Event: "Event",
    events.Effect: "Effect",
}

# At most this many problems are listed in one DecodeError message.
_MAX_PROBLEMS = 10

_INT_KEY = re.compile(r"-?(?:0|[1-9][0-9]*)")


class _WireError(ValueError):
    """A decoding problem whose message is complete as it stands (no cattrs rewording)."""


# ----------------------------------------------------------------------------- descriptions


def _json_kind(value: object) -> str:
    """How a decoded JSON value reads in an error message: ``an integer``, ``null``..."""
    kind = json_kind(value)
    if kind == "null":
        return kind
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _type_name(tp: Any) -> str:
    """A short readable name of a target type."""
    named = _UNION_NAMES.get(tp) if _is_hashable(tp) else None
    if named is not None:
        return named
    if isinstance(tp, type) and not get_args(tp):
        return tp.__name__
    return repr(tp).replace("agentcore._core.messages.", "").replace("agentcore._core.events.", "")


def _is_hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _show(value: object) -> str:
    """A decoded JSON value as quoted in an error message: scalars by value, others by kind."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return repr(value)
    return _json_kind(value)


def _mismatch(expected: str, value: object) -> _WireError:
    return _WireError(f"expected {expected}, got {_json_kind(value)}")


# ----------------------------------------------------------------------------- primitives
#
# cattrs' defaults call the type (``int("5")``, ``bool("false")``, ``str(3)``); these hooks
# accept only the JSON type itself. They are registered per class, which also routes
# str- and int-valued enum subclasses here, hence the enum branch.


def _exact_hook(kind: type, expected: str) -> Callable[[object, Any], Any]:
    """The hook for ``str``, ``int`` or ``bool``: a value of exactly that JSON type, converted
    for a subclass of ``kind``; a mismatch names ``expected``."""

    def structure(value: object, cl: Any) -> Any:
        if cl is not kind and issubclass(cl, enum.Enum):
            return _structure_enum(value, cl)
        if type(value) is not kind:
            raise _mismatch(expected, value)
        return value if cl is kind else cl(value)

    return structure


def _structure_float(value: object, cl: Any) -> Any:
    if type(value) is not float and type(value) is not int:
        raise _mismatch("a number", value)
    return float(value) if cl is float else cl(value)


def _unstructure_float(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{value!r} has no exact JSON representation")
    return value


def _structure_bytes(value: object, cl: Any) -> bytes:
    if not isinstance(value, str):
        raise _mismatch("base64 text", value)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise _WireError("expected base64 text, got a string that is not valid base64") from None


def _unstructure_bytes(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _structure_enum(value: object, cl: type[enum.Enum]) -> enum.Enum:
    for member in cl:
        if type(member.value) is type(value) and member.value == value:
            return member
    allowed = ", ".join(repr(member.value) for member in cl)
    raise _WireError(f"expected one of {allowed} ({cl.__name__}), got {_show(value)}")


def _is_enum(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, enum.Enum)


# ----------------------------------------------------------------------------- attrs classes


_ONLY_WHEN_SET: frozenset[tuple[type, str]] = frozenset(
    {
        (events.CallModel, "service_tier"),
        (events.ModelResponded, "service_tier"),
        (events.ModelResponded, "cache_write_tokens"),
        (events.ModelResponded, "cache_write_1h_tokens"),
    }
)
"""Fields added to the format after it was fixed: written only when they differ from their
default, so what was written before reads the same and writes back the same bytes."""


def _code_fields(cl: type) -> dict[str, Any]:
    """cattrs overrides omitting fields that hold code (``Callable`` with a default), and
    those of :data:`_ONLY_WHEN_SET` while they hold their default."""
    attrs.resolve_types(cl)  # at once, a no-op when done before (see agentcore._public)
    omitted: dict[str, Any] = {}
    for field in attrs.fields(cl):
        hint = field.type
        is_callable = hint is Callable or get_origin(hint) is Callable
        if is_callable and field.default is not attrs.NOTHING:
            omitted[field.name] = override(omit=True)
        elif (cl, field.name) in _ONLY_WHEN_SET:
            omitted[field.name] = override(omit_if_default=True)
    return omitted


def _is_attrs_class(tp: Any) -> bool:
    return isinstance(tp, type) and attrs.has(tp) and not get_args(tp)


def _make_attrs_structure(conv: OrjsonConverter) -> Callable[[Any], Any]:
    def factory(cl: type) -> Callable[[Any, Any], Any]:
        inner: Callable[[Any, Any], Any] = make_dict_structure_fn(cl, conv, **_code_fields(cl))
        tag = _TAGS.get(cl)
        expected = f"an object ({cl.__name__})"

        def structure(value: Any, _: Any) -> Any:
            if type(value) is not dict:
                raise _mismatch(expected, value)
            if tag is not None and _TAG_FIELD in value:
                found = value[_TAG_FIELD]
                if found != tag:
                    raise _WireError(
                        f"expected type tag {tag!r} ({cl.__name__}), got {_show(found)}"
                    )
                value = {k: v for k, v in value.items() if k != _TAG_FIELD}
            return inner(value, cl)

        return structure

    return factory


def _make_attrs_unstructure(conv: OrjsonConverter) -> Callable[[Any], Any]:
    def factory(cl: type) -> Callable[[Any], Any]:
        inner: Callable[[Any], Any] = make_dict_unstructure_fn(cl, conv, **_code_fields(cl))
        tag = _TAGS.get(cl)
        if tag is None:
            return inner

        def unstructure(value: Any) -> dict[str, Any]:
            return {_TAG_FIELD: tag, **inner(value)}

        return unstructure

    return factory


# ----------------------------------------------------------------------------- tagged unions


def _union_args(tp: Any) -> tuple[Any, ...]:
    if get_origin(tp) in (typing.Union, types.UnionType):
        return get_args(tp)
    return ()


def _is_tagged_union(tp: Any) -> bool:
    members = [arg for arg in _union_args(tp) if arg is not type(None)]
    return len(members) >= 2 and all(member in _TAGS for member in members)


def _make_union_structure(conv: OrjsonConverter) -> Callable[[Any], Any]:
    def factory(tp: Any) -> Callable[[Any, Any], Any]:
        members = [arg for arg in get_args(tp) if arg is not type(None)]
        nullable = len(members) < len(get_args(tp))
        by_tag = {_TAGS[member]: member for member in members}
        hooks = {member: conv.get_structure_hook(member) for member in members}
        name = _type_name(tp)
        allowed = ", ".join(repr(tag) for tag in by_tag)

        def structure(value: Any, _: Any) -> Any:
            if value is None and nullable:
                return None
            if type(value) is not dict:
                raise _mismatch(f"an object ({name})", value)
            if _TAG_FIELD not in value:
                raise _WireError(f"missing type tag for {name}; expected one of {allowed}")
            found = value[_TAG_FIELD]
            if not isinstance(found, str):
                raise _WireError(
                    f"type tag must be a string, got {_json_kind(found)}; "
                    f"expected one of {allowed} ({name})"
                )
            member = by_tag.get(found)
            if member is None:
                raise _WireError(
                    f"unknown type tag {found!r} for {name}; expected one of {allowed}"
                )
            return hooks[member](value, member)

        return structure

    return factory


def _make_union_unstructure(conv: OrjsonConverter) -> Callable[[Any], Any]:
    def factory(tp: Any) -> Callable[[Any], Any]:
        members = [arg for arg in get_args(tp) if arg is not type(None)]
        nullable = len(members) < len(get_args(tp))
        hooks = {member: conv.get_unstructure_hook(member) for member in members}
        name = _type_name(tp)

        def unstructure(value: Any) -> Any:
            if value is None and nullable:
                return None
            hook = hooks.get(type(value))
            if hook is None:
                raise TypeError(f"{type(value).__name__} is not a member of {name}")
            return hook(value)

        return unstructure

    return factory


# ----------------------------------------------------------------------------- collections


def _is_array(tp: Any) -> bool:
    origin = get_origin(tp) or tp
    return is_sequence(tp) and origin in (list, tuple, Sequence, MutableSequence)


def _is_fixed_tuple(tp: Any) -> bool:
    args = get_args(tp)
    return get_origin(tp) is tuple and bool(args) and args[-1] is not Ellipsis


def _make_array_structure(conv: OrjsonConverter) -> Callable[[Any], Any]:
    def factory(tp: Any) -> Callable[[Any, Any], Any]:
        if (get_origin(tp) or tp) is tuple:
            inner = homogenous_tuple_structure_factory(tp, conv)
        else:
            inner = list_structure_factory(tp, conv)

        def structure(value: Any, _: Any) -> Any:
            if type(value) is not list:
                raise _mismatch("an array", value)
            return inner(value, tp)

        return structure

    return factory


def _make_fixed_tuple_structure(conv: OrjsonConverter) -> Callable[[Any], Any]:
    def factory(tp: Any) -> Callable[[Any, Any], Any]:
        inner = conv.gen_structure_hetero_tuple(tp)
        size = len(get_args(tp))

        def structure(value: Any, _: Any) -> Any:
            if type(value) is not list:
                raise _mismatch("an array", value)
            if len(value) != size:
                raise _WireError(f"expected an array of {size} items, got {len(value)}")
            return inner(value, tp)

        return structure

    return factory


def _make_set_structure(conv: OrjsonConverter) -> Callable[[Any], Any]:
    def factory(tp: Any) -> Callable[[Any, Any], Any]:
        args = get_args(tp)
        inner = list_structure_factory(list[args[0]] if args else list, conv)  # type: ignore[valid-type]
        origin = get_origin(tp) or tp
        build: Callable[[list[Any]], Any] = set if origin is set else frozenset

        def structure(value: Any, _: Any) -> Any:
            if type(value) is not list:
                raise _mismatch("an array", value)
            return build(inner(value, list))

        return structure

    return factory


def _make_set_unstructure(conv: OrjsonConverter) -> Callable[[Any], Any]:
    def factory(tp: Any) -> Callable[[Any], Any]:
        args = get_args(tp)
        item_hook = conv.get_unstructure_hook(args[0]) if args else conv.unstructure

        def unstructure(value: Any) -> list[Any]:
            items = [item_hook(item) for item in value]
            # Set order depends on hashing; sort when the items allow it, so equal sets
            # always give equal bytes.
            with contextlib.suppress(TypeError):
                items.sort()
            return items

        return unstructure

    return factory


def _mapping_types(tp: Any) -> tuple[Any, Any]:
    args = get_args(tp)
    return (args[0], args[1]) if len(args) == 2 else (Any, Any)


def _key_encoder(key_type: Any) -> Callable[[Any], str]:
    """How a mapping key of static type ``key_type`` becomes a JSON object key."""
    if key_type is int:

        def encode_int(key: Any) -> str:
            if type(key) is not int:
                raise TypeError(f"mapping key {key!r} is not an int")
            return str(key)

        return encode_int
    if _is_enum(key_type) and all(isinstance(m.value, str) for m in key_type):

        def encode_enum(key: Any) -> str:
            if not isinstance(key, key_type):
                raise TypeError(f"mapping key {key!r} is not a {key_type.__name__}")
            return str(key.value)

        return encode_enum
    if key_type in (str, Any):

        def encode_str(key: Any) -> str:
            if type(key) is not str:
                raise TypeError(f"mapping key {key!r} is not a string")
            return key

        return encode_str
    raise TypeError(f"mapping keys of type {_type_name(key_type)} cannot be written as JSON")


def _key_decoder(key_type: Any) -> Callable[[str], Any] | None:
    """How a JSON object key becomes a key of static type ``key_type`` (``None``: as is)."""
    if key_type in (str, Any):
        return None
    if key_type is int:

        def decode_int(key: str) -> int:
            if not _INT_KEY.fullmatch(key):
                raise _WireError(f"expected an integer key, got {key!r}")
            return int(key)

        return decode_int
    if _is_enum(key_type) and all(isinstance(m.value, str) for m in key_type):
        enum_type = key_type

        def decode_enum(key: str) -> Any:
            return _structure_enum(key, enum_type)

        return decode_enum
    raise TypeError(f"mapping keys of type {_type_name(key_type)} cannot be read from JSON")


def _make_mapping_structure(conv: OrjsonConverter) -> Callable[[Any], Any]:
    def factory(tp: Any) -> Callable[[Any, Any], Any]:
        key_type, value_type = _mapping_types(tp)
        decode_key = _key_decoder(key_type)
        value_hook = None if value_type is Any else conv.get_structure_hook(value_type)

        def structure(value: Any, _: Any) -> Any:
            if type(value) is not dict:
                raise _mismatch("an object", value)
            if decode_key is None and value_hook is None:
                return dict(value)
            result: dict[Any, Any] = {}
            errors: list[Exception] = []
            for key, item in value.items():
                try:
                    new_key = key if decode_key is None else decode_key(key)
                    result[new_key] = item if value_hook is None else value_hook(item, value_type)
                except Exception as exc:
                    note = IterableValidationNote(
                        f"Structuring mapping @ key {key!r}", key, value_type
                    )
                    exc.__notes__ = [*getattr(exc, "__notes__", []), note]
                    errors.append(exc)
            if errors:
                raise IterableValidationError(f"While structuring {tp!r}", errors, tp)
            return result

        return structure

    return factory


def _make_mapping_unstructure(conv: OrjsonConverter) -> Callable[[Any], Any]:
    def factory(tp: Any) -> Callable[[Any], Any]:
        key_type, value_type = _mapping_types(tp)
        encode_key = _key_encoder(key_type)
        value_hook = (
            conv.unstructure if value_type is Any else conv.get_unstructure_hook(value_type)
        )

        def unstructure(value: Mapping[Any, Any]) -> dict[str, Any]:
            return {encode_key(key): value_hook(item) for key, item in value.items()}

        return unstructure

    return factory


# ----------------------------------------------------------------------------- the converter


# One of the three cattrs converters, each with its own job: this one round-trips agentcore's
# own values (messages, snapshots, wire values) exactly, with tagged unions and strict reading.
# ``_core/schema.py``'s reads model output into user types; ``values.py``'s gives user values
# their one JSON form. (``keep_secrets=True`` builds a second instance of this same one.)
def _build_converter() -> OrjsonConverter:
    conv = make_converter(forbid_extra_keys=True, detailed_validation=True)

    conv.register_structure_hook(str, _exact_hook(str, "a string"))
    conv.register_structure_hook(int, _exact_hook(int, "an integer"))
    conv.register_structure_hook(float, _structure_float)
    conv.register_structure_hook(bool, _exact_hook(bool, "a boolean"))
    conv.register_unstructure_hook(float, _unstructure_float)
    conv.register_structure_hook(bytes, _structure_bytes)
    conv.register_unstructure_hook(bytes, _unstructure_bytes)

    # Later registrations win: the most specific predicates go last.
    conv.register_structure_hook_func(_is_enum, _structure_enum)
    conv.register_structure_hook_factory(is_mapping, _make_mapping_structure(conv))
    conv.register_unstructure_hook_factory(is_mapping, _make_mapping_unstructure(conv))
    conv.register_structure_hook_factory(is_any_set, _make_set_structure(conv))
    conv.register_unstructure_hook_factory(is_any_set, _make_set_unstructure(conv))
    conv.register_structure_hook_factory(_is_array, _make_array_structure(conv))
    conv.register_structure_hook_factory(_is_fixed_tuple, _make_fixed_tuple_structure(conv))
    conv.register_structure_hook_factory(_is_attrs_class, _make_attrs_structure(conv))
    conv.register_unstructure_hook_factory(_is_attrs_class, _make_attrs_unstructure(conv))
    conv.register_structure_hook_factory(_is_tagged_union, _make_union_structure(conv))
    conv.register_unstructure_hook_factory(_is_tagged_union, _make_union_unstructure(conv))
    return conv


def _redact_requests(conv: OrjsonConverter) -> OrjsonConverter:
    """Make ``conv`` write the values of secret headers of an ``HttpRequest`` as
    ``<redacted>`` (the request's repr does the same)."""
    plain = conv.get_unstructure_hook(HttpRequest)

    def unstructure(request: HttpRequest) -> Any:
        data = plain(request)
        data["headers"] = [
            [name, REDACTED if name in SECRET_HEADERS else value] for name, value in request.headers
        ]
        return data

    conv.register_unstructure_hook(HttpRequest, unstructure)
    return conv


_converter = _redact_requests(_build_converter())
_revealing: OrjsonConverter | None = None
"""Built on first use of ``dumps(..., keep_secrets=True)``."""


# ----------------------------------------------------------------------------- errors


def _format_problem(exc: BaseException, tp: type | None) -> str:
    if isinstance(exc, _WireError | ConfigError):  # a value's own check names the problem
        return str(exc)
    return format_exception(exc, tp)


def _decode_error_message(exc: BaseException, tp: Any, path: str = "$") -> str:
    if isinstance(exc, (ClassValidationError, IterableValidationError, _WireError)):
        problems = transform_error(exc, path, _format_problem)
    else:
        problems = [f"{_format_problem(exc, None)} @ {path}"]
    shown = problems[:_MAX_PROBLEMS]
    if len(problems) > _MAX_PROBLEMS:
        shown.append(f"and {len(problems) - _MAX_PROBLEMS} more")
    return f"cannot decode {_type_name(tp)}: " + "; ".join(shown)


def _structure_hook(tp: Any) -> Callable[[Any, Any], Any]:
    try:
        return _converter.get_structure_hook(tp)
    except Exception as exc:  # unsupported or unresolvable type: a programming error
        raise TypeError(f"agentcore.core.loads cannot decode into {tp!r}: {exc}") from exc


# ----------------------------------------------------------------------------- public API


def dumps(obj: Any, *, keep_secrets: bool = False) -> bytes:
    """Encode an agentcore value (or any attrs value built from them) as compact JSON.

    Messages, events and effects carry their ``"type"`` tag, so the result decodes both as
    the value's own class and as its union. See the module documentation for the format.

    The values of secret headers (``authorization``, ``x-api-key``...) of an ``HttpRequest``
    are written as ``<redacted>``, as in its repr, unless ``keep_secrets=True``.

    Args:
        obj: the value to encode: a message, event, effect, snapshot, a tuple or list of
            them, or a plain JSON-like value.
        keep_secrets: write secret header values in clear (to replay a captured request).

    Returns:
        UTF-8 JSON bytes.

    Raises:
        TypeError: ``obj`` holds something JSON cannot represent exactly (an unsupported
            type, a non-finite float, an integer outside the 64-bit range, a string with lone
            surrogates, a non-string mapping key). The underlying error is the ``__cause__``.
    """
    conv = _converter
    if keep_secrets:
        global _revealing  # noqa: PLW0603 - built once, on first use
        conv = _revealing = _revealing or _build_converter()
    try:
        return conv.dumps(obj)
    except Exception as exc:  # orjson's errors, cattrs' hook errors, the checks above
        raise TypeError(f"cannot encode {type(obj).__name__} as JSON: {exc}") from exc


@overload
def loads(data: bytes | str, tp: type[T], *, output_type: Any = None) -> T: ...


@overload
def loads(data: bytes | str, tp: Any, *, output_type: Any = None) -> Any: ...


def loads(data: bytes | str, tp: Any, *, output_type: Any = None) -> Any:
    """Decode JSON produced by :func:`dumps` into ``tp``.

    ``tp`` may be a class (``ModelResponded``), a union (``agentcore.core.Event``,
    ``agentcore.core.Effect``, ``agentcore.core.Message``) or a generic alias such as
    ``tuple[Message, ...]``. Decoding is strict (no coercion, no unknown keys).

    ``Finish.output`` is ``Any``: it comes back as its JSON form (an attrs output as a dict,
    a tuple as a list). Pass ``output_type`` to rebuild it: when the decoded value is a
    ``Finish``, its output is decoded into ``output_type`` (for other values the argument is
    ignored, so ``loads(data, Effect, output_type=Answer)`` works for any effect).

    Args:
        data: the JSON document, as UTF-8 bytes or as text.
        tp: the type to decode into.
        output_type: the type of ``Finish.output``, if a typed output is wanted.

    Returns:
        The decoded value, an instance of ``tp``.

    Raises:
        DecodeError: ``data`` is not valid UTF-8 JSON or does not describe a ``tp`` (wrong
            shape, unknown tag, unknown or missing fields, wrong types). The message lists
            each problem with its JSON path; the orjson or cattrs error is the ``__cause__``.
        TypeError: ``data`` is not bytes or text, or no decoder can be built for ``tp``.
    """
    if not isinstance(data, (bytes, bytearray, memoryview, str)):
        raise TypeError(f"agentcore.core.loads expects bytes or str, got {type(data).__name__}")
    hook = _structure_hook(tp)
    try:
        raw = _converter.loads(data, Any)
    except json.JSONDecodeError as exc:
        raise DecodeError(f"cannot decode {_type_name(tp)}: invalid JSON: {exc}") from exc
    try:
        value = hook(raw, tp)
    except Exception as exc:
        raise DecodeError(_decode_error_message(exc, tp)) from exc
    if output_type is not None and isinstance(value, events.Finish):
        output_hook = _structure_hook(output_type)
        try:
            output = output_hook(value.output, output_type)
        except Exception as exc:
            raise DecodeError(_decode_error_message(exc, output_type, "$.output")) from exc
        value = attrs.evolve(value, output=output)
    return value
