"""Rate-limit headers of hosted APIs, read into a :class:`RateObservation`.

Two families are understood:

- OpenAI and the APIs copying it: ``x-ratelimit-limit-requests``, ``-limit-tokens``,
  ``-remaining-requests``, ``-remaining-tokens``, ``-reset-requests``, ``-reset-tokens``; the
  resets are durations such as ``1s``, ``6m0s`` or ``20ms``.
- Anthropic: ``anthropic-ratelimit-requests-limit``, ``-requests-remaining``,
  ``-requests-reset``, and the same for ``tokens``; the resets are RFC 3339 times, turned into
  seconds from ``wall_now`` (Unix time) when it is given.

Malformed values are ignored (a header that cannot be read says nothing), never an error.
"""

from __future__ import annotations

import calendar
import re

from .._core.ratebudget import RateObservation
from .http import Headers

__all__ = ["read_rate_headers"]

_FIELDS = {
    "x-ratelimit-limit-requests": "limit_requests",
    "x-ratelimit-limit-tokens": "limit_tokens",
    "x-ratelimit-remaining-requests": "remaining_requests",
    "x-ratelimit-remaining-tokens": "remaining_tokens",
    "x-ratelimit-reset-requests": "reset_requests",
    "x-ratelimit-reset-tokens": "reset_tokens",
    "anthropic-ratelimit-requests-limit": "limit_requests",
    "anthropic-ratelimit-tokens-limit": "limit_tokens",
    "anthropic-ratelimit-requests-remaining": "remaining_requests",
    "anthropic-ratelimit-tokens-remaining": "remaining_tokens",
    "anthropic-ratelimit-requests-reset": "reset_requests",
    "anthropic-ratelimit-tokens-reset": "reset_tokens",
}
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?"
                       r"(?:(\d+(?:\.\d+)?)ms)?")  # fmt: skip
_MAX_COUNT = 10**12
_RFC3339 = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(\.\d+)?(?:([Zz])|([+-])(\d\d):(\d\d))"
)


def _count(value: str) -> int | None:
    value = value.strip()
    if not value.isascii() or not value.isdigit() or len(value) > 13:
        return None
    number = int(value)
    return number if number <= _MAX_COUNT else None


def _duration(value: str) -> float | None:
    """``1h2m3.5s``, ``6m0s``, ``20ms``, or plain seconds; ``None`` if unreadable."""
    value = value.strip()
    if not value or len(value) > 40:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if 0 <= seconds < 1e9 else None
    match = _DURATION.fullmatch(value)
    if match is None or not any(match.groups()):
        return None
    hours, minutes, secs, millis = (float(g) if g else 0.0 for g in match.groups())
    return hours * 3600 + minutes * 60 + secs + millis / 1000


def _until(value: str, wall_now: float | None) -> float | None:
    """An RFC 3339 time as seconds from ``wall_now``; a duration is accepted as well."""
    duration = _duration(value)
    if duration is not None or wall_now is None:
        return duration
    match = _RFC3339.fullmatch(value.strip())
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction, utc, sign, offset_hours, offset_minutes = match.groups()[6:]
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 61):
        return None
    when = float(calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)))
    when += float(fraction) if fraction else 0.0
    if utc is None:
        offset = int(offset_hours) * 3600 + int(offset_minutes) * 60
        when -= offset if sign == "+" else -offset
    return max(0.0, when - wall_now)


def read_rate_headers(headers: Headers, wall_now: float | None = None) -> RateObservation | None:
    """The rate-limit facts in ``headers`` (lower-case names), ``None`` when there are none."""
    found: dict[str, int | float] = {}
    for name, value in headers:
        field = _FIELDS.get(name)
        if field is None:
            continue
        parsed = _until(value, wall_now) if field.startswith("reset") else _count(value)
        if parsed is not None:
            found[field] = parsed
    if not found:
        return None
    return RateObservation(**found)  # type: ignore[arg-type]
