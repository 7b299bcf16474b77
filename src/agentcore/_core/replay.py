"""Reusing tool results across runs, only when it is safe: the key rule and the result store.

Theory of operation
-------------------
A tool declared ``replay_safe`` names what its result depends on besides its arguments: some
fields of the run's context (``input.task``, ``deps.user_id``...) and, optionally, the run's
*tool history* (the calls and results of its earlier turns). Its successful results are kept
and answer a later call only when the two calls' keys are equal:

    key = (tool, canonical arguments, (canonical value of each declared field, in the
           declared order), history digest if declared)

The *safety rule*: two calls share a key only if they agree on everything the tool declared,
so a kept result is reused exactly where the tool's own declaration says the result would be
the same. Each part is canonical (JSON text with sorted keys; ``1``, ``1.0`` and ``true``
distinct), and the parts are kept apart in a tuple, so no two different declarations can
collide. A field value that is not a JSON value (a client object, a lock) has no canonical
form, and a path that leads nowhere (an absent key, a missing attribute) has no value: such a
call gets no key (:func:`replay_key` returns ``None``), and it runs on its own, neither reused
nor shared (two runs whose declared field is missing alike are not known to agree on what the
result depends on). What a tool does *not* declare is not looked at: declaring too little is
the tool author's error, and the documentation says so.

The history digest (:class:`HistoryDigest`) folds the run's transcript, one message at a
time, into a BLAKE2b digest: each earlier tool call (name and canonical arguments) and each
tool result (name, content, error flag). Call ids, text and the prompt are left out, so the
rollouts of one task that made the same calls and saw the same results share a history. The
calls of the turn in progress are not part of it (they run at once, in no fixed order).

:class:`ResultStore` keeps the results: bounded (the least recently used goes first), with an
optional time to live per entry; time is passed in. Concurrent identical calls are the
special case singleflight handles (:mod:`.singleflight`): they share one execution under the
same key, and its result is then stored.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Hashable, Sequence
from typing import Any

import attrs

from .errors import LocalProtocolError
from .messages import AssistantMessage, Message, ToolMessage

__all__ = ["HistoryDigest", "ResultStore", "replay_key"]

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
# The same canonical text as ``singleflight.canonical_arguments``, for any JSON value.


def replay_key(base: Hashable, values: Sequence[Any], missing: Any) -> Hashable | None:
    """The reuse key of a call whose coalescing key is ``base``, given the JSON values of the
    fields its tool declared (in the declared order; the history digest, a ``str``, among
    them where declared).

    Args:
        base: the call's tool-and-arguments key.
        values: one JSON value per declared field (``missing`` for a path that leads
            nowhere).
        missing: the marker of a field that leads nowhere.

    Returns:
        The key, or ``None`` when a value has no canonical form or a path leads nowhere (the
        call is then neither reused nor shared).
    """
    parts: list[str] = []
    for value in values:
        if value is missing:
            return None
        try:
            parts.append(_CANONICAL.encode(value))
        except (TypeError, ValueError):
            return None
    return (base, tuple(parts))


def _canonical_arguments_text(text: str) -> str:
    try:
        return _CANONICAL.encode(json.loads(text))
    except (TypeError, ValueError):
        return text  # not JSON: kept as sent (a different text is a different history)


@attrs.define
class HistoryDigest:
    """The tool history of one run, folded incrementally (see the module's theory)."""

    digested: int = 0
    """Messages of the transcript folded so far."""
    digest: str = attrs.field(factory=lambda: hashlib.blake2b(digest_size=16).hexdigest())

    def up_to(self, messages: Sequence[Message], end: int) -> str:
        """The digest of the tool calls and results in ``messages[:end]``.

        ``end`` never goes back: a run's transcript only grows.
        """
        if end < self.digested:
            raise LocalProtocolError("a run's history only grows")
        digest = self.digest
        for message in messages[self.digested : end]:
            if isinstance(message, AssistantMessage):
                items: list[Any] = [
                    ["call", call.name, _canonical_arguments_text(call.arguments)]
                    for call in message.tool_calls
                ]
            elif isinstance(message, ToolMessage):
                items = [["result", message.name, message.content, message.is_error]]
            else:
                continue
            for item in items:
                digest = hashlib.blake2b(
                    (digest + _CANONICAL.encode(item)).encode(), digest_size=16
                ).hexdigest()
        self.digested = end
        self.digest = digest
        return digest


@attrs.frozen
class _Entry:
    content: str
    expires: float  # math.inf: no time to live


@attrs.define
class ResultStore:
    """Kept tool results: at most ``size`` of them, least recently used dropped first, each
    valid until its ``ttl`` has passed."""

    size: int
    _entries: dict[Hashable, _Entry] = attrs.field(factory=dict, init=False)
    _sweep_at: int = attrs.field(default=64, init=False)

    def __len__(self) -> int:
        """Results held now (some may have expired and not been swept yet)."""
        return len(self._entries)

    def get(self, key: Hashable, now: float) -> str | None:
        """The result kept for ``key`` that has not expired at ``now`` (it becomes the most
        recently used), else ``None``."""
        entry = self._entries.pop(key, None)
        if entry is None or now >= entry.expires:
            return None
        self._entries[key] = entry  # most recently used last
        return entry.content

    def put(self, key: Hashable, content: str, now: float, ttl: float | None) -> None:
        """Keep ``content`` for ``key`` from ``now`` for ``ttl`` seconds (``None``: no end)."""
        entries = self._entries
        entries.pop(key, None)
        entries[key] = _Entry(content, math.inf if ttl is None else now + ttl)
        if len(entries) >= self._sweep_at:
            # Amortised sweep of expired entries: the store may at most double between sweeps.
            self._entries = entries = {k: e for k, e in entries.items() if e.expires > now}
            self._sweep_at = max(64, 2 * len(entries))
        while len(entries) > self.size:
            del entries[next(iter(entries))]  # the least recently used
