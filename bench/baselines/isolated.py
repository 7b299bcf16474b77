"""The isolated baseline: each agent as if it had the inference server to itself.

It is :mod:`minimal_loop` with both switches on:

- an agent holds its inference slot for its whole run, tool waits included (so at most
  ``--slots`` agents are in progress, and a slot idles while its agent waits for a tool);
- nothing is shared between agents: each system prompt starts with the agent's own session
  line, so the server's prefix cache only reuses an agent's own earlier turns; there is no
  prefix warming and no coalescing of identical tool calls (each call executes).

Run: ``python isolated.py WORKLOAD.json --url http://127.0.0.1:PORT --slots 8``
"""

from __future__ import annotations

import sys

import trio
from minimal_loop import main, parse

if __name__ == "__main__":
    trio.run(main, parse([*sys.argv[1:], "--hold-slot", "--isolate"]))
