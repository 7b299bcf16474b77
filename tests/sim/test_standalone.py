"""The blocking entry point behind ``agentcore sim``."""

from __future__ import annotations

import selectors
import signal
import subprocess
import sys

import httpx
import pytest

_CODE = (
    "from agentcore._sim import SimConfig, run_sim_server; "
    "run_sim_server('127.0.0.1', 0, SimConfig())"
)


def _first_line(process: subprocess.Popen[bytes], timeout: float) -> str:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        assert selector.select(timeout), "the server printed nothing"
    return process.stdout.readline().decode()


@pytest.mark.skipif(sys.platform == "win32", reason="uses SIGINT")
def test_run_sim_server_prints_its_url_serves_and_stops_on_interrupt() -> None:
    with subprocess.Popen([sys.executable, "-c", _CODE], stdout=subprocess.PIPE) as process:
        try:
            line = _first_line(process, timeout=30)
            assert line.startswith("agentcore sim: serving http://127.0.0.1:")
            url = line.split("serving ", 1)[1].split()[0]
            models = httpx.get(f"{url}/models", timeout=10).json()
            assert models["data"][0]["id"] == "agentcore-sim"
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                process.kill()
