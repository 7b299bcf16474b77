"""Retry policy for model requests: when to try again, and after how long.

Pure arithmetic: no clock, no randomness of its own (the caller passes a ``random`` function
returning floats in ``[0, 1)``), so schedules can be tested exactly.

Rules, in order, after attempt ``n`` (1-based) failed with ``error``:

1. A final error (``error.retryable`` is false) is not retried.
2. After ``max_attempts`` attempts, give up.
3. The wait is the server's ``retry_after`` when it sent one, capped at ``max_retry_after``;
   otherwise exponential back-off with full jitter: a uniform draw in
   ``[0, min(max_delay, base_delay * 2 ** (n - 1)))``.
4. If the wait would end after the time budget (``max_elapsed`` since the first attempt, or the
   caller's own remaining time, e.g. a run deadline), give up now rather than sleep in vain.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from .events import ModelError

__all__ = ["RetryPolicy"]


def _positive(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must not be negative, got {value}")


@attrs.frozen
class RetryPolicy:
    """How the driver retries failed model requests.

    The defaults allow 6 attempts within 5 minutes, starting around half a second and doubling
    up to 30 s, which rides out a restarting server or a burst of rate limiting without letting
    a run hang. A ``retry-after`` longer than a minute is cut to a minute.
    """

    max_attempts: int = attrs.field(default=6)
    """Attempts in all, the first included (1 disables retries)."""
    base_delay: float = attrs.field(default=0.5, validator=_positive)
    """Seconds: the back-off ceiling after the first failure; it doubles per failure."""
    max_delay: float = attrs.field(default=30.0, validator=_positive)
    """Seconds: the back-off ceiling never grows past this."""
    max_retry_after: float = attrs.field(default=60.0, validator=_positive)
    """Seconds: the cap on a server's ``retry-after``."""
    max_elapsed: float = attrs.field(default=300.0, validator=_positive)
    """Seconds since the first attempt after which no retry starts."""

    @max_attempts.validator
    def _check_attempts(self, _attribute: object, value: int) -> None:
        if value < 1:
            raise ValueError(f"max_attempts must be at least 1, got {value}")

    def delay(
        self,
        *,
        attempt: int,
        error: ModelError,
        elapsed: float,
        random: Callable[[], float],
        remaining: float | None = None,
    ) -> float | None:
        """The wait before the next attempt, or ``None`` to give up.

        Args:
            attempt: how many attempts were made so far (1 after the first failure).
            error: why the last attempt failed.
            elapsed: seconds since the first attempt started.
            random: returns a float in ``[0, 1)``; used for jitter.
            remaining: seconds left in the caller's own budget (a deadline), if any.

        Returns:
            Seconds to sleep before trying again, or ``None`` when the request has failed
            for good.
        """
        if not error.retryable or attempt >= self.max_attempts:
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
