"""agentcore: run many tool-using LLM agents at once against one shared inference backend.

This namespace is the batch and driver user's surface: tasks and batches, the trio driver,
tools, the values a run is configured with and ends with, and the exceptions. The other
audiences have their own namespaces:

- :mod:`agentcore.core`: the sans-IO agent loop and its values, for other runtimes;
- :mod:`agentcore.wire`: HTTP values, codecs, transports and model clients (extension points);
- :mod:`agentcore.sim`: the embedded simulated backend (``sim://``);
- :mod:`agentcore.testing`: scripted models, virtual time and Hypothesis strategies.

Every public name lives in exactly one of them. Names here are loaded on first use, so
``import agentcore.core`` (or ``import agentcore`` alone) pulls in neither trio nor httpx.

General layout
--------------
Every top-level entry, public namespaces first; the private folders are layers, top floor first:
a module imports only its own folder and folders below it (``tests/test_layers.py`` holds the
table).

- ``__init__.py``: The batch and driver user's surface (names load on first use).
- ``core.py``: The trio-free embedding surface: the sans-IO agent loop and the values it speaks.
- ``wire.py``: Extension points at the wire: HTTP values, codecs, transports and model clients.
- ``sim.py``: The embedded simulated backend (``sim://``): an OpenAI-compatible server on
  loopback.
- ``testing/``: Tools for testing code built on agentcore.
- ``_public.py``: Helpers for the public modules: present re-exported objects under their public
  module.
- ``py.typed``: The PEP 561 marker: the package ships its type hints.
- ``_cli/``: The ``agentcore`` command line, the top floor.
- ``_distributed/``: Distributed batches: agents stepped by many worker processes through
  Valkey/Redis Streams.
- ``_tasks/``: The batch layer: tasks, batches of agents, one watched agent and the results
  file.
- ``_driver/``: The trio driver: it performs the effects of many agent loops against one
  backend.
- ``_backends/``: Backends: a URL, or a configured :class:`Backend`, plus its options, to a
  model client stack.
- ``_tools/``: Tools: the ``@tool`` decorator, the executor that runs tool calls, MCP tool
  servers.
- ``_sim/``: The embedded simulated backend: an OpenAI-compatible server on loopback
  (``sim://``).
- ``_transports/``: HTTP transports and model clients: the only code that opens sockets.
- ``_observe/``: Seeing what a run did.
- ``_codecs/``: Sans-IO wire dialects: requests to bytes, bytes to replies.
- ``_core/``: The sans-IO core: values, the agent loop and pure policies.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # errors
    from ._core.errors import AgentcoreError as AgentcoreError
    from ._core.errors import ConfigError as ConfigError
    from ._core.errors import DecodeError as DecodeError
    from ._core.errors import InternalError as InternalError
    from ._core.errors import JournalError as JournalError
    from ._core.errors import JournalFull as JournalFull
    from ._core.errors import JournalLocked as JournalLocked
    from ._core.errors import JournalMismatch as JournalMismatch
    from ._tasks.task import RenderError as RenderError
    from ._tasks.taskfile import TaskFileError as TaskFileError

    # what a run is configured with and ends with
    from ._core.messages import ModelParams as ModelParams
    from ._core.messages import Usage as Usage
    from ._core.events import AbortKind as AbortKind
    from ._core.events import AbortReason as AbortReason
    from ._core.events import ErrorKind as ErrorKind
    from ._core.error_policy import ERROR_POLICY as ERROR_POLICY
    from ._core.error_policy import KindPolicy as KindPolicy
    from ._core.events import ModelError as ModelError
    from ._core.events import ToolError as ToolError
    from ._core.budgets import Budget as Budget
    from ._core.budgets import BudgetExceeded as BudgetExceeded
    from ._core.budgets import UsageLimits as UsageLimits
    from ._core.config import DEFAULT_FINAL_INSTRUCTION as DEFAULT_FINAL_INSTRUCTION

    # tools
    from ._tools.context import RunContext as RunContext
    from ._tools.spec import Tool as Tool
    from ._tools.spec import tool as tool
    from ._tools.executor import ToolExecutorStatistics as ToolExecutorStatistics
    from ._tools.mcp import McpServer as McpServer
    from ._tools.mcp import McpToolError as McpToolError
    from ._tools.mcp import open_mcp_tools as open_mcp_tools
    from ._tools.executor import ToolStatistics as ToolStatistics
    from ._tools.executor import ToolExecutor as ToolExecutor
    from ._tools.executor import open_tool_executor as open_tool_executor

    # the trio driver (docs/driver.md)
    from ._driver.driver import Driver as Driver
    from ._driver.open import open_driver as open_driver
    from ._backends.fallback import Fallback as Fallback
    from ._driver.options import DriverOptions as DriverOptions
    from ._core.fallback import CircuitBreaker as CircuitBreaker
    from ._core.fallback import FallbackPolicy as FallbackPolicy
    from ._core.results import Result as Result
    from ._driver.runs import ResultStream as ResultStream
    from ._core.results import RunTimings as RunTimings
    from ._codecs.http import Timeouts as Timeouts
    from ._core.retry import RetryPolicy as RetryPolicy
    from ._driver.slot_limiter import SlotStatistics as SlotStatistics
    from ._driver.rate_limiter import RateLimiterStatistics as RateLimiterStatistics
    from ._core.token_estimate import EstimateError as EstimateError
    from ._core.token_estimate import RequestShape as RequestShape
    from ._driver.stats import DriverStatistics as DriverStatistics
    from ._driver.stats import RequestStats as RequestStats
    from ._driver.stats import Summary as Summary
    from ._driver.stats import TurnCache as TurnCache
    from ._core.slots import SlotPolicy as SlotPolicy
    from ._core.service_tier import ServiceTier as ServiceTier
    from ._core.cost import CostReport as CostReport
    from ._core.cost import TierTokens as TierTokens

    # the batch layer (docs/batch.md)
    from ._tasks.warmup import BackendUnavailable as BackendUnavailable
    from ._tasks.batch import BatchStream as BatchStream
    from ._tasks.batch import MapReduceResult as MapReduceResult
    from ._tasks.batch import map_reduce as map_reduce
    from ._tasks.batch import open_batch as open_batch
    from ._tasks.batch import run_batch as run_batch
    from ._tasks.warmup import warm_prefix as warm_prefix
    from ._tasks.warmup import WarmUpReport as WarmUpReport
    from ._tasks.align import PrefixAlignment as PrefixAlignment
    from ._tasks.task import Task as Task
    from ._tasks.taskfile import load_task as load_task

    # one-shot generation and step events (docs/watching.md)
    from ._driver.generate import Generation as Generation
    from ._driver.generate import GenerationError as GenerationError
    from ._driver.generate import GenerationStream as GenerationStream
    from ._observe.steps import ModelDelta as ModelDelta
    from ._observe.steps import ModelReplied as ModelReplied
    from ._observe.steps import RequestFailed as RequestFailed
    from ._observe.steps import RequestQueued as RequestQueued
    from ._observe.steps import RequestStarted as RequestStarted
    from ._observe.steps import RetryScheduled as RetryScheduled
    from ._observe.steps import RunAborted as RunAborted
    from ._observe.steps import RunFinished as RunFinished
    from ._observe.steps import RunStarted as RunStarted
    from ._observe.steps import StepEvent as StepEvent
    from ._observe.steps import StepSink as StepSink
    from ._observe.steps import StepStream as StepStream
    from ._observe.steps import ToolEnded as ToolEnded
    from ._observe.steps import HopChanged as HopChanged
    from ._observe.steps import ToolProgress as ToolProgress
    from ._observe.steps import ToolStarted as ToolStarted
    from ._observe.steps import ToolWaited as ToolWaited
    from ._tasks.agent import Agent as Agent

    # seeing what a batch did (docs/observability.md)
    from ._observe.render import render_timeline as render_timeline

    # distributed batches on Valkey/Redis Streams (docs/distributed.md)
    from ._distributed import QueueAddress as QueueAddress
    from ._distributed import SubmitReport as SubmitReport
    from ._distributed import WorkerStatistics as WorkerStatistics
    from ._distributed import run_worker as run_worker
    from ._distributed import submit_batch as submit_batch

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # distributed batches
    "QueueAddress": "_distributed",
    "SubmitReport": "_distributed",
    "WorkerStatistics": "_distributed",
    "run_worker": "_distributed",
    "submit_batch": "_distributed",
    # errors
    "AgentcoreError": "_core.errors",
    "ConfigError": "_core.errors",
    "DecodeError": "_core.errors",
    "InternalError": "_core.errors",
    "JournalError": "_core.errors",
    "JournalFull": "_core.errors",
    "JournalLocked": "_core.errors",
    "JournalMismatch": "_core.errors",
    "RenderError": "_tasks.task",
    "TaskFileError": "_tasks.taskfile",
    # what a run is configured with and ends with
    "ModelParams": "_core.messages",
    "Usage": "_core.messages",
    "AbortKind": "_core.events",
    "AbortReason": "_core.events",
    "ErrorKind": "_core.events",
    "ERROR_POLICY": "_core.error_policy",
    "KindPolicy": "_core.error_policy",
    "ModelError": "_core.events",
    "ToolError": "_core.events",
    "Budget": "_core.budgets",
    "BudgetExceeded": "_core.budgets",
    "UsageLimits": "_core.budgets",
    "DEFAULT_FINAL_INSTRUCTION": "_core.config",
    # tools
    "RunContext": "_tools.context",
    "Tool": "_tools.spec",
    "tool": "_tools.spec",
    "ToolExecutorStatistics": "_tools.executor",
    "McpServer": "_tools.mcp",
    "McpToolError": "_tools.mcp",
    "open_mcp_tools": "_tools.mcp",
    "ToolStatistics": "_tools.executor",
    "ToolExecutor": "_tools.executor",
    "open_tool_executor": "_tools.executor",
    # the trio driver (docs/driver.md)
    "Driver": "_driver.driver",
    "open_driver": "_driver.open",
    "Fallback": "_backends.fallback",
    "DriverOptions": "_driver.options",
    "FallbackPolicy": "_core.fallback",
    "CircuitBreaker": "_core.fallback",
    "Result": "_core.results",
    "ResultStream": "_driver.runs",
    "RunTimings": "_core.results",
    "Timeouts": "_codecs.http",
    "RetryPolicy": "_core.retry",
    "SlotStatistics": "_driver.slot_limiter",
    "RateLimiterStatistics": "_driver.rate_limiter",
    "EstimateError": "_core.token_estimate",
    "RequestShape": "_core.token_estimate",
    "DriverStatistics": "_driver.stats",
    "RequestStats": "_driver.stats",
    "Summary": "_driver.stats",
    "TurnCache": "_driver.stats",
    "SlotPolicy": "_core.slots",
    "ServiceTier": "_core.service_tier",
    "CostReport": "_core.cost",
    "TierTokens": "_core.cost",
    # the batch layer (docs/batch.md)
    "BackendUnavailable": "_tasks.warmup",
    "BatchStream": "_tasks.batch",
    "MapReduceResult": "_tasks.batch",
    "map_reduce": "_tasks.batch",
    "open_batch": "_tasks.batch",
    "run_batch": "_tasks.batch",
    "warm_prefix": "_tasks.warmup",
    "WarmUpReport": "_tasks.warmup",
    "PrefixAlignment": "_tasks.align",
    "Task": "_tasks.task",
    "load_task": "_tasks.taskfile",
    # one-shot generation and step events (docs/watching.md)
    "Generation": "_driver.generate",
    "GenerationError": "_driver.generate",
    "GenerationStream": "_driver.generate",
    "ModelDelta": "_observe.steps",
    "ModelReplied": "_observe.steps",
    "RequestFailed": "_observe.steps",
    "RequestQueued": "_observe.steps",
    "RequestStarted": "_observe.steps",
    "RetryScheduled": "_observe.steps",
    "RunAborted": "_observe.steps",
    "RunFinished": "_observe.steps",
    "RunStarted": "_observe.steps",
    "StepEvent": "_observe.steps",
    "StepSink": "_observe.steps",
    "StepStream": "_observe.steps",
    "ToolEnded": "_observe.steps",
    "ToolStarted": "_observe.steps",
    "ToolWaited": "_observe.steps",
    "ToolProgress": "_observe.steps",
    "HopChanged": "_observe.steps",
    "Agent": "_tasks.agent",
    # seeing what a batch did (docs/observability.md)
    "render_timeline": "_observe.render",
}
"""Each public name and the private module that defines it."""

_SUBMODULES = frozenset({"core", "sim", "testing", "wire"})

__all__ = [
    "DEFAULT_FINAL_INSTRUCTION",
    "ERROR_POLICY",
    "AbortKind",
    "AbortReason",
    "Agent",
    "AgentcoreError",
    "BackendUnavailable",
    "BatchStream",
    "Budget",
    "BudgetExceeded",
    "CircuitBreaker",
    "ConfigError",
    "CostReport",
    "DecodeError",
    "Driver",
    "DriverOptions",
    "DriverStatistics",
    "ErrorKind",
    "EstimateError",
    "Fallback",
    "FallbackPolicy",
    "Generation",
    "GenerationError",
    "GenerationStream",
    "InternalError",
    "JournalError",
    "JournalFull",
    "JournalLocked",
    "JournalMismatch",
    "KindPolicy",
    "MapReduceResult",
    "McpServer",
    "McpToolError",
    "ModelDelta",
    "ModelError",
    "ModelParams",
    "ModelReplied",
    "PrefixAlignment",
    "QueueAddress",
    "RateLimiterStatistics",
    "RenderError",
    "RequestFailed",
    "RequestQueued",
    "RequestShape",
    "RequestStarted",
    "RequestStats",
    "Result",
    "ResultStream",
    "RetryPolicy",
    "RetryScheduled",
    "RunAborted",
    "RunContext",
    "RunFinished",
    "RunStarted",
    "RunTimings",
    "ServiceTier",
    "SlotPolicy",
    "SlotStatistics",
    "StepEvent",
    "StepSink",
    "StepStream",
    "SubmitReport",
    "Summary",
    "Task",
    "TaskFileError",
    "TierTokens",
    "Timeouts",
    "Tool",
    "ToolEnded",
    "ToolError",
    "ToolExecutor",
    "ToolExecutorStatistics",
    "ToolProgress",
    "HopChanged",
    "ToolStarted",
    "ToolStatistics",
    "ToolWaited",
    "TurnCache",
    "Usage",
    "UsageLimits",
    "WarmUpReport",
    "WorkerStatistics",
    "load_task",
    "map_reduce",
    "open_batch",
    "open_driver",
    "open_mcp_tools",
    "open_tool_executor",
    "render_timeline",
    "run_batch",
    "run_worker",
    "submit_batch",
    "tool",
    "warm_prefix",
]


def __getattr__(name: str) -> Any:
    # Load a public name's module on first use (PEP 562), and present the object as
    # ``agentcore.<name>`` in reprs and docs.
    if name in _SUBMODULES:  # ``agentcore.core.X`` after a bare ``import agentcore``
        return importlib.import_module(f".{name}", __name__)
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentcore' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    from ._public import publish

    publish(__name__, (name,), {name: value})
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    # The public names and namespaces only: not this module's helpers (``importlib``,
    # ``TYPE_CHECKING``...) nor the private modules that loading a name imports.
    return sorted([*__all__, *_SUBMODULES])
