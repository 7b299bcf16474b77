"""The simulator's service tiers: which flex requests it refuses, and how.

A chat request may carry ``service_tier``: ``"flex"`` asks for the flex tier; anything else
(absent, ``"auto"``, ``"default"``) is the standard tier. A flex request is refused the way the
providers refuse it:

- its model is not among ``SimConfig.flex_models`` (when that is set): HTTP 400
  ``invalid_request_error`` with ``param: service_tier``, as OpenAI and Azure OpenAI refuse a
  model without flex;
- otherwise a share ``SimConfig.flex_refuse_rate`` of flex requests is refused for capacity:
  HTTP 429 "Resource Unavailable" (OpenAI; ``flex_refusal_status=498`` answers as Groq does,
  with ``capacity_exceeded``). The draw hashes the request content and the number of times that
  content was refused before, so it is deterministic, yet a request sent again on flex gets a
  fresh draw.

The standard tier is never refused here. Refused requests do no engine work.
"""

from __future__ import annotations

import hashlib

import attrs

from .responses import error_body

__all__ = ["FlexGate", "wire_tier"]

_MAX_REMEMBERED = 100_000


def wire_tier(body: object) -> str:
    """The tier a decoded request body asks for: ``"flex"`` or ``"standard"``."""
    if isinstance(body, dict) and body.get("service_tier") == "flex":
        return "flex"
    return "standard"


@attrs.define(eq=False)
class FlexGate:
    """Decides which flex requests are refused (see the module docstring)."""

    refuse_rate: float
    models: tuple[str, ...] | None
    status: int
    seed: int
    flex_requests: int = attrs.field(default=0, init=False)
    """Flex requests seen (refused or not)."""
    refused: int = attrs.field(default=0, init=False)
    """Flex requests refused for capacity."""
    unsupported: int = attrs.field(default=0, init=False)
    """Flex requests refused because their model has no flex tier."""
    _refusals: dict[bytes, int] = attrs.field(factory=dict, init=False)

    def decide(self, model: str, digest: bytes) -> tuple[int, bytes] | None:
        """The status and body refusing a flex request for ``model``, or ``None`` to serve it."""
        self.flex_requests += 1
        if self.models is not None and model not in self.models:
            self.unsupported += 1
            message = (
                f"The model {model!r} does not support the 'flex' service tier (simulated); "
                "use service_tier 'auto' or 'default'"
            )
            return 400, error_body(message, "invalid_request_error", "service_tier")
        if not self.refuse_rate:
            return None
        seen = self._refusals.get(digest, 0)
        salt = f"/flex/{seen}/{self.seed}".encode()
        draw = hashlib.blake2b(digest + salt, digest_size=8).digest()
        if int.from_bytes(draw, "big") >= self.refuse_rate * 2**64:
            self._refusals.pop(digest, None)
            return None
        if len(self._refusals) >= _MAX_REMEMBERED:
            self._refusals.clear()
        self._refusals[digest] = seen + 1
        self.refused += 1
        if self.status == 498:
            message = "Flex tier capacity exceeded. Please try again later. (simulated)"
            return 498, error_body(message, "capacity_exceeded", code="capacity_exceeded")
        message = (
            "Resource Unavailable: the flex tier has no capacity for this request now; "
            "retry later or use the default tier (simulated)"
        )
        return 429, error_body(message, "resource_unavailable")
