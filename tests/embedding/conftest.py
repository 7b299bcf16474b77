"""A simulated backend in a subprocess, and docs/embedding.md executed against it."""

from __future__ import annotations

import re
import selectors
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "embedding.md"
BLOCKS: list[str] = re.findall(
    r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL
)

# Two tool turns with up to three parallel calls each, so every run exercises tool turns and
# most have one with several calls; speedup keeps each model reply to a few milliseconds.
_SERVE = (
    "from agentcore._sim import SimConfig, run_sim_server; "
    "run_sim_server('127.0.0.1', 0, "
    "SimConfig(tool_rounds=2, max_parallel_calls=3, speedup=50))"
)


def _first_line(process: subprocess.Popen[bytes], timeout: float) -> str:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        assert selector.select(timeout), "the simulated backend printed nothing"
    return process.stdout.readline().decode()


@pytest.fixture(scope="session")
def guide_blocks() -> list[str]:
    """The Python blocks of docs/embedding.md, in order."""
    return BLOCKS


@pytest.fixture(scope="session")
def backend_url() -> Iterator[str]:
    """Base URL of a simulated backend serving on loopback, stopped after the session."""
    process = subprocess.Popen([sys.executable, "-c", _SERVE], stdout=subprocess.PIPE)
    try:
        line = _first_line(process, timeout=30)
        assert line.startswith("agentcore sim: serving http://127.0.0.1:"), line
        url = line.split("serving ", 1)[1].split()[0]
        assert httpx.get(f"{url}/models", timeout=10).status_code == 200
        yield url
    finally:
        process.kill()
        process.wait(timeout=30)
        assert process.stdout is not None
        process.stdout.close()


@pytest.fixture(scope="session")
def guide(backend_url: str) -> dict[str, Any]:
    """The namespace left by executing every Python block of the guide, in order.

    The blocks read the backend's address from ``BACKEND_URL``, as the guide tells users to.
    """
    namespace: dict[str, Any] = {"__name__": "docs_embedding"}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BACKEND_URL", backend_url)
        for block in BLOCKS:
            exec(compile(block, str(DOC), "exec"), namespace)
    return namespace
