"""What a failed execution tells the call that ran it: the exception and the tool's count."""

from __future__ import annotations

import trio
import trio.testing

from agentcore import tool
from agentcore._tools.executor import CallReport, open_tool_executor
from agentcore.core import CallTool, ToolFailed


class Gone(Exception):
    pass


@tool(coalesce=False)
async def fetch(url: str) -> str:
    """Fetch a URL.

    Args:
        url: what to fetch.
    """
    raise Gone(url)


@tool(coalesce=True)
async def shared(key: str) -> str:
    """A slow shared read that fails.

    Args:
        key: what to read.
    """
    await trio.sleep(1)
    raise Gone(key)


@tool(coalesce=False, timeout=1.0)
async def hang(key: str) -> str:
    """Never returns.

    Args:
        key: anything.
    """
    await trio.sleep_forever()
    return key


async def test_a_failed_execution_reports_its_exception_and_the_tools_failure_count() -> None:
    async with open_tool_executor([fetch]) as executor:
        for n in (1, 2, 3):
            report = CallReport()
            event = await executor.call(CallTool(f"c{n}", "fetch", {"url": "u"}), report=report)
            assert isinstance(event, ToolFailed) and event.error.type == "Gone"
            assert isinstance(report.exception, Gone)
            assert report.exception.__traceback__ is not None
            assert report.failures == n


async def test_only_the_call_that_ran_a_shared_execution_gets_its_exception(
    autojump_clock: trio.testing.MockClock,
) -> None:
    reports = [CallReport() for _ in range(3)]
    async with open_tool_executor([shared]) as executor, trio.open_nursery() as nursery:
        for i, report in enumerate(reports):
            call = CallTool(f"c{i}", "shared", {"key": "k"})
            nursery.start_soon(lambda c=call, r=report: executor.call(c, report=r))
            await trio.testing.wait_all_tasks_blocked()
    ran = [r for r in reports if r.source == "executed"]
    joined = [r for r in reports if r.source == "coalesced"]
    assert len(ran) == 1 and len(joined) == 2
    assert isinstance(ran[0].exception, Gone) and ran[0].failures == 1
    assert all(r.exception is None and r.failures == 0 for r in joined)


async def test_a_timeout_is_counted_without_an_exception(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_tool_executor([hang]) as executor:
        report = CallReport()
        event = await executor.call(CallTool("c", "hang", {"key": "k"}), report=report)
    assert isinstance(event, ToolFailed) and event.error.type == "timeout"
    assert report.exception is None and report.failures == 1
