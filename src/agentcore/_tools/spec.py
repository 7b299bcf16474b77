"""``@agentcore.tool``: turn a plain or ``async`` function into a tool the model can call.

The decorator reads the function's signature and docstring once, at definition time, and
builds three things from them:

- an attrs class with one field per parameter (its *arguments type*): the annotation is the
  field type, the default is the field default, and the docstring's ``Args:`` entry becomes
  the field's ``description`` metadata;
- a :class:`~agentcore.core.ToolSpec` whose JSON schema is derived from that class and whose
  validator structures model-supplied JSON into an instance of it. Schema and validation come
  from the same type through :mod:`agentcore._core.schema`, so they cannot drift apart;
- frozen :class:`ToolOptions` (caching, coalescing, timeout, concurrency caps and rate limits)
  that the tool executor and the runner honour.

Side effects are never merged silently: a tool runs once per call unless it is declared a
read (``coalesce=True``: concurrent identical calls share one execution) or replay-safe
(``replay_safe=(fields...)``, or ``cache=True`` for a result that depends on its arguments
alone; both imply ``coalesce``). See docs/tools.md.

The :class:`Tool` object stays callable like the original function, so decorated functions can
still be unit-tested directly.
"""

from __future__ import annotations

import copy
import functools
import inspect
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Concatenate, Generic, Never, ParamSpec, Protocol, TypeAlias, final, overload

import attrs
from typing_extensions import TypeVar

from .._codecs.values import json_dumps
from .._core.errors import ConfigError
from .._core.messages import ToolSpec
from .._core.schema import json_schema, structure
from .context import RunContext, is_context_type, typed_path_problem

__all__ = ["HISTORY", "AnyTool", "Tool", "ToolBase", "ToolOptions", "encode_result", "tool"]

P = ParamSpec("P")
R = TypeVar("R")
D = TypeVar("D")
DepsT_contra = TypeVar("DepsT_contra", contravariant=True, default=Any)
"""The ``deps`` a tool can be handed: the type its :class:`RunContext` parameter names
(``object`` for a tool without one: it takes any). Contravariant: a tool that takes any deps
serves a run whose deps are an ``Approvals``. ``Any`` (no check) where an annotation leaves it
out (``Tool[..., str]``)."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# Tool names follow the strictest common rule (OpenAI function names): 1-64 characters of
# letters, digits, "_" and "-".


def _positive_number(name: str, value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"{name} must be a positive number of seconds or calls, got {value!r}")


def _positive_int(name: str, value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")


_CONTEXT_FIELDS = ("index", "run_id", "session_id", "input", "deps")
HISTORY = "history"
"""The ``replay_safe`` entry naming the run's tool history (the calls and results of its
earlier turns) rather than a context field."""


def _replay_fields(value: Any) -> tuple[str, ...] | None:
    """``replay_safe`` as a sorted tuple of distinct entries (``None`` stays ``None``)."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ConfigError(
            "replay_safe must be a sequence of context fields, such as ('input.task',) "
            f"(or () for none), got {value!r}"
        )
    fields = tuple(value)
    for field in fields:
        if not isinstance(field, str) or not (
            field == HISTORY
            or (field.split(".", 1)[0] in _CONTEXT_FIELDS and "" not in field.split("."))
        ):
            raise ConfigError(
                f"replay_safe entry {field!r} is not a context field: use one of "
                f"{', '.join(_CONTEXT_FIELDS)}, optionally with a dotted path into it "
                f"('deps.user_id', 'input.task'), or {HISTORY!r} for the run's tool history"
            )
    return tuple(sorted(set(fields)))


@attrs.frozen(kw_only=True)
class ToolOptions:
    """How the tool executor runs a tool. Every option is off by default (``cache`` follows
    ``replay_safe``, ``coalesce`` follows ``cache`` and ``replay_safe``).

    Raises:
        ConfigError: an option is out of range, or options contradict each other (``ttl``
            without ``cache``, ``cache`` without ``coalesce``, ``burst`` without ``rate``,
            ``replay_safe`` with neither ``cache`` nor ``coalesce``).
    """

    replay_safe: tuple[str, ...] | None = attrs.field(default=None, converter=_replay_fields)
    """The context fields a result depends on, besides the arguments (``None``: not
    declared). Declared, successful results are kept and answer later calls whose key (tool,
    arguments, the values of these fields, and the tool history when ``"history"`` is one of
    them) is the same, across runs and batches of one driver (with ``cache=False``: only
    concurrent calls with the same key share one execution, nothing is kept). Entries:
    ``index``, ``run_id``, ``session_id``, ``input``, ``deps``, each optionally with a dotted
    path into it (``"deps.user_id"``, ``"input.task"``), or ``"history"``. A path must lead
    somewhere: checked against the deps type the tool's ``RunContext[...]`` names when it is
    an attrs class, a dataclass, a ``TypedDict`` or a pydantic model, and otherwise at the
    first call of each input and deps type (``ConfigError`` naming the path and what is
    there); a call where it later leads nowhere gets no key (neither reused nor shared)."""
    cache: bool = attrs.field(
        default=attrs.Factory(lambda self: self.replay_safe is not None, takes_self=True)
    )
    """Remember successful results and answer later calls with the same key from memory
    (the key: see ``replay_safe``; with ``replay_safe`` undeclared, the tool name and
    arguments alone). Only for deterministic tools without side effects."""
    ttl: float | None = None
    """Seconds a cached result stays valid (``None``: for the executor's lifetime)."""
    coalesce: bool = attrs.field(
        default=attrs.Factory(
            lambda self: self.cache or self.replay_safe is not None, takes_self=True
        )
    )
    """Let concurrent identical calls share one execution (every caller gets its outcome).
    Only for reads without side effects: two agents sending the same email at once must
    send two emails. Off unless declared; ``cache=True`` or ``replay_safe`` turns it on. For
    a tool that takes the context, identical means: the same key (``replay_safe``, which it
    must declare)."""
    timeout: float | None = None
    """Seconds one execution may run before its callers get a ``timeout`` failure."""
    max_concurrency: int | None = None
    """At most this many executions of the tool at once."""
    rate: float | None = None
    """At most this many executions started per second, on average (token bucket)."""
    burst: int | None = None
    """How many executions may start back to back after an idle spell (bucket size;
    default 1 when ``rate`` is set)."""
    max_per_turn: int | None = None
    """At most this many calls of the tool in progress at once within one agent turn (a
    reply asking for more runs them in the order the model listed them)."""

    def __attrs_post_init__(self) -> None:
        for flag in ("cache", "coalesce"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(f"{flag} must be True or False, got {getattr(self, flag)!r}")
        _positive_number("ttl", self.ttl)
        _positive_number("timeout", self.timeout)
        _positive_number("rate", self.rate)
        _positive_int("max_concurrency", self.max_concurrency)
        _positive_int("burst", self.burst)
        _positive_int("max_per_turn", self.max_per_turn)
        if self.replay_safe is not None and not self.coalesce:
            raise ConfigError(
                "replay_safe keys the reuse (cache) or the sharing (coalesce) of results: it "
                "cannot be combined with cache=False and coalesce=False"
            )
        if self.ttl is not None and not self.cache:
            raise ConfigError("ttl needs cache=True or replay_safe")
        if self.cache and not self.coalesce:
            raise ConfigError(
                "cache=True needs coalesce=True: a cached tool is deterministic, so identical "
                "concurrent calls can share one execution"
            )
        if self.burst is not None and self.rate is None:
            raise ConfigError("burst needs rate")


# ----------------------------------------------------------------------------- docstrings

_SECTIONS = (
    "Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|"
    "Returns|Return|Yields|Yield|Raises|Raise|Examples|Example|Notes|Note|Attributes|"
    "See Also|Warnings|Warning|References|Todo"
)
_INLINE_SECTIONS = "Args|Arguments|Parameters|Returns|Raises"
# A section header starts a line; in one-line docstrings the common ones may also follow the
# end of a sentence ("Search. Args: query: terms."), while a mid-line "Note:" stays prose.
_HEADER = re.compile(
    rf"(?:^[ \t]*({_SECTIONS})|(?<=[.!?])[ \t]+({_INLINE_SECTIONS}))[ \t]*:(?=\s|$)",
    re.MULTILINE,
)
_ARGS_SECTIONS = frozenset(
    {"Args", "Arguments", "Parameters", "Params", "Keyword Args", "Keyword Arguments"}
)


@attrs.frozen
class _Docstring:
    description: str
    arguments: Mapping[str, str]


def _parse_docstring(doc: str | None, names: tuple[str, ...]) -> _Docstring:
    """Split a Google-style docstring into its description and per-argument descriptions.

    Both layouts are understood: the usual one (``Args:`` on its own line, one indented
    ``name: text`` or ``name (type): text`` entry per argument, continuation lines indented
    further) and a one-line one (``"Search. Args: query: terms. k: hits."``). Only names of
    actual parameters start an entry, so prose inside a description is not mistaken for one.
    """
    text = inspect.cleandoc(doc or "")
    headers = list(_HEADER.finditer(text))
    if not headers:
        return _Docstring(text.strip(), {})
    description = text[: headers[0].start()].strip()
    arguments: dict[str, str] = {}
    if not names:
        return _Docstring(description, arguments)
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    entry = rf"({alternatives})(?:[ \t]*\([^)\n]*\))?[ \t]*:(?=\s|$)"
    at_line_start = re.compile(rf"^[ \t]*{entry}", re.MULTILINE)
    inline = re.compile(rf"(?:^|(?<=\s)){entry}", re.MULTILINE)
    for i, header in enumerate(headers):
        if (header.group(1) or header.group(2)) not in _ARGS_SECTIONS:
            continue
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        body = text[header.end() : end]
        # Entries follow the header on its own line (one per line) or on the same line.
        same_line = body.split("\n", 1)[0].strip()
        entries = list((inline if same_line else at_line_start).finditer(body))
        for j, match in enumerate(entries):
            stop = entries[j + 1].start() if j + 1 < len(entries) else len(body)
            words = body[match.end() : stop].split()
            if words:
                arguments.setdefault(match.group(1), " ".join(words))
    return _Docstring(description, arguments)


# ----------------------------------------------------------------------------- arguments type


def _class_name(tool_name: str) -> str:
    parts = re.split(r"[^A-Za-z0-9]+", tool_name)
    return "".join(p[:1].upper() + p[1:] for p in parts if p) + "Arguments"


def _default(value: Any) -> Any:
    # Mutable defaults are copied per call, so one call cannot change what the next one sees.
    if isinstance(value, list | dict | set):
        return attrs.Factory(functools.partial(copy.deepcopy, value))
    return value


@attrs.frozen
class _Binding:
    """How the validated arguments are passed back to the function."""

    positional: tuple[str, ...]
    keyword: tuple[str, ...]
    context: str | None = None
    """The parameter that receives the :class:`RunContext` (``None``: the tool takes none)."""
    context_positional: bool = False
    deps: Any = Any
    """The deps type its ``RunContext[...]`` annotation names (``Any``: none named)."""


def _parameter_hints(function: Callable[..., Any]) -> dict[str, Any]:
    """The resolved annotations of the parameters (the return annotation is not needed, and a
    function may return a type its module cannot name at definition time)."""
    target: Any = function
    if not (inspect.isfunction(function) or inspect.ismethod(function)):
        target = getattr(function, "__call__", function)  # noqa: B004 - callable objects
    annotations = {k: v for k, v in inspect.get_annotations(target).items() if k != "return"}
    # Names resolve in the module of the innermost wrapped function, as get_type_hints does.
    scope = getattr(inspect.unwrap(target), "__globals__", {})
    shim = types.FunctionType(_no_code.__code__, scope)
    shim.__annotations__ = annotations
    return typing.get_type_hints(shim)


def _no_code() -> None:
    """Carries the parameter annotations of a tool function for ``typing.get_type_hints``."""


def _arguments_type(
    function: Callable[..., Any], name: str, docs: Mapping[str, str]
) -> tuple[type, _Binding]:
    where = getattr(function, "__qualname__", repr(function))
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"tool {name!r}: cannot read the signature of {where}: {exc}") from None
    try:
        hints = _parameter_hints(function)
    except Exception as exc:  # NameError, TypeError...: any failure is a definition problem
        raise ConfigError(
            f"tool {name!r}: cannot resolve the annotations of {where}: {exc}"
        ) from None
    fields: dict[str, Any] = {}
    positional: list[str] = []
    keyword: list[str] = []
    context: str | None = None
    context_positional = False
    deps: Any = Any
    for param in signature.parameters.values():
        if is_context_type(hints.get(param.name)):
            if context is not None:
                raise ConfigError(
                    f"tool {name!r}: {where} has two RunContext parameters "
                    f"({context!r} and {param.name!r})"
                )
            if param.kind is param.POSITIONAL_ONLY and positional:
                raise ConfigError(
                    f"tool {name!r}: the RunContext parameter {param.name!r} of {where} must "
                    "come before the other positional-only parameters"
                )
            context = param.name
            context_positional = param.kind is param.POSITIONAL_ONLY
            deps = next(iter(typing.get_args(hints[param.name])), Any)
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigError(
                f"tool {name!r}: *args and **kwargs cannot be described to a model "
                f"(parameter {param.name!r} of {where}); list the parameters explicitly"
            )
        if param.name not in hints:
            raise ConfigError(
                f"tool {name!r}: parameter {param.name!r} of {where} has no type annotation"
            )
        metadata = {"description": docs[param.name]} if param.name in docs else {}
        if param.default is param.empty:
            fields[param.name] = attrs.field(type=hints[param.name], metadata=metadata)
        else:
            fields[param.name] = attrs.field(
                type=hints[param.name], default=_default(param.default), metadata=metadata
            )
        (positional if param.kind is param.POSITIONAL_ONLY else keyword).append(param.name)
    cls = attrs.make_class(_class_name(name), fields, frozen=True, kw_only=True)
    cls.__module__ = getattr(function, "__module__", cls.__module__)
    cls.__doc__ = f"The arguments of the tool {name!r}."
    return cls, _Binding(tuple(positional), tuple(keyword), context, context_positional, deps)


def _check_reuse(name: str, options: ToolOptions, binding: _Binding) -> None:
    """Refuse a tool whose results could pass from one run to another unkeyed: one that takes
    the context and shares them (``coalesce``, or ``cache``, which implies it) without saying
    which context fields key them, or one whose ``replay_safe`` path leads nowhere in the deps
    type its context names."""
    if binding.context is not None and options.coalesce and options.replay_safe is None:
        keeps = "keeps its results" if options.cache else "shares executions (coalesce=True)"
        raise ConfigError(
            f"tool {name!r} takes the RunContext and {keeps}: declare the context fields "
            "its result depends on, replay_safe=('deps.user_id', ...), or replay_safe=() if it "
            "depends on none (a shared or kept result is handed to other runs); with "
            "cache=False the fields key only the sharing of concurrent calls"
        )
    for field in options.replay_safe or ():
        problem = None if field == HISTORY else typed_path_problem(field, binding.deps)
        if problem is not None:
            raise ConfigError(
                f"tool {name!r}: replay_safe entry {field!r} leads nowhere: {problem}"
            )


# ----------------------------------------------------------------------------- results


def encode_result(value: Any) -> str:
    """The text a tool's return value shows the model.

    A ``str`` is passed on unchanged. Anything else is encoded as JSON: attrs instances,
    dataclasses, pydantic models, enums, lists, tuples, dicts, numbers, booleans, ``None``,
    dates (ISO 8601), through cattrs and orjson.

    Raises:
        TypeError: the value cannot be encoded as JSON.
    """
    if isinstance(value, str):
        return value
    try:
        return json_dumps(value).decode()
    except (TypeError, ValueError) as exc:
        raise TypeError(f"the tool returned a value that is not JSON-encodable: {exc}") from None


# ----------------------------------------------------------------------------- Tool


class ToolBase(Generic[DepsT_contra]):
    """What tasks, agents and drivers hold of a tool, whatever its parameters: its spec,
    options and binding, and (to type checkers) the ``deps`` it can be handed. Every tool is
    a :class:`Tool`; this base exists so that a list of tools with different signatures has
    a precise type (``list[ToolBase[Approvals]]``) instead of one mixing in ``Any``."""

    __slots__ = ()

    function: Callable[..., Any]
    spec: ToolSpec
    options: ToolOptions
    arguments_type: type
    is_async: bool
    _binding: _Binding

    @property
    def name(self) -> str:
        """The tool's name, as the model sees it."""
        return self.spec.name

    @property
    def takes_context(self) -> bool:
        """Whether the function declares a :class:`~agentcore.RunContext` parameter."""
        return self._binding.context is not None

    def bind(self, arguments: Any, context: RunContext[Any] | None = None) -> Callable[[], Any]:
        """The function bound to validated arguments (an instance of :attr:`arguments_type`)
        and, for a tool that :attr:`takes_context`, to the calling run's ``context``.

        Returns:
            A callable without parameters: for a plain function it returns the result, for an
            ``async def`` function it returns the coroutine.
        """
        binding = self._binding
        args = [getattr(arguments, n) for n in binding.positional]
        kwargs = {n: getattr(arguments, n) for n in binding.keyword}
        if binding.context is not None:
            if binding.context_positional:
                args.insert(0, context)
            else:
                kwargs[binding.context] = context
        return functools.partial(self.function, *args, **kwargs)


AnyTool: TypeAlias = ToolBase[Never]
"""Any tool, whatever its parameters and the ``deps`` it takes (a driver holds tools of every
kind; ``Never`` is what every tool can be handed, so every tool is one)."""


@final
class Tool(ToolBase[DepsT_contra], Generic[P, R, DepsT_contra]):
    """A function the model can call, with its spec and its execution options.

    ``Tool[P, R, Deps]``: the function's parameters and result, and the ``deps`` its
    :class:`~agentcore.RunContext` parameter takes (what :func:`tool` infers from a first
    parameter annotated ``RunContext[Deps]``; ``object`` for a tool without one). A task or an
    agent holding it checks the ``deps`` of its runs against it.

    Built by :func:`tool`; calling the object calls the original function unchanged.

    Attributes:
        function: the decorated function.
        spec: what the model sees (name, description, JSON schema) plus the validator for
            its arguments.
        options: how the tool executor runs it.
        arguments_type: the attrs class the validator builds (one field per parameter but
            the :class:`~agentcore.RunContext` one).
        is_async: ``True`` for ``async def`` functions (run as trio tasks), ``False`` for
            plain functions (run in worker threads).
    """

    function: Callable[P, R]

    def __init__(
        self,
        function: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        options: ToolOptions | None = None,
    ) -> None:
        if not callable(function):
            raise ConfigError(f"@tool needs a function, got {function!r}")
        if inspect.isasyncgenfunction(function) or inspect.isgeneratorfunction(function):
            raise ConfigError(f"@tool cannot wrap a generator function ({function!r})")
        tool_name = name if name is not None else getattr(function, "__name__", "")
        if not isinstance(tool_name, str) or not _NAME.match(tool_name):
            raise ConfigError(
                f"tool name {tool_name!r} is invalid: use 1-64 letters, digits, '_' or '-'"
            )
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"tool {tool_name!r}: cannot read the signature: {exc}") from None
        docs = _parse_docstring(inspect.getdoc(function), tuple(signature.parameters))
        arguments_type, binding = _arguments_type(function, tool_name, docs.arguments)
        if options is not None:
            _check_reuse(tool_name, options, binding)
        parameters = json_schema(arguments_type)

        def validate(arguments: Any) -> Any:
            return structure(arguments, arguments_type)

        self.function = function
        self.arguments_type = arguments_type
        self.options = options if options is not None else ToolOptions()
        self.is_async = inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
            getattr(function, "__call__", None)  # noqa: B004 - async callable objects
        )
        self.spec = ToolSpec(
            name=tool_name,
            description=description if description is not None else docs.description,
            parameters=parameters,
            validator=validate,
        )
        self._binding = binding
        functools.update_wrapper(self, function)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the original function."""
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Tool {self.spec.name!r} {'async' if self.is_async else 'sync'} {self.options}>"


class _Decorator(Protocol):
    """What ``tool(...)`` with options returns: :func:`tool` with those options bound."""

    @overload
    def __call__(
        self, function: Callable[Concatenate[RunContext[D], P], R], /
    ) -> Tool[Concatenate[RunContext[D], P], R, D]: ...

    @overload
    def __call__(self, function: Callable[P, R], /) -> Tool[P, R, object]: ...


@overload
def tool(
    function: Callable[Concatenate[RunContext[D], P], R], /
) -> Tool[Concatenate[RunContext[D], P], R, D]: ...


@overload
def tool(function: Callable[P, R], /) -> Tool[P, R, object]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    cache: bool | None = None,
    ttl: float | None = None,
    coalesce: bool | None = None,
    timeout: float | None = None,
    max_concurrency: int | None = None,
    rate: float | None = None,
    burst: int | None = None,
    replay_safe: Iterable[str] | None = None,
    max_per_turn: int | None = None,
) -> _Decorator: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    cache: bool | None = None,
    ttl: float | None = None,
    coalesce: bool | None = None,
    timeout: float | None = None,
    max_concurrency: int | None = None,
    rate: float | None = None,
    burst: int | None = None,
    replay_safe: Iterable[str] | None = None,
    max_per_turn: int | None = None,
) -> Tool[..., Any] | _Decorator:
    """Make a function callable by the model.

    Use it bare (``@tool``) or with options (``@tool(timeout=10)``), on plain functions
    (run in worker threads) and ``async def`` functions (run as trio tasks)::

        @agentcore.tool(cache=True, timeout=20, max_concurrency=8)
        async def web_search(query: str, k: int = 5) -> str:
            \"\"\"Search the web.

            Args:
                query: search terms.
                k: number of hits.
            \"\"\"

    Every parameter needs a type annotation that :func:`agentcore._core.schema.json_schema`
    supports; ``*args`` and ``**kwargs`` are not allowed. One parameter may be annotated
    :class:`~agentcore.RunContext` instead: it is no argument of the model, and receives the
    calling run's context (index, input, ids, ``deps``). The docstring's text before its
    first section is the tool's description; its ``Args:`` entries describe the parameters.
    A ``str`` result is shown to the model as is; any other result is encoded as JSON
    (see :func:`encode_result`).

    Args:
        function: the function (when used bare).
        name: the tool's name (default: the function's ``__name__``).
        description: overrides the docstring's description.
        cache: remember successful results (deterministic tools only); implies ``coalesce``.
            The key is the tool and its arguments: a tool that takes the
            :class:`~agentcore.RunContext` must name what it reads with ``replay_safe``.
            Default: on with ``replay_safe``, else off.
        ttl: seconds a kept result stays valid; needs ``cache`` or ``replay_safe``.
        coalesce: share one execution among concurrent identical calls: declare it for
            reads without side effects (default: off, or on with ``cache`` or
            ``replay_safe``). A tool with side effects runs once per call. A tool that takes
            the :class:`~agentcore.RunContext` must name what keys the sharing with
            ``replay_safe``.
        timeout: seconds one execution may take.
        max_concurrency: executions of this tool running at once, at most.
        rate: executions started per second, at most, on average.
        burst: executions that may start back to back (token-bucket size, default 1).
        replay_safe: the context fields the result depends on besides the arguments
            (``("input.task",)``, ``("deps.user_id", "history")``; ``()``: none). Results are
            then kept and reused across runs whose key is the same (implies ``cache``; with
            ``cache=False`` only concurrent calls share); see :attr:`ToolOptions.replay_safe`
            and docs/tools.md for the safety rule.
        max_per_turn: calls of this tool in progress at once within one agent turn, at most
            (the others wait their turn, in the model's order).

    Returns:
        A :class:`Tool`, or a decorator making one.

    Raises:
        ConfigError: the function cannot be described (missing annotation, ``*args``,
            unsupported type, invalid name), the options are invalid, a tool that takes the
            :class:`~agentcore.RunContext` shares or keeps results without ``replay_safe``,
            or a ``replay_safe`` path leads nowhere in the deps type its context names.
    """
    keyed = replay_safe is not None
    keeps = keyed if cache is None else cache
    options = ToolOptions(
        replay_safe=replay_safe,  # converted to a sorted tuple
        cache=keeps,
        ttl=ttl,
        coalesce=(keeps or keyed) if coalesce is None else coalesce,
        timeout=timeout,
        max_concurrency=max_concurrency,
        rate=rate,
        burst=burst,
        max_per_turn=max_per_turn,
    )

    def decorate(fn: Callable[..., Any]) -> Tool[..., Any]:
        return Tool(fn, name=name, description=description, options=options)

    if function is not None:
        return decorate(function)
    return decorate  # type: ignore[return-value]  # one function serves both overloads
