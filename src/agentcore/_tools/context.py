""":class:`RunContext`: what a tool knows about the run that called it.

A tool function may declare one parameter annotated ``RunContext`` (or ``RunContext[Deps]``).
That parameter is not an argument the model sees: it is left out of the tool's JSON schema
and of its validator, and the executor fills it at call time with the calling run's context.
Only the fields a tool declares ``replay_safe`` enter its reuse key
(:func:`context_value` reads them); a declared path must lead somewhere
(:func:`typed_path_problem` checks it against a typed deps when the tool is made,
:func:`value_path_problem` against a run's context).

:meth:`RunContext.progress` reports a long tool's progress. It reaches somebody only when the
call is observed (a watcher, the trace, the CLI): the driver then hands the tool a context of
its own for that call, carrying the call's reporter. Otherwise the run's one context has no
reporter and ``progress`` returns at once: nothing is built for it.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic

import attrs

from .._core.schema import field_types

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    DepsT = TypeVar("DepsT", default=Any)
else:  # type parameter defaults exist for type checkers only (PEP 696)
    from typing import TypeVar

    DepsT = TypeVar("DepsT")

__all__ = [
    "MISSING",
    "RunContext",
    "context_value",
    "for_call",
    "history_of",
    "is_context_type",
    "typed_path_problem",
    "value_path_problem",
    "with_reporter",
]


@attrs.frozen
class RunContext(Generic[DepsT]):
    """The run a tool call serves, and the user's ``deps``.

    Declare a parameter of this type on a tool to receive it (any name, excluded from the
    schema the model sees)::

        @agentcore.tool
        async def approve(ctx: agentcore.RunContext[Approvals], request: str) -> str:
            \"\"\"Ask a human to approve a request. Args: request: what to approve.\"\"\"
            return await ctx.deps.wait_for(ctx.index, request)

    A tool taking the context runs once per call unless it declares ``coalesce=True`` or
    ``cache=True``; then identical concurrent calls from different runs share one
    execution, which sees the context of the run that started it.
    """

    index: int
    """The run's index: its input's position in a batch (``Driver.run``: its ``index``)."""
    run_id: str
    """The run id (the prefix of its request ids)."""
    session_id: str
    """The session id sent to the server with the run's requests."""
    input: Any
    """The batch input the run was compiled from (``None`` outside a batch)."""
    deps: DepsT
    """The ``deps`` object given to the batch or the driver (``None`` if none was)."""
    idempotency_key: str = ""
    """The idempotency key of the call being served (``{run_id}/{turn}/{index}``): the same
    when the call is made again, after its run was resumed from its journal or its step
    was run again by another distributed worker. A tool with side effects records it with
    the effect, and does nothing the second time it sees it (docs/tools.md, "Side effects
    exactly once"). ``""`` outside a call."""
    _reporter: Callable[[float, str], None] | None = attrs.field(
        default=None, eq=False, repr=False, alias="reporter"
    )
    """Where :meth:`progress` goes: set for an observed call, else ``None``."""
    _history: Callable[[], str] | None = attrs.field(
        default=None, eq=False, repr=False, alias="history"
    )
    """The digest of the run's tool history (for ``replay_safe=("history",)`` keys)."""

    def progress(self, fraction: float, message: str = "") -> None:
        """Report how far the calling tool has got, as a :class:`~agentcore.ToolProgress`
        step event (to a watcher, the trace, the CLI's progress line).

        Cheap when nobody listens (it returns at once), never waits, holds nothing; callable
        from an ``async def`` tool and from a plain one running in a worker thread. Reports
        closer together than 0.1 s are dropped (but the one at ``fraction`` 1); a watcher that
        falls behind misses some. A shared (coalesced) execution reports to the call that
        started it.

        Args:
            fraction: the share done, from 0 to 1.
            message: what the tool is doing (short).

        Raises:
            ValueError: ``fraction`` is not a number from 0 to 1, or ``message`` is not text.
        """
        if (
            isinstance(fraction, bool)
            or not isinstance(fraction, int | float)
            or not 0.0 <= fraction <= 1.0
            or math.isnan(fraction)
        ):
            raise ValueError(f"progress fraction must be a number from 0 to 1, got {fraction!r}")
        if not isinstance(message, str):
            raise ValueError(f"progress message must be a str, got {message!r}")
        reporter = self._reporter
        if reporter is not None:
            reporter(float(fraction), message)


def is_context_type(annotation: Any) -> bool:
    """Whether a resolved annotation is ``RunContext`` or ``RunContext[...]``."""
    return annotation is RunContext or typing.get_origin(annotation) is RunContext


MISSING: Any = ("agentcore.missing",)
"""What :func:`context_value` gives for a path that leads nowhere (an absent key, a missing
attribute): distinct from every JSON value. A call whose key would need it gets no key."""

_SCALARS: Mapping[str, type] = {"index": int, "run_id": str, "session_id": str}
"""The context fields that are plain values: a path cannot go further into them."""

_SHOWN = 12
"""Field or key names listed at most when a path leads nowhere."""


def _listed(names: Iterable[Any]) -> str:
    names = [str(n) for n in names]
    more = f", ... ({len(names)} in all)" if len(names) > _SHOWN else ""
    return ", ".join(names[:_SHOWN]) + more if names else "none"


def _type_name(tp: Any) -> str:
    return getattr(tp, "__qualname__", None) or repr(tp)


def typed_path_problem(path: str, deps: Any) -> str | None:
    """Why the ``replay_safe`` entry ``path`` leads nowhere in every run whose deps are of
    type ``deps`` (the type a tool's ``RunContext[...]`` names; ``Any``: unknown), or
    ``None``: it leads somewhere, or only a run can tell (``input``, deps of a type that is
    not an attrs class, a dataclass, a ``TypedDict`` or a pydantic model)."""
    head, *rest = path.split(".")
    if head in _SCALARS:
        if rest:
            return f"{head} is a {_SCALARS[head].__name__}, with no field {rest[0]!r}"
        return None
    if head != "deps":
        return None
    tp, walked = deps, [head]
    for part in rest:
        fields = field_types(tp)
        if fields is None:
            return None
        if part not in fields:
            return (
                f"{'.'.join(walked)} is a {_type_name(tp)}, which has no field {part!r} "
                f"(its fields: {_listed(fields)})"
            )
        tp = fields[part]
        walked.append(part)
    return None


def value_path_problem(context: RunContext[Any], path: str) -> str | None:
    """Why the ``replay_safe`` entry ``path`` leads nowhere in ``context`` (naming what is
    there instead), or ``None``."""
    head, *rest = path.split(".")
    value: Any = getattr(context, head)
    walked = [head]
    for part in rest:
        where = ".".join(walked)
        if isinstance(value, Mapping):
            if part not in value:
                return f"{where} is a mapping without the key {part!r} (its keys: {_listed(value)})"
            value = value[part]
        else:
            found = getattr(value, part, MISSING)
            if found is MISSING:
                fields = field_types(type(value))
                listed = "" if fields is None else f" (its fields: {_listed(fields)})"
                what = "None" if value is None else f"a {type(value).__name__}"
                return f"{where} is {what}, which has no field {part!r}{listed}"
            value = found
        walked.append(part)
    return None


def context_value(context: RunContext[Any], path: str) -> Any:
    """The value a ``replay_safe`` entry names in ``context``: ``"deps.user_id"`` is
    ``context.deps.user_id`` (a mapping is read by key, anything else by attribute)."""
    head, *rest = path.split(".")
    value: Any = getattr(context, head)
    for part in rest:
        if isinstance(value, Mapping):
            if part not in value:
                return MISSING
            value = value[part]
        else:
            value = getattr(value, part, MISSING)
            if value is MISSING:
                return MISSING
    return value


def history_of(context: RunContext[Any]) -> str:
    """The digest of the tool history of the run ``context`` belongs to (``""`` outside a
    run)."""
    history = context._history
    return "" if history is None else history()


def for_call(context: RunContext[Any], idempotency_key: str) -> RunContext[Any]:
    """``context`` for the call whose idempotency key is ``idempotency_key``."""
    return attrs.evolve(context, idempotency_key=idempotency_key)


def with_reporter(
    context: RunContext[Any], reporter: Callable[[float, str], None]
) -> RunContext[Any]:
    """``context`` for one observed call: the same fields, progress going to ``reporter``."""
    return attrs.evolve(context, reporter=reporter)
