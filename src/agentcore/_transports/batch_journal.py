"""The journal of a batch backend: every hop's batch, written down before it is submitted.

A hop is one batch. Its records, one JSON line each, appended to the journal file; the records
that announce a step are flushed to disk (fsync) before the step goes on:

- ``{"t": "intent", "hop": TAG, "n": NUMBER, "ids": [custom_id...]}``: about to submit these
  lines (``NUMBER``: the hop's number, shown in progress lines and continued by a resumed run);
- ``{"t": "batch", "hop": TAG, "id": BATCH_ID}``: the provider accepted the batch;
- ``{"t": "answer", "hop": TAG, "try": K, "id": CUSTOM_ID, "s": STATUS, "b": BODY}``: one
  line's answer, as the results were read (``K`` counts the downloads of the hop; ``BODY`` is
  the answer's JSON);
- ``{"t": "ended", "hop": TAG, "try": K, "status": STATUS}``: every answer of download ``K`` is
  written (and synced): the hop is over (a batch that ``failed`` as a whole ends with no
  answers, its lines sent again in new hops);
- ``{"t": "dead", "hop": TAG, "s": STATUS, "error": MESSAGE}``: polling it or reading its
  results was refused for good (deleted, archived, a key that changed); its calls failed;
- ``{"t": "cancelled", "hop": TAG}``: it was cancelled at the provider.

A ``custom_id`` is ``KEY-N``: ``KEY`` names the request's body (a hash), ``N`` tells apart
identical bodies in one hop. A process that restarts from the same journal (``--resume``)
replays its agents: a request whose body was answered in an ended hop takes that answer (each
answer once), one whose body is in a hop that was submitted and has not ended, died or been
cancelled waits for that batch (polled again, never submitted again). A hop with an intent and
no batch id was never confirmed (the window is one HTTP exchange): the client looks for it by
its tag where the provider keeps one (OpenAI's ``metadata.agentcore_hop``), else its lines are
sent again in a new hop.

Answers are not kept in memory: the journal keeps where each answer's record is in the file
and reads it back when a call takes it, so memory is bounded by a line, not by a results file.
Without a path the journal lives in memory, and in an anonymous temporary file once it passes a
few megabytes: the same bookkeeping, nothing to resume from.
"""

from __future__ import annotations

import io
import os
import secrets
import tempfile
from collections import defaultdict, deque
from pathlib import Path
from typing import IO, Any

import orjson

from .._core.errors import ConfigError

__all__ = ["AnswerRef", "BatchJournal", "JournalHop", "key_of"]

_SPOOL = 8 * 1024 * 1024
"""Bytes a journal without a path keeps in memory before it moves to a temporary file."""

AnswerRef = tuple[int, int]
"""Where an answer's record is in the journal file: its offset and length."""


class JournalHop:
    """A hop as the journal knows it."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.number = 0
        self.ids: list[str] = []
        self.batch_id: str | None = None
        self.ended = False
        self.closed = False
        """Ended, dead or cancelled: nothing to wait for."""


def key_of(custom_id: str) -> str:
    """The body key of a custom id (``KEY-N`` -> ``KEY``)."""
    return custom_id.rsplit("-", 1)[0]


def _number_of(tag: str) -> int:
    tail = tag.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


class BatchJournal:
    """The hops of one batch backend, on disk when ``path`` is given (module docstring).

    Args:
        path: the journal file (created if absent, read and appended to if present).
        replace: start a new journal at ``path``: the hops of the one it replaces that were
            submitted and had not ended are in :attr:`orphans` (to be cancelled), and the file
            is emptied.

    Raises:
        ConfigError: the journal cannot be read or written.
    """

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, replace: bool = False
    ) -> None:
        self.path = None if path is None else Path(path)
        self.run = secrets.token_hex(4)
        self.answered: defaultdict[str, deque[AnswerRef]] = defaultdict(deque)
        """Answers not yet taken, by body key (a resumed journal's, and answers nobody
        waited for)."""
        self.pending: list[JournalHop] = []
        """Hops submitted and not ended when the journal was read."""
        self.unconfirmed: list[JournalHop] = []
        """Hops with an intent and no batch id when the journal was read (see the module
        docstring)."""
        self.orphans: list[JournalHop] = []
        """With ``replace``: the replaced journal's hops that were submitted and not ended."""
        self.numbers = 0
        self._size = 0
        try:
            if self.path is None:  # in memory while small, on disk past a few MB
                self._file: IO[bytes] = io.BytesIO()
            else:
                self._file = self.path.open("a+b")
        except OSError as exc:
            raise ConfigError(f"cannot open the batch journal {self.path}: {exc}") from None
        if self.path is not None:
            self._read()
            if replace:
                self.orphans, self.pending, self.unconfirmed = self.pending, [], []
                self.answered.clear()
                self.numbers = 0
                self._truncate()

    # -- reading ------------------------------------------------------------------------------

    def _read(self) -> None:
        hops: dict[str, JournalHop] = {}
        tries: dict[tuple[str, int], list[tuple[str, AnswerRef]]] = defaultdict(list)
        ended: dict[str, int] = {}
        older: list[tuple[str, dict[str, Any]]] = []
        file = self._file
        try:
            file.seek(0)
            offset = 0
            for text in file:
                if not text.endswith(b"\n"):
                    break  # a torn last line: its step never happened
                start, offset = offset, offset + len(text)
                try:
                    record: Any = orjson.loads(text)
                    tag = str(record["hop"])
                    kind = record.get("t")
                except (orjson.JSONDecodeError, KeyError, TypeError):
                    continue
                hop = hops.setdefault(tag, JournalHop(tag))
                if kind == "intent":
                    hop.ids = list(record["ids"])
                    hop.number = int(record.get("n") or _number_of(tag))
                elif kind == "batch":
                    hop.batch_id = str(record["id"])
                elif kind == "answer":
                    tries[tag, int(record["try"])].append((str(record["id"]), (start, len(text))))
                elif kind == "ended":
                    hop.ended = hop.closed = True
                    ended[tag] = int(record.get("try") or 0)
                elif kind in ("dead", "cancelled"):
                    hop.closed = True
                elif kind == "results":  # an older journal: every answer in one record
                    hop.ended = hop.closed = True
                    ended[tag] = -1
                    older.append((tag, record["lines"]))
            file.truncate(offset)  # a torn last line goes
            self._size = offset
            for tag, lines in older:
                for custom_id, (status, body) in lines.items():
                    ref = self.answer(tag, -1, custom_id, int(status), str(body).encode())
                    tries[tag, -1].append((custom_id, ref))
        except OSError as exc:
            raise ConfigError(f"cannot read the batch journal {self.path}: {exc}") from None
        self.numbers = max([h.number for h in hops.values()] + [0])
        for tag, hop in hops.items():
            if tag in ended:
                for custom_id, ref in tries.get((tag, ended[tag]), []):
                    self.answered[key_of(custom_id)].append(ref)
            elif not hop.closed and hop.batch_id is not None:
                self.pending.append(hop)
            elif not hop.closed and hop.ids:
                self.unconfirmed.append(hop)

    def _truncate(self) -> None:
        try:
            self._file.truncate(0)
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            raise ConfigError(f"cannot write the batch journal {self.path}: {exc}") from None
        self._size = 0

    # -- answers ------------------------------------------------------------------------------

    def read(self, ref: AnswerRef) -> tuple[int, bytes]:
        """The status and body of the answer whose record is at ``ref``."""
        offset, length = ref
        try:
            self._file.seek(offset)
            record = orjson.loads(self._file.read(length))
        except (OSError, orjson.JSONDecodeError) as exc:
            raise ConfigError(f"cannot read the batch journal {self.path}: {exc}") from None
        return int(record["s"]), orjson.dumps(record["b"])

    def take_answer(self, key: str) -> AnswerRef | None:
        """Where an ended hop's answer to a body with ``key`` is, once."""
        found = self.answered.get(key)
        if not found:
            return None
        ref = found.popleft()
        if not found:
            del self.answered[key]
        return ref

    def keep_answer(self, custom_id: str, ref: AnswerRef) -> None:
        """Keep an answer nobody waits for, for a request still to come."""
        self.answered[key_of(custom_id)].append(ref)

    # -- writing ------------------------------------------------------------------------------

    def new_tag(self) -> tuple[str, int]:
        """The tag and number of the next hop."""
        self.numbers += 1
        return f"{self.run}-{self.numbers}", self.numbers

    def intent(self, tag: str, number: int, ids: list[str]) -> None:
        """Record the lines of hop ``tag``, before it is submitted."""
        self._write({"t": "intent", "hop": tag, "n": number, "ids": ids}, sync=True)

    def submitted(self, tag: str, batch_id: str) -> None:
        """Record the batch id of hop ``tag``."""
        self._write({"t": "batch", "hop": tag, "id": batch_id}, sync=True)

    def answer(self, tag: str, attempt: int, custom_id: str, status: int, body: bytes) -> AnswerRef:
        """Record one line's answer, as download ``attempt`` of hop ``tag`` read it; where."""
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError:
            value = body.decode(errors="replace")
        record = {"t": "answer", "hop": tag, "try": attempt, "id": custom_id, "s": status,
                  "b": value}  # fmt: skip
        offset = self._size
        length = self._write(record, sync=False)
        return offset, length

    def ended(self, tag: str, attempt: int, status: str) -> None:
        """Record that every answer of download ``attempt`` of hop ``tag`` is written."""
        self._write({"t": "ended", "hop": tag, "try": attempt, "status": status}, sync=True)

    def dead(self, tag: str, status: int, error: str) -> None:
        """Record that hop ``tag`` was refused for good (its calls failed)."""
        self._write({"t": "dead", "hop": tag, "s": status, "error": error}, sync=True)

    def cancelled(self, tag: str) -> None:
        """Record that hop ``tag`` was cancelled at the provider."""
        self._write({"t": "cancelled", "hop": tag}, sync=True)

    def _write(self, record: dict[str, Any], *, sync: bool) -> int:
        data = orjson.dumps(record) + b"\n"
        try:
            if isinstance(self._file, io.BytesIO) and self._size + len(data) > _SPOOL:
                spilled = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
                spilled.write(self._file.getbuffer())
                self._file = spilled
            self._file.seek(0, os.SEEK_END)
            self._file.write(data)
            if sync:
                self._file.flush()
                if self.path is not None:
                    os.fsync(self._file.fileno())
        except OSError as exc:
            raise ConfigError(f"cannot write the batch journal {self.path}: {exc}") from None
        self._size += len(data)
        return len(data)

    def close(self) -> None:
        """Close the journal's file (an anonymous one is deleted)."""
        self._file.close()
