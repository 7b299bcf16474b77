"""One run's configuration, and the formulas of the ids derived from it.

:class:`LoopConfig` is validated once at construction (every check raises
:class:`~agentcore.ConfigError`) and derives what every request of the run shares: the output
schema and its system-prompt instruction, the tool table, the final request's parameters,
and the first system message with that instruction joined (built once per system prompt and
shared by every run, see ``_system_message``). A batch builds one config per task and shares
it between its runs; each loop keeps its own ids (``AgentLoop._for_run``).

Ids are data, derived here and nowhere else: request ``n`` of a run is
:func:`request_id` ``(run_id, n)``, tool call ``index`` of turn ``turn`` has the idempotency
key :func:`idempotency_key` ``(run_id, turn, index)``, and a call id the model left empty or
repeated becomes :func:`fallback_call_id` ``(turn, index)``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import attrs

from .budgets import UsageLimits
from .errors import ConfigError, InternalError
from .messages import ModelParams, OutputSpec, SystemMessage, ToolSpec
from .schema import json_schema
from .validators import (
    int_at_least,
    is_bool,
    is_int,
    nonempty_str,
    one_of,
    optional_int_at_least,
    optional_nonempty_str,
)

__all__ = [
    "DEFAULT_FINAL_INSTRUCTION",
    "TruncatedPolicy",
    "DEFAULT_PLANNING_FOLLOWUP",
    "DEFAULT_PLANNING_INSTRUCTION",
    "LoopConfig",
    "fallback_call_id",
    "idempotency_key",
    "request_id",
]


TruncatedPolicy = Literal["repair", "continue", "fail"]
"""What a final answer cut by the token limit earns (``LoopConfig.on_truncated``)."""


def request_id(run_id: str, n: int) -> str:
    """The id of request ``n`` (0-based) of run ``run_id``."""
    return f"{run_id}/{n}"


def idempotency_key(run_id: str, turn: int, index: int) -> str:
    """The idempotency key of tool call ``index`` of turn ``turn`` of run ``run_id``."""
    return f"{run_id}/{turn}/{index}"


def fallback_call_id(turn: int, index: int) -> str:
    """The call id given to tool call ``index`` of turn ``turn`` when the model's is unusable."""
    return f"call_{turn}_{index}"


DEFAULT_FINAL_INSTRUCTION: Final = (
    "You have used all your tool turns. Do not call any tools. "
    "Give your final answer now, based on what you already know."
)
"""The user message of a run's forced final request, unless configured otherwise
(``LoopConfig.final_instruction``, ``Task.final_instruction``)."""

DEFAULT_PLANNING_INSTRUCTION: Final = (
    "Before you act, write a short plan: what you know so far, what is still missing, and "
    "the next steps (which tools to call, and why). Do not call any tools in this reply."
)

DEFAULT_PLANNING_FOLLOWUP: Final = "Now carry out your plan."

_OUTPUT_INSTRUCTION = (
    "When you give your final answer (a reply without tool calls), reply with a single JSON "
    "value and nothing else (a ```json fenced block is also accepted). It must conform to "
    "this JSON schema:\n"
)


def _check_params(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, ModelParams):
        raise ConfigError(f"LoopConfig.params must be a ModelParams, got {value!r}")


def _check_limits(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, UsageLimits):
        raise ConfigError(f"LoopConfig.limits must be a UsageLimits or None, got {value!r}")


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

    run_id: str = attrs.field(validator=nonempty_str)
    """Unique id of the run; request ids and idempotency keys derive from it."""
    tools: tuple[ToolSpec, ...] = attrs.field(
        default=(), converter=_to_tools, validator=_check_tools
    )
    """The tools offered to the model, in this order (keep it stable for prefix caching)."""
    output: Any = None
    """The type the final answer must structure into (an attrs class or any type
    :func:`agentcore._core.schema.json_schema` supports); ``None`` for a text answer."""
    session_id: str = attrs.field(
        default=attrs.Factory(lambda self: self.run_id, takes_self=True),
        validator=nonempty_str,
    )
    """Session id for serving hints; defaults to ``run_id``."""
    parent_session_id: str | None = attrs.field(default=None, validator=optional_nonempty_str)
    """Session id of the agent that spawned this one, if any."""
    max_turns: int = attrs.field(default=10, validator=int_at_least(1))
    """Tool turns allowed before the forced final request. Ten covers typical
    search-read-answer agents while bounding a model that loops on tools."""
    max_tool_errors: int = attrs.field(default=3, validator=int_at_least(0))
    """Invalid tool calls tolerated per run; one more aborts. A model that gets three
    explained errors in a row rarely recovers on the fourth."""
    max_tool_failures: int | None = attrs.field(default=None, validator=optional_int_at_least(0))
    """Failed tool calls (``ToolFailed``: the tool raised or timed out) tolerated per run; one
    more ends it with ``Abort(TOOL_FAILURES)``. ``None`` (the default): no limit, each failure
    is only reported to the model (and counted in ``Result.tool_failures``)."""
    max_output_retries: int = attrs.field(default=2, validator=int_at_least(0))
    """Repair turns allowed for an unusable final answer."""
    params: ModelParams = attrs.field(default=ModelParams(), validator=_check_params)
    """Sampling parameters of every request (the final one also gets ``tool_choice="none"``)."""
    base_priority: int = attrs.field(default=0, validator=is_int)
    """Priority hint of the first request."""
    priority_step: int = attrs.field(default=1, validator=is_int)
    """Added to the priority per request, so runs near completion are served first and free
    their KV cache sooner."""
    expected_output_tokens: int | None = attrs.field(
        default=None, validator=optional_int_at_least(1)
    )
    """Expected reply length, passed on as a hint."""
    final_instruction: str | None = attrs.field(
        default=DEFAULT_FINAL_INSTRUCTION, validator=optional_nonempty_str
    )
    """The user message of the forced final request; ``None``: none (the request still
    withholds tools with ``tool_choice="none"``, and the prompt stays what a hand-written
    loop would send)."""
    announce_output: bool = attrs.field(default=True, validator=is_bool)
    """Append the output instruction (the JSON schema, :attr:`output_instruction`) to the first
    system message. ``False``: the schema travels only with the requests
    (``CallModel.output``), for a server whose guided decoding enforces it on every request
    that can end the run, where the instruction would only lengthen the shared prefix."""
    on_truncated: TruncatedPolicy = attrs.field(
        default="repair", validator=one_of("repair", "continue", "fail")
    )
    """What a final answer cut by the token limit earns: ``"repair"`` (ask for a shorter
    answer), ``"continue"`` (ask the model to go on; the pieces are joined) or ``"fail"``
    (``Abort(TRUNCATED)`` at once). Repair and continue turns use ``max_output_retries``."""
    limits: UsageLimits | None = attrs.field(default=None, validator=_check_limits)
    """Usage budgets of the run, checked before each model request and each tool turn
    (``None``: none beyond ``max_turns``)."""

    planning_interval: int | None = attrs.field(default=None, validator=optional_int_at_least(1))
    """Ask for a plan before the first tool turn and after every this many tool turns
    (``None``: never). A planning request offers the tools with ``tool_choice="none"``."""
    planning_instruction: str = attrs.field(
        default=DEFAULT_PLANNING_INSTRUCTION, validator=nonempty_str
    )
    """The user message of a planning request."""
    planning_followup: str = attrs.field(default=DEFAULT_PLANNING_FOLLOWUP, validator=nonempty_str)
    """The user message after a plan, asking the model to act on it."""

    output_spec: OutputSpec | None = attrs.field(init=False, eq=False, repr=False)
    """Derived from ``output``: its name and JSON schema (``None`` for text output)."""
    output_instruction: str | None = attrs.field(init=False, eq=False, repr=False)
    """Derived from ``output``: the system-prompt text announcing the schema."""
    _tools_by_name: Mapping[str, ToolSpec] = attrs.field(init=False, eq=False, repr=False)
    _final_params: ModelParams = attrs.field(init=False, eq=False, repr=False)
    _system_memo: list[Any] = attrs.field(init=False, eq=False, repr=False)
    """``[system prompt text, the system message with the output instruction joined]`` of
    the last run that asked (one entry: a batch's runs share one system prompt)."""

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
        object.__setattr__(self, "_system_memo", [None, None])

    def _system_message(self, first: str | None) -> SystemMessage:
        """The system message that announces the output schema: ``first`` (the text of the
        conversation's first system message, ``None`` when it has none) with the output
        instruction joined.

        Runs with the same system prompt get the same (immutable) message object, so a batch
        keeps one copy of its prompt prefix instead of one per agent.

        Raises:
            InternalError: the config has no output type.
        """
        instruction = self.output_instruction
        if instruction is None:
            raise InternalError("no output instruction to join: the config has no output type")
        text = first or ""  # no system prompt and an empty one give the same message
        memo = self._system_memo
        key = memo[0]
        if key is not None and (key is text or key == text):
            message: SystemMessage = memo[1]
            return message
        message = SystemMessage(f"{text}\n\n{instruction}" if text else instruction)
        memo[0] = text
        memo[1] = message
        return message

    def _for_run(self, run_id: str, parent_session_id: str | None) -> LoopConfig:
        """This config for another run: ``run_id`` (also the session id) and the parent
        session id replaced, everything else shared.

        Equal to ``attrs.evolve(self, run_id=run_id, session_id=run_id,
        parent_session_id=parent_session_id)``, without validating and deriving again what
        ``self`` already validated and derived: a batch builds one config per job.

        Raises:
            ConfigError: an invalid id.
        """
        nonempty_str(None, _RUN_ID, run_id)
        optional_nonempty_str(None, _PARENT_SESSION_ID, parent_session_id)
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
        put(config, "max_tool_failures", self.max_tool_failures)
        put(config, "max_output_retries", self.max_output_retries)
        put(config, "params", self.params)
        put(config, "base_priority", self.base_priority)
        put(config, "priority_step", self.priority_step)
        put(config, "expected_output_tokens", self.expected_output_tokens)
        put(config, "final_instruction", self.final_instruction)
        put(config, "announce_output", self.announce_output)
        put(config, "on_truncated", self.on_truncated)
        put(config, "limits", self.limits)

        put(config, "planning_interval", self.planning_interval)
        put(config, "planning_instruction", self.planning_instruction)
        put(config, "planning_followup", self.planning_followup)
        put(config, "output_spec", self.output_spec)
        put(config, "output_instruction", self.output_instruction)
        put(config, "_tools_by_name", self._tools_by_name)
        put(config, "_final_params", self._final_params)
        put(config, "_system_memo", self._system_memo)
        return config


_RUN_ID = attrs.fields(LoopConfig).run_id
_PARENT_SESSION_ID = attrs.fields(LoopConfig).parent_session_id
_FOR_RUN_FIELDS = 25  # the fields ``LoopConfig._for_run`` sets
if len(attrs.fields(LoopConfig)) != _FOR_RUN_FIELDS:  # pragma: no cover - a maintenance guard
    raise InternalError("LoopConfig._for_run must set every field of LoopConfig")
