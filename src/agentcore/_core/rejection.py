"""Telling a deterministic rejection from a transient failure, so it is not retried in a storm.

A server error (5xx) is retried because it is usually transient. Some are not: llama-server
answers ``500 Failed to parse tool call arguments as JSON`` to every copy of a request whose
history it cannot render, and retrying the identical request six times only wastes seconds.
The rule: when a retry of the same request fails with the same server error again (same kind,
status, code and message), the failure is deterministic and final. One retry is still made, so
a genuinely transient 500 is ridden out as before.

Only ``SERVER`` errors that came with a response qualify: rate limits, overload, timeouts,
conflicts and connection failures repeat identically for transient reasons.
"""

from __future__ import annotations

from .events import ErrorKind, ModelError

__all__ = ["repeated_rejection"]


def repeated_rejection(previous: ModelError | None, error: ModelError) -> bool:
    """Whether ``error`` repeats ``previous`` (the failure of the previous attempt of the same
    request) as a deterministic server rejection, which makes it final."""
    return (
        previous is not None
        and error.kind is ErrorKind.SERVER
        and error.status is not None
        and (previous.kind, previous.status, previous.code, previous.message)
        == (error.kind, error.status, error.code, error.message)
    )
