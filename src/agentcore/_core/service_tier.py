"""Service tiers: which tier a request goes to first, and what a refusal on flex means.

Theory of operation
-------------------
Hosted APIs sell the same tokens at two speeds. The *standard* tier answers at once at the list
price; the *flex* tier (OpenAI's ``service_tier: "flex"``, Azure OpenAI's and Gemini's flex,
Groq's flex) answers when it has capacity, at batch prices or with higher rate limits, and
refuses a request outright when it has none. A driver's tier option is one of
:data:`SERVICE_TIERS`:

- ``standard``: every request on the standard tier (nothing is sent for the tier);
- ``flex``: every request on flex; a capacity refusal is an overload like any other, retried on
  flex with back-off within the retry policy (the request waits for capacity);
- ``flex-then-standard``: every request starts on flex; a capacity refusal sends *that request*
  to the standard tier at once (not a retry of the same tier, not a failure), and the next
  request starts on flex again.

:func:`flex_refusal` reads a failed flex request (pure, from the classified
:class:`~agentcore.ModelError`):

- a *capacity* refusal: Groq's HTTP 498 ``capacity_exceeded``; OpenAI's HTTP 429 "Resource
  Unavailable" (its flex guide: the request is not charged). A 429 whose code or message speaks
  of a rate limit (``rate_limit_exceeded``) or of quota stays what it is: those limits hold on
  every tier, so moving tiers would not help;
- an *unsupported* refusal: the model (or deployment) does not offer flex. OpenAI and Azure
  answer HTTP 400 ``invalid_request_error`` naming ``service_tier`` or flex, and Azure never
  falls back by itself. Every request of the batch would be refused the same way, so this is a
  configuration error (:class:`~agentcore.ConfigError`), raised by :meth:`TierPolicy.after`,
  which the driver raises before the batch spends anything (its first flex request goes alone).

:meth:`TierPolicy.after` is the whole decision for one failed attempt: the tier to send the
same request to next, or the failure as the retry layer should see it.
"""

from __future__ import annotations

import enum
from typing import Final, Literal

import attrs

from .errors import ConfigError
from .events import ErrorKind, ModelError

__all__ = [
    "SERVICE_TIERS",
    "Refusal",
    "ServiceTier",
    "TierPolicy",
    "WireTier",
    "check_service_tier",
    "flex_refusal",
]

ServiceTier = Literal["standard", "flex", "flex-then-standard"]
"""A driver's tier option."""
WireTier = Literal["standard", "flex"]
"""The tier one attempt is sent on."""

SERVICE_TIERS: Final[tuple[ServiceTier, ...]] = ("standard", "flex", "flex-then-standard")

_CAPACITY_STATUS: Final = 498
"""Groq's status for a flex request without capacity (``capacity_exceeded``)."""
_CAPACITY_CODES: Final = frozenset({"capacity_exceeded", "resource_unavailable"})
_CAPACITY_WORDS: Final = ("resource unavailable", "capacity")
_LIMIT_WORDS: Final = ("rate limit", "rate_limit", "quota", "per minute", "per day")
_UNSUPPORTED_STATUSES: Final = frozenset({400, 404, 422})
_UNSUPPORTED_WORDS: Final = ("service_tier", "service tier", "flex")


class Refusal(enum.Enum):
    """Why the flex tier refused a request."""

    CAPACITY = "capacity"
    """No flex capacity now: the standard tier (or a later flex attempt) may serve it."""
    UNSUPPORTED = "unsupported"
    """The model or deployment has no flex tier: every flex request would be refused."""


def check_service_tier(value: object, where: str = "service_tier") -> ServiceTier:
    """``value`` as a :data:`ServiceTier`.

    Raises:
        ConfigError: ``value`` is not one of :data:`SERVICE_TIERS`.
    """
    for tier in SERVICE_TIERS:
        if value == tier and isinstance(value, str):
            return tier
    raise ConfigError(f"{where} must be one of {list(SERVICE_TIERS)}, got {value!r}")


def flex_refusal(error: ModelError) -> Refusal | None:
    """How a failure of a request sent on the flex tier reads (see the module docstring).

    Returns:
        :attr:`Refusal.CAPACITY`, :attr:`Refusal.UNSUPPORTED`, or ``None`` for any other
        failure (a rate limit, a server error, a bad request of its own).
    """
    status = error.status
    code = (error.code or "").lower()
    message = error.message.lower()
    if status == _CAPACITY_STATUS or code in _CAPACITY_CODES:
        return Refusal.CAPACITY
    if status == 429:
        if error.kind is ErrorKind.QUOTA or any(word in code for word in _LIMIT_WORDS):
            return None
        if any(word in message for word in _LIMIT_WORDS):
            return None
        if any(word in message for word in _CAPACITY_WORDS):
            return Refusal.CAPACITY
        return None
    if status in _UNSUPPORTED_STATUSES and any(word in message for word in _UNSUPPORTED_WORDS):
        return Refusal.UNSUPPORTED
    return None


def _tier(value: object) -> ServiceTier:
    return check_service_tier(value, "TierPolicy.tier")


@attrs.frozen
class TierPolicy:
    """The service tier of a backend's requests, and the routing of flex refusals.

    Raises:
        ConfigError: ``tier`` is not one of :data:`SERVICE_TIERS`.
    """

    tier: ServiceTier = attrs.field(default="standard", converter=_tier)

    @property
    def first(self) -> WireTier:
        """The tier every request is sent on first."""
        return "standard" if self.tier == "standard" else "flex"

    def after(self, sent: WireTier, error: ModelError, model: str = "") -> WireTier | ModelError:
        """What follows the failure ``error`` of an attempt sent on ``sent``.

        Returns:
            ``"standard"``: send the same request to the standard tier now (a capacity refusal
            under ``flex-then-standard``); otherwise the failure as the retry layer should see
            it: unchanged, or, for a capacity refusal under ``flex``, a retryable
            ``OVERLOADED`` error (the request waits for flex capacity with back-off).

        Raises:
            ConfigError: flex refused the model itself (``model`` names it in the message).
        """
        if sent != "flex":
            return error
        refusal = flex_refusal(error)
        if refusal is Refusal.UNSUPPORTED:
            named = f" for model {model!r}" if model else ""
            raise ConfigError(
                f"the flex service tier is refused{named}: {error.message.strip()} "
                "(choose a model that offers flex, or service_tier='standard')"
            )
        if refusal is None:
            return error
        if self.tier == "flex-then-standard":
            return "standard"
        return attrs.evolve(error, kind=ErrorKind.OVERLOADED, retryable=True)
