"""Shared pieces of the simulator tests: a small JSON-schema checker and request builders.

The checker covers the subset the simulator's generator claims to honour (see
``agentcore._sim.schema_values``); it is written independently of the generator so the two
check each other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def _is_type(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    raise AssertionError(f"unknown type {kind!r}")


def _resolve(schema: Any, root: Any) -> Any:
    while isinstance(schema, Mapping) and "$ref" in schema:
        target = root
        for part in schema["$ref"].lstrip("#").split("/"):
            if part:
                target = target[part]
        schema = target
    return schema


def violations(value: Any, schema: Any, root: Any = None, path: str = "$") -> list[str]:
    """Every way ``value`` fails ``schema`` (empty when valid)."""
    root = schema if root is None else root
    if schema is True or schema == {}:
        return []
    if schema is False:
        return [f"{path}: no value allowed"]
    schema = _resolve(schema, root)
    problems: list[str] = []
    if "const" in schema and value != schema["const"]:
        problems.append(f"{path}: expected const {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: {value!r} not in enum")
    for key in ("anyOf", "oneOf"):
        if key in schema:
            matches = [b for b in schema[key] if not violations(value, b, root, path)]
            if not matches or (key == "oneOf" and len(matches) > 1):
                problems.append(f"{path}: {len(matches)} {key} branches match")
    for branch in schema.get("allOf", ()):
        problems.extend(violations(value, branch, root, path))
    kind = schema.get("type")
    if schema.get("nullable") and value is None:
        return problems
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_is_type(value, k) for k in kinds):
            return [*problems, f"{path}: {value!r} is not of type {kind}"]
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                problems.append(f"{path}: missing required {name!r}")
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in properties:
                problems.extend(violations(item, properties[name], root, f"{path}.{name}"))
            elif extra is False:
                problems.append(f"{path}: unexpected property {name!r}")
            elif isinstance(extra, Mapping):
                problems.extend(violations(item, extra, root, f"{path}.{name}"))
        if len(value) < schema.get("minProperties", 0):
            problems.append(f"{path}: too few properties")
    if isinstance(value, list):
        prefix = schema.get("prefixItems", [])
        for i, item in enumerate(value):
            sub = prefix[i] if i < len(prefix) else schema.get("items", True)
            problems.extend(violations(item, sub, root, f"{path}[{i}]"))
        if len(value) < schema.get("minItems", 0):
            problems.append(f"{path}: fewer than minItems")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            problems.append(f"{path}: more than maxItems")
        if schema.get("uniqueItems"):
            keys = [orjson.dumps(v, option=orjson.OPT_SORT_KEYS) for v in value]
            if len(set(keys)) != len(keys):
                problems.append(f"{path}: items not unique")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            problems.append(f"{path}: shorter than minLength")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append(f"{path}: longer than maxLength")
        fmt = schema.get("format")
        pattern = {"date-time": _DATE_TIME, "date": _DATE, "uuid": _UUID}.get(fmt or "")
        if pattern is not None and not pattern.match(value):
            problems.append(f"{path}: {value!r} is not a {fmt}")
        if fmt == "email" and "@" not in value:
            problems.append(f"{path}: {value!r} is not an email")
    if _is_type(value, "number"):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{path}: below minimum")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{path}: above maximum")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            problems.append(f"{path}: not above exclusiveMinimum")
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            problems.append(f"{path}: not below exclusiveMaximum")
        multiple = schema.get("multipleOf")
        if multiple and abs(value / multiple - round(value / multiple)) > 1e-9:
            problems.append(f"{path}: not a multiple of {multiple}")
    return problems


GREP_TOOL = {
    "type": "function",
    "function": {
        "name": "grep",
        "description": "Search files for a pattern.",
        "parameters": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "minLength": 1},
                "path": {"type": ["string", "null"]},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                "mode": {"enum": ["regex", "literal"]},
            },
            "required": ["pattern", "limit"],
            "additionalProperties": False,
        },
    },
}

READ_TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "lines": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": 0},
                    "maxItems": 4,
                },
            },
            "required": ["path"],
        },
    },
}

TOOLS = [GREP_TOOL, READ_TOOL]
TOOL_SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}

REPORT_SCHEMA = {
    "type": "object",
    "properties": {
        "summary": {"type": "string", "maxLength": 80},
        "severity": {"enum": ["low", "medium", "high"]},
        "findings": {
            "type": "array",
            "items": {"$ref": "#/$defs/Finding"},
            "minItems": 1,
        },
        "score": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["summary", "severity", "findings", "score"],
    "additionalProperties": False,
    "$defs": {
        "Finding": {
            "type": "object",
            "properties": {
                "line": {"type": "integer", "minimum": 1},
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            },
            "required": ["line", "note"],
            "additionalProperties": False,
        }
    },
}

SYSTEM = "You review Python files for bugs. Be precise and cite line numbers. " * 40


def conversation(user: str) -> list[dict[str, Any]]:
    """A first turn with the shared system prompt and a per-agent user message."""
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def tool_results(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The assistant message sent back, followed by one tool result per call."""
    results: list[dict[str, Any]] = [message]
    for call in message["tool_calls"]:
        results.append({"role": "tool", "tool_call_id": call["id"], "content": "no match"})
    return results
