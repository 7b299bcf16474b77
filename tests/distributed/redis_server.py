"""Start, stop, SIGKILL and restart a redis-server through tools/redis/server.sh.

Used by the test fixtures (conftest.py) and the chaos script (chaos.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[2]
SERVER_SCRIPT = ROOT / "tools" / "redis" / "server.sh"


@attrs.define
class RedisServer:
    """A server started by tools/redis/server.sh; ``restart`` keeps its port and AOF."""

    folder: Path
    port: int
    pid: int
    fsync: str

    def url(self, batch: str) -> str:
        return f"redis://127.0.0.1:{self.port}/{batch}"

    def stop(self) -> None:
        subprocess.run(["bash", str(SERVER_SCRIPT), "stop", str(self.folder)], check=True)

    def kill(self) -> None:
        """SIGKILL the server (what a crash does); its AOF is what a restart recovers."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        for _ in range(200):
            if not _alive(self.pid):
                return
            time.sleep(0.02)

    def start(self) -> None:
        out = subprocess.run(
            ["bash", str(SERVER_SCRIPT), "start", str(self.folder), str(self.port), self.fsync],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        self.port, self.pid = int(out[0]), int(out[1])


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped by its new parent does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def start_server(folder: Path, fsync: str = "always", port: int = 0) -> RedisServer:
    server = RedisServer(folder, port, 0, fsync)
    server.start()
    return server
