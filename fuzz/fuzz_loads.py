"""Fuzz target for ``agentcore.core.loads``.

Invariant checked on every input, for each of ``Event``, ``Effect``, ``Message`` and
``LoopSnapshot``: ``loads`` either returns a value or raises ``agentcore.DecodeError``; nothing
else. A value it returns must re-encode with ``dumps`` and decode again, as the union and as
its own class, to an equal value with identical bytes. Input given as text (when it is UTF-8)
must fare exactly like the same input given as bytes.

With atheris installed (``pip install atheris``; wheels may lag new CPython releases)::

    python fuzz/fuzz_loads.py -atheris_runs=200000 [corpus_dir]

Without it the same command says so and runs a bounded mutation loop over built-in seeds
instead (``--iterations`` and ``--seconds`` bound it). ``--write-seeds DIR`` writes the seeds
as a starting corpus. ``TestOneInput``, ``check``, ``seeds`` and ``mutate`` are importable
without atheris; the test suite runs this very target under Hypothesis
(tests/fuzz/test_loads.py).
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import agentcore
from agentcore import AbortKind, AbortReason, ErrorKind, ModelError, ModelParams, ToolError, Usage
from agentcore.core import (
    Abort,
    AgentHints,
    AssistantMessage,
    CallModel,
    CallTool,
    CancelRequested,
    Finish,
    LoopSnapshot,
    ModelFailed,
    ModelResponded,
    OutputSpec,
    RunState,
    ServerTiming,
    SystemMessage,
    ToolCall,
    ToolFailed,
    ToolMessage,
    ToolReturned,
    ToolSpec,
    UserMessage,
)

if (_HERE := str(Path(__file__).resolve().parent)) not in sys.path:  # when loaded by path
    sys.path.insert(0, _HERE)  # for _harness.py
from _harness import Target, mutate_bytes

TARGETS: tuple[tuple[str, Any], ...] = (
    ("Event", agentcore.core.Event),
    ("Effect", agentcore.core.Effect),
    ("Message", agentcore.core.Message),
    ("LoopSnapshot", LoopSnapshot),
)
"""The types every input is decoded into."""


def _decode(data: bytes | str, tp: Any) -> tuple[bool, Any]:
    """``(True, value)`` if ``data`` decodes, ``(False, message)`` on ``DecodeError``."""
    try:
        return True, agentcore.core.loads(data, tp)
    except agentcore.DecodeError as exc:
        return False, str(exc)


def check(data: bytes) -> None:
    """Check the invariant for one input; any exception other than ``AssertionError`` raised
    here is a finding too."""
    try:
        text: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    for name, tp in TARGETS:
        ok, value = _decode(data, tp)
        if text is not None:
            assert _decode(text, tp) == (ok, value), f"{name}: text and bytes disagree"
        if not ok:
            continue
        encoded = agentcore.core.dumps(value)
        for again_tp in (tp, type(value)):
            again = agentcore.core.loads(encoded, again_tp)
            assert again == value, f"{name}: re-decoding changed the value"
            assert agentcore.core.dumps(again) == encoded, f"{name}: re-encoding changed the bytes"


def TestOneInput(data: bytes) -> None:
    """Fuzzer entry point: the whole input is one JSON document candidate."""
    check(data)


# ----------------------------------------------------------------------------- seeds


def seed_values() -> list[Any]:
    """One representative value per message, event and effect class, and a snapshot."""
    call = ToolCall("call_1", "search", '{"q":"serde"}')
    reply = AssistantMessage("Searching.", (call, ToolCall("call_2", "read", "{")))
    transcript = (SystemMessage("Be brief."), UserMessage("Define serde."), reply)
    error = ModelError(ErrorKind.OVERLOADED, "busy", status=529, retryable=True, retry_after=2.0)
    return [
        *transcript,
        ToolMessage("call_1", "search", "No results.", is_error=True),
        ModelResponded(
            "run/0",
            reply,
            Usage(120, 14, 64),
            "tool_calls",
            ServerTiming(ttft_ms=12.5, kv_hit_rate=0.5, worker_id=3),
        ),
        ModelFailed("run/1", error),
        ToolReturned("call_1", "ok"),
        ToolFailed("call_2", ToolError("ValueError", "bad page")),
        CancelRequested("user pressed ^C"),
        CallModel(
            "run/0",
            transcript,
            (ToolSpec("search", "Web search.", {"type": "object", "properties": {}}),),
            ModelParams(max_tokens=64, temperature=0.2, stop=("\n\n",)),
            AgentHints("run", "parent", turn=2, priority=3, final=True),
            OutputSpec("Answer", {"type": "object"}),
        ),
        CallTool("call_1", "search", {"q": "serde", "n": [1, 2.5, None, True]}, "run/0/0"),
        Finish({"answer": "a format", "sources": []}, transcript, Usage(300, 40, None)),
        Abort(AbortReason(AbortKind.MODEL_FAILED, "gave up", error), transcript, Usage(1, 0)),
        LoopSnapshot(
            run_id="run",
            state=RunState.AWAITING_TOOLS,
            transcript=transcript,
            model_calls=1,
            tool_turns=0,
            tool_errors=1,
            output_retries=0,
            final=False,
            usage=Usage(120, 14, 64),
            results=(None, ToolMessage("call_2", "read", "invalid JSON", is_error=True)),
        ),
    ]


def seeds() -> list[bytes]:
    """Valid encodings of :func:`seed_values`, to start mutating from."""
    return [agentcore.core.dumps(value) for value in seed_values()]


# ----------------------------------------------------------------------------- mutations

_TAG_NAMES = [
    "system",
    "user",
    "assistant",
    "tool",
    "model_responded",
    "model_failed",
    "tool_returned",
    "tool_failed",
    "cancel_requested",
    "call_model",
    "call_tool",
    "finish",
    "abort",
    "bogus",
]
_SCALARS: list[Any] = [None, True, False, 0, -1, 2**63, 2**64, 1.5, -0.0, 1e308, "", "x", "\u2603"]
_TOKENS = [b"{", b"}", b"[", b"]", b'"', b",", b":", b"null", b"\\u", b"\xc3", b"\xff", b"\x00"]


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every node of a decoded JSON document."""
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(_nodes(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_nodes(item, (*path, index)))
    return found


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


def _mutate_json(rng: random.Random, document: Any) -> Any:
    """A structural edit: change a scalar's type, drop or add a key, retag, wrap, duplicate."""
    path = rng.choice(_nodes(document))
    node = document
    for step in path:
        node = node[step]
    op = rng.randrange(6)
    if op == 0:
        new: Any = rng.choice(_SCALARS)
    elif op == 1 and isinstance(node, dict) and node:
        new = {k: v for k, v in node.items() if k != rng.choice(list(node))}
    elif op == 2 and isinstance(node, dict):
        new = {**node, rng.choice(["type", "extra", "content", "kind"]): rng.choice(_SCALARS)}
    elif op == 3 and isinstance(node, dict):
        new = {**node, "type": rng.choice(_TAG_NAMES)}
    elif op == 4:
        new = [node] if rng.random() < 0.5 else {"value": node}
    else:
        new = [node, node] if isinstance(node, list) else node
    return _replace(document, path, new)


def mutate(rng: random.Random, data: bytes, corpus: Sequence[bytes]) -> bytes:
    """A random edit of ``data``: structural JSON edits when it parses, byte edits otherwise
    (and sometimes anyway): flip, insert a token, delete, duplicate, splice, cut."""
    if rng.random() < 0.6:
        try:
            document = json.loads(data)
        except ValueError:
            pass
        else:
            for _ in range(rng.randint(1, 3)):
                document = _mutate_json(rng, document)
            return json.dumps(document, ensure_ascii=rng.random() < 0.5).encode("utf-8", "replace")
    return mutate_bytes(rng, data, corpus, _TOKENS)


TARGET = Target("loads", __doc__, TestOneInput, seeds, mutate, framed=False, seed_suffix=".json")
fallback = TARGET.fallback

if __name__ == "__main__":
    sys.exit(TARGET.main(sys.argv))
