"""Distributed batches: agents stepped by many worker processes through Valkey/Redis Streams.

Imports everything up to the batch layer (``_tasks``); the CLI commands are in ``_cli``.
Files:

- ``address``: the queue URL (``redis://host:port/BATCH``) and the batch's key names.
- ``scripts``: the server-side Lua scripts (admission, the compare-and-set step commit,
  owner-checked lease renewal, the reclaimer with its dead-letter path, cleanup, consumer
  removal, the pause, the fleet's rate budget).
- ``connection``: the only place that imports ``valkey-glide`` (lazily, so
  ``import agentcore`` never needs it) and the few commands used, as typed helpers.
- ``records``: pure helpers: checkpoints with the agent's clock, and tool memos.
- ``journal``: the step journal of a distributed batch (``ValkeyStep``): one step of one
  agent, read from and committed to the batch's keys through the step-journal interface.
- ``worker``: :func:`run_worker`: reads runnable steps, drives one step of an agent loop
  per entry on the worker's own driver, commits it; heartbeats, reclaimer, consumer cleanup.
- ``submitter``: :func:`submit_batch`: admits inputs through a bounded window and
  streams finished results to a JSONL file exactly once, resumably.
- ``backoff``: ``SharedBackoff``: the model-client wrapper that makes every worker of a
  batch pause when one of them is told to slow down (429, overloaded), and reserves each
  attempt from the fleet's rate budget.
- ``budget``: ``FleetBudget``: a worker's side of the fleet's rate budget (the line of
  requests in front of the server's ``RESERVE`` script, the local share without the server).

See ``docs/distributed.md`` for the protocol and how to operate it.
"""

from .address import QueueAddress as QueueAddress
from .submitter import SubmitReport as SubmitReport
from .submitter import submit_batch as submit_batch
from .worker import WorkerStatistics as WorkerStatistics
from .worker import run_worker as run_worker

__all__ = ["QueueAddress", "SubmitReport", "WorkerStatistics", "run_worker", "submit_batch"]
