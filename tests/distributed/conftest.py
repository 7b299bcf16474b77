"""Fixtures of the distributed tier: a real redis-server (or valkey-server) on 127.0.0.1.

The server is started and stopped by the project's script ``tools/redis/server.sh`` on a
free port with AOF on (``appendfsync always``), in a temporary folder; it is stopped by its
pid. The tier skips, naming what is missing, when no server binary is installed (run
``tools/redis/install.sh``, or ``make test-distributed``) or valkey-glide is not importable
(``pip install -e '.[distributed]'``).
"""

from __future__ import annotations

import importlib.util
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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    reason = _missing()
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
