"""The simulator's request and token limits, enforced as hosted APIs do.

Each limit is a bucket of one (simulated) minute's allowance, refilled continuously. A chat
request is admitted when the request bucket holds one request and the token bucket holds its
prompt tokens (or is full, for a prompt larger than the bucket); its completion tokens are
charged once decoded, which may take the token bucket below zero. A refused request gets a 429
with ``retry-after`` / ``retry-after-ms`` saying when it would be admitted. Every chat answer
carries OpenAI's ``x-ratelimit-*`` headers (limits, what remains, time until full).

Times are trio seconds; with ``speedup`` a simulated minute lasts ``60 / speedup`` of them.
"""

from __future__ import annotations

import math

__all__ = ["SimRateLimits"]


def _duration(seconds: float) -> bytes:
    """OpenAI's reset format: ``1.5s``, ``6m0s``, ``20ms``."""
    if seconds < 1.0:
        return f"{max(0, math.ceil(seconds * 1000))}ms".encode()
    minutes, rest = divmod(seconds, 60.0)
    if minutes:
        return f"{int(minutes)}m{rest:.0f}s".encode()
    return f"{rest:.3g}s".encode()


class _Bucket:
    __slots__ = ("level", "limit", "rate", "updated")

    def __init__(self, limit: int, minute: float) -> None:
        self.limit = limit
        self.rate = limit / minute
        self.level = float(limit)
        self.updated = 0.0

    def refill(self, now: float) -> None:
        if now > self.updated:
            self.level = min(float(self.limit), self.level + (now - self.updated) * self.rate)
            self.updated = now

    def shortfall(self, now: float, cost: float) -> float:
        """Seconds until ``cost`` is admissible (0: now)."""
        self.refill(now)
        need = min(cost, float(self.limit))
        return 0.0 if self.level >= need else (need - self.level) / self.rate

    def until_full(self) -> float:
        return max(0.0, self.limit - self.level) / self.rate


class SimRateLimits:
    """Request and token limits per simulated minute (``None``: not limited)."""

    def __init__(
        self, requests_per_minute: int | None, tokens_per_minute: int | None, speedup: float
    ) -> None:
        minute = 60.0 / speedup
        self._requests = (
            None if requests_per_minute is None else _Bucket(requests_per_minute, minute)
        )
        self._tokens = None if tokens_per_minute is None else _Bucket(tokens_per_minute, minute)
        self.refused = 0

    def admit(self, now: float, prompt_tokens: int) -> float | None:
        """Take one request and ``prompt_tokens``; ``None`` if admitted, else the seconds to
        wait before it would be (nothing is taken then)."""
        wait = 0.0
        if self._requests is not None:
            wait = self._requests.shortfall(now, 1.0)
        if self._tokens is not None:
            wait = max(wait, self._tokens.shortfall(now, float(prompt_tokens)))
        if wait > 0:
            self.refused += 1
            return wait
        if self._requests is not None:
            self._requests.level -= 1.0
        if self._tokens is not None:
            self._tokens.level -= prompt_tokens
        return None

    def charge(self, now: float, completion_tokens: int) -> None:
        """Charge the tokens decoded for an admitted request."""
        if self._tokens is not None:
            self._tokens.refill(now)
            self._tokens.level -= completion_tokens

    def headers(self, now: float) -> list[tuple[bytes, bytes]]:
        """The ``x-ratelimit-*`` headers as of ``now``."""
        found: list[tuple[bytes, bytes]] = []
        for name, bucket in (("requests", self._requests), ("tokens", self._tokens)):
            if bucket is None:
                continue
            bucket.refill(now)
            found += [
                (f"x-ratelimit-limit-{name}".encode(), str(bucket.limit).encode()),
                (
                    f"x-ratelimit-remaining-{name}".encode(),
                    str(max(0, math.floor(bucket.level))).encode(),
                ),
                (f"x-ratelimit-reset-{name}".encode(), _duration(bucket.until_full())),
            ]
        return found
