"""Failed tool executions on ``agentcore.tools``: the first ones with their run and traceback,
then a bounded number of lines however many calls fail."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import agentcore
from agentcore._observe.log_sink import TRACEBACKS_LOGGED


class Broken(Exception):
    pass


@agentcore.tool(coalesce=False)
def lookup(term: str) -> str:
    """Look a term up.

    Args:
        term: what to look up.
    """
    raise Broken(f"no index for {term}")


TASK = agentcore.Task(prompt="Look up {term}.", tools=[lookup], max_turns=3)


@pytest.mark.parametrize("traced", [False, True], ids=["unwatched", "traced"])
async def test_failures_are_logged_with_run_and_traceback_and_bounded(
    caplog: pytest.LogCaptureFixture, tmp_path: Path, traced: bool
) -> None:
    caplog.set_level(logging.WARNING, logger="agentcore")
    options = {"trace": tmp_path / "trace.json"} if traced else {}
    async with agentcore.open_driver("sim://", model="sim", tools=[lookup], **options) as driver:
        await agentcore.run_batch(TASK, [{"term": f"t{i}"} for i in range(90)], driver=driver)
        failures = driver.executor.statistics().tools["lookup"].failures
    assert failures > 100  # enough to show the bound
    warnings = [r for r in caplog.records if r.name == "agentcore.tools"]
    milestones = [n for n in (10, 100, 1000) if n <= failures]
    assert len(warnings) == TRACEBACKS_LOGGED + len(milestones)
    first, later = warnings[:TRACEBACKS_LOGGED], warnings[TRACEBACKS_LOGGED:]
    for record in first:
        assert record.levelno == logging.WARNING
        assert record.getMessage().startswith(f"run {record.run}: tool lookup failed: Broken: ")  # type: ignore[attr-defined]
        assert record.exc_info is not None and isinstance(record.exc_info[1], Broken)
        assert record.error_type == "Broken"  # type: ignore[attr-defined]
    assert "later failures are logged at DEBUG" in first[-1].getMessage()
    assert [r.failures for r in later] == milestones  # type: ignore[attr-defined]
    for record in later:
        assert record.exc_info is None
        assert f"failure {record.failures} of this tool" in record.getMessage()  # type: ignore[attr-defined]


async def test_every_failure_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="agentcore.tools")
    async with agentcore.open_driver("sim://", model="sim", tools=[lookup]) as driver:
        await agentcore.run_batch(TASK, [{"term": f"t{i}"} for i in range(5)], driver=driver)
        failures = driver.executor.statistics().tools["lookup"].failures
    failed = [r for r in caplog.records if "tool lookup failed" in r.getMessage()]
    assert len(failed) == failures
