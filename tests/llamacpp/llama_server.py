"""The llama-server a test talks to: where it listens, and starting and stopping it by pid
through the project's own ``tools/llamacpp/server.py``."""

from __future__ import annotations

from pathlib import Path

import attrs

from tests import server_scripts

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tools" / "llamacpp" / "server.py"
SLOTS = 4
CTX = 4096


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
        args = ["--slots", str(self.slots), "--ctx", str(self.ctx), "--slot-save", "--", *extra]
        server_scripts.start(SERVER, self.port, args, what="llama-server")

    def stop(self) -> None:
        server_scripts.stop(SERVER, self.port, timeout=30)
