"""A driver loads the libraries of the backends it uses, not those of every backend: a
self-hosted server on the lean transport needs neither httpx nor the simulator, whose imports
are a large part of a process's first batch (docs/benchmarks.md, the vLLM benchmark)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import trio
import agentcore

async def main() -> None:
    async with agentcore.open_driver("{url}", model="m", api_key="k"):
        pass

trio.run(main)
print(",".join(m for m in ("httpx", "agentcore._sim") if m in sys.modules))
"""


def loaded_after_opening(url: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(url=url)], capture_output=True, text=True, check=True
    ).stdout.strip()
    return set(out.split(",")) - {""}


def test_a_self_hosted_driver_imports_neither_httpx_nor_the_simulator() -> None:
    assert loaded_after_opening("vllm://127.0.0.1:9") == set()


def test_the_httpx_transport_and_the_simulator_are_imported_when_used() -> None:
    assert loaded_after_opening("openai://") == {"httpx"}
    assert "agentcore._sim" in loaded_after_opening("sim://")
