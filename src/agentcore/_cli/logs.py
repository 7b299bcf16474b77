"""The command line's logging: agentcore's warnings, and a worker's progress, on stderr.

The library itself stays silent unless the application configures logging (the ``agentcore``
logger has only a ``NullHandler``). The command line is an application: while a command runs,
:func:`cli_logging` hangs a handler on the ``agentcore`` logger that writes to the current
``sys.stderr``, as ``agentcore: warning: ...``, the WARNING records of the loggers in
:data:`SHOWN`: failed tool executions with their traceback (``agentcore.tools``, bounded per
tool), a trace file that cannot be written (``agentcore.batch``), and for ``agentcore worker``
also the INFO lines of ``agentcore.distributed`` (its start, progress and end). The
``agentcore.driver`` warnings (a model request failed for good) are not shown: every such
failure ends its agent ``failed``, with the reason in the results file and the summary, and a
misconfigured backend is reported once as an error; a line per failed request would repeat
that for every agent. Handler and level are taken off again when the command returns.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["SHOWN", "cli_logging"]

SHOWN = frozenset({"agentcore.tools", "agentcore.batch", "agentcore.distributed"})
"""The loggers whose records the command line shows."""


class _Stderr(logging.Handler):
    """Writes the records of :data:`SHOWN` to ``sys.stderr`` as it is when the record comes
    (tests replace it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name in SHOWN

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:  # logging must never take the command down
            self.handleError(record)


class _Prefixed(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"agentcore: {record.levelname.lower()}: {super().format(record)}"


@contextmanager
def cli_logging(*, progress: bool) -> Iterator[None]:
    """Show agentcore's WARNING records on stderr while the block runs; with ``progress``,
    also the INFO records of ``agentcore.distributed``."""
    root = logging.getLogger("agentcore")
    handler = _Stderr()
    handler.setFormatter(_Prefixed("%(message)s"))
    root.addHandler(handler)
    distributed = logging.getLogger("agentcore.distributed")
    level = distributed.level
    if progress:
        distributed.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        distributed.setLevel(level)
