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

Which kinds fall over by default, and which may fall over at all, is read from the error
table (:data:`~agentcore._core.error_policy.ERROR_POLICY`, columns ``falls_over`` and
``may_fall_over``). A deadline never falls over: the run has no time left for another backend.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import attrs

from .error_policy import kinds_where, policy_of
from .errors import ConfigError
from .events import ErrorKind, ModelError

__all__ = ["DEFAULT_FALLBACK_ON", "FallbackPolicy"]

DEFAULT_FALLBACK_ON: Final = kinds_where("falls_over")
"""The kinds whose row in the error table says ``falls_over``: failures another backend may
well not have (overload, rate limits, server errors, timeouts, unreachable servers, an unknown
model). Not the request's own faults (bad request, too large), not auth or quota (a
configuration to fix, not to hide)."""


def _kinds(value: Iterable[ErrorKind]) -> frozenset[ErrorKind]:
    if isinstance(value, str | bytes | ErrorKind):
        raise ConfigError(f"FallbackPolicy.on must be a collection of ErrorKind, got {value!r}")
    kinds = frozenset(value)
    for kind in kinds:
        if not isinstance(kind, ErrorKind):
            raise ConfigError(f"FallbackPolicy.on must hold ErrorKind values, got {kind!r}")
    refused = sorted(kind.value for kind in kinds if not policy_of(kind).may_fall_over)
    if refused:
        raise ConfigError(
            f"FallbackPolicy.on cannot hold {', '.join(refused)}: such a failure cannot fall"
            " over to another backend (a deadline leaves the run no time)"
        )
    return kinds


@attrs.frozen
class FallbackPolicy:
    """Which final request failures go on to the next backend.

    Raises:
        ConfigError: ``on`` holds something that is not an :class:`~agentcore.ErrorKind`, or
            a kind that may not fall over (``ErrorKind.DEADLINE``).
    """

    on: frozenset[ErrorKind] = attrs.field(
        factory=lambda: kinds_where("falls_over"), converter=_kinds
    )
    """The error kinds that send a request to the next backend (default: the kinds whose row
    in the error table says ``falls_over``, :data:`DEFAULT_FALLBACK_ON`)."""

    def next(self, current: int, count: int, error: ModelError) -> int | None:
        """The backend to try after ``current`` (0-based, of ``count``) failed with ``error``.

        Returns:
            ``current + 1`` when ``error.kind`` is one of :attr:`on` and another backend
            follows; ``None`` when the failure is final.
        """
        if error.kind in self.on and current + 1 < count:
            return current + 1
        return None
