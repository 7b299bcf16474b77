"""What makes two tasks run agents the same way, as a value and as a digest.

A journal (``agentcore run``'s, or a distributed batch's) is bound to the task it was written
for: resumed with another task, its replies and tool results would be fed to agents that never
asked for them. :func:`task_description` is what is compared (prompts, tool schemas, the output
schema, budgets, parameters); :func:`task_fingerprint` is its digest, and :func:`changes` names
the fields that differ between two descriptions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

from .._codecs.values import json_value
from .task import Task

__all__ = ["changes", "task_description", "task_fingerprint"]


def task_description(task: Task[Any, Any]) -> dict[str, Any]:
    """The fields of ``task`` that decide how its agents run, as JSON values."""
    spec = task._base_config
    value: dict[str, Any] = {
        "name": task.name,
        "system": task.system,
        "prompt": task.prompt,
        "tools": [[t.name, t.description, t.parameters] for t in spec.tools],
        "output": None if spec.output_spec is None else spec.output_spec.schema,
        "budgets": [task.max_turns, task.max_tool_errors, task.max_output_retries],
        "params": json_value(task.params),
    }
    if task.max_tool_failures is not None:  # absent when unset: older fingerprints still hold
        value["max_tool_failures"] = task.max_tool_failures
    return value


def task_fingerprint(task: Task[Any, Any]) -> str:
    """A digest of :func:`task_description`. Workers refuse a batch submitted with another
    task."""
    value = task_description(task)
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def changes(stored: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """The fields whose values differ between two descriptions (present in one only
    included), sorted; tool changes are named by tool."""
    changed: list[str] = []
    for field in sorted(set(stored) | set(current)):
        before, now = stored.get(field), current.get(field)
        if _canonical(before) == _canonical(now):
            continue
        if field == "tools" and isinstance(before, list) and isinstance(now, list):
            old = {t[0]: t for t in before if isinstance(t, list) and t}
            new = {t[0]: t for t in now if isinstance(t, list) and t}
            names = sorted(
                n for n in set(old) | set(new) if _canonical(old.get(n)) != _canonical(new.get(n))
            )
            changed.append(f"tools ({', '.join(names)})" if names else "tools (their order)")
            continue
        changed.append(field)
    return changed


def _canonical(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
