""":class:`RunContext`: what a tool knows about the run that called it.

A tool function may declare one parameter annotated ``RunContext`` (or ``RunContext[Deps]``).
That parameter is not an argument the model sees: it is left out of the tool's JSON schema,
of its validator and of the coalescing key, and the executor fills it at call time with the
calling run's context.
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Any, Generic

import attrs

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    DepsT = TypeVar("DepsT", default=Any)
else:  # type parameter defaults exist for type checkers only (PEP 696)
    from typing import TypeVar

    DepsT = TypeVar("DepsT")

__all__ = ["RunContext", "is_context_type"]


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


def is_context_type(annotation: Any) -> bool:
    """Whether a resolved annotation is ``RunContext`` or ``RunContext[...]``."""
    return annotation is RunContext or typing.get_origin(annotation) is RunContext
