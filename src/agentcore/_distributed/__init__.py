"""Distributed batches: agents stepped by many worker processes through Valkey/Redis Streams.

Map of this folder
------------------
- ``_address.py``: the queue URL (``redis://host:port/BATCH``) and the batch's key names.
- ``scripts.py``: the server-side Lua scripts (admission, the compare-and-set step commit,
  owner-checked lease renewal, the reclaimer with its dead-letter path, cleanup).
- ``_connection.py``: the only place that imports ``valkey-glide`` (lazily, so
  ``import agentcore`` never needs it) and the few commands used, as typed helpers.
- ``_records.py``: pure helpers: the JSONL result record of a finished agent, tool memos,
  the task fingerprint that workers check against the batch's.
- ``_worker.py``: :func:`run_worker`: reads runnable steps, drives one step of an agent loop
  per entry on the worker's own driver, commits it; heartbeats, reclaimer, consumer cleanup.
- ``_submitter.py``: :func:`submit_batch`: admits inputs through a bounded window and
  streams finished results to a JSONL file exactly once, resumably.
- ``_backoff.py``: ``SharedBackoff``: the model-client wrapper that makes every worker of a
  batch pause when one of them is told to slow down (429, overloaded).
- ``_commands.py``: ``agentcore worker`` and ``agentcore run --queue`` (called by ``_cli``).

See ``docs/distributed.md`` for the protocol and how to operate it.
"""

from .address import QueueAddress as QueueAddress
from .submitter import SubmitReport as SubmitReport
from .submitter import submit_batch as submit_batch
from .worker import WorkerStatistics as WorkerStatistics
from .worker import run_worker as run_worker

__all__ = ["QueueAddress", "SubmitReport", "WorkerStatistics", "run_worker", "submit_batch"]
