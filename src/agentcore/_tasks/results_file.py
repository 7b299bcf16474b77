"""The results file of ``agentcore run`` and of a distributed batch: its one record, checked
before anything runs, touched only once it has something to hold.

- :class:`ResultRecord` is the one JSON line per finished agent, written by ``agentcore run``
  (from a :class:`~agentcore.Result`) and by the distributed workers (from the loop's end);
  the submitter appends the workers' lines unchanged. It encodes and decodes itself; decoding
  accepts the lines of older files (distributed lines without ``timings``, errors without
  ``model_error`` / ``http_status``). Outputs are in their one JSON form
  (:func:`agentcore._codecs.values.json_value`).
- :func:`check_output_path` refuses, with a :class:`ConfigError`, an output whose folder does not
  exist or that is itself a folder, before the task, the inputs or the backend are used.
- :class:`ResultsFile` opens the file lazily, on the first result written. With ``--force`` an
  existing file is therefore emptied only when the new run has a result to put in it: a command
  that fails its checks, cannot reach its backend, or is interrupted before any agent finishes
  leaves the previous results as they were.
- :func:`split_resumed` separates the indices already in an output into the ones that belong to
  the current inputs and the strays (a shorter or different inputs file), which are reported and
  not counted as done.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any, Literal

import attrs
import cattrs
import orjson

from .._codecs.serde import dumps
from .._codecs.values import from_json_value, json_value
from .._core.errors import ConfigError
from .._core.events import Abort, AbortKind, AbortReason, Finish
from .._core.messages import Usage
from .._core.results import NO_TOOL_FAILURES, Result, Status, ToolFailures

__all__ = [
    "ErrorRecord",
    "RecordCost",
    "RecordTimings",
    "ResultRecord",
    "ResultsFile",
    "check_output_path",
    "finished_indices",
    "interrupted",
    "split_resumed",
    "step_journal_of",
]


@attrs.frozen
class ErrorRecord:
    """Why an agent did not finish ``ok``: the ``error`` object of its record."""

    kind: str
    """The abort kind (``model_failed``, ``invalid_input``, ``output_invalid``, ...)."""
    message: str
    model_error: str | None = None
    """For a failed model request, the model error's kind (``not_found``, ``auth``, ...)."""
    http_status: int | None = None
    """For a failed model request, the HTTP status (``None`` without a response)."""

    @classmethod
    def of(cls, reason: AbortReason) -> ErrorRecord:
        """The record of an abort reason."""
        cause = reason.error
        return cls(
            reason.kind.value,
            reason.message,
            None if cause is None else cause.kind.value,
            None if cause is None else cause.status,
        )


@attrs.frozen
class RecordTimings:
    """Where an agent's time went, in seconds (the ``timings`` object of its record)."""

    wall: float
    """From the agent's start to its end."""
    model_time: float
    """Spent in model requests (in a distributed batch, waiting for a slot included)."""
    tool_time: float
    """Spent running tools."""
    slot_wait: float | None
    """Spent waiting for a slot; ``None`` where it is not measured apart (distributed)."""

    @classmethod
    def rounded(
        cls, wall: float, model_time: float, tool_time: float, slot_wait: float | None
    ) -> RecordTimings:
        """Timings rounded to the microsecond (the file holds no more)."""
        return cls(
            round(wall, 6),
            round(model_time, 6),
            round(tool_time, 6),
            None if slot_wait is None else round(slot_wait, 6),
        )


_NO_TIME = RecordTimings(0.0, 0.0, 0.0, 0.0)


@attrs.frozen
class RecordCost:
    """What an agent's model requests cost (the ``cost`` object of its record, written when
    the driver kept a cost ledger: a service tier, prices or a Batch API backend;
    ``docs/batch.md``)."""

    usd: float | None
    """USD at the prices of the tiers that answered (``None``: the model has no price)."""
    standard_usd: float | None
    """USD the same tokens cost on the standard tier."""
    requests: dict[str, int] = attrs.field(factory=dict)
    """Answered requests per tier (``standard``, ``flex``, ``batch``)."""


@attrs.frozen
class ResultRecord:
    """One line of a results file: how one agent (the input at ``index``) ended.

    Encoded as a JSON object with the fields in this order; ``transcript`` only when it was
    asked for (``agentcore run --transcripts``).
    """

    index: int
    """The input's position among the non-blank lines of the inputs."""
    status: Status
    output: Any = None
    """The output as JSON (``None`` unless ``status == "ok"``)."""
    error: ErrorRecord | None = None
    turns: int = 0
    """Model requests made."""
    usage: Usage = Usage()
    timings: RecordTimings | None = None
    """``None`` only in lines of older distributed batches, which did not record them."""
    transcript: list[Any] | None = None
    """The conversation as JSON messages, when asked for."""
    cost: RecordCost | None = None
    """The agent's cost, when the batch kept a cost ledger (absent from the line otherwise)."""
    tool_failures: ToolFailures = NO_TOOL_FAILURES
    """The agent's failed tool calls by tool and error type, with each tool's first error
    (absent from the line when none failed)."""

    @classmethod
    def of_result(
        cls,
        result: Result,
        index: int,
        *,
        transcript: bool = False,
        cost: RecordCost | None = None,
    ) -> ResultRecord:
        """The record of a run of this process (``index``: the input's index in the file)."""
        timings = result.timings
        return cls(
            index,
            result.status,
            json_value(result.output),
            None if result.error is None else ErrorRecord.of(result.error),
            result.turns,
            result.usage,
            RecordTimings.rounded(
                timings.wall, timings.model_time, timings.tool_time, timings.slot_wait
            ),
            [orjson.loads(dumps(m)) for m in result.transcript] if transcript else None,
            cost,
            result.tool_failures,
        )

    @classmethod
    def of_end(
        cls,
        index: int,
        end: Finish | Abort,
        turns: int,
        timings: RecordTimings,
        tool_failures: ToolFailures = NO_TOOL_FAILURES,
    ) -> ResultRecord:
        """The record of an agent loop's end (a distributed agent's last step)."""
        if isinstance(end, Finish):
            return cls(
                index,
                "ok",
                json_value(end.output),
                None,
                turns,
                end.usage,
                timings,
                tool_failures=tool_failures,
            )
        return cls(
            index,
            "failed",
            None,
            ErrorRecord.of(end.reason),
            turns,
            end.usage,
            timings,
            tool_failures=tool_failures,
        )

    @classmethod
    def not_run(cls, index: int, kind: AbortKind, message: str) -> ResultRecord:
        """The record of an agent that could not start (an input its template refuses)."""
        return cls(index, "failed", None, ErrorRecord(kind.value, message), timings=_NO_TIME)

    def encode(self) -> bytes:
        """The record as one line of JSON (without the newline)."""
        value = json_value(self)
        if self.transcript is None:
            del value["transcript"]
        if self.cost is None:
            del value["cost"]
        if not self.tool_failures.counts:
            del value["tool_failures"]
        return orjson.dumps(value)

    @classmethod
    def decode(cls, line: bytes | str) -> ResultRecord:
        """A record from its line (also from the lines of older files).

        Raises:
            ValueError: the line is not JSON, or not a record.
        """
        try:
            return from_json_value(orjson.loads(line), cls)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"not a results-file record: {exc}") from None
        except cattrs.BaseValidationError as exc:
            problems = "; ".join(cattrs.transform_error(exc))
            raise ValueError(f"not a results-file record: {problems}") from None


def check_output_path(path: Path) -> None:
    """Raise :class:`ConfigError` unless ``path`` can be created or appended to."""
    if path.is_dir():
        raise ConfigError(f"{path} is a directory: give -o a file name")
    parent = path.parent
    if not parent.exists():
        raise ConfigError(f"{path}: the directory {parent} does not exist (create it first)")
    if not parent.is_dir():
        raise ConfigError(f"{path}: {parent} is not a directory")


class ResultsFile:
    """A results file opened on the first :meth:`write` (``"wb"`` replaces, ``"ab"`` appends)."""

    def __init__(self, path: Path, mode: Literal["wb", "ab"]) -> None:
        self.path = path
        self._mode = mode
        self._file: IO[bytes] | None = None
        self.written = 0

    def write(self, line: bytes) -> None:
        """Write one record line and flush it, so a killed run keeps every finished result."""
        if self._file is None:
            self._file = self.path.open(self._mode)
        self._file.write(line)
        self._file.flush()
        self.written += 1

    def close(self) -> None:
        """Close the file; a run that wrote nothing creates an empty file if there was none."""
        if self._file is None:
            if not self.path.exists():
                self.path.touch()
            return
        self._file.close()
        self._file = None


STEP_JOURNAL_SUFFIX = ".journal"


def step_journal_of(results: Path) -> Path:
    """The step journal kept beside a results file: ``out.jsonl`` -> ``out.jsonl.journal``."""
    return results.with_name(results.name + STEP_JOURNAL_SUFFIX)


def split_resumed(done: Iterable[int], count: int) -> tuple[set[int], list[int]]:
    """The finished indices that are inputs (``0 <= i < count``) and the sorted strays."""
    inside: set[int] = set()
    strays: list[int] = []
    for index in done:
        (inside.add(index) if 0 <= index < count else strays.append(index))
    return inside, sorted(strays)


def interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is a Ctrl-C, bare or inside (nested) exception groups from nurseries."""
    if isinstance(exc, KeyboardInterrupt):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return exc.subgroup(KeyboardInterrupt) is not None
    return False


def finished_indices(path: Path) -> set[int]:
    """Indices already in an output file; a torn last line (from a killed run) is cut off."""
    if not path.exists():
        return set()
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data):
        with path.open("r+b") as f:
            f.truncate(end)
        data = data[:end]
    done: set[int] = set()
    for line in data.splitlines():
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(record, dict) and isinstance(record.get("index"), int):
            done.add(record["index"])
    return done
