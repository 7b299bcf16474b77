"""The contract between backend codecs and the driver.

A codec turns a ``CallModel`` effect into an :class:`~agentcore.wire.HttpRequest` and turns the
server's answer back into a ``ModelResponded`` or ``ModelFailed`` event. It never performs I/O.
For streamed replies it hands out a :class:`StreamDecoder`, a small state machine fed with raw
body pieces, which reports progress as :data:`Delta` values (so the driver can time the first
token) and the final event on :meth:`StreamDecoder.finish`.
"""

from __future__ import annotations

from typing import Literal, Protocol

import attrs

from .._core.events import CallModel, ModelFailed, ModelResponded
from .http import Headers, HttpRequest

__all__ = [
    "WARM_UPS",
    "AlignPrefix",
    "Codec",
    "Delta",
    "StreamDecoder",
    "TextDelta",
    "ToolCallDelta",
    "TransportKind",
    "WarmUp",
    "says_schema_on_final",
]


AlignPrefix = bool | Literal["auto"]
"""Whether a batch pads its shared prefix to the engine's cache blocks
(``agentcore._tasks.align``): ``"auto"`` where the blocks are large enough to pay, ``True``
whatever their size, ``False`` never."""
WarmUp = Literal["off", "check", "request", "slots"]
"""How a batch warms a server's prefix cache (``agentcore._tasks.warmup``)."""
WARM_UPS: tuple[WarmUp, ...] = ("off", "check", "request", "slots")
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


def says_schema_on_final(obj: object) -> bool:
    """Whether a codec or a model client says, with a ``schema_on_final`` of its own, that a
    typed run's final request goes out with the output schema (``False`` when it says
    nothing: the attribute is optional)."""
    return getattr(obj, "schema_on_final", False) is True
