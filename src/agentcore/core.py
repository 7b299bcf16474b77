"""The trio-free embedding surface: the sans-IO agent loop and the values it speaks.

Use this namespace to drive agents from a runtime other than agentcore's trio driver (plain
sync code, asyncio, a durable workflow engine; see ``docs/embedding.md``), to property-test a
scheduler, or to read the messages and events of a run. Importing it imports neither trio nor
httpx nor the simulator: only the standard library, attrs, cattrs and orjson.

- :class:`AgentLoop` and :class:`LoopConfig`: one run as a state machine; events in
  (:class:`ModelResponded`, :class:`ModelFailed`, :class:`ToolReturned`,
  :class:`ToolFailed`, :class:`CancelRequested`), effects out (:class:`CallModel`,
  :class:`CallTool`, :class:`Finish`, :class:`Abort`).
- Messages and the values requests carry: :class:`SystemMessage`, :class:`UserMessage` (with
  :class:`Image` parts),
  :class:`AssistantMessage`, :class:`ToolMessage`, :class:`ToolCall`, :class:`ToolSpec`,
  :class:`OutputSpec`, :class:`AgentHints`, :class:`ServerTiming`.
- :func:`dumps` / :func:`loads`: JSON for every value above (snapshots included).
- :class:`SlotQueue`: the pure FIFO/priority slot policy.
- :class:`LocalProtocolError`: an event the loop cannot accept in its state (a driver bug).

Values a batch user meets in results (``ModelParams``, ``Usage``, ``ModelError``,
``AbortReason``...) and the exceptions live in :mod:`agentcore`.
"""

from __future__ import annotations

from ._codecs.serde import dumps as dumps
from ._codecs.serde import loads as loads
from ._core.config import LoopConfig as LoopConfig
from ._core.errors import LocalProtocolError as LocalProtocolError
from ._core.events import Abort as Abort
from ._core.events import CallModel as CallModel
from ._core.events import CallTool as CallTool
from ._core.events import CancelRequested as CancelRequested
from ._core.events import Effect as Effect
from ._core.events import Event as Event
from ._core.events import Finish as Finish
from ._core.events import ModelFailed as ModelFailed
from ._core.events import ModelResponded as ModelResponded
from ._core.events import ToolFailed as ToolFailed
from ._core.events import ToolReturned as ToolReturned
from ._core.loop import AgentLoop as AgentLoop
from ._core.loop import LoopSnapshot as LoopSnapshot
from ._core.loop import LoopStatistics as LoopStatistics
from ._core.loop import RunState as RunState
from ._core.messages import AgentHints as AgentHints
from ._core.messages import AssistantMessage as AssistantMessage
from ._core.messages import Image as Image
from ._core.messages import Message as Message
from ._core.messages import OutputSpec as OutputSpec
from ._core.messages import ServerTiming as ServerTiming
from ._core.messages import SystemMessage as SystemMessage
from ._core.messages import ToolCall as ToolCall
from ._core.messages import ToolMessage as ToolMessage
from ._core.messages import ToolSpec as ToolSpec
from ._core.messages import UserMessage as UserMessage
from ._core.slots import SlotQueue as SlotQueue
from ._public import publish as _publish

__all__ = [
    "Abort",
    "AgentHints",
    "AgentLoop",
    "AssistantMessage",
    "CallModel",
    "CallTool",
    "CancelRequested",
    "Effect",
    "Event",
    "Finish",
    "Image",
    "LocalProtocolError",
    "LoopConfig",
    "LoopSnapshot",
    "LoopStatistics",
    "Message",
    "ModelFailed",
    "ModelResponded",
    "OutputSpec",
    "RunState",
    "ServerTiming",
    "SlotQueue",
    "SystemMessage",
    "ToolCall",
    "ToolFailed",
    "ToolMessage",
    "ToolReturned",
    "ToolSpec",
    "UserMessage",
    "dumps",
    "loads",
]

_publish(__name__, __all__, globals())
