"""Pure helpers of the distributed mode: checkpoints with the agent's clock and tool memos.
(The result record is the results file's :class:`ResultRecord`; the task fingerprint is
``agentcore._tasks.fingerprint``'s.)"""

from __future__ import annotations

import attrs
import orjson

from .._core.events import ToolError, ToolFailed, ToolReturned
from .._tasks.results_file import RecordTimings

__all__ = [
    "AgentClock",
    "decode_checkpoint",
    "decode_memo",
    "encode_checkpoint",
    "encode_memo",
]


@attrs.frozen
class AgentClock:
    """An agent's time so far, carried from step to step in its checkpoint (its steps run on
    any worker): when its first step started (seconds since the epoch, by the clock of the
    worker that ran it) and the seconds its model and tool steps took."""

    started: float
    model_time: float = 0.0
    tool_time: float = 0.0

    def timings(self, now: float) -> RecordTimings:
        """The timings of the agent's record, ending ``now`` (seconds since the epoch). The
        wait for a slot is inside ``model_time``: the driver does not report it per request."""
        return RecordTimings.rounded(
            max(0.0, now - self.started), self.model_time, self.tool_time, None
        )


def encode_checkpoint(clock: AgentClock, snapshot: bytes) -> bytes:
    """A checkpoint: the clock as one JSON line, then the loop's snapshot."""
    return orjson.dumps([clock.started, clock.model_time, clock.tool_time]) + b"\n" + snapshot


def decode_checkpoint(data: bytes | str, now: float) -> tuple[AgentClock, bytes]:
    """The clock and the snapshot of a checkpoint. A bare snapshot (from a worker that kept no
    clock) gets a clock started ``now``."""
    if isinstance(data, str):
        data = data.encode()
    if not data.startswith(b"["):
        return AgentClock(now), data
    head, _, snapshot = data.partition(b"\n")
    started, model_time, tool_time = orjson.loads(head)
    return AgentClock(started, model_time, tool_time), snapshot


def encode_memo(event: ToolReturned | ToolFailed) -> bytes:
    """A tool outcome as stored under its idempotency key."""
    if isinstance(event, ToolReturned):
        return orjson.dumps({"ok": event.content})
    return orjson.dumps({"error": [event.error.type, event.error.message]})


def decode_memo(call_id: str, data: bytes | str) -> ToolReturned | ToolFailed:
    """A stored tool outcome as the event for ``call_id``."""
    value = orjson.loads(data)
    if "ok" in value:
        return ToolReturned(call_id, value["ok"])
    kind, message = value["error"]
    return ToolFailed(call_id, ToolError(kind, message))
