"""The configured backend: the value a backend URL and its options become.

:class:`Backend` is what :func:`agentcore.wire.backend` returns and what every entry point
that opens a driver takes in place of a URL: where the server is, the codec that speaks its
dialect, the transport to reach it, and the options of the backend itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._codecs.codec import Codec, TransportKind, WarmUp, says_schema_on_final
from .._codecs.reply_limit import DEFAULT_MAX_REPLY_BYTES

__all__ = ["Backend"]


@attrs.frozen
class Backend:
    """A configured inference backend: where it is, how to talk to it, what it supports.

    Built by :func:`agentcore.wire.backend` from a URL such as ``vllm://127.0.0.1:8000``.
    """

    name: str
    """Dialect name: one of :data:`agentcore._codecs.dialects.DIALECTS` (``openai``, ``vllm``,
    ``sglang``, ``dynamo``, ``sim``, ``llamacpp``), ``anthropic`` or ``bedrock``."""
    base_url: str
    """``http(s)://host[:port][/base path]`` that request paths are appended to."""
    codec: Codec = attrs.field(eq=False, repr=False)
    transport: TransportKind = "httpx"
    """Default transport: the lean h11 one for self-hosted plain-HTTP servers, httpx for
    hosted APIs."""
    self_hosted: bool = False
    """``True`` for servers we run (prefix warming on by default, no per-token cost)."""
    stream: bool = False
    """Whether requests are streamed by default."""
    options: Mapping[str, Any] = attrs.field(factory=dict, eq=False)
    """Dialect options as given (never holds the API key)."""
    max_reply_bytes: int | None = DEFAULT_MAX_REPLY_BYTES
    """The cap on one reply body; a larger reply fails with ``ErrorKind.REPLY_TOO_LARGE``."""
    reuse_streams: bool = True
    """Whether a connection is kept after a streamed reply (the dialect record's
    ``reuse_streams``: ``False`` for llama-server, which closes it right after every streamed
    reply, so reusing it races that close)."""
    warm_up: WarmUp = "off"
    """How a batch warms the shared prefix before its fan-out (``docs/backends.md``):
    ``off``, ``request`` (one one-token request) or ``slots`` (llama-server: one request, then
    the warm slot copied into every slot). Defaults to the dialect record's ``warm_up`` on a
    self-hosted server, ``off`` on a hosted API."""

    @property
    def schema_on_final(self) -> bool:
        """Whether a typed run's final request carries the output schema for the server to
        constrain the reply with (``response_format`` on the OpenAI-compatible dialects, unless
        ``response_format="never"``): the codec's own ``schema_on_final``, ``False`` for a
        codec without one (Anthropic, Bedrock: the schema is in the system prompt only)."""
        return says_schema_on_final(self.codec)
