"""HTTP/1.1 framing for the lean transport, sans-IO: the origin, request bytes, response events.

Nothing here touches a socket, a clock or trio; :mod:`.lean` moves the bytes. (The module
stays in ``_transports`` rather than beside the codecs' HTTP values because it parses with h11,
which the codecs do not depend on.)

Requests
--------
:class:`RequestEncoder` writes a request itself: request line, ``host``, the codec's headers,
``content-length``, body. Header names must be tokens, values Latin-1 without control
characters, the target percent-encoded and on the encoder's origin; anything else is refused
with ``TransportError(REFUSED)`` before a byte exists. The codec's own ``host``,
``content-length``, ``transfer-encoding`` and ``connection`` headers are dropped (the encoder
frames the body). Small bodies are joined to the head so they leave in one write.

Responses: theory of operation
------------------------------
:class:`ResponseReader` reads the response to one request on one connection. The socket code
feeds it what each read returned (:meth:`~ResponseReader.feed`, ``b""`` at the peer's end) and
pulls events from its one pump, :meth:`~ResponseReader.next_event`, which returns

- :data:`NEED_DATA`: feed more bytes (a caller that may not wait stops here);
- the final ``h11.Response`` head (informational ``1xx`` heads are skipped);
- body bytes, never empty, counted against the reply cap (``bytes``, or h11's ``bytearray``:
  join them with ``b"".join``);
- :data:`END`: the body ended; h11 then says whether the connection may be reused.

h11 parses every head and decides every end, but its client state machine must have seen a
request first: the reader shows it a stand-in request with the same method (the only property
of a request that changes how a response is framed; :meth:`RequestEncoder.encode` builds it).

Chunked bodies are the exception to "h11 parses": h11 makes an event of every HTTP chunk, and
streaming servers send a chunk per few characters. When the first bytes fed hold the whole
response head, h11 is given the head alone (up to the blank line, found as h11 finds it) and
the bytes behind it are *held*; if the head announces a chunked body,
:class:`~.chunked.ChunkedBody` decodes the chunks from the held bytes and later feeds, and hands
h11 the last-chunk line and what follows, so h11 still parses the trailer, ends the message and
decides about keep-alive. Any other body (or a head that took several feeds) goes to h11.

Every failure is a :class:`~agentcore.wire.TransportError`: an h11 ``ProtocolError`` becomes
``closed`` when the peer's end had been fed and ``protocol`` otherwise.
"""

from __future__ import annotations

import math
import re
from typing import Final
from urllib.parse import urlsplit

import attrs
import h11

from .._codecs.http import HttpRequest
from .._codecs.reply_limit import reply_too_large
from .._core.errors import ConfigError, TransportError, TransportErrorKind
from .chunked import ChunkedBody
from .protocol import BAD_HEADER_VALUE, HEADER_NAME

__all__ = [
    "END",
    "NEED_DATA",
    "EncodedRequest",
    "Origin",
    "RequestEncoder",
    "ResponseEvent",
    "ResponseReader",
    "decode_headers",
    "head_end",
]

_REFUSED = TransportErrorKind.REFUSED
_DEFAULT_PORTS = {"http": 80, "https": 443}

# Request bodies below this size are joined to the head (one write, one segment with
# TCP_NODELAY); larger ones are written separately to avoid copying them.
_JOIN_LIMIT = 65536

# Headers the encoder owns: it frames the body itself and names the origin it talks to.
_OWN_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})

# What a request target must not hold (it must be percent-encoded).
_BAD_TARGET = re.compile(r"[^\x21-\x7e]")

# Header names and methods already checked; bounded so odd callers cannot grow it without limit.
_MAX_KNOWN_NAMES = 256

# Where h11 ends a response head (``ReceiveBuffer.maybe_extract_lines``): a leading empty line,
# else the first LF, optional CR, LF.
_BLANK_LINE = re.compile(rb"\n\r?\n")
# Responses to these methods have no body whatever their headers say.
_NO_BODY_METHODS = frozenset({b"HEAD", b"CONNECT"})

NEED_DATA: Final = h11.NEED_DATA
"""From :meth:`ResponseReader.next_event`: feed more bytes."""
END: Final = h11.EndOfMessage()
"""From :meth:`ResponseReader.next_event`: the response is complete."""
ResponseEvent = h11.Response | bytes | type[h11.NEED_DATA] | h11.EndOfMessage
"""What :meth:`ResponseReader.next_event` returns."""


@attrs.frozen
class Origin:
    """Scheme, host and port of the server a transport talks to."""

    scheme: str
    host: str
    port: int

    @classmethod
    def from_url(cls, url: str) -> Origin:
        """The origin of an absolute ``http`` or ``https`` URL.

        Raises:
            ConfigError: the URL is not an absolute http(s) URL with a host.
        """
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise ConfigError(f"invalid URL {url!r}: {exc}") from exc
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS:
            raise ConfigError(f"URL {url!r} must start with http:// or https://")
        host = parts.hostname
        if not host:
            raise ConfigError(f"URL {url!r} has no host")
        return cls(scheme, host, _DEFAULT_PORTS[scheme] if port is None else port)

    @property
    def authority(self) -> str:
        """``host[:port]`` as it appears in URLs and the ``Host`` header."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        if self.port == _DEFAULT_PORTS[self.scheme]:
            return host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.scheme}://{self.authority}"


def _origin_prefixes(origin: Origin) -> tuple[str, ...]:
    """The canonical spellings of URLs on ``origin`` (with and without a default port)."""
    host = f"[{origin.host}]" if ":" in origin.host else origin.host
    explicit = f"{origin.scheme}://{host}:{origin.port}"
    if origin.port == _DEFAULT_PORTS[origin.scheme]:
        return (f"{origin.scheme}://{host}", explicit)
    return (explicit,)


class EncodedRequest:
    """A request turned into bytes, plus the stand-in request h11 is shown."""

    __slots__ = ("body", "head", "standin")

    def __init__(self, head: bytes, body: bytes | None, standin: h11.Request) -> None:
        self.head = head
        """The head (and the body, when it was small enough to join)."""
        self.body = body
        """The body when it is written on its own, else ``None``."""
        self.standin = standin


class RequestEncoder:
    """Requests for one origin to bytes (see the module docstring)."""

    __slots__ = ("_host_line", "_known_names", "_origin", "_prefixes", "_standins")

    def __init__(self, origin: Origin) -> None:
        self._origin = origin
        self._prefixes = _origin_prefixes(origin)
        self._host_line = f"\r\nhost: {origin.authority.encode('idna').decode('ascii')}\r\n"
        self._standins: dict[str, h11.Request] = {}
        self._known_names: set[str] = set()

    def target(self, url: str) -> str:
        """The request target of ``url`` (path and query).

        Raises:
            TransportError: (``refused``) the URL is on another origin or not percent-encoded.
        """
        target: str | None = None
        for prefix in self._prefixes:
            if url.startswith(prefix):
                rest = url[len(prefix) :]
                if not rest:
                    target = "/"
                elif rest[0] == "/":
                    target = rest
                elif rest[0] == "?":
                    target = "/" + rest
                break
        if target is None:
            # Not in the canonical spelling (case, default port written out...): parse it.
            try:
                same = Origin.from_url(url) == self._origin
            except ConfigError:
                same = False
            if not same:
                raise TransportError(
                    _REFUSED, f"{url!r} is not on this transport's origin {self._origin}"
                )
            parts = urlsplit(url)
            target = parts.path or "/"
            if parts.query:
                target = f"{target}?{parts.query}"
        if _BAD_TARGET.search(target) is not None:
            raise TransportError(_REFUSED, f"the URL {url!r} is not percent-encoded")
        return target

    def _standin(self, method: str) -> h11.Request:
        standin = self._standins.get(method)
        if standin is None:
            if HEADER_NAME.fullmatch(method) is None:
                raise TransportError(_REFUSED, f"invalid HTTP method {method!r}")
            standin = h11.Request(method=method, target="/", headers=[("host", "standin")])
            if len(self._standins) < _MAX_KNOWN_NAMES:
                self._standins[method] = standin
        return standin

    def encode(self, request: HttpRequest) -> EncodedRequest:
        """The bytes of ``request``.

        Raises:
            TransportError: (``refused``) a bad method, header name or value, or URL.
        """
        method = request.method
        standin = self._standin(method)
        body = request.body
        known = self._known_names
        lines = [method, " ", self.target(request.url), " HTTP/1.1", self._host_line]
        for name, value in request.headers:
            if name in _OWN_HEADERS:
                continue
            if name not in known:
                if HEADER_NAME.fullmatch(name) is None:
                    raise TransportError(_REFUSED, f"invalid header name {name!r}")
                if len(known) < _MAX_KNOWN_NAMES:
                    known.add(name)
            if BAD_HEADER_VALUE.search(value) is not None:
                raise TransportError(_REFUSED, f"invalid character in header {name!r}")
            lines += (name, ": ", value, "\r\n")
        if body or (method != "GET" and method != "HEAD"):  # noqa: PLR1714
            lines += ("content-length: ", str(len(body)), "\r\n")
        lines.append("\r\n")
        try:
            head = "".join(lines).encode("latin-1")
        except UnicodeEncodeError as exc:
            raise TransportError(_REFUSED, f"header values must be latin-1: {exc}") from exc
        if not body:
            return EncodedRequest(head, None, standin)
        if len(body) < _JOIN_LIMIT:
            return EncodedRequest(head + body, None, standin)
        return EncodedRequest(head, body, standin)


def head_end(data: bytes) -> int:
    """The length of the response head at the start of ``data`` (as h11 delimits it), or -1
    when the head is not complete."""
    if data[:1] == b"\n":
        return 1
    if data[:2] == b"\r\n":
        return 2
    match = _BLANK_LINE.search(data)
    return -1 if match is None else match.end()


def _is_chunked(head: h11.Response, method: bytes) -> bool:
    """Whether h11 frames the body of ``head`` (the reply to ``method``) as chunked."""
    if head.status_code in (204, 304) or method in _NO_BODY_METHODS:
        return False
    return any(name == b"transfer-encoding" for name, _ in head.headers)


def decode_headers(head: h11.Response) -> list[tuple[str, str]]:
    """The head's header pairs as text (names lower-case, as h11 gives them)."""
    return [(n.decode("ascii"), v.decode("latin-1")) for n, v in head.headers]


class ResponseReader:
    """The response to one request on one connection (see the module docstring).

    Building it tells the connection's h11 state machine that ``standin`` was sent whole.
    """

    __slots__ = ("_cap", "_chunked", "_first", "_held", "_left", "_method", "_state", "eof",
                 "head", "started")  # fmt: skip

    def __init__(self, state: h11.Connection, standin: h11.Request, max_reply: int | None):
        state.send(standin)
        state.send(END)
        self._state = state
        self._method = standin.method
        self._cap = max_reply
        self._left = math.inf if max_reply is None else max_reply
        """Body bytes this response may still carry."""
        self._held = b""
        """Bytes fed but not given to h11 (nor to :attr:`_chunked`) yet."""
        self._chunked: ChunkedBody | None = None
        """The decoder of a chunked body until its last chunk; ``None`` when h11 reads."""
        self._first = True
        self.started = False
        """Any byte of the response was fed."""
        self.eof = False
        """The peer's end was fed."""
        self.head: h11.Response | None = None
        """The final head, once :meth:`next_event` returned it."""

    def feed(self, data: bytes) -> None:
        """Bytes read from the connection; ``b""`` when the peer closed it."""
        if data:
            self.started = True
        else:
            self.eof = True
        if self._chunked is not None:
            self._held += data  # next_event hands them to the chunk decoder
            return
        state = self._state
        if self._first:
            self._first = False
            cut = head_end(data) if data and not state.trailing_data[0] else -1
            if cut >= 0:  # h11 gets the head; the body waits
                state.receive_data(data[:cut])
                self._held = data[cut:]
                return
        state.receive_data(data)

    def next_event(self) -> ResponseEvent:
        """The next of :data:`NEED_DATA`, the head, body ``bytes`` or :data:`END`.

        Raises:
            TransportError: the response is malformed, truncated, or larger than the cap.
        """
        body = self._chunked
        while body is not None:
            data = self._held
            if not data:
                if self.eof:
                    raise TransportError(
                        "closed",
                        "the server closed the connection inside the response",
                        response_started=True,
                    )
                return NEED_DATA
            self._held = b""
            piece = body.feed(data)
            if body.ended:  # h11 reads the last chunk, the trailer and the end
                self._state.receive_data(body.rest)
                self._chunked = body = None
            if piece:
                self._count(len(piece))
                return piece
        state = self._state
        while True:
            try:
                got = state.next_event()
            except h11.ProtocolError as exc:
                raise self._protocol_error(exc) from exc
            if got is NEED_DATA:
                return NEED_DATA
            if type(got) is h11.Data:
                data = got.data
                self._count(len(data))
                return data
            if type(got) is h11.EndOfMessage:
                return END
            if type(got) is h11.Response:
                return self._final_head(got)
            if type(got) is h11.InformationalResponse:
                if self._held:  # more heads follow: h11 reads everything
                    state.receive_data(self._held)
                    self._held = b""
                continue
            where = "in" if self.head is not None else "before"
            raise TransportError(
                "protocol", f"unexpected {got!r} {where} the response", response_started=True
            )

    def _final_head(self, head: h11.Response) -> h11.Response:
        self.head = head
        cap = self._cap
        if cap is not None:
            for name, value in head.headers:
                if name == b"content-length":
                    size = int(value)  # h11 accepts only digits here
                    if size > cap:
                        raise reply_too_large(cap, size, announced=True)
        if _is_chunked(head, self._method) and not self._state.trailing_data[0]:
            self._chunked = ChunkedBody()  # h11 has seen no body byte
        elif self._held:
            self._state.receive_data(self._held)
            self._held = b""
        return head

    def _count(self, size: int) -> None:
        """Count ``size`` more body bytes against the reply cap."""
        self._left -= size
        if self._left < 0:
            cap = self._cap
            assert cap is not None
            raise reply_too_large(cap, cap - int(self._left))

    def _protocol_error(self, exc: h11.ProtocolError) -> TransportError:
        started = self.started
        if self.eof:
            where = "inside the response" if started else "before responding"
            return TransportError(
                "closed", f"the server closed the connection {where}", response_started=started
            )
        return TransportError("protocol", f"malformed response: {exc}", response_started=started)
