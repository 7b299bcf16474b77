"""Starting and stopping the real servers of the integration tiers through the project's own
scripts (``tools/*/server.py start|stop --port N``), which start each by its pid and stop it
by that pid; also a free port for one."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest


def free_port() -> int:
    """A TCP port of 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(
    script: Path, port: int, args: Sequence[str], *, what: str, timeout: float = 120.0
) -> None:
    """``script start --port PORT ARGS``; the test fails with the script's error output if the
    server does not start."""
    command = [sys.executable, str(script), "start", "--port", str(port), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        pytest.fail(f"{what} did not start: {done.stderr.strip()[-3000:]}")


def stop(script: Path, port: int, *, timeout: float = 60.0) -> None:
    """``script stop --port PORT``."""
    subprocess.run([sys.executable, str(script), "stop", "--port", str(port)],
                   capture_output=True, timeout=timeout, check=False)  # fmt: skip
