"""``agentcore sim`` in a process of its own (for tests whose client is another process, or is
killed), stopped with SIGTERM at the end."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from tests.batch.test_cli import _cli


@contextmanager
def sim_process(*flags: str) -> Iterator[str]:
    """Start ``agentcore sim --port 0 FLAGS...`` and yield the base URL it serves."""
    proc = subprocess.Popen(_cli("sim", "--port", "0", *flags), stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "serving" in line, line
        yield line.split("serving ", 1)[1].split()[0]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
