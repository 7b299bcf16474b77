"""Tools for testing code built on agentcore.

- :class:`ScriptedModel`: an in-process model whose replies come from a policy function or a
  script, with latency spent in trio time. Open a driver or a batch on it
  (``backend=ScriptedModel(...)``) to test agents, tools and schedules without a server.
- :func:`run_in_virtual_time`: run an async function under trio with a ``MockClock`` that
  jumps to the next deadline whenever every task is blocked, so a batch that "takes" minutes
  of model and tool latency finishes at once, with exact, reproducible virtual timings.
- :mod:`agentcore.testing.strategies`: Hypothesis strategies for messages, tool calls, events,
  effects and model replies, for property tests of policies, schedulers and drivers. Import it
  explicitly; it needs ``hypothesis`` installed, this package does not.

See ``docs/testing.md`` for worked examples, including a stateful test of a slot policy.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs
import trio
import trio.testing

from ._scripted import Reply as Reply
from ._scripted import ScriptedModel as ScriptedModel
from ._scripted import StreamCut as StreamCut

__all__ = ["Reply", "ScriptedModel", "StreamCut", "VirtualRun", "run_in_virtual_time"]

_T = TypeVar("_T")


@attrs.frozen
class VirtualRun:
    """What :func:`run_in_virtual_time` returns: the function's value and the virtual time
    that passed (in seconds)."""

    value: Any
    elapsed: float


def run_in_virtual_time(fn: Callable[..., Awaitable[Any]], *args: Any) -> VirtualRun:
    """Run ``fn(*args)`` under trio in virtual time.

    Time jumps to the next deadline whenever every task is blocked, so sleeps (model and tool
    latency, retry back-off, timeouts) cost no real time and the elapsed virtual time is
    exact. Each call gets a fresh clock, so it is safe inside a Hypothesis ``@given`` test.

    Returns:
        A :class:`VirtualRun` with the value returned by ``fn`` and the virtual seconds spent.
    """
    clock = trio.testing.MockClock(autojump_threshold=0)

    async def timed() -> VirtualRun:
        start = trio.current_time()
        value = await fn(*args)
        return VirtualRun(value, trio.current_time() - start)

    return trio.run(timed, clock=clock)


from .._public import publish as _publish  # noqa: E402 - after the definitions it presents

_publish(__name__, __all__, globals())
