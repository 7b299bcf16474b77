"""Telling a deterministic rejection from a transient failure, so it is not retried in a storm.

A server error (5xx) is retried because it is usually transient. Some are not: llama-server
answers ``500 Failed to parse tool call arguments as JSON`` to every copy of a request whose
history it cannot render, and retrying the identical request six times only wastes seconds.
The rule: when a retry of the same request fails with the same error again (same kind,
status, code and message), of a kind whose row in :data:`~agentcore._core.error_policy.
ERROR_POLICY` says ``final_when_repeated``, and with a response, the failure is deterministic
and final. One retry is still made, so a genuinely transient 500 is ridden out as before.

Only ``SERVER`` errors qualify (see the table): rate limits, overload, timeouts, conflicts and
connection failures repeat identically for transient reasons. :class:`~agentcore.RetryPolicy`
applies the rule unless its ``stop_on_repeat`` is off.
"""

from __future__ import annotations

from .error_policy import policy_of
from .events import ModelError

__all__ = ["repeated_rejection"]


def repeated_rejection(previous: ModelError | None, error: ModelError) -> bool:
    """Whether ``error`` repeats ``previous`` (the failure of the previous attempt of the same
    request) as a deterministic server rejection, which makes it final."""
    return (
        previous is not None
        and error.status is not None
        and policy_of(error.kind).final_when_repeated
        and (previous.kind, previous.status, previous.code, previous.message)
        == (error.kind, error.status, error.code, error.message)
    )
