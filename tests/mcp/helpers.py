"""Starting the test MCP server (tests/mcp/mcp_server.py): stdio parameters and an HTTP server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from agentcore import McpServer

ROOT = str(Path(__file__).resolve().parents[2])


def stdio_server(**options: Any) -> McpServer:
    return McpServer.stdio(
        sys.executable, ["-m", "tests.mcp.mcp_server", "stdio"], cwd=ROOT, **options
    )


def alive(pid: int) -> bool:
    """Whether a process with this id exists (and is not a zombie)."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def http_server() -> AsyncIterator[tuple[str, trio.Process]]:
    """The test server on streamable HTTP at 127.0.0.1 (a free port); stopped by pid at the end."""
    port = _free_port()
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "tests.mcp.mcp_server", "http", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with trio.fail_after(30):
            while True:
                try:
                    stream = await trio.open_tcp_stream("127.0.0.1", port)
                except OSError:
                    if process.poll() is not None:
                        raise RuntimeError("the MCP test server exited at start-up") from None
                    await trio.sleep(0.1)
                else:
                    await stream.aclose()
                    break
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        if process.poll() is None:
            os.kill(process.pid, 15)
        with trio.move_on_after(10) as waited:
            await process.wait()
        if waited.cancelled_caught:
            process.kill()
            await process.wait()
