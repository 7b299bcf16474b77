"""The llama-server a test talks to: where it listens, and starting and stopping it by pid
through the project's own ``tools/llamacpp/server.py``."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tools" / "llamacpp" / "server.py"
SLOTS = 4
CTX = 4096


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@attrs.frozen
class LlamaServer:
    port: int
    slots: int
    ctx: int

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """``llamacpp://127.0.0.1:PORT``."""
        return f"llamacpp://127.0.0.1:{self.port}"

    def start(self, *extra: str) -> None:
        command = [sys.executable, str(SERVER), "start", "--port", str(self.port),
                   "--slots", str(self.slots), "--ctx", str(self.ctx), "--slot-save"]  # fmt: skip
        if extra:
            command += ["--", *extra]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            pytest.fail(f"llama-server did not start: {done.stderr.strip()}")

    def stop(self) -> None:
        subprocess.run([sys.executable, str(SERVER), "stop", "--port", str(self.port)],
                       capture_output=True, timeout=30, check=False)  # fmt: skip
