"""Tools: the ``@tool`` decorator, the executor that runs tool calls, MCP tool servers.

Imports ``_core``, ``_codecs`` and ``_observe``; the driver above calls into it. Files:

- ``spec``: :func:`tool`, :class:`Tool` (and its base ``ToolBase``, what tasks and drivers
  hold of any tool) and the JSON schema of a tool's arguments.
- ``context``: :class:`RunContext`, what a tool learns about the run that called it, and the
  checks that a ``replay_safe`` path leads somewhere in it.
- ``executor``: :class:`ToolExecutor`: validation, singleflight, reuse of results, limits,
  threads.
- ``caps``: :class:`Cap`, a FIFO concurrency cap shared by trio tasks (a tool's
  ``max_concurrency``, a batch's ``max_tool_concurrency``).
- ``progress``: :class:`CallSteps`, the waits and progress reports of one observed call.
- ``mcp``: tools served by MCP servers (the ``mcp`` extra).
"""
