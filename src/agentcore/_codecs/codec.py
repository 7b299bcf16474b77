"""The contract between backend codecs and the driver.

A codec turns a ``CallModel`` effect into an :class:`~agentcore.wire.HttpRequest` and turns the
server's answer back into a ``ModelResponded`` or ``ModelFailed`` event. It never performs I/O.
For streamed replies it hands out a :class:`StreamDecoder`, a small state machine fed with raw
body pieces, which reports progress as :data:`Delta` values (so the driver can time the first
token) and the final event on :meth:`StreamDecoder.finish`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

import attrs

from .._core.events import CallModel, ModelFailed, ModelResponded
from .http import Headers, HttpRequest
from .reply_limit import DEFAULT_MAX_REPLY_BYTES

__all__ = [
    "WARM_UPS",
    "Backend",
    "Codec",
    "Delta",
    "StreamDecoder",
    "TextDelta",
    "ToolCallDelta",
    "TransportKind",
    "WarmUp",
    "says_schema_on_final",
]


WarmUp = Literal["off", "request", "slots"]
"""How a batch warms a server's prefix cache (``agentcore._tasks.warmup``)."""
WARM_UPS: tuple[WarmUp, ...] = ("off", "request", "slots")
TransportKind = Literal["lean", "httpx"]
"""``"lean"``: h11 on trio sockets, one connection per slot (self-hosted servers).
``"httpx"``: ``httpx.AsyncClient`` (hosted APIs: proxies, HTTP/2, auth flows)."""


@attrs.frozen
class TextDelta:
    """A piece of reply text arrived."""

    text: str


@attrs.frozen
class ToolCallDelta:
    """A piece of a tool call arrived (``index`` is the call's position in the reply)."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""
    """A fragment of the raw JSON arguments."""


Delta = TextDelta | ToolCallDelta


class StreamDecoder(Protocol):
    """Decodes one streamed reply. Feeding the body whole or in any split gives the same result."""

    def feed(self, chunk: bytes) -> list[Delta]:
        """Consume one body piece; return the progress it carried."""
        ...

    def finish(self) -> ModelResponded | ModelFailed:
        """The body ended: return the final event (``ModelFailed`` if it was truncated or
        carried an in-stream error). Never raises."""
        ...


class Codec(Protocol):
    """One wire dialect. Pure: no I/O, no clock."""

    def encode(self, call: CallModel, *, stream: bool = False) -> HttpRequest:
        """The HTTP request for ``call``."""
        ...

    def decode(
        self, request_id: str, status: int, headers: Headers, body: bytes
    ) -> ModelResponded | ModelFailed:
        """The event for a complete response. Never raises."""
        ...

    def stream_decoder(self, request_id: str) -> StreamDecoder:
        """A decoder for a streamed 2xx response to ``request_id``."""
        ...


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


def says_schema_on_final(obj: object) -> bool:
    """Whether a codec or a model client says, with a ``schema_on_final`` of its own, that a
    typed run's final request goes out with the output schema (``False`` when it says
    nothing: the attribute is optional)."""
    return getattr(obj, "schema_on_final", False) is True
