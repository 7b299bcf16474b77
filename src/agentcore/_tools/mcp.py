"""MCP tool servers: tools served over the Model Context Protocol become agentcore tools.

Theory of operation
-------------------
:func:`open_mcp_tools` connects to each :class:`McpServer` with the official ``mcp`` SDK (the
optional extra ``trio-agentcore[mcp]``, imported only here and only when used): a stdio server is
started as a subprocess, a streamable-HTTP server is reached at its URL. Each connection's
tasks (the SDK runs on anyio, which runs on trio) live in the nursery of the ``async with``
block that opened it: ``open_mcp_tools`` itself, or the driver's when the servers are given
to :func:`agentcore.open_driver` (``mcp=``). Leaving the block, by an error or a cancellation
included, closes the session and stops the server process (the SDK's shutdown is shielded and
bounded), so no process outlives its block.

At start-up every server's tools are listed once (all pages); each becomes a
:class:`~agentcore.Tool` with the server's name, description and input schema. Names the
model cannot use (MCP allows dots and longer names) are rewritten to ``[A-Za-z0-9_-]{1,64}``
(``McpServer.prefix`` is put in front); the server is always called with its own name.

A call is checked only for the arguments the schema requires (the server validates the rest
and answers a bad call with an error result). The result's content becomes the tool's text:
text parts as they are, structured content as JSON when there is no text, other parts as a
short description. An error result, or a failed connection (a server that died mid-call), is
raised as an exception, which the tool executor feeds back to the model as a tool error like
any other: a failing MCP server never takes down a batch.

Coalescing and caching are off for MCP tools (the client cannot know whether a remote tool
has side effects); :attr:`McpServer.options` turns them on for the tools declared safe.
"""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from typing import Any, TextIO

import attrs
import orjson

from .._core.errors import ConfigError
from .._core.messages import ToolSpec
from .._core.validators import check_items, optional_nonempty_str
from .spec import Tool, ToolOptions

__all__ = ["McpServer", "McpToolError", "open_mcp_tools"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_NO_SHARING: Mapping[str, Any] = {"coalesce": False}


class McpToolError(Exception):
    """An MCP server answered a tool call with an error result (its text is the message)."""


def _to_args(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        raise ConfigError("McpServer.args must be a list of strings, not one string")
    return tuple(value)


def _check_options(_: Any, __: Any, value: Mapping[str, Mapping[str, Any]]) -> None:
    for name, options in value.items():
        if not isinstance(options, Mapping):
            raise ConfigError(f"McpServer.options[{name!r}] must be a mapping of tool options")
        ToolOptions(**{**_NO_SHARING, **options})  # raises ConfigError on a bad option


@attrs.frozen(kw_only=True)
class McpServer:
    """One MCP server whose tools the agents may call.

    Make one with :meth:`stdio` (a subprocess speaking over stdin/stdout) or :meth:`http`
    (streamable HTTP). ``options`` declares, per tool (by the server's name for it), the
    :func:`agentcore.tool` options to run it with, for example
    ``{"search": {"coalesce": True, "cache": True, "timeout": 20}}``; tools not named there
    run every call on its own (no coalescing, no cache), with ``timeout`` if given.

    Raises:
        ConfigError: neither or both of ``command`` and ``url``, or a bad tool option.
    """

    command: str | None = attrs.field(default=None, validator=optional_nonempty_str)
    args: tuple[str, ...] = attrs.field(default=(), converter=_to_args)
    env: Mapping[str, str] | None = None
    """Variables added to the subprocess's environment (over the SDK's safe defaults)."""
    cwd: str | None = None
    url: str | None = attrs.field(default=None, validator=optional_nonempty_str)
    prefix: str = ""
    """Put in front of each tool's name (to keep two servers' tools apart)."""
    timeout: float | None = None
    """Seconds one call of any of its tools may take (unless ``options`` says otherwise)."""
    options: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict, validator=_check_options)

    def __attrs_post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ConfigError("an McpServer needs exactly one of command= (stdio) or url= (HTTP)")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"McpServer.url must be an http(s) URL, got {self.url!r}")
        ToolOptions(coalesce=False, timeout=self.timeout)  # checks the timeout

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        **options: Any,
    ) -> McpServer:
        """A server started as ``command args...``, spoken to over its stdin/stdout."""
        return cls(command=command, args=tuple(args), env=env, cwd=cwd, **options)

    @classmethod
    def http(cls, url: str, **options: Any) -> McpServer:
        """A server reached over streamable HTTP at ``url`` (e.g. ``http://host:8000/mcp``)."""
        return cls(url=url, **options)

    def describe(self) -> str:
        """The server, in words (for messages)."""
        if self.url is not None:
            return self.url
        return " ".join([self.command or "", *self.args])


def _import_sdk() -> Any:
    try:
        import mcp.client.streamable_http  # noqa: PLC0415 - the optional extra, when used
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ConfigError(
            "MCP tool servers need the mcp package: pip install 'trio-agentcore[mcp]'"
        ) from exc
    return mcp


def _local_name(server: McpServer, remote: str) -> str:
    name = _UNSAFE.sub("_", server.prefix + remote)[:64]
    return name or "tool"


def _result_text(result: Any) -> str:
    parts: list[str] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource" and isinstance(getattr(block.resource, "text", None), str):
            parts.append(block.resource.text)
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {block.mime_type}, {len(block.data)} base64 characters]")
        else:
            parts.append(f"[{kind or type(block).__name__} content]")
    if not parts and result.structured_content is not None:
        return orjson.dumps(result.structured_content).decode()
    return "\n".join(parts)


def _make_tool(session: Any, server: McpServer, listed: Any) -> Tool[..., Any]:
    remote = listed.name
    schema: Mapping[str, Any] = listed.input_schema or {"type": "object", "properties": {}}
    required = tuple(r for r in schema.get("required", ()) if isinstance(r, str))

    async def call(arguments: dict[str, Any]) -> str:
        result = await session.call_tool(remote, arguments)
        text = _result_text(result)
        if result.is_error:
            raise McpToolError(text or f"the MCP tool {remote!r} failed")
        return text

    declared = server.options.get(remote)
    options = ToolOptions(
        **({**_NO_SHARING, "timeout": server.timeout} if declared is None else dict(declared))
    )
    name = _local_name(server, remote)
    description = listed.description or ""
    tool = Tool(call, name=name, description=description, options=options)
    arguments_type = tool.arguments_type

    def validate(arguments: Any) -> Any:
        if not isinstance(arguments, dict):
            raise ValueError("the arguments must be a JSON object")
        missing = [key for key in required if key not in arguments]
        if missing:
            raise ValueError(f"missing required arguments: {', '.join(missing)}")
        return arguments_type(arguments=arguments)

    tool.spec = ToolSpec(name, description, schema, validator=validate)
    return tool


async def _list_tools(session: Any) -> list[Any]:
    listed: list[Any] = []
    cursor: str | None = None
    for _ in range(1000):  # bounded: a server paging forever is a broken server
        page = (
            await session.list_tools(params=_page(cursor)) if cursor else await session.list_tools()
        )
        listed.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return listed
    raise ConfigError("the MCP server kept paging its tool list (over 1000 pages)")


def _page(cursor: str) -> Any:
    import mcp.types  # noqa: PLC0415 - the optional extra

    return mcp.types.PaginatedRequestParams(cursor=cursor)


async def _close_quietly(connection: AsyncExitStack) -> None:
    # A server that went away makes the SDK's transport fail on the way out too (a refused
    # connection, a broken pipe); its calls already reported that as tool errors, so closing
    # it is not an error of the caller's block. Cancellations still propagate.
    with suppress(Exception):
        await connection.aclose()


async def _connect(stack: AsyncExitStack, sdk: Any, server: McpServer, errlog: TextIO) -> Any:
    connection = AsyncExitStack()
    stack.push_async_callback(_close_quietly, connection)
    return await _open_session(connection, sdk, server, errlog)


async def _open_session(stack: AsyncExitStack, sdk: Any, server: McpServer, errlog: TextIO) -> Any:
    if server.url is not None:
        transport = sdk.client.streamable_http.streamable_http_client(server.url)
    else:
        params = sdk.StdioServerParameters(
            command=server.command,
            args=list(server.args),
            env=None if server.env is None else dict(server.env),
            cwd=server.cwd,
        )
        transport = sdk.stdio_client(params, errlog=errlog)
    read, write = await stack.enter_async_context(transport)
    session = await stack.enter_async_context(sdk.ClientSession(read, write))
    await session.initialize()
    return session


@asynccontextmanager
async def open_mcp_tools(
    servers: Sequence[McpServer], *, errlog: TextIO | None = None
) -> AsyncIterator[list[Tool[..., Any]]]:
    """Connect to MCP servers and yield their tools, ready for a ``Task`` and a driver.

    ::

        server = agentcore.McpServer.stdio("mcp-fs", ["/data"])
        async with agentcore.open_mcp_tools([server]) as tools:
            task = agentcore.Task(prompt="...", tools=tools)
            results = await agentcore.run_batch(task, inputs, backend="sim://")

    Args:
        servers: the servers, in order (their tools keep this order).
        errlog: where stdio servers' stderr goes (default: this process's stderr).

    Yields:
        The tools of every server. Leaving the block closes the sessions and stops the
        server processes.

    Raises:
        ConfigError: the ``mcp`` package is missing, a server could not be started or
            listed, or two tools end up with the same name.
    """
    check_items("servers", servers, McpServer, "McpServer values")
    sdk = _import_sdk()
    # The SDK's task groups are trio nurseries: anything raised inside them leaves wrapped in
    # an exception group. Failures to start and the caller's own exceptions are taken out and
    # raised as themselves once everything is closed.
    failed: tuple[McpServer, Exception] | None = None
    raised: BaseException | None = None
    async with AsyncExitStack() as stack:
        tools: list[Tool[..., Any]] = []
        for server in servers:
            try:
                session = await _connect(stack, sdk, server, errlog or sys.stderr)
                listed = await _list_tools(session)
            except (OSError, sdk.MCPError, ExceptionGroup) as exc:
                failed = (server, exc)
                break
            unknown = sorted(set(server.options) - {item.name for item in listed})
            if unknown:  # a misspelt name would silently leave its tool undeclared
                failed = (server, ConfigError(f"options name no tool of it: {', '.join(unknown)}"))
                break
            tools.extend(_make_tool(session, server, item) for item in listed)
        duplicates = _duplicates(tools)
        if failed is None and not duplicates:
            try:
                yield tools
            except BaseException as exc:  # re-raised below, once everything is closed
                raised = exc
    if failed is not None:
        where, problem = failed
        if isinstance(problem, ConfigError):
            raise ConfigError(f"MCP server {where.describe()!r}: {problem}")
        raise ConfigError(
            f"MCP server {where.describe()!r} could not be started or listed: {problem!r}"
        ) from problem
    if duplicates:
        raise ConfigError(
            f"MCP tools with the same name: {', '.join(duplicates)} (give the servers a prefix)"
        )
    if raised is not None:
        raise raised


def _duplicates(tools: list[Tool[..., Any]]) -> list[str]:
    names = [t.name for t in tools]
    return sorted({n for n in names if names.count(n) > 1})
