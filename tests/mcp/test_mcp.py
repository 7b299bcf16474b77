"""MCP tool servers against real servers (the SDK's own server helpers), stdio and HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
import trio

from agentcore import ConfigError, McpServer, Task, open_driver, open_mcp_tools, run_batch
from agentcore.core import AssistantMessage, CallModel, ToolCall, ToolMessage
from agentcore.testing import ScriptedModel
from tests.extras import skip_without
from tests.mcp.helpers import alive, http_server, stdio_server

skip_without("mcp", reason="the mcp extra is not installed (pip install 'trio-agentcore[mcp]')")

# Under trio, the SDK's streamable-HTTP client (httpx2, httpx-sse) leaves some response
# iterators to the garbage collector; trio's async-generator hooks close them and warn. Those
# warnings (and only those) are not failures of ours: see docs/decisions.md.
SDK_HTTP_GENERATORS = pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <async_generator object "
    "(EventSource.__aiter__|PoolByteStream.__aiter__|Response.aiter_bytes|Response.aiter_text)"
    ":pytest.PytestUnraisableExceptionWarning"
)


@pytest.fixture
def devnull() -> Any:
    with open(os.devnull, "w") as sink:
        yield sink


def calls_then_answer(*calls: tuple[str, dict[str, Any]]) -> Any:
    """A model that asks for ``calls`` in one turn, then answers with the results."""

    def policy(call: CallModel) -> str | AssistantMessage:
        results = [m for m in call.messages if isinstance(m, ToolMessage)]
        if results:
            return "results: " + " | ".join(m.content for m in results)
        return AssistantMessage(
            tool_calls=[
                ToolCall(f"c{i}", name, json.dumps(arguments))
                for i, (name, arguments) in enumerate(calls)
            ]
        )

    return policy


def tool_results(transcript: Any) -> list[ToolMessage]:
    return [m for m in transcript if isinstance(m, ToolMessage)]


def test_the_sdk_client_runs_under_trio_run(devnull: Any) -> None:
    async def main() -> tuple[list[str], str]:
        async with open_mcp_tools([stdio_server()], errlog=devnull) as tools:
            by_name = {t.name: t for t in tools}
            text = await by_name["add"].function({"a": 2, "b": 40})
            return sorted(by_name), text

    names, text = trio.run(main)
    assert names == ["add", "count", "die", "fail", "pid", "slow", "text_echo"]
    assert text == "42"


async def test_tools_are_listed_at_start_up_with_the_servers_schemas(devnull: Any) -> None:
    async with open_mcp_tools([stdio_server(prefix="t_")], errlog=devnull) as tools:
        add = next(t for t in tools if t.name == "t_add")
        echo = next(t for t in tools if t.name == "t_text_echo")
    assert add.spec.description == "Add two integers."
    assert add.spec.parameters["required"] == ["a", "b"]
    assert add.spec.parameters["properties"]["a"]["type"] == "integer"
    assert echo.spec.parameters["properties"] == {"text": {"title": "Text", "type": "string"}}
    assert not add.options.coalesce and not add.options.cache


async def test_calls_are_routed_to_the_server_and_errors_come_back_as_tool_errors() -> None:
    model = ScriptedModel(
        calls_then_answer(
            ("add", {"a": 2, "b": 3}),
            ("text_echo", {"text": "héllo"}),
            ("fail", {"reason": "no way"}),
            ("add", {"a": 1}),  # the server checks the rest of the schema
        )
    )
    async with (
        open_driver(model, mcp=[stdio_server()]) as driver,
    ):
        task = Task(prompt="go {input}", tools=list(driver.executor.tools.values()))
        (result,) = await run_batch(task, [1], driver=driver)
    assert result.status == "ok", result.error
    add, echo, fail, missing = tool_results(result.transcript)
    assert (add.content, add.is_error) == ("5", False)
    assert (echo.content, echo.is_error) == ("héllo", False)
    assert fail.is_error and "refused: no way" in fail.content
    assert missing.is_error and "missing required arguments: b" in missing.content


async def test_a_server_that_dies_mid_call_is_a_tool_error_and_no_call_hangs_after_it(
    devnull: Any,
) -> None:
    model = ScriptedModel(calls_then_answer(("die", {})))
    async with open_mcp_tools([stdio_server()], errlog=devnull) as tools:
        by_name = {t.name: t for t in tools}
        pid = int(await by_name["pid"].function({}))
        task = Task(prompt="go {input}", tools=tools)
        with trio.fail_after(30):
            (result,) = await run_batch(task, [1], backend=model)
            (died,) = tool_results(result.transcript)
            assert result.status == "ok"
            assert died.is_error and "closed" in died.content.lower()
            # Later calls fail at once too.
            with pytest.raises(Exception, match=r"(?i)closed"):
                await by_name["add"].function({"a": 1, "b": 2})
    assert not alive(pid)


async def test_cancelling_a_batch_mid_call_leaves_no_server_process(devnull: Any) -> None:
    model = ScriptedModel(calls_then_answer(("pid", {}), ("slow", {"seconds": 60})))
    pid_seen: list[int] = []
    with trio.fail_after(30):
        async with open_mcp_tools([stdio_server()], errlog=devnull) as tools:
            pid_tool = next(t for t in tools if t.name == "pid")
            pid_seen.append(int(await pid_tool.function({})))
            task = Task(prompt="go {input}", tools=tools)
            with trio.move_on_after(2):
                await run_batch(task, [1, 2], backend=model)
        assert not alive(pid_seen[0])


async def test_an_error_in_the_drivers_block_stops_the_server_and_is_raised_as_itself() -> None:
    model = ScriptedModel(lambda call: "x")
    pid = 0
    with pytest.raises(KeyError, match="boom"):
        async with open_driver(model, mcp=[stdio_server()]) as driver:
            pid = int(await driver.executor.tools["pid"].function({}))
            assert alive(pid)
            raise KeyError("boom")
    assert pid and not alive(pid)


async def test_cancelling_the_drivers_block_mid_call_stops_the_server() -> None:
    model = ScriptedModel(calls_then_answer(("slow", {"seconds": 60})))
    pids: list[int] = []

    async def cancel_mid_call(driver: Any, scope: trio.CancelScope) -> None:
        # Wait until the three agents' slow calls have started (the direct "pid" call above
        # does not count as an execution of the driver's executor).
        while driver.statistics().tool_executions < 3:
            await trio.sleep(0.01)
        scope.cancel()

    with trio.fail_after(60):
        with trio.CancelScope() as scope:
            async with open_driver(model, mcp=[stdio_server()]) as driver:
                pids.append(int(await driver.executor.tools["pid"].function({})))
                task = Task(prompt="go {input}", tools=list(driver.executor.tools.values()))
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(cancel_mid_call, driver, scope)
                    await run_batch(task, [1, 2, 3], driver=driver)
        assert scope.cancelled_caught
    assert not alive(pids[0])


@SDK_HTTP_GENERATORS
async def test_streamable_http_servers_work_too() -> None:
    async with http_server() as (url, process):
        async with open_mcp_tools([McpServer.http(url)]) as tools:
            by_name = {t.name: t for t in tools}
            assert await by_name["add"].function({"a": 20, "b": 22}) == "42"
            assert int(await by_name["pid"].function({})) == process.pid
            model = ScriptedModel(calls_then_answer(("fail", {"reason": "http"})))
            (result,) = await run_batch(Task(prompt="{input}", tools=tools), [1], backend=model)
        (failed,) = tool_results(result.transcript)
        assert failed.is_error and "refused: http" in failed.content


@SDK_HTTP_GENERATORS
async def test_an_http_server_that_goes_away_gives_tool_errors_not_a_crash() -> None:
    async with http_server() as (url, process), open_mcp_tools([McpServer.http(url)]) as tools:
        process.kill()
        await process.wait()
        model = ScriptedModel(calls_then_answer(("add", {"a": 1, "b": 1})))
        with trio.fail_after(60):
            (result,) = await run_batch(Task(prompt="{input}", tools=tools), [1], backend=model)
    assert result.status == "ok"
    (failed,) = tool_results(result.transcript)
    assert failed.is_error


@pytest.mark.parametrize(("options", "runs"), [({}, {"run 1", "run 2"}), (None, {"run 1"})])
async def test_identical_calls_are_coalesced_only_for_tools_declared_safe(
    options: dict[str, Any] | None, runs: set[str], devnull: Any
) -> None:
    declared = {"count": {"coalesce": True}} if options is None else options
    model = ScriptedModel(calls_then_answer(("count", {"key": "k"}), ("count", {"key": "k"})))
    async with open_mcp_tools([stdio_server(options=declared)], errlog=devnull) as tools:
        (result,) = await run_batch(Task(prompt="{input}", tools=tools), [1], backend=model)
    texts = {m.content.split(": ")[1] for m in tool_results(result.transcript)}
    assert texts == runs


async def test_a_server_that_cannot_start_is_a_config_error(devnull: Any) -> None:
    broken = McpServer.stdio(sys.executable, ["-c", "import sys; sys.exit(2)"])
    with trio.fail_after(30), pytest.raises(ConfigError, match="could not be started"):
        async with open_mcp_tools([broken], errlog=devnull):
            pass


async def test_options_for_a_tool_the_server_does_not_have_are_a_config_error(
    devnull: Any,
) -> None:
    server = stdio_server(options={"cuont": {"coalesce": True}})
    with trio.fail_after(30), pytest.raises(ConfigError, match="name no tool of it: cuont"):
        async with open_mcp_tools([server], errlog=devnull):
            pass


async def test_two_servers_with_the_same_tool_names_need_a_prefix(devnull: Any) -> None:
    with pytest.raises(ConfigError, match="same name"):
        async with open_mcp_tools([stdio_server(), stdio_server()], errlog=devnull):
            pass
    async with open_mcp_tools([stdio_server(), stdio_server(prefix="b_")], errlog=devnull) as tools:
        assert len(tools) == 14


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({}, "exactly one"),
        ({"command": "x", "url": "http://h/mcp"}, "exactly one"),
        ({"url": "ftp://h"}, "http"),
        ({"command": "x", "args": "-v"}, "list of strings"),
        ({"command": "x", "options": {"t": {"cache": True, "coalesce": False}}}, "coalesce"),
        ({"command": "x", "timeout": -1}, "timeout"),
    ],
)
def test_bad_server_options_are_config_errors(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        McpServer(**options)


def test_the_sdk_is_imported_only_when_servers_are_opened() -> None:
    code = (
        "import sys, agentcore; agentcore.open_mcp_tools; agentcore.McpServer.stdio('x'); "
        "import agentcore._driver.open; print('mcp' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
