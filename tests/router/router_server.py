"""The vllm-router a test talks to: where it listens, which policy it runs, its log, and
starting and stopping it by pid through the project's own ``tools/router/server.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tools" / "router" / "server.py"
HOME = Path(os.environ.get("AGENTCORE_ROUTER_HOME", Path.home() / ".cache/agentcore-router"))
ROUTER = HOME / "venv-0.1.17" / "bin" / "vllm-router"


@attrs.frozen
class RouterServer:
    port: int
    policy: str
    workers: tuple[str, ...]
    """The replicas' base URLs (``http://127.0.0.1:PORT``)."""

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return HOME / f"run-{self.port}" / "server.log"

    def start(self, extra: Sequence[str] = ()) -> None:
        command = [sys.executable, str(SERVER), "start", "--port", str(self.port),
                   "--policy", self.policy]  # fmt: skip
        for worker in self.workers:
            command += ["--worker", worker]
        if extra:
            command += ["--", *extra]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            pytest.fail(f"vllm-router did not start: {done.stderr.strip()[-3000:]}")

    def stop(self) -> None:
        subprocess.run([sys.executable, str(SERVER), "stop", "--port", str(self.port)],
                       capture_output=True, timeout=60, check=False)  # fmt: skip
