"""The agent loop: one run of one agent, as a sans-IO state machine.

Theory of operation
-------------------
An :class:`AgentLoop` holds the state of one agent run and nothing else: no clock, no
sockets, no tasks. The code that owns it (the trio driver, a plain ``for`` loop, a workflow
engine) feeds it *events* (facts: the model answered, a tool returned) and performs the
*effects* it returns (commands: call the model, call a tool, finish). Every decision lives
here, so every decision can be tested without I/O.

A run is a sequence of *model requests*. Request ``n`` (0-based, the ``turn`` of its hints)
has the id ``request_id(run_id, n)`` (the id formulas live in :mod:`agentcore._core.config`)
and is answered by exactly one ``ModelResponded`` or ``ModelFailed`` carrying that id. A reply
either

- asks for tools (a *tool turn*): one ``CallTool`` per valid call, all emitted at once (the
  driver runs them in parallel). Invalid calls (unknown tool, arguments that are not a JSON
  object, arguments the tool's validator rejects) get an error ``ToolMessage`` at once and no
  ``CallTool``. Results may arrive in any order; they are kept in the model's order and
  appended to the transcript when the last one arrives, and only then is the next request
  emitted. A turn whose calls were all invalid goes straight to the next request;
- or gives the final answer: text (``output is None``) or JSON that must structure into
  ``config.output``. An unusable answer earns a *repair turn* (a user message quoting the
  problem) while ``max_output_retries`` allows, then ``Abort(OUTPUT_INVALID)``.

Finish reasons are data too. A final answer cut by the token limit (``finish_reason ==
"length"``) is never a success, even when its text happens to parse: ``config.on_truncated``
chooses between a repair turn asking for a shorter answer (``"repair"``, the default), a turn
asking the model to go on where it stopped, whose text is joined to the cut one
(``"continue"``), and ending the run at once (``"fail"``). Repair and continue turns count
toward ``max_output_retries``; when it is spent the run ends with ``Abort(TRUNCATED)``. A reply
without tool calls to a request whose ``tool_choice`` is ``"required"`` is not a final answer
either: it counts as an invalid tool call (toward
``max_tool_errors``, ``Abort(TOOL_CALL_MISSING)`` past it) and earns a user message asking for
the call. Both are counted in :class:`LoopStatistics`.

A tool call whose arguments are not a JSON object is answered with an error that quotes the
raw text, and the assistant message kept in the transcript carries ``{}`` as that call's
arguments: servers render the history through a chat template that parses the arguments
(llama-server answers 500 to a history holding invalid arguments), so the transcript must hold
only JSON objects while the model still sees what it sent.

After ``max_turns`` tool turns, the next request is the *final* one: no tools, a user message
with ``final_instruction``, ``hints.final`` set. So is the request after a turn one of whose
calls was refused by its batch's spent tool-call budget (a ``ToolFailed`` carrying the
``budget``): the model is told the call was not run and no more can be, and is asked for its
answer; a refused call counts neither as a tool failure nor as a call started. A final reply
that still asks for tools ends the run with ``Abort(MAX_TURNS)``. Repair turns do not count
as tool turns, so every run makes at most ``max_turns + 1 + max_output_retries +
max_tool_errors`` model requests (the last term for replies that lacked a required tool call).

Planning (``config.planning_interval`` = N): before the first request, and after every N-th
tool turn (unless the next request is the final one), the loop first asks for a *plan*: it
appends ``planning_instruction`` as a user message and sends a request that keeps the tool
list but sets ``tool_choice="none"`` (as the final request does, so the tools stay in the
shared prefix). The reply's text enters the transcript as an assistant message (tool calls in
it are dropped: they were not offered), followed by ``planning_followup`` as a user message,
and the next request is an ordinary one. Plans are model requests (they have request ids,
count toward usage and ``model_calls``) but not tool turns; ``LoopStatistics.plans`` counts
them, and a snapshot taken while a plan is outstanding restores to the same request.

Budgets: every invalid tool call counts toward ``max_tool_errors``; the call that exceeds it
ends the run with ``Abort(TOOL_ERRORS)`` (no ``CallTool`` of that reply is emitted). A tool
that *ran* and failed (``ToolFailed``) is reported to the model as an error result but does
not count there: it is the tool's fault, not the model's. Such failures are counted apart, by
tool and error type (:class:`~agentcore._core.results.ToolFailures`, kept in the snapshot and
handed to the run's ``Result``); with ``config.max_tool_failures`` = N the failure that
exceeds N ends the run at once with ``Abort(TOOL_FAILURES)`` (calls of the turn still
outstanding are dropped, the results that arrived are in the transcript).

Usage budgets (``config.limits``, see :mod:`agentcore._core.budgets`): before each model
request (the first one included) the loop checks the run's requests and tokens so far, and
before a tool turn starts it checks that the turn's valid calls fit the tool-call limit; a
budget without room ends the run with ``Abort(BUDGET_EXHAUSTED)`` whose reason names it.

Legality: :data:`TRANSITIONS` lists every (state, event type) pair the loop accepts and the
states it may move to. A pair missing from the table, a reply to a request that is not the
current one, a result for a call that is not outstanding, or a second result for a call is
illegal: ``handle`` raises :class:`~agentcore.core.LocalProtocolError` and the loop moves to
``ERROR`` for good (every later call raises too), like h11. After ``Finish`` or ``Abort``
every event is illegal: a driver that cancels a run must drop late tool results itself.
Any other exception out of ``handle`` is a bug.

Structured output is announced twice: the loop appends a fixed instruction with the JSON
schema to the first system message (or inserts a system message) before the first request,
so the bytes of the shared prefix are identical across runs with the same config (runs of one
config with the same system prompt share that message object: the config builds it once); and
``CallModel.output`` carries the ``OutputSpec`` on every request of the run. Whether it goes on
the wire (``response_format``) is the codec's choice: where the server's guided decoding would
constrain the whole reply and so forbid tool calls (vLLM, SGLang), the codec sends it only on
requests that offer no tools or use ``tool_choice="none"``. With ``config.announce_output``
off the instruction is left out (the batch layer does so where every request that can end the
run carries the schema for the server to enforce).

Ids are data: call ids the model left empty or repeated within a reply are replaced by
``call_{turn}_{index}`` (the assistant message in the transcript is rewritten to match), and
``CallTool.idempotency_key`` is ``idempotency_key(run_id, turn, index)``, so a run restored from a
snapshot asks for the same keys again.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final, NoReturn

import attrs

from .budgets import BudgetExceeded, UsageLimits, UsageTally, exhausted, tool_calls_exceed
from .config import LoopConfig, fallback_call_id, idempotency_key, request_id
from .errors import ConfigError, InternalError, LocalProtocolError
from .events import (
    Abort,
    AbortKind,
    AbortReason,
    CallModel,
    CallTool,
    CancelRequested,
    Effect,
    Event,
    Finish,
    ModelError,
    ModelFailed,
    ModelResponded,
    ToolFailed,
    ToolReturned,
)
from .messages import (
    AgentHints,
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from .results import NO_TOOL_FAILURES, ToolFailures
from .schema import ValidationFailed, loads_json, parse_json_text, structure
from .validators import nonempty_str, optional_nonempty_str

__all__ = [
    "START",
    "TRANSITIONS",
    "AgentLoop",
    "LoopSnapshot",
    "LoopStatistics",
    "RunState",
]

_NO_RESULTS: Final[list[ToolMessage | None]] = []
"""The tool results of a loop outside a tool turn. Never mutated: a tool turn replaces it with
a list of its own (so a loop waiting for the model holds no list for them)."""

_NO_PENDING: Final[dict[str, int]] = {}
"""The outstanding tool calls of a loop outside a tool turn. Never mutated (only looked up, or
popped from with a default): a tool turn replaces it with a dict of its own, so a loop waiting
for the model, or queued for its first request, holds no dict for them."""


class RunState(enum.Enum):
    """Where an :class:`AgentLoop` is in its run."""

    IDLE = "idle"  #: created, ``start()`` not called yet
    AWAITING_MODEL = "awaiting_model"  #: one ``CallModel`` is outstanding
    AWAITING_TOOLS = "awaiting_tools"  #: one or more ``CallTool`` are outstanding
    FINISHED = "finished"  #: ``Finish`` was emitted; terminal
    ABORTED = "aborted"  #: ``Abort`` was emitted; terminal
    ERROR = "error"  #: an illegal event arrived; terminal and sticky

    # Members are singletons: identity hashing is correct and much cheaper than Enum's
    # name-based ``__hash__`` on the loop's hot path (table lookups).
    __hash__ = object.__hash__


START: Final = "start"
"""The pseudo-event of ``AgentLoop.start()`` in :data:`TRANSITIONS`."""

_IDLE = RunState.IDLE
_AWAITING_MODEL = RunState.AWAITING_MODEL
_AWAITING_TOOLS = RunState.AWAITING_TOOLS
_FINISHED = RunState.FINISHED
_ABORTED = RunState.ABORTED
_ERROR = RunState.ERROR

TRANSITIONS: Final[Mapping[tuple[RunState, type[Any] | str], frozenset[RunState]]] = {
    (_IDLE, START): frozenset({_AWAITING_MODEL, _ABORTED}),
    (_AWAITING_MODEL, ModelResponded): frozenset(
        {_AWAITING_MODEL, _AWAITING_TOOLS, _FINISHED, _ABORTED}
    ),
    (_AWAITING_MODEL, ModelFailed): frozenset({_ABORTED}),
    (_AWAITING_MODEL, CancelRequested): frozenset({_ABORTED}),
    (_AWAITING_TOOLS, ToolReturned): frozenset({_AWAITING_TOOLS, _AWAITING_MODEL, _ABORTED}),
    (_AWAITING_TOOLS, ToolFailed): frozenset({_AWAITING_TOOLS, _AWAITING_MODEL, _ABORTED}),
    (_AWAITING_TOOLS, CancelRequested): frozenset({_ABORTED}),
}
"""Every legal (state, input) pair and the states the loop may move to.

The input is an event type, or :data:`START` for ``AgentLoop.start()``. A pair that is not a
key is illegal; ``ERROR`` is entered on any illegal input and never left.
"""


_RUN_ID = attrs.fields(LoopConfig).run_id
_PARENT_SESSION_ID = attrs.fields(LoopConfig).parent_session_id

# ----------------------------------------------------------------------------- snapshot


@attrs.frozen(kw_only=True)
class LoopSnapshot:
    """The complete state of an :class:`AgentLoop` as plain data.

    Round-trips through ``agentcore.core.dumps``/``agentcore.core.loads``. Restore it with the same
    :class:`LoopConfig` through :meth:`AgentLoop.restore`.
    """

    run_id: str
    state: RunState
    transcript: tuple[Message, ...]
    """Messages so far; while tools are outstanding, the last one is the assistant message
    that asked for them (its results are in ``results``)."""
    model_calls: int
    """Model requests emitted so far."""
    tool_turns: int
    tool_errors: int
    output_retries: int
    final: bool
    """Whether the forced final request has been emitted or, while tools are outstanding,
    is the next request (a call of the turn was refused by a spent batch budget)."""
    usage: Usage
    results: tuple[ToolMessage | None, ...] = ()
    """Per call of the current tool turn (model order): its result, or ``None`` while it is
    outstanding. Empty unless the state is ``AWAITING_TOOLS``."""
    tool_calls: int = 0
    """Tool calls started so far (what ``UsageLimits.tool_calls`` bounds)."""
    planning: bool = False
    """Whether the outstanding model request asks for a plan."""
    plans: int = 0
    """Planning requests emitted so far."""
    partial: str = ""
    """Text of final answers cut by the token limit, awaiting a ``continue`` turn."""
    truncated_replies: int = 0
    missing_tool_calls: int = 0
    tool_failures: ToolFailures = NO_TOOL_FAILURES
    """Tool calls that failed so far (``ToolFailed``), by tool and error type."""


@attrs.frozen
class LoopStatistics:
    """Counters of one run so far."""

    state: RunState
    model_calls: int
    tool_turns: int
    tool_errors: int
    output_retries: int
    outstanding_tools: int
    usage: Usage
    tool_calls: int = 0
    """Tool calls started so far."""
    plans: int = 0
    """Planning requests made (they are also in ``model_calls``)."""
    truncated_replies: int = 0
    """Replies cut by the token limit (``finish_reason == "length"``), tool turns included."""
    missing_tool_calls: int = 0
    """Replies without the tool call that ``tool_choice`` required."""
    tool_failures: int = 0
    """Tool calls answered ``ToolFailed`` so far (what ``max_tool_failures`` bounds)."""


# ----------------------------------------------------------------------------- the loop


def _parse_arguments(text: str) -> Any:
    text = text.strip()
    if not text:
        return {}
    return loads_json(text)


_QUOTE_LIMIT = 2000


def _quoted(text: str) -> str:
    """The model's raw text for an error message: JSON-quoted, cut to a bounded length."""
    if len(text) > _QUOTE_LIMIT:
        text = text[:_QUOTE_LIMIT] + "..."
    return json.dumps(text, ensure_ascii=False)


def _requires_tool(tool_choice: str | None) -> bool:
    """Whether ``tool_choice`` obliges the model to call a tool."""
    return tool_choice == "required"


def _fix_call_ids(calls: tuple[ToolCall, ...], turn: int) -> tuple[ToolCall, ...]:
    """Give every call of one reply a distinct non-empty id, deterministically."""
    ids = [c.id for c in calls]
    if all(ids) and len(set(ids)) == len(ids):
        return calls
    taken = set(ids)
    seen: set[str] = set()
    fixed: list[ToolCall] = []
    for index, call in enumerate(calls):
        if call.id and call.id not in seen:
            seen.add(call.id)
            fixed.append(call)
            continue
        new_id = fallback_call_id(turn, index)
        suffix = 0
        while new_id in taken:
            suffix += 1
            new_id = f"{fallback_call_id(turn, index)}_{suffix}"
        taken.add(new_id)
        seen.add(new_id)
        fixed.append(ToolCall(new_id, call.name, call.arguments))
    return tuple(fixed)


class AgentLoop:
    """One agent run as a sans-IO state machine (see the module docstring).

    Args:
        config: the run's configuration.
        messages: the initial conversation (system prompt, user turn...). When
            ``config.output`` is set, the output instruction is appended to the first system
            message, or inserted as a system message in front.

    Raises:
        ConfigError: ``messages`` holds something that is not a message.
    """

    __slots__ = (
        "_cached_tokens",
        "_calls",
        "_completion_tokens",
        "_config",
        "_final",
        "_missing_tool_calls",
        "_model_calls",
        "_output_retries",
        "_parent_session_id",
        "_partial",
        "_pending",
        "_planning",
        "_plans",
        "_prompt_tokens",
        "_request_id",
        "_results",
        "_run_id",
        "_session_id",
        "_state",
        "_tool_calls",
        "_tool_errors",
        "_tool_failures",
        "_tool_turns",
        "_transcript",
        "_truncated",
    )

    def __init__(self, config: LoopConfig, messages: Sequence[Message]) -> None:
        if not isinstance(config, LoopConfig):
            raise ConfigError(f"config must be a LoopConfig, got {config!r}")
        self._setup(config, messages, config.run_id, config.session_id, config.parent_session_id)

    @classmethod
    def _for_run(
        cls,
        config: LoopConfig,
        messages: Sequence[Message],
        run_id: str,
        parent_session_id: str | None,
    ) -> AgentLoop:
        """A loop for run ``run_id`` (also its session id) on a config shared by many runs.

        Behaves like ``AgentLoop(config._for_run(run_id, parent_session_id), messages)``
        without a config per run: the ids live in the loop, and :attr:`config` builds the
        per-run config only when asked for.

        Raises:
            ConfigError: an invalid id, or ``messages`` holds something that is not a message.
        """
        nonempty_str(None, _RUN_ID, run_id)
        optional_nonempty_str(None, _PARENT_SESSION_ID, parent_session_id)
        loop = cls.__new__(cls)
        loop._setup(config, messages, run_id, run_id, parent_session_id)
        return loop

    def _setup(
        self,
        config: LoopConfig,
        messages: Sequence[Message],
        run_id: str,
        session_id: str,
        parent_session_id: str | None,
    ) -> None:
        transcript: list[Message] = []
        for m in messages:
            if not isinstance(m, SystemMessage | UserMessage | AssistantMessage | ToolMessage):
                raise ConfigError(f"not a message: {m!r}")
            transcript.append(m)
        if config.output_instruction is not None and config.announce_output:
            if transcript and isinstance(transcript[0], SystemMessage):
                transcript[0] = config._system_message(transcript[0].content)
            else:
                transcript.insert(0, config._system_message(None))
        self._config = config
        self._run_id = run_id
        self._session_id = session_id
        self._parent_session_id = parent_session_id
        self._transcript = transcript
        self._state = RunState.IDLE
        self._model_calls = 0
        self._request_id = ""
        self._tool_turns = 0
        self._tool_errors = 0
        self._tool_calls = 0
        self._output_retries = 0
        self._final = False
        self._prompt_tokens = 0
        self._completion_tokens = 0
        self._cached_tokens: int | None = None
        self._calls: tuple[ToolCall, ...] = ()
        self._results: list[ToolMessage | None] = _NO_RESULTS
        self._pending = _NO_PENDING
        self._planning = False
        self._plans = 0
        self._partial = ""
        self._truncated = 0
        self._missing_tool_calls = 0
        self._tool_failures = NO_TOOL_FAILURES

    # ------------------------------------------------------------------ public surface

    @property
    def state(self) -> RunState:
        """The current :class:`RunState`."""
        return self._state

    @property
    def config(self) -> LoopConfig:
        """The run's configuration."""
        config = self._config
        if (
            self._run_id == config.run_id
            and self._session_id == config.session_id
            and self._parent_session_id == config.parent_session_id
        ):
            return config
        return config._for_run(self._run_id, self._parent_session_id)

    @property
    def opening_priority(self) -> int | None:
        """The ``hints.priority`` of the request :meth:`start` is certain to return, or
        ``None`` when it may return something else (the loop has started, or a run budget
        could end it at once). A scheduler can queue a fresh run by this alone and call
        :meth:`start` once the run's turn comes."""
        if self._state is not RunState.IDLE or self._config.limits is not None:
            return None
        return self._config.base_priority

    @property
    def run_id(self) -> str:
        """The run's id (its requests' ids and its calls' idempotency keys derive from it)."""
        return self._run_id

    @property
    def transcript(self) -> tuple[Message, ...]:
        """The messages so far (results of a tool turn in progress are not included)."""
        return tuple(self._transcript)

    @property
    def tool_failures(self) -> ToolFailures:
        """The run's failed tool calls so far, by tool and error type."""
        return self._tool_failures

    @property
    def usage(self) -> Usage:
        """Token usage summed over the replies so far."""
        return Usage(self._prompt_tokens, self._completion_tokens, self._cached_tokens)

    def statistics(self) -> LoopStatistics:
        """Counters of the run so far."""
        return LoopStatistics(
            self._state,
            self._model_calls,
            self._tool_turns,
            self._tool_errors,
            self._output_retries,
            len(self._pending),
            self.usage,
            self._tool_calls,
            self._plans,
            self._truncated,
            self._missing_tool_calls,
            self._tool_failures.total,
        )

    def start(self) -> tuple[Effect, ...]:
        """Begin the run.

        Returns:
            ``(CallModel(...),)``: the first model request.

        Raises:
            LocalProtocolError: the loop was already started (it moves to ``ERROR``).
        """
        if self._state is not RunState.IDLE:
            self._illegal(f"start() called in state {self._state.name}", None)
        self._state = RunState.AWAITING_MODEL
        return self._request(plan=self._config.planning_interval is not None)

    def handle(self, event: Event) -> tuple[Effect, ...]:
        """Feed one event; get the effects to perform.

        Args:
            event: what happened (a reply, a tool result, a cancellation request).

        Returns:
            The effects to perform, possibly none (a tool result that is not the last of its
            turn), in order. After ``Finish`` or ``Abort`` the run is over.

        Raises:
            LocalProtocolError: the event is illegal in the current state; the loop moves to
                ``ERROR`` and every later call raises. Any other exception is a bug.
        """
        state = self._state
        allowed = TRANSITIONS.get((state, type(event)))
        if allowed is None:
            self._illegal(f"can't handle {type(event).__name__} in state {state.name}", event)
        try:
            if type(event) is ModelResponded:
                effects = self._on_model_responded(event)
            elif type(event) is ToolReturned:
                effects = self._on_tool_result(event, event.call_id, event.content, is_error=False)
            elif type(event) is ToolFailed:
                effects = self._on_tool_failed(event)
            elif type(event) is ModelFailed:
                effects = self._on_model_failed(event)
            else:
                assert type(event) is CancelRequested
                effects = self._abort(
                    AbortKind.CANCELLED, event.reason, self._transcript_with_results()
                )
        except BaseException:
            self._state = RunState.ERROR
            raise
        if self._state not in allowed:
            self._state = RunState.ERROR
            raise InternalError(
                f"{type(event).__name__} moved the loop from {state.name} to "
                f"{self._state.name}, which TRANSITIONS does not allow"
            )
        return effects

    def outstanding(self) -> tuple[Effect, ...]:
        """The effects whose answers the loop is still waiting for.

        A driver resuming a restored run performs these again (``CallTool`` keeps its
        ``idempotency_key``, ``CallModel`` its ``request_id``).

        Returns:
            ``(CallModel,)`` while awaiting the model, the outstanding ``CallTool`` effects
            (model order) while awaiting tools, ``()`` otherwise.
        """
        if self._state is RunState.AWAITING_MODEL:
            return (self._build_call_model(self._model_calls - 1),)
        if self._state is RunState.AWAITING_TOOLS:
            turn = self._model_calls - 1
            run_id = self._run_id
            return tuple(
                CallTool(
                    call.id,
                    call.name,
                    _parse_arguments(call.arguments),
                    idempotency_key(run_id, turn, index),
                )
                for index, call in enumerate(self._calls)
                if call.id in self._pending
            )
        return ()

    def snapshot(self) -> LoopSnapshot:
        """The loop's complete state as plain data (see :class:`LoopSnapshot`)."""
        return LoopSnapshot(
            run_id=self._run_id,
            state=self._state,
            transcript=tuple(self._transcript),
            model_calls=self._model_calls,
            tool_turns=self._tool_turns,
            tool_errors=self._tool_errors,
            output_retries=self._output_retries,
            final=self._final,
            usage=self.usage,
            results=tuple(self._results) if self._state is RunState.AWAITING_TOOLS else (),
            tool_calls=self._tool_calls,
            planning=self._planning,
            plans=self._plans,
            partial=self._partial,
            truncated_replies=self._truncated,
            missing_tool_calls=self._missing_tool_calls,
            tool_failures=self._tool_failures,
        )

    @classmethod
    def restore(cls, config: LoopConfig, snapshot: LoopSnapshot) -> AgentLoop:
        """Rebuild a loop from :meth:`snapshot` output and the same config.

        The restored loop behaves exactly like the original from the moment the snapshot was
        taken. Effects that were outstanding then are still owed: see :meth:`outstanding`.

        Args:
            config: the config of the original run (same ``run_id``, tools and output).
            snapshot: what :meth:`snapshot` returned (possibly through ``dumps``/``loads``).

        Returns:
            A new loop in the snapshot's state.

        Raises:
            ConfigError: the snapshot belongs to another run or is inconsistent.
        """
        if snapshot.run_id != config.run_id:
            raise ConfigError(
                f"snapshot of run {snapshot.run_id!r} cannot be restored with the config "
                f"of run {config.run_id!r}"
            )
        loop = cls.__new__(cls)
        loop._config = config
        loop._run_id = config.run_id
        loop._session_id = config.session_id
        loop._parent_session_id = config.parent_session_id
        loop._transcript = list(snapshot.transcript)
        loop._state = snapshot.state
        loop._model_calls = snapshot.model_calls
        loop._request_id = (
            request_id(config.run_id, snapshot.model_calls - 1) if snapshot.model_calls else ""
        )
        loop._tool_turns = snapshot.tool_turns
        loop._tool_errors = snapshot.tool_errors
        loop._tool_calls = snapshot.tool_calls
        loop._output_retries = snapshot.output_retries
        loop._final = snapshot.final
        usage = snapshot.usage
        loop._prompt_tokens = usage.prompt_tokens
        loop._completion_tokens = usage.completion_tokens
        loop._cached_tokens = usage.cached_tokens
        loop._calls = ()
        loop._results = _NO_RESULTS
        loop._pending = _NO_PENDING
        loop._planning = snapshot.planning
        loop._plans = snapshot.plans
        if snapshot.planning and snapshot.state in (RunState.IDLE, RunState.AWAITING_TOOLS):
            raise ConfigError("inconsistent snapshot: a plan outside of a model request")
        loop._partial = snapshot.partial
        loop._truncated = snapshot.truncated_replies
        loop._missing_tool_calls = snapshot.missing_tool_calls
        loop._tool_failures = snapshot.tool_failures
        if snapshot.state is RunState.AWAITING_TOOLS:
            last = snapshot.transcript[-1] if snapshot.transcript else None
            if not isinstance(last, AssistantMessage) or len(last.tool_calls) != len(
                snapshot.results
            ):
                raise ConfigError(
                    "inconsistent snapshot: awaiting tools, but the results do not match "
                    "the last assistant message"
                )
            loop._calls = last.tool_calls
            loop._results = list(snapshot.results)
            loop._pending = {
                call.id: index
                for index, (call, result) in enumerate(
                    zip(last.tool_calls, snapshot.results, strict=True)
                )
                if result is None
            }
            if not loop._pending:
                raise ConfigError("inconsistent snapshot: awaiting tools, but none outstanding")
        elif snapshot.results:
            raise ConfigError("inconsistent snapshot: results outside of a tool turn")
        return loop

    # ------------------------------------------------------------------ transitions

    def _illegal(self, message: str, event: Any) -> NoReturn:
        state = self._state
        self._state = RunState.ERROR
        raise LocalProtocolError(message, state=state, event=event)

    def _not_outstanding(self, what: str, event: ModelResponded | ModelFailed) -> NoReturn:
        self._illegal(
            f"{what} request {event.request_id!r}, but the outstanding request is "
            f"{self._request_id!r}",
            event,
        )

    def _build_call_model(self, turn: int) -> CallModel:
        config = self._config
        final = self._final or self._planning
        # The final request keeps the tool list (with ``tool_choice="none"``): chat templates
        # render tools near the start of the prompt, so dropping them would change the shared
        # prefix and miss the prefix cache, and some APIs reject a history with tool calls
        # but no tool definitions. The output spec travels on every request; the codec
        # decides whether a request with tools carries it on the wire.
        return CallModel(
            request_id(self._run_id, turn),
            tuple(self._transcript),
            config.tools,
            config._final_params if final else config.params,
            AgentHints(
                self._session_id,
                self._parent_session_id,
                turn,
                config.base_priority + config.priority_step * turn,
                config.expected_output_tokens,
                self._final,
            ),
            None if self._planning else config.output_spec,
        )

    def _request(self, *, plan: bool = False) -> tuple[Effect, ...]:
        """The next model request (a planning one if ``plan``), or the abort of a run whose
        budget has no room for it."""
        limits = self._config.limits
        if limits is not None:
            exceeded = exhausted(
                limits,
                UsageTally(
                    self._model_calls,
                    self._prompt_tokens,
                    self._completion_tokens,
                    self._tool_calls,
                ),
                "run",
            )
            if exceeded is not None:
                return self._over_budget(exceeded, tuple(self._transcript))
        return (self._plan() if plan else self._call_model(),)

    def _over_budget(
        self, exceeded: BudgetExceeded, transcript: tuple[Message, ...]
    ) -> tuple[Effect, ...]:
        return self._abort(
            AbortKind.BUDGET_EXHAUSTED, exceeded.describe(), transcript, budget=exceeded
        )

    def _call_model(self) -> CallModel:
        turn = self._model_calls
        call = self._build_call_model(turn)
        self._model_calls = turn + 1
        self._request_id = call.request_id
        self._state = RunState.AWAITING_MODEL
        return call

    def _on_model_responded(self, event: ModelResponded) -> tuple[Effect, ...]:
        if event.request_id != self._request_id:
            self._not_outstanding("reply to", event)
        usage = event.usage
        self._prompt_tokens += usage.prompt_tokens
        self._completion_tokens += usage.completion_tokens
        if usage.cached_tokens is not None:  # unknown stays distinct from zero (Usage.__add__)
            self._cached_tokens = (self._cached_tokens or 0) + usage.cached_tokens
        message = event.message
        truncated = event.finish_reason == "length"
        if truncated:
            self._truncated += 1
        if self._planning:
            return self._on_plan(message)
        if message.tool_calls:
            if self._final:
                self._transcript.append(message)
                return self._abort(
                    AbortKind.MAX_TURNS,
                    f"the model still called tools after {self._tool_turns} tool turns "
                    "and the final instruction",
                    tuple(self._transcript),
                )
            return self._start_tool_turn(message)
        config = self._config
        if not self._final and config.tools and _requires_tool(config.params.tool_choice):
            return self._missing_tool_call(message)
        return self._final_answer(message, truncated=truncated)

    def _start_tool_turn(self, message: AssistantMessage) -> tuple[Effect, ...]:
        config = self._config
        turn = self._model_calls - 1
        calls = _fix_call_ids(message.tool_calls, turn)
        kept = list(calls)  # the calls as the transcript keeps them
        self._tool_turns += 1
        tools = config._tools_by_name
        results: list[ToolMessage | None] = [None] * len(calls)
        pending: dict[str, int] = {}
        effects: list[Effect] = []
        errors = 0
        for index, call in enumerate(calls):
            problem: str | None = None
            arguments: Any = None
            spec = tools.get(call.name)
            if spec is None:
                problem = self._unknown_tool(call.name)
            else:
                try:
                    arguments = _parse_arguments(call.arguments)
                except ValueError as exc:
                    problem = (
                        f"Error: the arguments of tool {call.name!r} are not valid JSON "
                        f"({exc}). You sent: {_quoted(call.arguments)}. Send the arguments "
                        "as one JSON object."
                    )
                    kept[index] = ToolCall(call.id, call.name, "{}")
                else:
                    if type(arguments) is not dict:
                        problem = (
                            f"Error: the arguments of tool {call.name!r} must be a JSON object. "
                            f"You sent: {_quoted(call.arguments)}."
                        )
                        kept[index] = ToolCall(call.id, call.name, "{}")
                    else:
                        try:
                            spec.validator(arguments)
                        except Exception as exc:  # model data: any validator error is reported
                            detail = (
                                exc.message
                                if isinstance(exc, ValidationFailed)
                                else (str(exc) or type(exc).__name__)
                            )
                            problem = f"Error: invalid arguments for tool {call.name!r}: {detail}"
            if problem is not None:
                results[index] = ToolMessage(call.id, call.name, problem, True)
                errors += 1
            else:
                pending[call.id] = index
                effects.append(
                    CallTool(
                        call.id, call.name, arguments, idempotency_key(self._run_id, turn, index)
                    )
                )
        if kept != list(message.tool_calls):
            message = AssistantMessage(message.content, tuple(kept))
            calls = message.tool_calls
        self._transcript.append(message)
        if errors:
            self._tool_errors += errors
            if self._tool_errors > config.max_tool_errors:
                partial = [*self._transcript, *(r for r in results if r is not None)]
                return self._abort(
                    AbortKind.TOOL_ERRORS,
                    f"{self._tool_errors} invalid tool calls, more than max_tool_errors="
                    f"{config.max_tool_errors}",
                    tuple(partial),
                )
        limits: UsageLimits | None = config.limits
        if limits is not None and (
            exceeded := tool_calls_exceed(limits, self._tool_calls, len(effects), "run")
        ):
            partial = [*self._transcript, *(r for r in results if r is not None)]
            return self._over_budget(exceeded, tuple(partial))
        self._tool_calls += len(effects)
        if not pending:
            self._transcript.extend(results)  # type: ignore[arg-type]  # all set
            return self._next_after_tools()
        self._calls = calls
        self._results = results
        self._pending = pending
        self._state = RunState.AWAITING_TOOLS
        return tuple(effects)

    def _unknown_tool(self, name: str) -> str:
        names = ", ".join(self._config._tools_by_name) or "(none)"
        return f"Error: there is no tool named {name!r}. Valid tool names: {names}."

    def _on_tool_result(
        self, event: Event, call_id: str, content: str, *, is_error: bool
    ) -> tuple[Effect, ...]:
        index = self._pending.pop(call_id, None)
        if index is None:
            self._illegal(f"result for call {call_id!r}, which is not outstanding", event)
        self._results[index] = ToolMessage(call_id, self._calls[index].name, content, is_error)
        if self._pending:
            return ()
        self._transcript.extend(self._results)  # type: ignore[arg-type]  # all set
        self._calls = ()
        self._results = _NO_RESULTS
        self._pending = _NO_PENDING
        return self._next_after_tools()

    def _on_tool_failed(self, event: ToolFailed) -> tuple[Effect, ...]:
        error = event.error
        if event.budget is not None:
            return self._on_tool_refused(event, event.budget)
        content = f"Error: the tool failed ({error.type}): {error.message}"
        index = self._pending.get(event.call_id)
        if index is not None:  # else ``_on_tool_result`` reports the illegal event
            failures = self._tool_failures = self._tool_failures.added(
                self._calls[index].name, error
            )
            limit = self._config.max_tool_failures
            if limit is not None and failures.total > limit:
                del self._pending[event.call_id]
                self._results[index] = ToolMessage(
                    event.call_id, self._calls[index].name, content, True
                )
                return self._abort(
                    AbortKind.TOOL_FAILURES,
                    f"{failures.total} tool calls failed, more than max_tool_failures={limit}: "
                    f"{failures.describe()}",
                    self._transcript_with_results(),
                )
        return self._on_tool_result(event, event.call_id, content, is_error=True)

    def _on_tool_refused(self, event: ToolFailed, exceeded: BudgetExceeded) -> tuple[Effect, ...]:
        # Not run, so neither a tool failure nor a call started; the tools are spent, so the
        # request after this turn is the final one.
        if event.call_id in self._pending:  # else ``_on_tool_result`` reports the illegal event
            self._tool_calls -= 1
            self._final = True
        content = (
            f"Error: this call was not run: {exceeded.describe()}. No more tools can be "
            "called; give your final answer with what you have."
        )
        return self._on_tool_result(event, event.call_id, content, is_error=True)

    def _next_after_tools(self) -> tuple[Effect, ...]:
        config = self._config
        # ``_final`` is already set when a call of this turn was refused by a spent batch
        # budget (no tool turn follows a final request otherwise).
        if self._final or self._tool_turns >= config.max_turns:
            self._final = True
            if config.final_instruction is not None:
                self._transcript.append(UserMessage(config.final_instruction))
            return self._request()
        planning = config.planning_interval
        return self._request(plan=planning is not None and self._tool_turns % planning == 0)

    def _plan(self) -> CallModel:
        self._transcript.append(UserMessage(self._config.planning_instruction))
        self._planning = True
        self._plans += 1
        return self._call_model()

    def _on_plan(self, message: AssistantMessage) -> tuple[Effect, ...]:
        # Tools were not offered (tool_choice="none"): calls in a plan are dropped rather
        # than run, and an empty plan is kept as such so the turns still alternate.
        self._planning = False
        self._transcript.append(AssistantMessage(message.content or "(no plan)"))
        self._transcript.append(UserMessage(self._config.planning_followup))
        return self._request()

    def _missing_tool_call(self, message: AssistantMessage) -> tuple[Effect, ...]:
        config = self._config
        self._transcript.append(message)
        self._missing_tool_calls += 1
        self._tool_errors += 1
        if self._tool_errors > config.max_tool_errors:
            return self._abort(
                AbortKind.TOOL_CALL_MISSING,
                f"the reply had no tool call although tool_choice="
                f"{config.params.tool_choice!r} required one ({self._tool_errors} invalid tool "
                f"calls, more than max_tool_errors={config.max_tool_errors})",
                tuple(self._transcript),
            )
        names = ", ".join(config._tools_by_name) or "(none)"
        self._transcript.append(
            UserMessage(f"A tool call is required here. Call one of the tools: {names}.")
        )
        return self._request()

    def _final_answer(self, message: AssistantMessage, *, truncated: bool) -> tuple[Effect, ...]:
        self._transcript.append(message)
        config = self._config
        text = self._partial + (message.content or "")
        if truncated:
            return self._truncated_answer(text)
        self._partial = ""
        if config.output is None:
            if text.strip():
                return self._finish(text)
            problem = "the answer was empty"
            repair = "Your answer was empty. Reply with your final answer."
        else:
            try:
                output = structure(parse_json_text(text), config.output)
            except ValidationFailed as exc:
                problem = exc.message
                repair = (
                    f"Your answer could not be used: {problem}. Reply with only the "
                    "corrected JSON value"
                    + (
                        ", conforming to the JSON schema given in the instructions."
                        if config.announce_output
                        else "."
                    )
                )
            else:
                return self._finish(output)
        if self._output_retries >= config.max_output_retries:
            return self._abort(
                AbortKind.OUTPUT_INVALID,
                f"no valid output after {self._output_retries} repair turns: {problem}",
                tuple(self._transcript),
            )
        self._output_retries += 1
        self._transcript.append(UserMessage(repair))
        return self._request()

    def _truncated_answer(self, text: str) -> tuple[Effect, ...]:
        config = self._config
        policy = config.on_truncated
        problem = "the answer was cut by the token limit (finish_reason=length)"
        if policy == "fail" or self._output_retries >= config.max_output_retries:
            spent = "" if policy == "fail" else f" after {self._output_retries} repair turns"
            return self._abort(AbortKind.TRUNCATED, problem + spent, tuple(self._transcript))
        self._output_retries += 1
        if policy == "continue":
            self._partial = text
            ask = (
                "Your answer was cut off by the length limit. Continue it exactly where it "
                "stopped, without repeating anything."
            )
        else:
            self._partial = ""
            ask = (
                "Your answer was cut off by the length limit. Give your complete final answer "
                "again, shorter."
            )
        self._transcript.append(UserMessage(ask))
        return self._request()

    def _on_model_failed(self, event: ModelFailed) -> tuple[Effect, ...]:
        if event.request_id != self._request_id:
            self._not_outstanding("failure of", event)
        error = event.error
        return self._abort(
            AbortKind.MODEL_FAILED, error.message, tuple(self._transcript), error=error
        )

    def _transcript_with_results(self) -> tuple[Message, ...]:
        arrived = [r for r in self._results if r is not None]
        return (*self._transcript, *arrived)

    def _abort(
        self,
        kind: AbortKind,
        message: str,
        transcript: tuple[Message, ...],
        *,
        error: ModelError | None = None,
        budget: BudgetExceeded | None = None,
    ) -> tuple[Effect, ...]:
        self._state = RunState.ABORTED
        self._planning = False
        self._pending = _NO_PENDING
        self._calls = ()
        self._results = _NO_RESULTS
        return (Abort(AbortReason(kind, message, error, budget), transcript, self.usage),)

    def _finish(self, output: Any) -> tuple[Effect, ...]:
        self._state = RunState.FINISHED
        return (Finish(output, tuple(self._transcript), self.usage),)
