"""Generating JSON values that satisfy a JSON schema.

The simulated model fills tool arguments and structured answers with this. It covers the
subset that tool and output schemas use in practice: ``type`` (one or a list, including
``null``), ``properties`` / ``required`` / ``additionalProperties``, ``items`` /
``prefixItems`` / ``minItems`` / ``maxItems`` / ``uniqueItems``, ``enum``, ``const``,
``anyOf`` / ``oneOf`` / ``allOf``, ``$ref`` into ``$defs`` or ``definitions``, numeric bounds
and ``multipleOf``, string ``minLength`` / ``maxLength`` and the common ``format`` values.
``pattern`` is not honoured (no general regex inversion); an unsatisfiable schema gives a best
effort rather than an error.

Past a nesting depth the generator switches to minimal values (no optional properties, the
fewest items, ``null`` where allowed), so recursive schemas terminate.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

__all__ = ["generate_value"]

_MINIMAL_DEPTH = 6
"""Below this many nested values, generation turns minimal."""

_FORMATS = ("date-time", "date", "time", "email", "uri", "url", "uuid", "hostname", "ipv4")


def generate_value(schema: Any, rng: random.Random, words: Sequence[str]) -> Any:
    """A JSON value (dict, list, str, int, float, bool or None) valid against ``schema``.

    Args:
        schema: a JSON schema (a mapping, or ``True``/``False``).
        rng: the source of every choice; the same state gives the same value.
        words: the vocabulary strings are made of (must not be empty).

    Returns:
        The value.
    """
    return _Generator(rng, words, schema).value(schema, 0)


class _Generator:
    __slots__ = ("rng", "root", "words")

    def __init__(self, rng: random.Random, words: Sequence[str], root: Any) -> None:
        self.rng = rng
        self.words = words
        self.root = root

    def resolve(self, schema: Mapping[str, Any]) -> Any:
        """Follow ``$ref`` pointers (``#/...``) until a schema without one."""
        for _ in range(32):
            ref = schema.get("$ref")
            if not isinstance(ref, str) or not ref.startswith("#"):
                return schema
            target: Any = self.root
            for part in ref[1:].split("/"):
                if not part:
                    continue
                key = part.replace("~1", "/").replace("~0", "~")
                if isinstance(target, Mapping) and key in target:
                    target = target[key]
                elif isinstance(target, list) and key.isdigit() and int(key) < len(target):
                    target = target[int(key)]
                else:
                    return {}
            if not isinstance(target, Mapping):
                return target
            schema = target
        return {}

    def value(self, schema: Any, depth: int) -> Any:
        if schema is True or schema is None:
            return self.word()
        if not isinstance(schema, Mapping):
            return None
        schema = self.resolve(schema)
        if not isinstance(schema, Mapping):
            return self.value(schema, depth)
        minimal = depth >= _MINIMAL_DEPTH
        if "const" in schema:
            return schema["const"]
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            return self.rng.choice(enum)
        branches = schema.get("anyOf") or schema.get("oneOf")
        if isinstance(branches, list) and branches:
            return self.value(self.pick_branch(branches, minimal), depth)
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and all_of:
            return self.value(self.merge([schema, *all_of]), depth)
        if schema.get("nullable") is True and (minimal or self.rng.random() < 0.2):
            return None
        kind = self.pick_type(schema, minimal)
        if kind == "object":
            return self.object(schema, depth, minimal)
        if kind == "array":
            return self.array(schema, depth, minimal)
        if kind == "string":
            return self.string(schema)
        if kind == "integer":
            return self.integer(schema)
        if kind == "number":
            return self.number(schema)
        if kind == "boolean":
            return self.rng.random() < 0.5
        return None

    # -- choices ------------------------------------------------------------------------------

    def word(self) -> str:
        return self.rng.choice(self.words)

    def pick_branch(self, branches: list[Any], minimal: bool) -> Any:
        if minimal:
            for branch in branches:
                resolved = self.resolve(branch) if isinstance(branch, Mapping) else branch
                if isinstance(resolved, Mapping) and resolved.get("type") not in (
                    "object",
                    "array",
                ):
                    return resolved
        return self.rng.choice(branches)

    def pick_type(self, schema: Mapping[str, Any], minimal: bool) -> str:
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if isinstance(k, str)]
            if not kinds:
                return "string"
            if "null" in kinds and len(kinds) > 1:
                if minimal or self.rng.random() < 0.2:
                    return "null"
                kinds.remove("null")
            return self.rng.choice(kinds)
        if isinstance(kind, str):
            return kind
        if "properties" in schema or "additionalProperties" in schema:
            return "object"
        if "items" in schema or "prefixItems" in schema:
            return "array"
        return "string"

    def merge(self, schemas: list[Any]) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        properties: dict[str, Any] = {}
        required: list[str] = []
        for raw in schemas:
            part = self.resolve(raw) if isinstance(raw, Mapping) else {}
            if not isinstance(part, Mapping):
                continue
            merged.update((k, v) for k, v in part.items() if k not in ("allOf", "$ref"))
            properties.update(part.get("properties") or {})
            required.extend(r for r in part.get("required") or () if r not in required)
        if properties:
            merged["properties"] = properties
        if required:
            merged["required"] = required
        return merged

    # -- per type -----------------------------------------------------------------------------

    def object(self, schema: Mapping[str, Any], depth: int, minimal: bool) -> dict[str, Any]:
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required = [r for r in schema.get("required") or () if isinstance(r, str)]
        extra = schema.get("additionalProperties")
        result: dict[str, Any] = {}
        for name, sub in properties.items():
            if name in required or (not minimal and self.rng.random() < 0.5):
                result[name] = self.value(sub, depth + 1)
        for name in required:
            if name not in result:
                result[name] = self.value(extra if isinstance(extra, Mapping) else {}, depth + 1)
        if not properties and isinstance(extra, Mapping) and not minimal:
            for _ in range(self.rng.randint(1, 2)):
                result.setdefault(self.word(), self.value(extra, depth + 1))
        low = schema.get("minProperties")
        if isinstance(low, int) and extra is not False:
            filler = extra if isinstance(extra, Mapping) else {}
            index = 0
            while len(result) < low:
                result.setdefault(f"{self.word()}_{index}", self.value(filler, depth + 1))
                index += 1
        return result

    def array(self, schema: Mapping[str, Any], depth: int, minimal: bool) -> list[Any]:
        prefix = schema.get("prefixItems")
        if isinstance(prefix, list):
            return [self.value(sub, depth + 1) for sub in prefix]
        items = schema.get("items", {})
        low = schema.get("minItems")
        low = low if isinstance(low, int) and low > 0 else 0
        high = schema.get("maxItems")
        high = high if isinstance(high, int) and high >= low else low + 3
        # Prefer at least one item where allowed; at most three beyond the minimum.
        count = low if minimal else self.rng.randint(max(low, min(1, high)), min(high, low + 3))
        if not schema.get("uniqueItems"):
            return [self.value(items, depth + 1) for _ in range(count)]
        values: dict[bytes, Any] = {}
        for _ in range(count * 8):
            if len(values) >= count:
                break
            value = self.value(items, depth + 1)
            values.setdefault(orjson.dumps(value, option=orjson.OPT_SORT_KEYS), value)
        return list(values.values())

    def string(self, schema: Mapping[str, Any]) -> str:
        fmt = schema.get("format")
        text = self.formatted(fmt) if fmt in _FORMATS else ""
        if not text:
            text = " ".join(self.word() for _ in range(self.rng.randint(1, 4)))
        low = schema.get("minLength")
        high = schema.get("maxLength")
        if isinstance(low, int):
            while len(text) < low:
                text = f"{text} {self.word()}"
        if isinstance(high, int) and high >= 0 and len(text) > high:
            text = text[:high]
        return text

    def formatted(self, fmt: str) -> str:
        rng = self.rng
        month, day = rng.randint(1, 12), rng.randint(1, 28)
        hour, minute = rng.randint(0, 23), rng.randint(0, 59)
        word = "".join(c for c in self.word().lower() if c.isalnum()) or "item"
        if fmt == "date-time":
            return f"2024-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:00Z"
        if fmt == "date":
            return f"2024-{month:02d}-{day:02d}"
        if fmt == "time":
            return f"{hour:02d}:{minute:02d}:00"
        if fmt == "email":
            return f"{word}@example.com"
        if fmt in ("uri", "url"):
            return f"https://example.com/{word}"
        if fmt == "hostname":
            return f"{word}.example.com"
        if fmt == "ipv4":
            return ".".join(str(rng.randint(1, 254)) for _ in range(4))
        digits = f"{rng.getrandbits(128):032x}"
        return f"{digits[:8]}-{digits[8:12]}-4{digits[13:16]}-a{digits[17:20]}-{digits[20:]}"

    def bounds(self, schema: Mapping[str, Any], step: float, span: int) -> tuple[float, float]:
        low = _number(schema.get("minimum"))
        high = _number(schema.get("maximum"))
        ex_low = _number(schema.get("exclusiveMinimum"))
        ex_high = _number(schema.get("exclusiveMaximum"))
        if ex_low is not None:
            low = max(low, ex_low + step) if low is not None else ex_low + step
        if ex_high is not None:
            high = min(high, ex_high - step) if high is not None else ex_high - step
        if low is None and high is not None:
            return high - span, high
        if low is not None and high is None:
            return low, low + span
        if low is None or high is None:
            return 0, span
        return low, max(low, high)

    def integer(self, schema: Mapping[str, Any]) -> int:
        low, high = self.bounds(schema, 1, 10)  # models pick small counts and sizes
        first, last = math.ceil(low), math.floor(high)
        multiple = _number(schema.get("multipleOf"))
        if isinstance(multiple, int) and multiple > 0:
            first_k, last_k = -(-first // multiple), last // multiple
            if first_k <= last_k:
                return self.rng.randint(first_k, last_k) * multiple
        return self.rng.randint(first, max(first, last))

    def number(self, schema: Mapping[str, Any]) -> float:
        low, high = self.bounds(schema, 0.01, 100)
        multiple = _number(schema.get("multipleOf"))
        if multiple is not None and multiple > 0:
            first_k, last_k = math.ceil(low / multiple), math.floor(high / multiple)
            if first_k <= last_k:
                return float(self.rng.randint(first_k, last_k) * multiple)
        value = round(self.rng.uniform(low, high), 2)
        return float(value if low <= value <= high else (low + high) / 2)


def _number(value: Any) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value
