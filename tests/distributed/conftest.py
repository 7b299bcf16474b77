"""Fixtures of the distributed tier: a real redis-server (or valkey-server) on 127.0.0.1.

The server is started and stopped by the project's script ``tools/redis/server.sh`` on a
free port with AOF on (``appendfsync always``), in a temporary folder; it is stopped by its
pid. The tier runs when asked (``make test-distributed`` sets ``AGENTCORE_DISTRIBUTED=1``,
and a missing server binary or valkey-glide is then an error); the plain test run skips it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.distributed.redis_server import RedisServer, start_server


def _missing() -> str | None:
    if shutil.which("redis-server") is None and shutil.which("valkey-server") is None:
        return "no redis-server/valkey-server on PATH (run tools/redis/install.sh)"
    if importlib.util.find_spec("glide") is None:
        return "valkey-glide is not installed (pip install -e '.[distributed]')"
    return None


REQUIRED = os.environ.get("AGENTCORE_DISTRIBUTED", "").lower() in ("1", "true", "yes")
"""Set by ``make test-distributed``: the tier runs, and a missing server or client is an
error rather than a skip. Without it (the plain ``make test``) the tier is skipped at once:
it starts worker processes and servers and takes minutes."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    reason = _missing()
    if REQUIRED and reason is not None and any("distributed" in i.nodeid for i in items):
        raise pytest.UsageError(f"the distributed tier was asked for, but {reason}")
    if not REQUIRED:
        reason = "the distributed tier: run `make test-distributed` (AGENTCORE_DISTRIBUTED=1)"
    for item in items:
        if "distributed" in item.nodeid.split("::")[0]:
            item.add_marker(pytest.mark.distributed)
            if reason is not None:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One server for the session; tests keep apart by using their own batch names."""
    server = start_server(tmp_path_factory.mktemp("redis"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A server of the test's own, for tests that kill and restart it."""
    server = start_server(tmp_path / "redis")
    try:
        yield server
    finally:
        server.stop()
