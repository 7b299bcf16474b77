"""The journal of a batch backend: every hop's batch, written down before it is submitted.

A hop is one batch. Its records, one JSON line each, appended and flushed to disk (fsync)
before the step they announce goes on:

- ``{"t": "intent", "hop": TAG, "ids": [custom_id...]}``: about to submit these lines;
- ``{"t": "batch", "hop": TAG, "id": BATCH_ID}``: the provider accepted the batch;
- ``{"t": "results", "hop": TAG, "lines": {custom_id: [status, body]}}``: every line's answer.

A ``custom_id`` is ``KEY-N``: ``KEY`` names the request's body (a hash), ``N`` tells apart
identical bodies in one hop. A process that restarts from the same journal (``--resume``)
replays its agents: a request whose body was answered in an ended hop takes that answer (each
answer once), one whose body is in a hop that was submitted and has not ended waits for that
batch (polled again, never submitted again). A hop with an intent and no batch id was never
confirmed: its lines are sent again in a new hop (the window is one HTTP exchange; OpenAI's
batches carry the hop's tag in ``metadata.agentcore_hop``, for a person to check).

Without a path the journal lives in memory: the same bookkeeping, nothing to resume from.
"""

from __future__ import annotations

import os
import secrets
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

import orjson

from .._core.errors import ConfigError

__all__ = ["BatchJournal", "JournalHop"]


class JournalHop:
    """A hop as the journal knows it."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.ids: list[str] = []
        self.batch_id: str | None = None
        self.lines: dict[str, tuple[int, bytes]] | None = None


def key_of(custom_id: str) -> str:
    """The body key of a custom id (``KEY-N`` -> ``KEY``)."""
    return custom_id.rsplit("-", 1)[0]


class BatchJournal:
    """The hops of one batch backend, on disk when ``path`` is given (module docstring).

    Args:
        path: the journal file (created if absent, read and appended to if present).

    Raises:
        ConfigError: the journal cannot be read or written.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = None if path is None else Path(path)
        self.run = secrets.token_hex(4)
        self.hops: dict[str, JournalHop] = {}
        self.answered: defaultdict[str, deque[tuple[int, bytes]]] = defaultdict(deque)
        """Answers of ended hops not yet taken, by body key (only a resumed journal has any)."""
        self.pending: list[JournalHop] = []
        """Hops submitted and not ended when the journal was read."""
        self.numbers = 0
        if self.path is not None and self.path.exists():
            self._read(self.path)

    def _read(self, path: Path) -> None:
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read the batch journal {path}: {exc}") from None
        for text in raw.splitlines():
            try:
                record: Any = orjson.loads(text)
                tag = str(record["hop"])
            except (orjson.JSONDecodeError, KeyError, TypeError):
                continue  # a torn last line: its step never happened
            hop = self.hops.setdefault(tag, JournalHop(tag))
            kind = record.get("t")
            if kind == "intent":
                hop.ids = list(record["ids"])
            elif kind == "batch":
                hop.batch_id = str(record["id"])
            elif kind == "results":
                hop.lines = {k: (int(v[0]), v[1].encode()) for k, v in record["lines"].items()}
        self.numbers = len(self.hops)
        for hop in self.hops.values():
            if hop.lines is not None:
                for custom_id in hop.ids:
                    if custom_id in hop.lines:
                        self.answered[key_of(custom_id)].append(hop.lines[custom_id])
                hop.lines = None
            elif hop.batch_id is not None:
                self.pending.append(hop)
        self.hops.clear()

    def new_tag(self) -> str:
        """The tag of the next hop."""
        self.numbers += 1
        return f"{self.run}-{self.numbers}"

    def take_answer(self, key: str) -> tuple[int, bytes] | None:
        """An ended hop's answer to a body with ``key``, once."""
        found = self.answered.get(key)
        if not found:
            return None
        answer = found.popleft()
        if not found:
            del self.answered[key]
        return answer

    def keep_answer(self, custom_id: str, answer: tuple[int, bytes]) -> None:
        """Keep an answer nobody waits for, for a request still to come."""
        self.answered[key_of(custom_id)].append(answer)

    def intent(self, tag: str, ids: list[str]) -> None:
        """Record the lines of hop ``tag``, before it is submitted."""
        self._write({"t": "intent", "hop": tag, "ids": ids})

    def submitted(self, tag: str, batch_id: str) -> None:
        """Record the batch id of hop ``tag``."""
        self._write({"t": "batch", "hop": tag, "id": batch_id})

    def ended(self, tag: str, lines: dict[str, tuple[int, bytes]]) -> None:
        """Record every line's answer of hop ``tag``."""
        shown = {k: [status, body.decode()] for k, (status, body) in lines.items()}
        self._write({"t": "results", "hop": tag, "lines": shown})

    def _write(self, record: dict[str, Any]) -> None:
        if self.path is None:
            return
        try:
            with self.path.open("ab") as file:
                file.write(orjson.dumps(record) + b"\n")
                file.flush()
                os.fsync(file.fileno())
        except OSError as exc:
            raise ConfigError(f"cannot write the batch journal {self.path}: {exc}") from None
