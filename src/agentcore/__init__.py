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

__version__ = "0.1.0"
