"""The vllm-router a test talks to: where it listens, which policy it runs, its log, and
starting and stopping it by pid through the project's own ``tools/router/server.py``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import attrs

from tests import server_scripts

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
        args = ["--policy", self.policy]
        for worker in self.workers:
            args += ["--worker", worker]
        server_scripts.start(SERVER, self.port, [*args, "--", *extra], what="vllm-router")

    def stop(self) -> None:
        server_scripts.stop(SERVER, self.port)
