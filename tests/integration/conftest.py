"""Fixtures for the tests against the real NVIDIA Dynamo stack (frontend + mocker).

These tests run only when asked: ``make test-dynamo`` sets ``AGENTCORE_DYNAMO=1``, installs
Dynamo through ``tools/dynamo/setup.sh`` if needed, and then a failure to install or start
the stack fails the tests loudly. Without the variable (the plain ``make test``) every test
here is skipped at once and nothing is installed or started.

The stack runs on a free 127.0.0.1 port with request tracing on, from a replay file of the
scripted replies in ``dynamo_helpers.py``; it is stopped by pid at the end of the session,
also on failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from tests.integration.dynamo_helpers import SCRIPT, STACK

REQUIRED = os.environ.get("AGENTCORE_DYNAMO", "").lower() in ("1", "true", "yes", "require")


@attrs.frozen
class Dynamo:
    """The running stack, as the tests see it."""

    stack: Any
    url: str
    """``dynamo://127.0.0.1:PORT``."""
    http_url: str
    """``http://127.0.0.1:PORT``."""
    replay: Path


def _start(tmp: Path, replay: Path) -> Any:
    found = STACK.Install.find() or STACK.install()
    return STACK.DynamoStack(found, run_dir=tmp / "run", replay=replay, speedup=10.0).start()


@pytest.fixture(scope="session")
def dynamo_replay(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not REQUIRED:
        pytest.skip("needs the real Dynamo stack: run `make test-dynamo` (AGENTCORE_DYNAMO=1)")
    tmp = tmp_path_factory.mktemp("dynamo-replay")
    try:
        found = STACK.Install.find() or STACK.install()
        return STACK.build_replay(found, SCRIPT, tmp / "replay.jsonl")
    except STACK.StackError as exc:
        pytest.fail(f"Dynamo could not be installed or the replay file built: {exc}")


@pytest.fixture(scope="session")
def dynamo(tmp_path_factory: pytest.TempPathFactory, dynamo_replay: Path) -> Iterator[Dynamo]:
    """A frontend + mocker shared by the session's tests (do not stop it in a test)."""
    tmp = tmp_path_factory.mktemp("dynamo")
    try:
        stack = _start(tmp, dynamo_replay)
    except STACK.StackError as exc:
        pytest.fail(f"Dynamo did not start: {exc}")
    try:
        yield Dynamo(stack, stack.url, stack.http_url, dynamo_replay)
    finally:
        stack.stop()


@pytest.fixture
def private_dynamo(tmp_path: Path, dynamo_replay: Path) -> Iterator[Dynamo]:
    """A stack of the test's own, for tests that take the server away."""
    try:
        stack = _start(tmp_path, dynamo_replay)
    except STACK.StackError as exc:
        pytest.fail(f"Dynamo did not start: {exc}")
    try:
        yield Dynamo(stack, stack.url, stack.http_url, dynamo_replay)
    finally:
        stack.stop()
