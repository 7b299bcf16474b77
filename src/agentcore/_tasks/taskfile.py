"""Task files: a :class:`~agentcore.Task` described in TOML, for the command line.

::

    name = "review"
    system = "You review Python files for bugs."
    prompt = "Review this file:\\n\\n{source}"
    max_turns = 6
    final_instruction = ""                             # once max_turns is spent: "" sends none
    tools = ["mytools:read_file", "mytools:grep"]      # module:attribute of @agentcore.tool objects
    output = "mymodels:BugReport"                      # module:attribute of an attrs class ...

    [output_fields]                                    # ... or the fields of the output inline
    summary = "str"
    line = "int"
    severity = ["low", "medium", "high"]               # one of these strings
    tags = "list[str]"
    fix = "str?"                                       # optional (may be null)

    [params]
    temperature = 0.2
    max_tokens = 800

    [limits]                                           # usage budgets of each agent
    requests = 8
    total_tokens = 40000
    tool_calls = 12

Module paths are imported with the task file's folder first on ``sys.path``. Every problem is
reported as a :class:`TaskFileError` naming the file and the key.
"""

from __future__ import annotations

import importlib
import sys
import tomllib
from pathlib import Path
from typing import Any, Literal, Optional

import attrs

from .._core.budgets import UsageLimits
from .._core.errors import ConfigError
from .._core.messages import ModelParams
from .._tools.spec import Tool
from .task import Task

__all__ = ["TaskFileError", "load_task"]

_SCALARS: dict[str, Any] = {"str": str, "int": int, "float": float, "bool": bool}
# The keys copied as they are into the task's options.
_OPTIONS = (
    "name",
    "system",
    "max_turns",
    "max_tool_errors",
    "max_output_retries",
    "max_tool_failures",
    "expected_output_tokens",
    "planning_interval",
)
_KEYS = {
    *_OPTIONS,
    "prompt",
    "final_instruction",
    "tools",
    "output",
    "output_fields",
    "params",
    "limits",
}
_PARAMS = {"max_tokens", "temperature", "top_p", "tool_choice", "stop", "seed"}


class TaskFileError(ConfigError):
    """A task file is unreadable or describes an invalid task."""


def _type_of(spec: Any, where: str) -> Any:
    if isinstance(spec, list):
        if not spec or not all(isinstance(v, str) for v in spec):
            raise TaskFileError(f"{where}: a list of choices must hold strings")
        return Literal[tuple(spec)]
    if not isinstance(spec, str):
        raise TaskFileError(f'{where}: expected a type name such as "str" or a list of choices')
    text = spec.strip()
    if text.endswith("?"):
        return Optional[_type_of(text[:-1], where)]  # noqa: UP045 - built at run time
    if text.startswith("list[") and text.endswith("]"):
        return list[_type_of(text[5:-1], where)]  # type: ignore[misc]
    if text in _SCALARS:
        return _SCALARS[text]
    raise TaskFileError(
        f"{where}: unknown type {spec!r} (use str, int, float, bool, list[T], T? or a list of "
        "choices)"
    )


def _import(path: str, where: str) -> Any:
    module_name, colon, attribute = path.partition(":")
    if not colon or not module_name or not attribute:
        raise TaskFileError(f"{where}: expected 'module:attribute', got {path!r}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise TaskFileError(f"{where}: cannot import {module_name!r}: {exc}") from exc
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise TaskFileError(f"{where}: module {module_name!r} has no {attribute!r}") from None


def load_task(path: str | Path) -> Task[Any, Any]:
    """Read a TOML task file.

    Raises:
        TaskFileError: the file cannot be read or parsed, a key is unknown or has the wrong
            type, an import fails, or the task is invalid.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TaskFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TaskFileError(f"{path}: not valid TOML: {exc}") from None
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise TaskFileError(f"{path}: unknown key(s) {', '.join(unknown)}")
    if "prompt" not in data or not isinstance(data["prompt"], str):
        raise TaskFileError(f"{path}: 'prompt' (a string) is required")
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)

    tools: list[Tool[..., Any]] = []
    raw_tools = data.get("tools", [])
    if not isinstance(raw_tools, list):
        raise TaskFileError(f"{path}: 'tools' must be a list of 'module:attribute' strings")
    for i, item in enumerate(raw_tools):
        where = f"{path}: tools[{i}]"
        if not isinstance(item, str):
            raise TaskFileError(f"{where}: expected 'module:attribute'")
        obj = _import(item, where)
        if not isinstance(obj, Tool):
            raise TaskFileError(f"{where}: {item} is not an @agentcore.tool")
        tools.append(obj)

    output: Any = None
    if "output" in data and "output_fields" in data:
        raise TaskFileError(f"{path}: give either 'output' or [output_fields], not both")
    if "output" in data:
        if not isinstance(data["output"], str):
            raise TaskFileError(f"{path}: 'output' must be a 'module:attribute' string")
        output = _import(data["output"], f"{path}: output")
    elif "output_fields" in data:
        fields = data["output_fields"]
        if not isinstance(fields, dict) or not fields:
            raise TaskFileError(f"{path}: [output_fields] must be a table of field = type")
        attributes = {
            name: attrs.field(type=_type_of(spec, f"{path}: output_fields.{name}"))
            for name, spec in fields.items()
        }
        output = attrs.make_class("Output", attributes, frozen=True)

    params = data.get("params", {})
    if not isinstance(params, dict):
        raise TaskFileError(f"{path}: [params] must be a table")
    bad = sorted(set(params) - _PARAMS)
    if bad:
        raise TaskFileError(f"{path}: unknown params key(s) {', '.join(bad)}")

    limits = data.get("limits")
    if limits is not None:
        if not isinstance(limits, dict):
            raise TaskFileError(f"{path}: [limits] must be a table")
        unknown = sorted(set(limits) - {f.name for f in attrs.fields(UsageLimits)})
        if unknown:
            raise TaskFileError(f"{path}: unknown limits key(s) {', '.join(unknown)}")
        try:
            limits = UsageLimits(**limits)
        except ConfigError as exc:
            raise TaskFileError(f"{path}: limits: {exc}") from None

    options: dict[str, Any] = {k: data[k] for k in _OPTIONS if k in data}
    if "final_instruction" in data:
        instruction = data["final_instruction"]
        if not isinstance(instruction, str):
            raise TaskFileError(f"{path}: final_instruction must be a string")
        options["final_instruction"] = instruction or None
    try:
        return Task(
            prompt=data["prompt"],
            tools=tools,
            output=output,
            params=ModelParams(**params),
            limits=limits,
            **options,
        )
    except (ConfigError, TypeError, ValueError) as exc:
        raise TaskFileError(f"{path}: {exc}") from None
