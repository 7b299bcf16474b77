"""agentcore's loggers: one per layer, silent unless the application configures logging.

==========================  ==========================================================
logger                      what it says
==========================  ==========================================================
``agentcore.batch``         batch start and end (INFO)
``agentcore.driver``        failed runs (INFO), retried attempts (INFO), requests failed
                            for good (WARNING), every attempt (DEBUG)
``agentcore.tools``         tool executions that raised or timed out (WARNING), every
                            execution (DEBUG)
``agentcore.transport``     connection failures and timeouts (DEBUG)
``agentcore.distributed``   a worker's start, progress every 10 s and end (INFO)
``agentcore.sim``           the simulated server
==========================  ==========================================================

The fields of each line are also given as ``extra=`` (``agent``, ``request_id``, ``attempt``,
``error_kind``, ``status``, ``wait``, ``tool``...) for structured formatters. Call sites on the
hot path test ``isEnabledFor`` first, so a disabled level costs one cached test. No record
carries request headers, and error texts are scrubbed of secrets before they get here
(:mod:`agentcore._codecs.redact`).
"""

from __future__ import annotations

import logging

__all__ = ["BATCH", "DISTRIBUTED", "DRIVER", "TOOLS", "TRANSPORT"]

logging.getLogger("agentcore").addHandler(logging.NullHandler())

BATCH = logging.getLogger("agentcore.batch")
DRIVER = logging.getLogger("agentcore.driver")
TOOLS = logging.getLogger("agentcore.tools")
TRANSPORT = logging.getLogger("agentcore.transport")
DISTRIBUTED = logging.getLogger("agentcore.distributed")
