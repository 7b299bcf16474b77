"""Events (inputs of the agent loop, past tense) and effects (its outputs, imperative).

The loop consumes :data:`Event` values through ``AgentLoop.handle`` and answers with a tuple of
:data:`Effect` values. The driver (or any other runtime) performs the effects and feeds the
outcomes back as events. Both unions are closed: the loop handles exactly these types.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import attrs

from .budgets import BudgetExceeded
from .messages import (
    AgentHints,
    AssistantMessage,
    Message,
    ModelParams,
    OutputSpec,
    ServerTiming,
    ToolSpec,
    Usage,
)

__all__ = [
    "Abort",
    "AbortKind",
    "AbortReason",
    "CallModel",
    "CallTool",
    "CancelRequested",
    "Effect",
    "ErrorKind",
    "Event",
    "Finish",
    "ModelError",
    "ModelFailed",
    "ModelResponded",
    "ToolError",
    "ToolFailed",
    "ToolReturned",
]


def _one_line(text: str) -> str:
    """``text`` with its line breaks turned into spaces (error strings go into log lines)."""
    return " ".join(text.splitlines())


class ErrorKind(enum.Enum):
    """Why a model request failed, as classified by a codec or the driver.

    What each kind means to every layer (retried, slows down, falls over...) is its row in
    :data:`agentcore._core.error_policy.ERROR_POLICY`.
    """

    RATE_LIMITED = "rate_limited"  #: 429 or equivalent; retryable
    OVERLOADED = "overloaded"  #: 529, 503, in-stream overload; retryable
    SERVER = "server"  #: other 5xx; retryable
    TIMEOUT = "timeout"  #: 408, or a client-side timeout; retryable
    CONFLICT = "conflict"  #: 409; retryable
    CONNECTION = "connection"  #: connect failure, reset, truncated stream; retryable
    BAD_REQUEST = "bad_request"  #: 400, 422; final
    AUTH = "auth"  #: 401, 403; final
    NOT_FOUND = "not_found"  #: 404; final
    TOO_LARGE = "too_large"  #: 413, context length exceeded; final
    QUOTA = "quota"  #: billing / quota exhausted; final
    PROTOCOL = "protocol"  #: a 2xx reply that could not be decoded; retryable (a 3xx: final)
    DEADLINE = "deadline"  #: the run's deadline passed; final
    REPLY_TOO_LARGE = "reply_too_large"  #: the reply body passed ``max_reply_bytes``; final


@attrs.frozen
class ModelError:
    """A classified model-request failure (data, not an exception)."""

    kind: ErrorKind
    message: str
    status: int | None = None
    """HTTP status, if there was a response."""
    retryable: bool = False
    retry_after: float | None = None
    """Seconds the server asked to wait (``retry-after`` / ``retry-after-ms``), if any."""
    code: str | None = None
    """The server's error type/code string, if any."""

    def __str__(self) -> str:
        """One line for logs: ``kind (HTTP status): message``."""
        status = "" if self.status is None else f" (HTTP {self.status})"
        return f"{self.kind.value}{status}: {_one_line(self.message)}"


@attrs.frozen
class ToolError:
    """Why a tool call failed: the exception type name (or a category) and a message."""

    type: str
    message: str

    def __str__(self) -> str:
        """One line for logs: ``type: message``."""
        return f"{self.type}: {_one_line(self.message)}"


# ----------------------------------------------------------------------------- events


@attrs.frozen
class ModelResponded:
    """The model answered the request ``request_id``."""

    request_id: str
    message: AssistantMessage
    usage: Usage = Usage()
    finish_reason: str | None = None
    timing: ServerTiming | None = None
    """Server-reported timing, when the backend gives it (Dynamo ``nvext.timing``)."""
    service_tier: str | None = None
    """The service tier the reply says it was served on (OpenAI's ``service_tier``:
    ``default``, ``flex``, ``priority``...; Anthropic's ``usage.service_tier``: ``standard``,
    ``priority``, ``batch``), when it says one: the tier it is billed at."""
    cache_write_tokens: int = 0
    """Of ``usage.prompt_tokens``, tokens written to the provider's prompt cache (Anthropic's
    ``cache_creation_input_tokens``), billed above the input price."""
    cache_write_1h_tokens: int = 0
    """Of ``cache_write_tokens``, those written with a one-hour lifetime (billed higher than
    the five-minute ones)."""


@attrs.frozen
class ModelFailed:
    """The request ``request_id`` failed for good (the driver's retries are spent)."""

    request_id: str
    error: ModelError


@attrs.frozen
class ToolReturned:
    """The tool call ``call_id`` returned ``content`` (text shown to the model)."""

    call_id: str
    content: str


@attrs.frozen
class ToolFailed:
    """The tool call ``call_id`` failed (raised, timed out, was rate limited...), or was not
    run because its batch's tool-call budget had no room for it (``budget``)."""

    call_id: str
    error: ToolError
    budget: BudgetExceeded | None = None
    """The spent budget that refused the call (``None``: the call ran, or could not, for
    another reason). The loop tells the model, does not count it as a tool failure, and
    makes its next request the final one: no more tools can be called."""


@attrs.frozen
class CancelRequested:
    """The run should stop now."""

    reason: str = "cancelled"


Event = ModelResponded | ModelFailed | ToolReturned | ToolFailed | CancelRequested
"""Everything ``AgentLoop.handle`` accepts."""


# ----------------------------------------------------------------------------- effects


@attrs.frozen
class CallModel:
    """Send ``messages`` to the model; answer with ``ModelResponded`` or ``ModelFailed``."""

    request_id: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    params: ModelParams = ModelParams()
    hints: AgentHints = AgentHints(session_id="")
    output: OutputSpec | None = None
    """The structured output expected from the final answer, on every request of a run that
    has an output type (codecs may pass it on as ``response_format`` when the backend
    supports it; some only on requests without tools, see the codec's options)."""
    service_tier: str | None = None
    """The provider's service tier this request asks for (``"flex"``), written by the codec
    of an API that has tiers (OpenAI-compatible ones: the request's ``service_tier``; a codec
    of an API without them refuses the request with a ``ConfigError``). ``None``: the API's
    default tier. The loop leaves it ``None``; a backend's tiered client sets it on each
    request it sends to flex."""


@attrs.frozen
class CallTool:
    """Run tool ``name``; answer with ``ToolReturned`` or ``ToolFailed`` for ``call_id``.

    ``arguments`` are the model's arguments after JSON parsing and validation against the
    tool's schema. ``idempotency_key`` is derived from (run id, turn, call index), so a resumed
    run asks for the same key again.
    """

    call_id: str
    name: str
    arguments: Mapping[str, Any] = attrs.field(eq=True, hash=False)
    idempotency_key: str = ""


class AbortKind(enum.Enum):
    """Why a run ended without an output."""

    MODEL_FAILED = "model_failed"  #: the model request failed for good
    TOOL_ERRORS = "tool_errors"  #: too many invalid tool calls (``max_tool_errors``)
    OUTPUT_INVALID = "output_invalid"  #: no valid output within ``max_output_retries``
    MAX_TURNS = "max_turns"  #: no answer even after the forced final turn
    CANCELLED = "cancelled"  #: ``CancelRequested``
    INVALID_INPUT = "invalid_input"  #: the batch input did not fit the task (no run started)
    BUDGET_EXHAUSTED = "budget_exhausted"  #: a usage budget ran out (``AbortReason.budget``)
    TRUNCATED = "truncated"  #: the final answer was cut by the token limit (``max_tokens``)
    TOOL_CALL_MISSING = "tool_call_missing"  #: ``tool_choice`` required a tool call; none came
    TOOL_FAILURES = "tool_failures"  #: too many failed tool calls (``max_tool_failures``)


@attrs.frozen
class AbortReason:
    """A typed reason for ``Abort``."""

    kind: AbortKind
    message: str
    error: ModelError | None = None
    """The model error, for ``MODEL_FAILED``."""
    budget: BudgetExceeded | None = None
    """The budget that ran out, for ``BUDGET_EXHAUSTED``."""

    def __str__(self) -> str:
        """One line for logs and JSONL: ``kind: message``, or for a model failure
        ``model_failed: error kind (HTTP status): message``."""
        if self.error is not None and self.message == self.error.message:
            return f"{self.kind.value}: {self.error}"
        text = f"{self.kind.value}: {_one_line(self.message)}"
        return text if self.error is None else f"{text} ({self.error})"


@attrs.frozen
class Finish:
    """The run succeeded with ``output`` (an instance of the output type, or text)."""

    output: Any
    transcript: tuple[Message, ...]
    usage: Usage


@attrs.frozen
class Abort:
    """The run ended without an output, for ``reason``."""

    reason: AbortReason
    transcript: tuple[Message, ...]
    usage: Usage


Effect = CallModel | CallTool | Finish | Abort
"""Everything ``AgentLoop.start`` and ``AgentLoop.handle`` emit."""
