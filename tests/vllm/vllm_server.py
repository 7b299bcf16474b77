"""The vLLM server a test talks to: where it listens, its ``/metrics``, and starting and
stopping it by pid through the project's own ``tools/vllm/server.py``."""

from __future__ import annotations

import os
import re
import urllib.request
from pathlib import Path

import attrs

from tests import server_scripts

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tools" / "vllm" / "server.py"
HOME = Path(os.environ.get("AGENTCORE_VLLM_HOME", Path.home() / ".cache/agentcore-vllm"))
PYTHON = HOME / "venv-0.32.0" / "bin" / "python"
MAX_MODEL_LEN = 4096
MAX_NUM_SEQS = 4
"""Sequences the engine runs at once: a few more requests than this queue on the server,
which is what priority scheduling orders."""
BLOCK = 128
"""vLLM's KV block size on CPUs: prefix caching works in whole blocks."""


@attrs.frozen
class VllmServer:
    port: int
    flags: tuple[str, ...] = ()
    """``server.py start`` flags (``--fcfs``, ``--plain``)."""
    wait: float = 240.0
    """Seconds the server may take to answer after its start."""

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """``vllm://127.0.0.1:PORT``."""
        return f"vllm://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return HOME / f"run-{self.port}" / "server.log"

    def start(self) -> None:
        args = [*self.flags, "--wait", str(self.wait), "--", "--max-num-seqs", str(MAX_NUM_SEQS)]
        server_scripts.start(SERVER, self.port, args, what="vLLM", timeout=self.wait + 60)

    def stop(self) -> None:
        server_scripts.stop(SERVER, self.port)

    def metrics(self) -> dict[str, float]:
        """``/metrics``: ``name`` or ``name{label=value}`` (the engine and model labels left
        out) to value."""
        with urllib.request.urlopen(self.http + "/metrics", timeout=10) as reply:
            text = reply.read().decode()
        found: dict[str, float] = {}
        for line in text.splitlines():
            match = re.match(r"(vllm:\w+)(?:\{(.*)\})?\s+([0-9.eE+-]+)$", line)
            if not match:
                continue
            labels = [
                part for part in (match.group(2) or "").split(",")
                if part and not part.startswith(("engine=", "model_name="))
            ]  # fmt: skip
            key = match.group(1) + ("{" + ",".join(labels) + "}" if labels else "")
            found[key] = float(match.group(3))
        return found


def connections_to(port: int) -> int:
    """Established TCP connections whose far end is ``port`` on this machine (the tests are the
    server's only clients)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote, state = fields[2], fields[3]
            if state == "01" and int(remote.rsplit(":", 1)[1], 16) == port:
                count += 1
    return count
