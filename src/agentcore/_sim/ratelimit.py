"""The simulator's request and token limits, enforced as hosted APIs do.

Each limit is a bucket of one (simulated) minute's allowance, refilled continuously: the one
pure :class:`~agentcore._core.tokenbucket.TokenBucket` that the clients' budgets use too. A chat
request is admitted when the request bucket holds one request and the token bucket holds its
prompt tokens (or is full, for a prompt larger than the bucket); its completion tokens are
charged once decoded, which may take the token bucket below zero. A refused request gets a 429
with ``retry-after`` / ``retry-after-ms`` saying when it would be admitted. Every chat answer
carries OpenAI's ``x-ratelimit-*`` headers (limits, what remains, time until full).

Times are trio seconds; with ``speedup`` a simulated minute lasts ``60 / speedup`` of them.
"""

from __future__ import annotations

import math

from .._core.tokenbucket import TokenBucket

__all__ = ["SimRateLimits"]


def _duration(seconds: float) -> bytes:
    """OpenAI's reset format: ``1.5s``, ``6m0s``, ``20ms``."""
    if seconds < 1.0:
        return f"{max(0, math.ceil(seconds * 1000))}ms".encode()
    minutes, rest = divmod(seconds, 60.0)
    if minutes:
        return f"{int(minutes)}m{rest:.0f}s".encode()
    return f"{rest:.3g}s".encode()


class SimRateLimits:
    """Request and token limits per simulated minute (``None``: not limited)."""

    def __init__(
        self, requests_per_minute: int | None, tokens_per_minute: int | None, speedup: float
    ) -> None:
        minute = 60.0 / speedup
        self._requests = _bucket(requests_per_minute, minute)
        self._tokens = _bucket(tokens_per_minute, minute)
        self.refused = 0

    def admit(self, now: float, prompt_tokens: int) -> float | None:
        """Take one request and ``prompt_tokens``; ``None`` if admitted, else the seconds to
        wait before it would be (nothing is taken then)."""
        wait = 0.0
        if self._requests is not None:
            wait = self._requests.wait(now, 1.0)
        if self._tokens is not None:
            wait = max(wait, self._tokens.wait(now, float(prompt_tokens)))
        if wait > 0:
            self.refused += 1
            return wait
        if self._requests is not None:
            self._requests.take(now, 1.0)
        if self._tokens is not None:
            self._tokens.take(now, float(prompt_tokens))
        return None

    def charge(self, now: float, completion_tokens: int) -> None:
        """Charge the tokens decoded for an admitted request."""
        if self._tokens is not None:
            self._tokens.take(now, float(completion_tokens))

    def headers(self, now: float) -> list[tuple[bytes, bytes]]:
        """The ``x-ratelimit-*`` headers as of ``now``."""
        found: list[tuple[bytes, bytes]] = []
        for name, bucket in (("requests", self._requests), ("tokens", self._tokens)):
            if bucket is None:
                continue
            found += [
                (f"x-ratelimit-limit-{name}".encode(), str(round(bucket.capacity)).encode()),
                (
                    f"x-ratelimit-remaining-{name}".encode(),
                    str(max(0, math.floor(bucket.level(now)))).encode(),
                ),
                (f"x-ratelimit-reset-{name}".encode(), _duration(bucket.until_full(now))),
            ]
        return found


def _bucket(limit: int | None, minute: float) -> TokenBucket | None:
    """A minute's allowance of ``limit``, refilled over ``minute`` trio seconds; full at first."""
    return None if limit is None else TokenBucket(limit / minute, float(limit))
