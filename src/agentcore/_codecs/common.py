"""Body fields that the OpenAI-compatible and the Anthropic codecs read and write alike."""

from __future__ import annotations

from typing import Any

from .._core.messages import ModelParams

__all__ = ["put_sampling", "wire_count"]


def wire_count(value: object) -> int | None:
    """A count or index from the wire: a non-negative integer (not a bool), otherwise ``None``."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def put_sampling(body: dict[str, Any], params: ModelParams, *, stop_field: str) -> None:
    """Set the sampling fields ``params`` gives in a request ``body``, in this order:
    ``temperature``, ``top_p`` and the stop sequences (named ``stop_field`` on the wire)."""
    if params.temperature is not None:
        body["temperature"] = params.temperature
    if params.top_p is not None:
        body["top_p"] = params.top_p
    if params.stop:
        body[stop_field] = list(params.stop)
