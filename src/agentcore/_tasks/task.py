"""Tasks and the task compiler: one :class:`Task` plus one input makes one agent loop.

The compiler's job beyond filling the template is to keep the *shared prefix* byte-identical
across every job of a batch, so a prefix-caching server computes it once:

    [system prompt + output schema] [tool schemas] [template text before the first placeholder]
    ------------------------------- shared by every job ------------------------------------
    [per-input text ...]

The system prompt, the tool list (in the task's order) and the template's literal head come
first and never depend on the input; everything that does depend on the input comes after the
first placeholder. :func:`prefix_call` builds the one-token request that warms that prefix.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Generic

import attrs
from typing_extensions import TypeVar

from .._core.budgets import UsageLimits
from .._core.config import DEFAULT_FINAL_INSTRUCTION, LoopConfig, TruncatedPolicy
from .._core.errors import ConfigError
from .._core.events import CallModel
from .._core.loop import AgentLoop
from .._core.messages import Image, Message, ModelParams, SystemMessage, UserMessage
from .._core.validators import check_items
from .._tools.spec import Tool, ToolBase

T = TypeVar("T", default=str)
"""A task's output type; ``str`` (a text answer) when the task names none."""
Deps_contra = TypeVar("Deps_contra", contravariant=True, default=object)
"""The ``deps`` a task's (or an agent's) runs may be handed: what every one of its tools
takes (``object``, anything, when none takes a typed context). Inferred from the tools where
a type checker can (one tool, or tools of one signature); for a list mixing tools with and
without a typed context, say it: ``task: Task[Report, Approvals] = Task(...)``."""

R = TypeVar("R")

__all__ = [
    "RenderError",
    "Task",
    "common_opening",
    "compile_job",
    "job_run_id",
    "one_token_call",
    "prefix_call",
    "render_message",
    "render_prompt",
]


AUTO: Final = "auto"
"""``Task.final_instruction``'s default: the default instruction, where it is needed."""


class RenderError(ConfigError):
    """An input does not fit the task's prompt template (a missing placeholder value...)."""


def _tools_tuple(tools: Iterable[ToolBase[Deps_contra]]) -> tuple[ToolBase[Deps_contra], ...]:
    return check_items("Task.tools", tools, Tool, "@agentcore.tool objects")


def _fallback_tuple(value: Any) -> tuple[Any, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ConfigError(f"Task.fallback must be a list of backends, got {value!r}")
    return tuple(value)


def _check_announce(instance: Task[Any, Any], attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not True and value is not False and value != AUTO:
        raise ConfigError(f"Task.announce_output must be 'auto', True or False, got {value!r}")


def _check_template(instance: Task[Any, Any], attribute: attrs.Attribute[str], value: str) -> None:
    try:
        fields = list(string.Formatter().parse(value))
    except ValueError as exc:
        raise ConfigError(f"Task.prompt is not a valid template: {exc}") from None
    for _, name, _, _ in fields:
        if name is not None and not name.isidentifier():
            raise ConfigError(
                f"Task.prompt placeholder {{{name}}} must be a plain name "
                "(write {{ and }} for literal braces)"
            )


@attrs.frozen
class Task(Generic[T, Deps_contra]):
    """What every agent of a batch does: prompts, tools, output type and budgets.

    ``Task[T, Deps]`` is generic over its output type: ``Task(..., output=BugReport)`` is a
    ``Task[BugReport]``, and its batches give ``Result[BugReport]`` values; a task without
    ``output`` is a ``Task[str]`` (a text answer). ``Deps`` is the ``deps`` its batches may
    hand its tools: a task whose tools take ``RunContext[Approvals]`` is a
    ``Task[..., Approvals]``, and ``run_batch(task, ..., deps=42)`` does not type-check
    (``object``, anything, when no tool takes a typed context).

    ``prompt`` is a template with ``{name}`` placeholders filled from each input (a mapping,
    or any other value, which fills ``{input}``). Put the text shared by every input *before*
    the first placeholder: it becomes part of the cached prefix. Literal braces are written
    ``{{`` and ``}}``.

    Example::

        task = agentcore.Task(
            system="You review Python files for bugs.",
            prompt="Review this file:\\n\\n{source}",
            tools=[read_file, grep],
            output=BugReport,
            max_turns=6,
        )
    """

    prompt: str = attrs.field(validator=_check_template)
    """The per-input user message template."""
    system: str = ""
    """The system prompt (shared by every job)."""
    tools: tuple[ToolBase[Deps_contra], ...] = attrs.field(default=(), converter=_tools_tuple)
    """Tools offered to the model, in this order."""
    output: type[T] | None = None
    """The output type (an attrs class, a dataclass, a ``TypedDict``, a pydantic model, or
    any other type the schema layer supports); ``None`` for a text answer."""
    max_turns: int = 6
    max_tool_errors: int = 3
    max_output_retries: int = 2
    max_tool_failures: int | None = None
    """Failed tool calls (the tool raised or timed out) tolerated per agent; one more ends
    the agent ``failed`` with ``AbortKind.TOOL_FAILURES``. ``None``: no limit (each failure
    is told to the model and counted in ``Result.tool_failures``)."""
    params: ModelParams = ModelParams()
    """Sampling parameters of every request."""
    expected_output_tokens: int | None = None
    """Expected reply length, passed to the server as a hint."""
    final_instruction: str | None = AUTO
    """The user message of the request forced once ``max_turns`` tool turns are spent
    (``LoopConfig.final_instruction``). ``"auto"`` (the default): the default instruction
    (:data:`agentcore.DEFAULT_FINAL_INSTRUCTION`: the tools are spent, answer now), left out
    of a typed task's runs on a driver whose every backend sends the output schema with that
    request (:attr:`~agentcore.Driver.schema_on_final`): the server's guided decoding then
    admits nothing but the answer, and the request is what a hand-written loop sends.
    ``None``: no message, the request only withholds tools. Any other text: that message,
    always."""
    announce_output: bool | str = attrs.field(default=AUTO, validator=_check_announce)
    """Whether a typed task's system prompt ends with the output instruction (the JSON schema
    the answer must follow; ``LoopConfig.announce_output``). ``"auto"`` (the default): left
    out on a driver whose every backend sends the output schema with the final request
    (:attr:`~agentcore.Driver.schema_on_final`) when no other request can end the run (the
    task has no tools, or its ``params.tool_choice`` is ``"required"`` or ``"none"``): every
    answer is then constrained by the server's guided decoding, and the instruction would
    only lengthen the prefix every request carries. ``True``: always sent; ``False``: never
    (the schema goes only where the backend sends it)."""
    on_truncated: TruncatedPolicy = "repair"
    """What a final answer cut by the token limit earns (``LoopConfig.on_truncated``)."""
    name: str = "task"
    """A short name, used in run ids."""
    limits: UsageLimits | None = None
    """Usage budgets of each agent (requests, tokens, tool calls); see
    :class:`~agentcore.UsageLimits`. A batch-wide budget is ``open_batch(budget=...)``."""

    planning_interval: int | None = None
    """Ask for a plan before the first tool turn and after every this many tool turns
    (``LoopConfig.planning_interval``; ``None``: never)."""
    fallback: tuple[Any, ...] = attrs.field(default=(), converter=_fallback_tuple)
    """Backends (or models) to fall back to, in order, for the driver a batch of this task
    opens (``open_driver(fallback=...)``: URLs, ``Backend`` values, model clients or
    :class:`~agentcore.Fallback` values). A batch given an open ``driver=`` uses that
    driver's fallbacks; a task with its own is then a ``ConfigError``."""
    _base_config: LoopConfig = attrs.field(init=False, eq=False, hash=False, repr=False)
    """The loop config every job shares (built and validated once; each loop keeps its own
    ids)."""
    _schema_config: LoopConfig = attrs.field(init=False, eq=False, hash=False, repr=False)
    """The same for a driver that sends the output schema with the final request: for a typed
    task without the default final instruction, and without the output instruction where
    every answer carries the schema (``"auto"``), else ``_base_config`` itself."""
    _prefix: tuple[Message, ...] = attrs.field(init=False, eq=False, hash=False, repr=False)
    """The messages in front of every job's user message (the system prompt), shared."""

    def __attrs_post_init__(self) -> None:
        # Validate the budgets and the output type once, with the loop's own checks; each
        # job's config is this one with its own ids.
        base = self._new_config("check")
        object.__setattr__(self, "_base_config", base)
        changes: dict[str, Any] = {}
        if self.output is not None:
            if self.final_instruction == AUTO:
                changes["final_instruction"] = None
            if self.announce_output == AUTO and _answers_constrained(self):
                changes["announce_output"] = False
        schema = attrs.evolve(base, **changes) if changes else base
        object.__setattr__(self, "_schema_config", schema)
        object.__setattr__(self, "_prefix", (SystemMessage(self.system),) if self.system else ())

    def _config(self, run_id: str, parent_session_id: str | None = None) -> LoopConfig:
        return self._base_config._for_run(run_id, parent_session_id)

    def _new_config(self, run_id: str) -> LoopConfig:
        return LoopConfig(
            run_id=run_id,
            tools=tuple(t.spec for t in self.tools),
            output=self.output,
            max_turns=self.max_turns,
            max_tool_errors=self.max_tool_errors,
            max_output_retries=self.max_output_retries,
            max_tool_failures=self.max_tool_failures,
            params=self.params,
            expected_output_tokens=self.expected_output_tokens,
            limits=self.limits,
            planning_interval=self.planning_interval,
            final_instruction=(
                DEFAULT_FINAL_INSTRUCTION
                if self.final_instruction == AUTO
                else self.final_instruction
            ),
            announce_output=self.announce_output is not False,
            on_truncated=self.on_truncated,
        )

    @property
    def placeholders(self) -> tuple[str, ...]:
        """The names of the template's placeholders, in order of first use."""
        names: dict[str, None] = {}
        for _, name, _, _ in string.Formatter().parse(self.prompt):
            if name is not None:
                names.setdefault(name, None)
        return tuple(names)

    def missing_placeholders(self, value: Any) -> list[str]:
        """The template's placeholders ``value`` has no value for, in order of first use (a
        mapping fills placeholders by key; any other value fills ``{input}`` only)."""
        keys = value if isinstance(value, Mapping) else {"input": value}
        return [name for name in self.placeholders if name not in keys]

    def check_input(self, value: Any) -> None:
        """Check that ``value`` fills every placeholder of the template (a mapping needs each
        placeholder as a key; any other value fills ``{input}`` only).

        Use it on the first input of a uniform input file to find a typo in the template
        before any model time is spent.

        Raises:
            RenderError: naming the placeholders ``value`` lacks and the keys it has.
        """
        missing = self.missing_placeholders(value)
        if missing:
            shown = ", ".join(f"{{{name}}}" for name in missing)
            if isinstance(value, Mapping):
                has = f"its keys: {', '.join(sorted(map(str, value))) or 'none'}"
            else:
                has = "it is not an object, so it fills {input} only"
            raise RenderError(
                f"the prompt template's placeholder{'s' if len(missing) > 1 else ''} {shown} "
                f"{'are' if len(missing) > 1 else 'is'} not in the input ({has})"
            )

    @property
    def prefix_text(self) -> str:
        """The template's literal text before the first placeholder (shared by every job)."""
        head = []
        for literal, name, _, _ in string.Formatter().parse(self.prompt):
            head.append(literal)  # the formatter has already turned {{ into {
            if name is not None:
                break
        return "".join(head)


def _answers_constrained(task: Task[Any, Any]) -> bool:
    """Whether every request of ``task``'s runs that can end the run is a final one (tools
    withheld with ``tool_choice="none"``) or offers no tools: then a backend that sends the
    output schema with the final request sends it with every possible answer."""
    return not task.tools or task.params.tool_choice in ("required", "none")


def _filled(fields: Mapping[str, Any], fill: Callable[..., R], *args: Any) -> R:
    """``fill(*args)``, its template failures raised as a :class:`RenderError` naming what
    the input (``fields``) lacks."""
    try:
        return fill(*args)
    except KeyError as exc:
        raise RenderError(
            f"input has no value for placeholder {{{exc.args[0]}}} "
            f"(it has: {', '.join(sorted(map(str, fields))) or 'nothing'})"
        ) from None
    except (ValueError, IndexError, AttributeError) as exc:
        raise RenderError(f"input does not fit the prompt template: {exc}") from None


def render_prompt(task: Task[Any, Any], value: Any) -> str:
    """Fill the task's template from one input.

    Raises:
        RenderError: the input lacks a placeholder's value.
    """
    fields: Mapping[str, Any] = value if isinstance(value, Mapping) else {"input": value}
    return _filled(fields, task.prompt.format_map, fields)


def _images_of(value: Any) -> tuple[Image, ...] | None:
    """``value`` as the images a placeholder stands for, or ``None`` if it is not images."""
    if isinstance(value, Image):
        return (value,)
    if isinstance(value, list | tuple) and value and all(isinstance(v, Image) for v in value):
        return tuple(value)
    return None


def render_message(task: Task[Any, Any], value: Any) -> UserMessage:
    """The user message for one input: the filled template, with the images of the input.

    A placeholder whose value is an :class:`~agentcore.core.Image` (or a list of them) puts
    the image(s) at its place in the text instead of text.

    Raises:
        RenderError: the input does not fit the template.
    """
    fields: Mapping[str, Any] = value if isinstance(value, Mapping) else {"input": value}
    if not any(_images_of(v) is not None for v in fields.values()):
        return UserMessage(render_prompt(task, value))
    return _filled(fields, _with_images, task.prompt, fields)


def _with_images(prompt: str, fields: Mapping[str, Any]) -> UserMessage:
    formatter = string.Formatter()
    text: list[str] = []
    length = 0
    images: list[Image] = []
    for literal, name, raw_spec, conversion in formatter.parse(prompt):
        text.append(literal)
        length += len(literal)
        if name is None:
            continue
        if name not in fields:
            raise KeyError(name)
        field = fields[name]
        placed = _images_of(field)
        if placed is not None:
            images.extend(attrs.evolve(image, at=length) for image in placed)
            continue
        spec = raw_spec or ""
        if "{" in spec:
            spec = formatter.vformat(spec, (), fields)
        piece = formatter.format_field(formatter.convert_field(field, conversion), spec)
        text.append(piece)
        length += len(piece)
    return UserMessage("".join(text), images)


def _messages(task: Task[Any, Any], user: str | UserMessage) -> list[Message]:
    return [*task._prefix, user if isinstance(user, UserMessage) else UserMessage(user)]


def compile_job(
    task: Task[Any, Any],
    value: Any,
    *,
    run_id: str,
    parent_session_id: str | None = None,
    schema_on_final: bool = False,
) -> AgentLoop:
    """The agent loop for one input; ``schema_on_final``: the driver it runs on sends the
    output schema with the final request (:attr:`Task.final_instruction`, ``"auto"``).

    Raises:
        RenderError: the input does not fit the template.
    """
    return AgentLoop._for_run(
        task._schema_config if schema_on_final else task._base_config,
        _messages(task, render_message(task, value)),
        run_id,
        parent_session_id,
    )


def common_opening(task: Task[Any, Any], samples: Iterable[Any]) -> str | None:
    """The text the user messages of ``samples`` open with (their longest common prefix, the
    template's literal head at least), ``None`` when no sample renders to text alone."""
    texts = []
    for value in samples:
        try:
            message = render_message(task, value)
        except RenderError:
            continue
        if not message.images:
            texts.append(message.content)
    if not texts:
        return None
    low, high = min(texts), max(texts)  # the common prefix of all is that of these two
    size = 0
    while size < len(low) and low[size] == high[size]:
        size += 1
    return low[:size]


def prefix_call(
    task: Task[Any, Any], *, run_id: str, schema_on_final: bool = False, opening: str | None = None
) -> CallModel:
    """A one-token request carrying exactly the task's shared prefix, to warm a prefix cache.

    It is built by the same loop machinery as the real jobs, so the system prompt (with the
    output schema where the jobs have it: ``schema_on_final`` as for :func:`compile_job`)
    and the tool list are byte-identical to theirs. Its user message is ``opening`` (the
    text the batch's inputs open with, see :func:`common_opening`), else the template's
    literal head. It is not marked ``final``: a final request tells some servers (Dynamo) to
    evict the session's cache.
    """
    config = task._schema_config if schema_on_final else task._base_config
    text = task.prefix_text if opening is None else opening
    return one_token_call(AgentLoop._for_run(config, _messages(task, text), run_id, None))


def one_token_call(loop: AgentLoop) -> CallModel:
    """The first request of ``loop``, cut to one token and not marked ``final`` (a warm-up
    request: its reply is not wanted, and a final request tells some servers, Dynamo, to
    evict the session's cache)."""
    call = loop.start()[0]
    assert isinstance(call, CallModel)
    return attrs.evolve(
        call,
        params=attrs.evolve(call.params, max_tokens=1),
        hints=attrs.evolve(call.hints, final=False),
    )


def job_run_id(batch_id: str, index: int | str) -> str:
    """The run id of job ``index`` of batch ``batch_id`` (``"warm"`` for the warm-up)."""
    return f"{batch_id}-{index}"
