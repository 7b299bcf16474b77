"""agentcore: run many tool-using LLM agents at once against one shared inference backend.

General layout
--------------
- The sans-IO core (``_messages``, ``_events``, ``_loop``, ``_schema``, ``_serde``): values,
  events in, effects out. It imports only the standard library, attrs and cattrs.
- Sans-IO backend codecs (``_sse``, ``_codecs``, ``_backends``): requests to bytes, bytes to
  replies, per wire dialect.
- The trio driver and its transports: the only place that performs I/O.
- The batch layer and the CLI on top; ``agentcore.testing`` for deterministic tests.

Every public name is re-exported here explicitly; modules starting with ``_`` are private.
"""

from ._errors import AgentcoreError as AgentcoreError
from ._errors import ConfigError as ConfigError
from ._errors import DecodeError as DecodeError
from ._errors import InternalError as InternalError
from ._errors import LocalProtocolError as LocalProtocolError
from ._errors import RunAborted as RunAborted
from ._errors import TransportError as TransportError
from ._events import Abort as Abort
from ._events import AbortKind as AbortKind
from ._events import AbortReason as AbortReason
from ._events import CallModel as CallModel
from ._events import CallTool as CallTool
from ._events import CancelRequested as CancelRequested
from ._events import Effect as Effect
from ._events import ErrorKind as ErrorKind
from ._events import Event as Event
from ._events import Finish as Finish
from ._events import ModelError as ModelError
from ._events import ModelFailed as ModelFailed
from ._events import ModelResponded as ModelResponded
from ._events import ToolError as ToolError
from ._events import ToolFailed as ToolFailed
from ._events import ToolReturned as ToolReturned
from ._http import HttpRequest as HttpRequest
from ._http import HttpResponse as HttpResponse
from ._http import Timeouts as Timeouts
from ._messages import AgentHints as AgentHints
from ._messages import AssistantMessage as AssistantMessage
from ._messages import Message as Message
from ._messages import ModelParams as ModelParams
from ._messages import OutputSpec as OutputSpec
from ._messages import ServerTiming as ServerTiming
from ._messages import SystemMessage as SystemMessage
from ._messages import ToolCall as ToolCall
from ._messages import ToolMessage as ToolMessage
from ._messages import ToolSpec as ToolSpec
from ._messages import Usage as Usage
from ._messages import UserMessage as UserMessage
from ._sse import SSEDecoder as SSEDecoder
from ._sse import SSEEvent as SSEEvent

# ---- sections added per area below (one block each; keep imports explicit: `X as X`) ----

# serialization
from ._serde import dumps as dumps
from ._serde import loads as loads

# backends (OpenAI-compatible codecs, backend selection)
from ._backends import backend as backend
from ._codec import Backend as Backend

# tools (@tool decorator)
from ._tools import Tool as Tool
from ._tools import tool as tool

# batch layer
from ._batch import BatchStream as BatchStream
from ._batch import MapReduceResult as MapReduceResult
from ._batch import map_reduce as map_reduce
from ._batch import open_batch as open_batch
from ._batch import run_batch as run_batch
from ._batch import warm_prefix as warm_prefix
from ._task import RenderError as RenderError
from ._task import Task as Task
from ._taskfile import TaskFileError as TaskFileError
from ._taskfile import load_task as load_task

# tool statistics (part of DriverStatistics)
from ._tool_executor import ToolExecutorStatistics as ToolExecutorStatistics
from ._tool_executor import ToolStatistics as ToolStatistics

# pure scheduling policy (also the subject of docs/testing.md)
from ._slots import SlotQueue as SlotQueue

# the sans-IO agent loop, for runtimes other than the trio driver (docs/embedding.md)
from ._loop import AgentLoop as AgentLoop
from ._loop import LoopConfig as LoopConfig
from ._loop import LoopSnapshot as LoopSnapshot
from ._loop import LoopStatistics as LoopStatistics
from ._loop import RunState as RunState

# simulated backend (sim://, docs/sim.md)
from ._sim import SimConfig as SimConfig
from ._sim import SimServer as SimServer
from ._sim import SimStatistics as SimStatistics
from ._sim import open_sim_server as open_sim_server

# trio driver (slots, retries, cancellation, metrics; docs/driver.md)
from ._driver import Driver as Driver
from ._driver import Result as Result
from ._driver import ResultStream as ResultStream
from ._driver import RunTimings as RunTimings
from ._driver import open_driver as open_driver
from ._model_client import Exchange as Exchange
from ._model_client import ModelClient as ModelClient
from ._retry import RetryPolicy as RetryPolicy
from ._slot_limiter import SlotStatistics as SlotStatistics
from ._stats import DriverStatistics as DriverStatistics
from ._stats import RequestStats as RequestStats
from ._stats import Summary as Summary

# distributed batches on Valkey/Redis Streams (docs/distributed.md; needs the `distributed` extra)
from ._distributed import QueueAddress as QueueAddress
from ._distributed import SubmitReport as SubmitReport
from ._distributed import WorkerStatistics as WorkerStatistics
from ._distributed import run_worker as run_worker
from ._distributed import submit_batch as submit_batch

__version__ = "0.1.0"
