"""The outcome of one attempt at a model request, as the driver and its observers see it."""

from __future__ import annotations

import attrs

from .._core.events import ModelFailed, ModelResponded
from .._core.ratebudget import RateObservation

__all__ = ["Exchange"]


@attrs.frozen
class Exchange:
    """The outcome of one attempt at a model request."""

    event: ModelResponded | ModelFailed
    ttft: float | None = None
    """Seconds from the start of the attempt to the first non-empty delta (streamed replies
    only)."""
    rate: RateObservation | None = None
    """What the reply's rate-limit headers said (``None``: nothing)."""
    held: float = 0.0
    """Seconds of the attempt spent waiting in a provider's queue (a Batch API hop): the retry
    budget does not count them (see :class:`~agentcore.RetryPolicy`)."""
