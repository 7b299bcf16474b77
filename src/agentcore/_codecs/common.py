"""What the dialects read and write alike: body fields, tool inputs, plain JSON containers."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from .._core.errors import ConfigError
from .._core.events import CallModel
from .._core.messages import Image, ModelParams

__all__ = [
    "RAW_ARGUMENTS_KEY",
    "image_base64",
    "image_url",
    "json_default",
    "no_service_tier",
    "plain_json",
    "put_sampling",
    "tool_input",
    "wire_count",
]

RAW_ARGUMENTS_KEY = "_raw_arguments"
"""The key of a tool use's ``input`` (Anthropic, Bedrock) that carries arguments which were
not a JSON object."""


def no_service_tier(call: CallModel, api: str) -> None:
    """Refuse ``call`` when it asks for a service tier: ``api`` has none to ask for.

    Raises:
        ConfigError: ``call.service_tier`` is set.
    """
    if call.service_tier is not None:
        raise ConfigError(
            f"request {call.request_id!r} asks for the {call.service_tier!r} service tier; "
            f"the {api} API has no service tiers to ask for"
        )


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


def tool_input(arguments: str) -> Any:
    """A tool call's ``arguments`` as the JSON object Anthropic and Bedrock take as a tool use's
    ``input``: the object they hold, ``{}`` for none, and anything else as the text itself
    under :data:`RAW_ARGUMENTS_KEY`."""
    if not arguments.strip():
        return {}
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        value = None
    if isinstance(value, dict):
        return value
    return {RAW_ARGUMENTS_KEY: arguments}


def plain_json(value: Any) -> Any:
    """A JSON value (a tool's schema) copied into plain dicts and lists, the only containers
    orjson encodes, for a body that is returned as well as encoded."""
    if isinstance(value, Mapping):
        return {str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_json(v) for v in value]
    return value


def json_default(value: object) -> object:
    """orjson's ``default`` for the other containers a body may hold (read-only mappings,
    tuples, sets): each as a dict or list, met only when encoding."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Sequence | frozenset | set) and not isinstance(value, str | bytes):
        return list(value)
    raise TypeError(f"cannot serialize {type(value).__name__}")
