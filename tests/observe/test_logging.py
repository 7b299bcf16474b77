"""Logging: one stdlib logger per layer, silent by default, structured, never a secret."""

from __future__ import annotations

import logging
import secrets
import subprocess
import sys
from typing import Any

import pytest
import trio

import agentcore
from agentcore.sim import SimConfig
from tests.driver.helpers import make_loop
from tests.driver.openai_server import error, open_openai_server

FAST_RETRY = agentcore.RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.02)


CALLS = [0]


@agentcore.tool(coalesce=False)
async def flaky(topic: str) -> str:
    """Look a topic up; every other call fails.

    Args:
        topic: what to look up.
    """
    await trio.sleep(0.01)
    CALLS[0] += 1
    if CALLS[0] % 2:
        raise LookupError(f"nothing on {topic}")
    return "found"


TASK = agentcore.Task(
    name="look",
    system="Use the flaky tool, then answer.",
    prompt="Topic: {topic}",
    tools=[flaky],
    max_turns=3,
)

SILENT_SCRIPT = """
import trio, agentcore
from agentcore.sim import SimConfig
from tests.observe.test_logging import TASK
async def main():
    results = await agentcore.run_batch(
        TASK, [{"topic": "bad1"}, {"topic": "ok"}], backend="sim://", model="sim",
        config=SimConfig(speedup=20, fail_rate=0.5), retry=agentcore.RetryPolicy(max_attempts=1),
    )
    print(sorted(r.status for r in results))
trio.run(main)
"""


def test_nothing_is_printed_unless_the_application_configures_logging() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SILENT_SCRIPT],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert agentcore.open_driver  # loads the driver, which installs the handler
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("agentcore").handlers)


async def test_each_layer_logs_to_its_own_logger_with_structured_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="agentcore")
    inputs = [{"topic": "bad" if i % 2 else f"t{i}"} for i in range(8)]
    await agentcore.run_batch(
        TASK,
        inputs,
        backend="sim://",
        model="sim",
        retry=FAST_RETRY,
        config=SimConfig(speedup=20, fail_rate=0.3, seed=2),
    )
    by_logger: dict[str, list[logging.LogRecord]] = {}
    for record in caplog.records:
        by_logger.setdefault(record.name, []).append(record)
    batch = by_logger["agentcore.batch"]
    assert any("started" in r.getMessage() for r in batch)
    assert any("ended: " in r.getMessage() for r in batch)
    tools = [r for r in by_logger["agentcore.tools"] if r.levelno == logging.WARNING]
    assert tools
    assert all(r.tool == "flaky" and r.error_type == "LookupError" for r in tools)  # type: ignore[attr-defined]
    driver = by_logger["agentcore.driver"]
    retries = [r for r in driver if "retrying" in r.getMessage()]
    assert retries
    for r in retries:
        assert r.levelno == logging.INFO
        assert r.error_kind in {"rate_limited", "server", "overloaded"}  # type: ignore[attr-defined]
        assert r.wait > 0  # type: ignore[attr-defined]
        assert r.run is None or isinstance(r.run, int)  # type: ignore[attr-defined]  # None: the warm-up
    assert any(isinstance(r.run, int) for r in retries)  # type: ignore[attr-defined]
    attempts = [r for r in driver if r.levelno == logging.DEBUG]
    assert attempts
    assert all(hasattr(r, "latency") and hasattr(r, "request_id") for r in attempts)


@pytest.mark.parametrize("transport", ["lean", "httpx"])
async def test_no_log_record_at_any_level_carries_the_api_key(
    caplog: pytest.LogCaptureFixture, transport: str
) -> None:
    key = "sk-log-" + secrets.token_hex(16)
    caplog.set_level(logging.DEBUG)  # every logger, third-party HTTP libraries included

    def respond(body: dict[str, Any], n: int) -> Any:
        if n == 0:
            return error(500, f"upstream rejected Authorization: Bearer {key}")
        return error(401, f"Incorrect API key provided: {key}")

    async with (
        open_openai_server(respond) as server,
        agentcore.open_driver(
            server.url, model="m", transport=transport, api_key=key, retry=FAST_RETRY
        ) as driver,
    ):
        result = await driver.run(make_loop(0))
    assert result.status == "failed"
    assert caplog.records  # the failure and the retry were logged
    driver_records = [r for r in caplog.records if r.name == "agentcore.driver"]
    assert any(r.levelno == logging.WARNING for r in driver_records)  # failed for good
    assert any("retrying" in r.getMessage() for r in driver_records)  # the 500 was retried
    for record in caplog.records:
        assert key not in record.getMessage()
        assert key not in repr(vars(record))
