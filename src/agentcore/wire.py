"""Extension points at the wire: HTTP values, codecs, transports and model clients.

Use this namespace to add a wire dialect (a :class:`Codec` and its :class:`StreamDecoder`), a
transport (:class:`Transport`), or a model client of your own (:class:`ModelClient`; the
driver accepts any object that implements it), or to configure a :class:`Backend` by hand.

- :class:`HttpRequest`, :class:`HttpResponse`: what codecs build and parse, transports move.
- :class:`Codec`, :class:`StreamDecoder`, :class:`TextDelta`, :class:`ToolCallDelta`: a dialect.
- :class:`Transport`, :class:`ResponseStream`: moving requests and streamed responses;
  :class:`TransportError` (with its :class:`TransportErrorKind`): the one exception a
  transport raises.
- :class:`ModelClient`, :class:`Exchange`: one model exchange, as the driver sees it;
  :class:`StreamingModelClient`: one that also hands out deltas as they arrive.
- :class:`SSEDecoder`, :class:`SSEEvent`: the server-sent-events decoder the codecs use.
- :func:`backend`, :class:`Backend`: a backend URL and its options to a configured codec and
  transport; :class:`BatchSettings`: a Batch API backend's settings.
"""

from __future__ import annotations

from ._backends.backend import Backend as Backend
from ._backends.backend import BatchSettings as BatchSettings
from ._backends.urls import backend as backend
from ._codecs.codec import Codec as Codec
from ._codecs.codec import StreamDecoder as StreamDecoder
from ._codecs.codec import TextDelta as TextDelta
from ._codecs.codec import ToolCallDelta as ToolCallDelta
from ._codecs.exchange import Exchange as Exchange
from ._codecs.http import HttpRequest as HttpRequest
from ._codecs.http import HttpResponse as HttpResponse
from ._codecs.sse import SSEDecoder as SSEDecoder
from ._codecs.sse import SSEEvent as SSEEvent
from ._core.errors import TransportError as TransportError
from ._core.errors import TransportErrorKind as TransportErrorKind
from ._public import publish as _publish
from ._transports.model_client import ModelClient as ModelClient
from ._transports.model_client import StreamingModelClient as StreamingModelClient
from ._transports.protocol import ResponseStream as ResponseStream
from ._transports.protocol import Transport as Transport

__all__ = [
    "Backend",
    "BatchSettings",
    "Codec",
    "Exchange",
    "HttpRequest",
    "HttpResponse",
    "ModelClient",
    "ResponseStream",
    "SSEDecoder",
    "SSEEvent",
    "StreamDecoder",
    "StreamingModelClient",
    "TextDelta",
    "ToolCallDelta",
    "Transport",
    "TransportError",
    "TransportErrorKind",
    "backend",
]

_publish(__name__, __all__, globals())
