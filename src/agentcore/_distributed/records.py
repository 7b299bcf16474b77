"""Pure helpers of the distributed mode: result records, tool memos, task fingerprints."""

from __future__ import annotations

import hashlib
from typing import Any

import cattrs
import orjson

from .._core.events import Abort, Finish, ToolError, ToolFailed, ToolReturned
from .._tasks.task import Task

__all__ = ["decode_memo", "encode_memo", "end_record", "task_fingerprint"]

_UNSTRUCTURE = cattrs.Converter()


def end_record(index: int, end: Finish | Abort, turns: int) -> dict[str, Any]:
    """The JSONL record of a finished agent (the fields of ``agentcore run``'s output that a
    distributed run knows; timings are per step and not summed up)."""
    error = None
    if isinstance(end, Abort):
        error = {"kind": end.reason.kind.value, "message": end.reason.message}
    return {
        "index": index,
        "status": "ok" if isinstance(end, Finish) else "failed",
        "output": _UNSTRUCTURE.unstructure(end.output) if isinstance(end, Finish) else None,
        "error": error,
        "turns": turns,
        "usage": {
            "prompt_tokens": end.usage.prompt_tokens,
            "completion_tokens": end.usage.completion_tokens,
            "cached_tokens": end.usage.cached_tokens,
        },
    }


def failed_record(index: int, kind: str, message: str) -> dict[str, Any]:
    """The record of an agent that could not run at all."""
    return {
        "index": index,
        "status": "failed",
        "output": None,
        "error": {"kind": kind, "message": message},
        "turns": 0,
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0},
    }


def encode_memo(event: ToolReturned | ToolFailed) -> bytes:
    """A tool outcome as stored under its idempotency key."""
    if isinstance(event, ToolReturned):
        return orjson.dumps({"ok": event.content})
    return orjson.dumps({"error": [event.error.type, event.error.message]})


def decode_memo(call_id: str, data: bytes | str) -> ToolReturned | ToolFailed:
    """A stored tool outcome as the event for ``call_id``."""
    value = orjson.loads(data)
    if "ok" in value:
        return ToolReturned(call_id, value["ok"])
    kind, message = value["error"]
    return ToolFailed(call_id, ToolError(kind, message))


def task_fingerprint(task: Task) -> str:
    """A digest of what makes two tasks run agents the same way: prompts, tool schemas, the
    output schema and budgets. Workers refuse a batch submitted with another task."""
    spec = task._base_config
    value = {
        "name": task.name,
        "system": task.system,
        "prompt": task.prompt,
        "tools": [[t.name, t.description, t.parameters] for t in spec.tools],
        "output": None if spec.output_spec is None else spec.output_spec.schema,
        "budgets": [task.max_turns, task.max_tool_errors, task.max_output_retries],
        "params": _UNSTRUCTURE.unstructure(task.params),
    }
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]
