"""JSON documents of replies, parsed in memory proportional to their size.

orjson parses a document into an arena sized for the worst case before it builds a single
value: about twelve times the document's length, whatever it holds. That is nothing for a
chat completion of a few kilobytes and a lot for a 10 MB reply (a 16 MiB reply, the default
cap, would reserve some 200 MB). :func:`loads` therefore hands documents above
:data:`LARGE_DOCUMENT` characters to the standard library's ``json`` module, which needs the
text and the values it builds (two to three times the document), and keeps orjson's speed for
everything smaller.

The large-document path accepts and refuses what orjson does: UTF-8 only, no byte-order mark,
no ``NaN``/``Infinity`` literals, no number that overflows a double, no lone surrogate escape
(``"\\udc00"``), integers outside 64 bits read as floats, control characters refused in
strings; its failures are ``orjson.JSONDecodeError`` as well.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

__all__ = ["LARGE_DOCUMENT", "loads"]

LARGE_DOCUMENT = 256 * 1024
"""Documents longer than this (bytes or characters) are parsed by the ``json`` module."""

_INT_MIN = -(2**63)
_INT_END = 2**64


def _int(text: str) -> int | float:
    value = int(text)
    if _INT_MIN <= value < _INT_END:
        return value
    return _float(text)


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number {text[:20]!r} is infinity when parsed as a double")
    return value


def _constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


_DECODER = json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_constant)

# A surrogate escape in the text; only then can a parsed string hold a lone surrogate (the
# json module joins the pairs).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item) is not None:
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def loads(document: bytes | bytearray | memoryview | str) -> Any:
    """The value of a JSON ``document`` (UTF-8 bytes or text), as ``orjson.loads`` gives it.

    Raises:
        orjson.JSONDecodeError: the document is not JSON.
    """
    if len(document) <= LARGE_DOCUMENT:
        return orjson.loads(document)
    if isinstance(document, str):
        text = document
    else:
        try:
            text = str(document, "utf-8")
        except UnicodeDecodeError as exc:
            raise orjson.JSONDecodeError(
                f"the document is not UTF-8: {exc.reason}", "", exc.start
            ) from None
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        message, position = exc.msg, exc.pos
    except (ValueError, RecursionError) as exc:
        message, position = str(exc), 0
    else:
        if _SURROGATE_ESCAPE.search(text) is None or not _has_lone_surrogate(value):
            return value
        message, position = "a string holds a lone surrogate", 0
    # Raised outside the handler: the json module's error holds the whole text.
    raise orjson.JSONDecodeError(message, "", position)
