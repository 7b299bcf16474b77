"""Model fallback: which backend of an ordered list a failed request goes to next.

Theory of operation
-------------------
A driver may have several backends (or models), in order of preference: the primary first,
then its fallbacks. Every model request starts on the primary. Each backend makes the request
with its own inference slots and its own retries (:mod:`agentcore._core.retry`); when the
request fails *for good* there (a final error, or retries spent), :meth:`FallbackPolicy.next`
decides: if the error's kind is one the user named (``on``), the request goes to the next
backend of the list, from scratch; otherwise, or after the last backend, the failure is final
and goes to the loop. So a request visits the backends in list order, each at most once, and
stops at the first answer.

A deadline never falls over: the run has no time left for another backend.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import attrs

from .errors import ConfigError
from .events import ErrorKind, ModelError

__all__ = ["DEFAULT_FALLBACK_ON", "FallbackPolicy"]

DEFAULT_FALLBACK_ON: Final = frozenset(
    {
        ErrorKind.OVERLOADED,
        ErrorKind.RATE_LIMITED,
        ErrorKind.SERVER,
        ErrorKind.TIMEOUT,
        ErrorKind.CONNECTION,
        ErrorKind.NOT_FOUND,
    }
)
"""Failures another backend may well not have: overload, rate limits, server errors,
timeouts, unreachable servers, and an unknown model. Not the request's own faults (bad
request, too large), not auth or quota (a configuration to fix, not to hide)."""


def _kinds(value: Iterable[ErrorKind]) -> frozenset[ErrorKind]:
    if isinstance(value, str | bytes | ErrorKind):
        raise ConfigError(f"FallbackPolicy.on must be a collection of ErrorKind, got {value!r}")
    kinds = frozenset(value)
    for kind in kinds:
        if not isinstance(kind, ErrorKind):
            raise ConfigError(f"FallbackPolicy.on must hold ErrorKind values, got {kind!r}")
    if ErrorKind.DEADLINE in kinds:
        raise ConfigError("a deadline cannot fall over to another backend: the run has no time")
    return kinds


@attrs.frozen
class FallbackPolicy:
    """Which final request failures go on to the next backend.

    Raises:
        ConfigError: ``on`` holds something that is not an :class:`~agentcore.ErrorKind`, or
            ``ErrorKind.DEADLINE``.
    """

    on: frozenset[ErrorKind] = attrs.field(default=DEFAULT_FALLBACK_ON, converter=_kinds)
    """The error kinds that send a request to the next backend."""

    def next(self, current: int, count: int, error: ModelError) -> int | None:
        """The backend to try after ``current`` (0-based, of ``count``) failed with ``error``.

        Returns:
            ``current + 1`` when ``error.kind`` is one of :attr:`on` and another backend
            follows; ``None`` when the failure is final.
        """
        if error.kind in self.on and current + 1 < count:
            return current + 1
        return None
