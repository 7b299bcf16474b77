"""Fixtures for the tests against a real llama.cpp llama-server (CPU, built from source).

These tests run only when asked: ``make test-llamacpp`` builds llama-server through
``tools/llamacpp/setup.sh`` (cached under ``~/.cache``) and sets ``AGENTCORE_LLAMACPP=1``;
then a missing binary or a server that does not start fails the tests loudly. Without the
variable (the plain ``make test``) every test here is skipped at once.

Servers run on free 127.0.0.1 ports with the scripted ``tiny`` model of
``tools/llamacpp/make_model.py`` (every reply is "Hello! I am a tiny test model.", a tool call
under ``tool_choice="required"``, valid JSON under a schema), and are stopped by pid.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.llamacpp.llama_server import CTX, SLOTS, LlamaServer
from tests.server_scripts import free_port

REQUIRED = os.environ.get("AGENTCORE_LLAMACPP", "").lower() in ("1", "true", "yes")


def _server(slots: int = SLOTS, ctx: int = CTX) -> Iterator[LlamaServer]:
    if not REQUIRED:
        pytest.skip("needs a real llama-server: run `make test-llamacpp` (AGENTCORE_LLAMACPP=1)")
    server = LlamaServer(free_port(), slots, ctx)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    """A server shared by a module's tests (do not stop it in a test)."""
    yield from _server()


@pytest.fixture
def private_llama() -> Iterator[LlamaServer]:
    """A server of the test's own (fresh caches; the test may stop and restart it)."""
    yield from _server()
