"""Body fields that the OpenAI-compatible and the Anthropic codecs read and write alike."""

from __future__ import annotations

import base64
from typing import Any

from .._core.messages import Image, ModelParams

__all__ = ["image_base64", "image_url", "put_sampling", "wire_count"]


def image_base64(image: Image) -> str:
    """An image's bytes as standard base64 text (the image must carry ``data``)."""
    assert image.data is not None
    return base64.b64encode(image.data).decode("ascii")


def image_url(image: Image) -> str:
    """An image as one URL: its own, or its bytes as a ``data:`` URL."""
    if image.url is not None:
        return image.url
    return f"data:{image.media_type};base64,{image_base64(image)}"


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
