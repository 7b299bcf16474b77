"""The results file of ``agentcore run``: checked before anything runs, touched only once it has
something to hold.

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
from typing import IO, Literal

import orjson

from .._core.errors import ConfigError

__all__ = [
    "ResultsFile",
    "check_output_path",
    "finished_indices",
    "interrupted",
    "split_resumed",
]


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
