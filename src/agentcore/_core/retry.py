"""Retry policy for model requests: when to try again, and after how long.

Pure arithmetic: no clock, no randomness of its own (the caller passes a ``random`` function
returning floats in ``[0, 1)``), so schedules can be tested exactly.

Rules, in order, after attempt ``n`` (1-based) failed with ``error``:

1. A final error (``error.retryable`` is false) is not retried.
2. With ``stop_on_repeat`` (the default), an error that repeats the previous attempt's word
   for word, of a kind the error table marks ``final_when_repeated`` (server errors), is
   deterministic and not retried (:mod:`agentcore._core.rejection`).
3. After ``max_attempts`` attempts, give up.
4. The wait is the server's ``retry_after`` when it sent one, capped at ``max_retry_after``;
   otherwise exponential back-off with full jitter: a uniform draw in
   ``[0, min(max_delay, base_delay * 2 ** (n - 1)))``.
5. If the wait would end after the time budget (``max_elapsed`` of the request's time, or the
   caller's own remaining time, e.g. a run deadline), give up now rather than sleep in vain.
   The budget counts the attempts and the waits between them, not the time an attempt spent
   queued at a provider (a Batch API hop, which may last up to 24 hours): the caller passes
   ``elapsed`` without it.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from .events import ModelError
from .rejection import repeated_rejection
from .validators import int_at_least, is_bool, number_at_least

__all__ = ["RetryPolicy"]

_seconds = number_at_least(0)


@attrs.frozen
class RetryPolicy:
    """How the driver retries failed model requests.

    The defaults allow 6 attempts within 5 minutes, starting around half a second and doubling
    up to 30 s, which rides out a restarting server or a burst of rate limiting without letting
    a run hang. A ``retry-after`` longer than a minute is cut to a minute. A server error
    answered word for word twice in a row ends the request after that one retry, unless
    ``stop_on_repeat`` is off.

    Raises:
        ConfigError: a field of the wrong type, ``max_attempts`` below 1, or a negative (or
            NaN) number of seconds.
    """

    max_attempts: int = attrs.field(default=6, validator=int_at_least(1))
    """Attempts in all, the first included (1 disables retries)."""
    base_delay: float = attrs.field(default=0.5, validator=_seconds)
    """Seconds: the back-off ceiling after the first failure; it doubles per failure."""
    max_delay: float = attrs.field(default=30.0, validator=_seconds)
    """Seconds: the back-off ceiling never grows past this."""
    max_retry_after: float = attrs.field(default=60.0, validator=_seconds)
    """Seconds: the cap on a server's ``retry-after``."""
    max_elapsed: float = attrs.field(default=300.0, validator=_seconds)
    """Seconds of the request after which no retry starts: since its first attempt, less the
    time its attempts waited in a provider's queue (a Batch API hop)."""
    # Last, so that positional arguments keep their meaning.
    stop_on_repeat: bool = attrs.field(default=True, validator=is_bool)
    """End the request when a retry fails with the same server error as the attempt before
    (same kind, status, code and message): a deterministic rejection, such as llama-server's
    500 for a history it cannot render. Off: a flaky server gets every attempt."""

    def delay(
        self,
        *,
        attempt: int,
        error: ModelError,
        elapsed: float,
        random: Callable[[], float],
        remaining: float | None = None,
        previous: ModelError | None = None,
    ) -> float | None:
        """The wait before the next attempt, or ``None`` to give up.

        Args:
            attempt: how many attempts were made so far (1 after the first failure).
            error: why the last attempt failed.
            elapsed: seconds of the request so far (since the first attempt started, less the
                time its attempts spent queued at a provider).
            random: returns a float in ``[0, 1)``; used for jitter.
            remaining: seconds left in the caller's own budget (a deadline), if any.
            previous: why the attempt before the last one failed, if it did (for
                ``stop_on_repeat``).

        Returns:
            Seconds to sleep before trying again, or ``None`` when the request has failed
            for good.
        """
        if not error.retryable or attempt >= self.max_attempts:
            return None
        if self.stop_on_repeat and repeated_rejection(previous, error):
            return None
        if error.retry_after is not None and error.retry_after >= 0:
            wait = min(error.retry_after, self.max_retry_after)
        else:
            ceiling = min(self.max_delay, self.base_delay * 2.0 ** min(attempt - 1, 64))
            wait = ceiling * random()
        if elapsed + wait > self.max_elapsed:
            return None
        if remaining is not None and wait >= remaining:
            return None
        return wait
