"""Tools: the ``@tool`` decorator, the executor that runs tool calls, MCP tool servers.

Imports ``_core``, ``_codecs`` and ``_observe``; the driver above calls into it. Files:

- ``spec``: :func:`tool`, :class:`Tool` and the JSON schema of a tool's arguments.
- ``context``: :class:`RunContext`, what a tool learns about the run that called it.
- ``executor``: :class:`ToolExecutor`: validation, singleflight, caching, limits, threads.
- ``mcp``: tools served by MCP servers (the ``mcp`` extra).
"""
