"""Choosing and building a transport for a backend's base URL."""

from __future__ import annotations

import ssl

from .._codecs.codec import TransportKind
from .._codecs.reply_limit import DEFAULT_MAX_REPLY_BYTES
from .._core.errors import ConfigError
from .lean import LeanTransport, Origin
from .protocol import Transport

__all__ = ["TransportKind", "make_transport"]


def make_transport(
    base_url: str,
    *,
    kind: TransportKind,
    max_connections: int,
    verify: bool | ssl.SSLContext = True,
    max_reply_bytes: int | None = DEFAULT_MAX_REPLY_BYTES,
    reuse_streams: bool = True,
) -> Transport:
    """Build the transport for the server at ``base_url``.

    Args:
        base_url: the backend's base URL, e.g. ``http://127.0.0.1:8000/v1``; requests carry
            absolute URLs. The lean transport serves only this URL's origin.
        kind: which implementation to use.
        max_connections: connections kept for reuse; match the number of inference slots.
        verify: verify TLS certificates (``True``), not (``False``), or with this
            ``ssl.SSLContext``.
        max_reply_bytes: the cap on one response body (``None``: no cap).
        reuse_streams: keep connections after streamed responses (lean transport; off for
            servers that close after every streamed reply).

    Returns:
        A transport; close it with ``await transport.aclose()``.

    Raises:
        ConfigError: unknown ``kind``, a base URL that is not absolute http(s), or
            ``max_connections`` below 1.
    """
    origin = Origin.from_url(base_url)
    if max_connections < 1:
        raise ConfigError(f"max_connections must be at least 1, not {max_connections}")
    if kind == "lean":
        return LeanTransport(
            origin,
            max_connections=max_connections,
            verify=verify,
            max_reply_bytes=max_reply_bytes,
            reuse_streams=reuse_streams,
        )
    if kind == "httpx":
        from .hosted import HttpxTransport  # noqa: PLC0415 - httpx, loaded when a backend uses it

        return HttpxTransport(
            max_connections=max_connections, verify=verify, max_reply_bytes=max_reply_bytes
        )
    raise ConfigError(f"unknown transport kind {kind!r}; use 'lean' or 'httpx'")
