"""An MCP server for the tests, built with the official SDK's server helpers.

Run as ``python -m tests.mcp.mcp_server stdio`` (tools over stdin/stdout) or
``python -m tests.mcp.mcp_server http PORT`` (streamable HTTP on 127.0.0.1:PORT, path ``/mcp``).
Its tools: ``add`` (numbers), ``echo`` (text), ``fail`` (always an error result), ``slow``
(sleeps), ``die`` (the process exits mid-call), ``count`` (how many times it ran: shows
whether calls were coalesced), ``pid`` (the server's process id).
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("agentcore-test")
_runs = {"count": 0}


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(name="text.echo")
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the reason."""
    raise ToolError(f"refused: {reason}")


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then say so."""
    await anyio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
async def count(key: str) -> str:
    """Count the executions (after a short pause, so concurrent calls overlap)."""
    _runs["count"] += 1
    run = _runs["count"]
    await anyio.sleep(0.2)
    return f"{key}: run {run}"


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def die(code: int = 3) -> str:
    """Exit the server process at once, mid-call."""
    os._exit(code)


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]), stateless_http=False)
