"""One writer per file: the lock that keeps two runs off one results file or one journal.

Two processes appending to one results file interleave their lines (a torn line in the
middle, duplicated indices), and two processes on one journal would each resume the same
agents. :class:`FileLock` takes an exclusive, non-blocking ``flock`` on the file itself
(created empty when absent, never truncated), held until :meth:`FileLock.release` or the
process ends, however it ends: the kernel drops it with the process. SQLite's own locks are
``fcntl`` byte ranges, which ``flock`` does not touch. A file about to *replace* the locked
one (``os.replace``) is locked first with :meth:`FileLock.adopt`, so the name is never
unguarded.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

from .._core.errors import JournalError, JournalLocked

__all__ = ["FileLock"]


def _locked_fd(path: Path, what: str) -> int:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise JournalError(f"cannot open {what} {path}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise JournalLocked(
                f"{path} is in use by another agentcore process (another run, or a resume, of "
                f"the same {what}): wait for it to end, or stop it, before starting this one"
            ) from None
        raise JournalError(f"cannot lock {what} {path}: {exc.strerror or exc}") from None
    return fd


class FileLock:
    """An exclusive lock on ``path`` for this process (module docstring).

    Args:
        path: the file (created empty when absent).
        what: what the file is, for messages (``"results file"``, ``"journal"``).

    Raises:
        JournalLocked: another process holds it.
        JournalError: the file cannot be opened or locked.
    """

    def __init__(self, path: str | os.PathLike[str], what: str) -> None:
        self.path = Path(path)
        self.what = what
        self._fd: int | None = _locked_fd(self.path, what)

    @property
    def fd(self) -> int:
        """The locked file's descriptor (open for reading and writing)."""
        if self._fd is None:
            raise JournalError(f"the lock on {self.path} was released")
        return self._fd

    def adopt(self, replacement: str | os.PathLike[str]) -> None:
        """Lock ``replacement``, the file about to replace the locked one, and release the
        old one (call before ``os.replace(replacement, path)``)."""
        fd = _locked_fd(Path(replacement), self.what)
        self.release()
        self._fd = fd

    def release(self) -> None:
        """Give the lock up (closing the descriptor)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
