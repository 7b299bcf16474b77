"""The agent loop: one run of one agent, as a sans-IO state machine.

Theory of operation
-------------------
An :class:`AgentLoop` holds the state of one agent run and nothing else: no clock, no
sockets, no tasks. The code that owns it (the trio driver, a plain ``for`` loop, a workflow
engine) feeds it *events* (facts: the model answered, a tool returned) and performs the
*effects* it returns (commands: call the model, call a tool, finish). Every decision lives
here, so every decision can be tested without I/O.

A run is a sequence of *model requests*. Request ``n`` (0-based, the ``turn`` of its hints)
has the id ``f"{run_id}/{n}"`` and is answered by exactly one ``ModelResponded`` or
``ModelFailed`` carrying that id. A reply either

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
with ``final_instruction``, ``hints.final`` set. A final reply that still asks for tools ends
the run with ``Abort(MAX_TURNS)``. Repair turns do not count as tool turns, so every run makes
at most ``max_turns + 1 + max_output_retries + max_tool_errors`` model requests (the last term
for replies that lacked a required tool call).

Budgets: every invalid tool call counts toward ``max_tool_errors``; the call that exceeds it
ends the run with ``Abort(TOOL_ERRORS)`` (no ``CallTool`` of that reply is emitted). A tool
that *ran* and failed (``ToolFailed``) is reported to the model as an error result but does
not count: it is the tool's fault, not the model's.

Legality: :data:`TRANSITIONS` lists every (state, event type) pair the loop accepts and the
states it may move to. A pair missing from the table, a reply to a request that is not the
current one, a result for a call that is not outstanding, or a second result for a call is
illegal: ``handle`` raises :class:`~agentcore.LocalProtocolError` and the loop moves to
``ERROR`` for good (every later call raises too), like h11. After ``Finish`` or ``Abort``
every event is illegal: a driver that cancels a run must drop late tool results itself.
Any other exception out of ``handle`` is a bug.

Structured output is announced twice: the loop appends a fixed instruction with the JSON
schema to the first system message (or inserts a system message) before the first request,
so the bytes of the shared prefix are identical across runs with the same config; and
``CallModel.output`` carries the ``OutputSpec`` on requests that offer no tools, where a codec
may map it to ``response_format`` without preventing tool calls.

Ids are data: call ids the model left empty or repeated within a reply are replaced by
``call_{turn}_{index}`` (the assistant message in the transcript is rewritten to match), and
``CallTool.idempotency_key`` is ``f"{run_id}/{turn}/{index}"``, so a run restored from a
snapshot asks for the same keys again.
"""

from __future__ import annotations

import enum
import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal, NoReturn

import attrs

from ._errors import ConfigError, InternalError, LocalProtocolError
from ._events import (
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
from ._messages import (
    AgentHints,
    AssistantMessage,
    Message,
    ModelParams,
    OutputSpec,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from ._schema import ValidationFailed, json_schema, loads_json, parse_json_text, structure

__all__ = [
    "START",
    "TRANSITIONS",
    "AgentLoop",
    "LoopConfig",
    "LoopSnapshot",
    "LoopStatistics",
    "RunState",
]


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
    (_IDLE, START): frozenset({_AWAITING_MODEL}),
    (_AWAITING_MODEL, ModelResponded): frozenset(
        {_AWAITING_MODEL, _AWAITING_TOOLS, _FINISHED, _ABORTED}
    ),
    (_AWAITING_MODEL, ModelFailed): frozenset({_ABORTED}),
    (_AWAITING_MODEL, CancelRequested): frozenset({_ABORTED}),
    (_AWAITING_TOOLS, ToolReturned): frozenset({_AWAITING_TOOLS, _AWAITING_MODEL}),
    (_AWAITING_TOOLS, ToolFailed): frozenset({_AWAITING_TOOLS, _AWAITING_MODEL}),
    (_AWAITING_TOOLS, CancelRequested): frozenset({_ABORTED}),
}
"""Every legal (state, input) pair and the states the loop may move to.

The input is an event type, or :data:`START` for ``AgentLoop.start()``. A pair that is not a
key is illegal; ``ERROR`` is entered on any illegal input and never left.
"""


# ----------------------------------------------------------------------------- config

DEFAULT_FINAL_INSTRUCTION: Final = (
    "You have used all your tool turns. Do not call any tools. "
    "Give your final answer now, based on what you already know."
)

_OUTPUT_INSTRUCTION = (
    "When you give your final answer (a reply without tool calls), reply with a single JSON "
    "value and nothing else (a ```json fenced block is also accepted). It must conform to "
    "this JSON schema:\n"
)


def _int_at_least(minimum: int) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if type(value) is not int or value < minimum:
            raise ConfigError(
                f"LoopConfig.{attribute.name} must be an int >= {minimum}, got {value!r}"
            )

    return check


def _check_int(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not int:
        raise ConfigError(f"LoopConfig.{attribute.name} must be an int, got {value!r}")


def _check_nonempty_str(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not str or not value:
        raise ConfigError(f"LoopConfig.{attribute.name} must be a non-empty str, got {value!r}")


def _check_optional_str(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (type(value) is not str or not value):
        raise ConfigError(
            f"LoopConfig.{attribute.name} must be None or a non-empty str, got {value!r}"
        )


def _check_optional_positive(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (type(value) is not int or value < 1):
        raise ConfigError(f"LoopConfig.{attribute.name} must be None or an int >= 1")


def _check_params(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, ModelParams):
        raise ConfigError(f"LoopConfig.params must be a ModelParams, got {value!r}")


def _to_tools(value: Any) -> tuple[ToolSpec, ...]:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise ConfigError(f"LoopConfig.tools must be a sequence of ToolSpec, got {value!r}")
    return tuple(value)


def _check_tools(_: Any, attribute: attrs.Attribute[Any], value: tuple[Any, ...]) -> None:
    seen: set[str] = set()
    for tool in value:
        if not isinstance(tool, ToolSpec):
            raise ConfigError(f"LoopConfig.tools must hold ToolSpec values, got {tool!r}")
        if not tool.name:
            raise ConfigError("a tool name must not be empty")
        if tool.name in seen:
            raise ConfigError(f"two tools are named {tool.name!r}")
        seen.add(tool.name)


TruncatedPolicy = Literal["repair", "continue", "fail"]
_TRUNCATED_POLICIES = ("repair", "continue", "fail")


def _check_truncated(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in _TRUNCATED_POLICIES:
        raise ConfigError(
            f"LoopConfig.on_truncated must be one of {list(_TRUNCATED_POLICIES)}, got {value!r}"
        )


_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def _output_name(output: Any) -> str:
    name = output.__name__ if isinstance(output, type) else "output"
    return _NAME_UNSAFE.sub("_", name)[:64] or "output"


@functools.lru_cache(maxsize=256)
def _output_parts(output: Any) -> tuple[OutputSpec, str]:
    """The output spec and the system-prompt instruction for an output type.

    Cached: every job of a batch builds its own config for the same output type, and deriving
    the schema costs far more than the rest of a config.
    """
    schema = json_schema(output)
    instruction = _OUTPUT_INSTRUCTION + json.dumps(
        schema, ensure_ascii=False, separators=(",", ":")
    )
    return OutputSpec(_output_name(output), schema), instruction


@attrs.frozen(kw_only=True)
class LoopConfig:
    """Everything that stays fixed during a run: tools, output type, budgets, hints.

    A config is code, not data (tools carry validators, ``output`` is a class), so it is not
    part of a :class:`LoopSnapshot`: pass the same config again to :meth:`AgentLoop.restore`.

    Raises:
        ConfigError: on any invalid value (checked at construction).
    """

    run_id: str = attrs.field(validator=_check_nonempty_str)
    """Unique id of the run; request ids and idempotency keys derive from it."""
    tools: tuple[ToolSpec, ...] = attrs.field(
        default=(), converter=_to_tools, validator=_check_tools
    )
    """The tools offered to the model, in this order (keep it stable for prefix caching)."""
    output: Any = None
    """The type the final answer must structure into (an attrs class or any type
    :func:`agentcore._schema.json_schema` supports); ``None`` for a text answer."""
    session_id: str = attrs.field(
        default=attrs.Factory(lambda self: self.run_id, takes_self=True),
        validator=_check_nonempty_str,
    )
    """Session id for serving hints; defaults to ``run_id``."""
    parent_session_id: str | None = attrs.field(default=None, validator=_check_optional_str)
    """Session id of the agent that spawned this one, if any."""
    max_turns: int = attrs.field(default=10, validator=_int_at_least(1))
    """Tool turns allowed before the forced final request. Ten covers typical
    search-read-answer agents while bounding a model that loops on tools."""
    max_tool_errors: int = attrs.field(default=3, validator=_int_at_least(0))
    """Invalid tool calls tolerated per run; one more aborts. A model that gets three
    explained errors in a row rarely recovers on the fourth."""
    max_output_retries: int = attrs.field(default=2, validator=_int_at_least(0))
    """Repair turns allowed for an unusable final answer."""
    params: ModelParams = attrs.field(default=ModelParams(), validator=_check_params)
    """Sampling parameters of every request (the final one also gets ``tool_choice="none"``)."""
    base_priority: int = attrs.field(default=0, validator=_check_int)
    """Priority hint of the first request."""
    priority_step: int = attrs.field(default=1, validator=_check_int)
    """Added to the priority per request, so runs near completion are served first and free
    their KV cache sooner."""
    expected_output_tokens: int | None = attrs.field(
        default=None, validator=_check_optional_positive
    )
    """Expected reply length, passed on as a hint."""
    final_instruction: str = attrs.field(
        default=DEFAULT_FINAL_INSTRUCTION, validator=_check_nonempty_str
    )
    """The user message of the forced final request."""
    on_truncated: TruncatedPolicy = attrs.field(default="repair", validator=_check_truncated)
    """What a final answer cut by the token limit earns: ``"repair"`` (ask for a shorter
    answer), ``"continue"`` (ask the model to go on; the pieces are joined) or ``"fail"``
    (``Abort(TRUNCATED)`` at once). Repair and continue turns use ``max_output_retries``."""

    output_spec: OutputSpec | None = attrs.field(init=False, eq=False, repr=False)
    """Derived from ``output``: its name and JSON schema (``None`` for text output)."""
    output_instruction: str | None = attrs.field(init=False, eq=False, repr=False)
    """Derived from ``output``: the system-prompt text announcing the schema."""
    _tools_by_name: Mapping[str, ToolSpec] = attrs.field(init=False, eq=False, repr=False)
    _final_params: ModelParams = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        spec: OutputSpec | None = None
        instruction: str | None = None
        if self.output is not None:
            try:
                spec, instruction = _output_parts(self.output)
            except TypeError:  # an unhashable output type: derive it uncached
                spec, instruction = _output_parts.__wrapped__(self.output)
        object.__setattr__(self, "output_spec", spec)
        object.__setattr__(self, "output_instruction", instruction)
        object.__setattr__(self, "_tools_by_name", {t.name: t for t in self.tools})
        object.__setattr__(self, "_final_params", attrs.evolve(self.params, tool_choice="none"))

    def _for_run(self, run_id: str, parent_session_id: str | None) -> LoopConfig:
        """This config for another run: ``run_id`` (also the session id) and the parent
        session id replaced, everything else shared.

        Equal to ``attrs.evolve(self, run_id=run_id, session_id=run_id,
        parent_session_id=parent_session_id)``, without validating and deriving again what
        ``self`` already validated and derived: a batch builds one config per job.

        Raises:
            ConfigError: an invalid id.
        """
        _check_nonempty_str(None, _RUN_ID, run_id)
        _check_optional_str(None, _PARENT_SESSION_ID, parent_session_id)
        # Spelled out field by field: a loop over the names costs twice as much. The check
        # below the class keeps this list complete.
        config: LoopConfig = object.__new__(LoopConfig)
        put = object.__setattr__
        put(config, "run_id", run_id)
        put(config, "tools", self.tools)
        put(config, "output", self.output)
        put(config, "session_id", run_id)
        put(config, "parent_session_id", parent_session_id)
        put(config, "max_turns", self.max_turns)
        put(config, "max_tool_errors", self.max_tool_errors)
        put(config, "max_output_retries", self.max_output_retries)
        put(config, "params", self.params)
        put(config, "base_priority", self.base_priority)
        put(config, "priority_step", self.priority_step)
        put(config, "expected_output_tokens", self.expected_output_tokens)
        put(config, "final_instruction", self.final_instruction)
        put(config, "on_truncated", self.on_truncated)
        put(config, "output_spec", self.output_spec)
        put(config, "output_instruction", self.output_instruction)
        put(config, "_tools_by_name", self._tools_by_name)
        put(config, "_final_params", self._final_params)
        return config


_RUN_ID = attrs.fields(LoopConfig).run_id
_PARENT_SESSION_ID = attrs.fields(LoopConfig).parent_session_id
_FOR_RUN_FIELDS = 18  # the fields ``LoopConfig._for_run`` sets
if len(attrs.fields(LoopConfig)) != _FOR_RUN_FIELDS:  # pragma: no cover - a maintenance guard
    raise InternalError("LoopConfig._for_run must set every field of LoopConfig")


# ----------------------------------------------------------------------------- snapshot


@attrs.frozen(kw_only=True)
class LoopSnapshot:
    """The complete state of an :class:`AgentLoop` as plain data.

    Round-trips through ``agentcore.dumps``/``agentcore.loads``. Restore it with the same
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
    """Whether the forced final request has been emitted."""
    usage: Usage
    results: tuple[ToolMessage | None, ...] = ()
    """Per call of the current tool turn (model order): its result, or ``None`` while it is
    outstanding. Empty unless the state is ``AWAITING_TOOLS``."""
    partial: str = ""
    """Text of final answers cut by the token limit, awaiting a ``continue`` turn."""
    truncated_replies: int = 0
    missing_tool_calls: int = 0


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
    truncated_replies: int = 0
    """Replies cut by the token limit (``finish_reason == "length"``), tool turns included."""
    missing_tool_calls: int = 0
    """Replies without the tool call that ``tool_choice`` required."""


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
        new_id = f"call_{turn}_{index}"
        suffix = 0
        while new_id in taken:
            suffix += 1
            new_id = f"call_{turn}_{index}_{suffix}"
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
        "_partial",
        "_pending",
        "_prompt_tokens",
        "_request_id",
        "_results",
        "_state",
        "_tool_errors",
        "_tool_turns",
        "_transcript",
        "_truncated",
    )

    def __init__(self, config: LoopConfig, messages: Sequence[Message]) -> None:
        if not isinstance(config, LoopConfig):
            raise ConfigError(f"config must be a LoopConfig, got {config!r}")
        transcript: list[Message] = []
        for m in messages:
            if not isinstance(m, SystemMessage | UserMessage | AssistantMessage | ToolMessage):
                raise ConfigError(f"not a message: {m!r}")
            transcript.append(m)
        instruction = config.output_instruction
        if instruction is not None:
            if transcript and isinstance(transcript[0], SystemMessage):
                first = transcript[0].content
                joined = f"{first}\n\n{instruction}" if first else instruction
                transcript[0] = SystemMessage(joined)
            else:
                transcript.insert(0, SystemMessage(instruction))
        self._config = config
        self._transcript = transcript
        self._state = RunState.IDLE
        self._model_calls = 0
        self._request_id = ""
        self._tool_turns = 0
        self._tool_errors = 0
        self._output_retries = 0
        self._final = False
        self._prompt_tokens = 0
        self._completion_tokens = 0
        self._cached_tokens: int | None = None
        self._calls: tuple[ToolCall, ...] = ()
        self._results: list[ToolMessage | None] = []
        self._pending: dict[str, int] = {}
        self._partial = ""
        self._truncated = 0
        self._missing_tool_calls = 0

    # ------------------------------------------------------------------ public surface

    @property
    def state(self) -> RunState:
        """The current :class:`RunState`."""
        return self._state

    @property
    def config(self) -> LoopConfig:
        """The run's configuration."""
        return self._config

    @property
    def transcript(self) -> tuple[Message, ...]:
        """The messages so far (results of a tool turn in progress are not included)."""
        return tuple(self._transcript)

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
            self._truncated,
            self._missing_tool_calls,
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
        return (self._call_model(),)

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
                error = event.error
                content = f"Error: the tool failed ({error.type}): {error.message}"
                effects = self._on_tool_result(event, event.call_id, content, is_error=True)
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
            run_id = self._config.run_id
            return tuple(
                CallTool(
                    call.id,
                    call.name,
                    _parse_arguments(call.arguments),
                    f"{run_id}/{turn}/{index}",
                )
                for index, call in enumerate(self._calls)
                if call.id in self._pending
            )
        return ()

    def snapshot(self) -> LoopSnapshot:
        """The loop's complete state as plain data (see :class:`LoopSnapshot`)."""
        return LoopSnapshot(
            run_id=self._config.run_id,
            state=self._state,
            transcript=tuple(self._transcript),
            model_calls=self._model_calls,
            tool_turns=self._tool_turns,
            tool_errors=self._tool_errors,
            output_retries=self._output_retries,
            final=self._final,
            usage=self.usage,
            results=tuple(self._results) if self._state is RunState.AWAITING_TOOLS else (),
            partial=self._partial,
            truncated_replies=self._truncated,
            missing_tool_calls=self._missing_tool_calls,
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
        loop._transcript = list(snapshot.transcript)
        loop._state = snapshot.state
        loop._model_calls = snapshot.model_calls
        loop._request_id = (
            f"{config.run_id}/{snapshot.model_calls - 1}" if snapshot.model_calls else ""
        )
        loop._tool_turns = snapshot.tool_turns
        loop._tool_errors = snapshot.tool_errors
        loop._output_retries = snapshot.output_retries
        loop._final = snapshot.final
        usage = snapshot.usage
        loop._prompt_tokens = usage.prompt_tokens
        loop._completion_tokens = usage.completion_tokens
        loop._cached_tokens = usage.cached_tokens
        loop._calls = ()
        loop._results = []
        loop._pending = {}
        loop._partial = snapshot.partial
        loop._truncated = snapshot.truncated_replies
        loop._missing_tool_calls = snapshot.missing_tool_calls
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

    def _build_call_model(self, turn: int) -> CallModel:
        config = self._config
        final = self._final
        # The final request keeps the tool list (with ``tool_choice="none"``): chat templates
        # render tools near the start of the prompt, so dropping them would change the shared
        # prefix and miss the prefix cache, and some APIs reject a history with tool calls
        # but no tool definitions. Structured output is requested whenever tools are off.
        offers_tools = bool(config.tools) and not final
        return CallModel(
            f"{config.run_id}/{turn}",
            tuple(self._transcript),
            config.tools,
            config._final_params if final else config.params,
            AgentHints(
                config.session_id,
                config.parent_session_id,
                turn,
                config.base_priority + config.priority_step * turn,
                config.expected_output_tokens,
                final,
            ),
            None if offers_tools else config.output_spec,
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
            self._illegal(
                f"reply to request {event.request_id!r}, but the outstanding request is "
                f"{self._request_id!r}",
                event,
            )
        usage = event.usage
        self._prompt_tokens += usage.prompt_tokens
        self._completion_tokens += usage.completion_tokens
        if usage.cached_tokens is not None:  # unknown stays distinct from zero (Usage.__add__)
            self._cached_tokens = (self._cached_tokens or 0) + usage.cached_tokens
        message = event.message
        truncated = event.finish_reason == "length"
        if truncated:
            self._truncated += 1
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
                    CallTool(call.id, call.name, arguments, f"{config.run_id}/{turn}/{index}")
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
        if not pending:
            self._transcript.extend(results)  # type: ignore[arg-type]  # all set
            return (self._next_after_tools(),)
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
        self._results = []
        return (self._next_after_tools(),)

    def _next_after_tools(self) -> CallModel:
        if self._tool_turns >= self._config.max_turns:
            self._final = True
            self._transcript.append(UserMessage(self._config.final_instruction))
        return self._call_model()

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
        return (self._call_model(),)

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
                    "corrected JSON value, conforming to the JSON schema given in the "
                    "instructions."
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
        return (self._call_model(),)

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
        return (self._call_model(),)

    def _on_model_failed(self, event: ModelFailed) -> tuple[Effect, ...]:
        if event.request_id != self._request_id:
            self._illegal(
                f"failure of request {event.request_id!r}, but the outstanding request is "
                f"{self._request_id!r}",
                event,
            )
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
    ) -> tuple[Effect, ...]:
        self._state = RunState.ABORTED
        self._pending = {}
        self._calls = ()
        self._results = []
        return (Abort(AbortReason(kind, message, error), transcript, self.usage),)

    def _finish(self, output: Any) -> tuple[Effect, ...]:
        self._state = RunState.FINISHED
        return (Finish(output, tuple(self._transcript), self.usage),)
