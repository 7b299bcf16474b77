"""Checks for configuration values, all raising :class:`~agentcore.ConfigError`.

The attrs validators name the offending field as ``Class.field`` (from the instance being
built); the plain functions take the name to show. Every configuration class of the package
validates through these, so a bad value reads the same wherever it is caught.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import attrs

from .errors import ConfigError

__all__ = [
    "check_choice",
    "check_header_value",
    "check_items",
    "int_at_least",
    "is_bool",
    "is_int",
    "nonempty_str",
    "number_at_least",
    "one_of",
    "optional_int_at_least",
    "optional_number_at_least",
    "optional_nonempty_str",
]

Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]
T = TypeVar("T")


def _where(instance: Any, attribute: attrs.Attribute[Any]) -> str:
    if instance is None:
        return attribute.name
    return f"{type(instance).__name__}.{attribute.name}"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def int_at_least(minimum: int) -> Validator:
    """An int (not a bool) of at least ``minimum``."""

    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if not _is_int(value) or value < minimum:
            where = _where(instance, attribute)
            raise ConfigError(f"{where} must be an int >= {minimum}, got {value!r}")

    return check


def optional_int_at_least(minimum: int) -> Validator:
    """``None``, or an int of at least ``minimum``."""
    inner = int_at_least(minimum)

    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is not None:
            inner(instance, attribute, value)

    return check


def is_int(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """An int (not a bool)."""
    if not _is_int(value):
        raise ConfigError(f"{_where(instance, attribute)} must be an int, got {value!r}")


def is_bool(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """``True`` or ``False``."""
    if not isinstance(value, bool):
        raise ConfigError(f"{_where(instance, attribute)} must be True or False, got {value!r}")


def number_at_least(minimum: float, *, strictly: bool = False) -> Validator:
    """An int or float (not a bool) of at least ``minimum`` (above it, if ``strictly``)."""
    relation = ">" if strictly else ">="

    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        ok = (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and (value > minimum if strictly else value >= minimum)
        )
        if not ok:
            where = _where(instance, attribute)
            raise ConfigError(f"{where} must be a number {relation} {minimum}, got {value!r}")

    return check


def optional_number_at_least(minimum: float, *, strictly: bool = False) -> Validator:
    """``None``, or a number of at least ``minimum`` (above it, if ``strictly``)."""
    inner = number_at_least(minimum, strictly=strictly)

    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is not None:
            inner(instance, attribute, value)

    return check


def nonempty_str(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A non-empty str."""
    if type(value) is not str or not value:
        raise ConfigError(f"{_where(instance, attribute)} must be a non-empty str, got {value!r}")


def optional_nonempty_str(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """``None``, or a non-empty str."""
    if value is not None and (type(value) is not str or not value):
        where = _where(instance, attribute)
        raise ConfigError(f"{where} must be None or a non-empty str, got {value!r}")


def one_of(*allowed: object) -> Validator:
    """One of ``allowed``."""

    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        check_choice(_where(instance, attribute), value, allowed)

    return check


def check_choice(name: str, value: object, allowed: tuple[object, ...]) -> None:
    """Raise unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise ConfigError(f"{name} must be one of {choices}; got {value!r}")


def check_items(name: str, value: object, kind: type[T], noun: str) -> tuple[T, ...]:
    """``value`` as a tuple, where it is a collection (not a string, not one ``kind`` value on
    its own) of ``kind`` values only; ``noun`` names them in the error."""
    if isinstance(value, (str, bytes, kind)) or not isinstance(value, Iterable):
        raise ConfigError(f"{name} must be a collection of {noun}, got {value!r}")
    items = tuple(value)
    for item in items:
        if not isinstance(item, kind):
            raise ConfigError(f"{name} must hold {noun}, got {item!r}")
    return items


def check_header_value(name: str, value: str, *, secret: bool = False) -> None:
    """Raise unless ``value`` can be sent as an HTTP header value as it is.

    Refused: characters outside latin-1, control characters (CR, LF, NUL...; a tab only
    inside), and leading or trailing whitespace (a key read from a file with its newline). A
    ``secret`` value is never quoted in the message.

    Args:
        name: what to call the value in the error (``"the API key"``, ``"header 'x-a'"``).
        value: the value to check.
        secret: leave the value out of the error message.
    """
    problem = None
    if not isinstance(value, str):
        problem = f"must be a str, got {type(value).__name__}"
    elif value != value.strip(" \t\r\n"):
        problem = "has leading or trailing whitespace (a newline read from a file?)"
    elif value.isascii() and value.isprintable():
        pass  # the common case (a request id, a key) at C speed: neither check below can fail
    elif any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in value):
        problem = "contains a control character"
    elif any(ord(c) > 0xFF for c in value):
        problem = "contains a character outside latin-1"
    if problem is not None:
        shown = "" if secret or not isinstance(value, str) else f" ({value!r})"
        raise ConfigError(f"{name} {problem}{shown}; it cannot be sent in an HTTP header")
