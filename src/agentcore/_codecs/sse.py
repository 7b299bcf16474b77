"""Incremental server-sent events decoder (WHATWG HTML, "Interpreting an event stream").

Theory of operation
-------------------
Bytes arrive in arbitrary pieces. They pass through an incremental UTF-8 decoder (invalid
sequences become U+FFFD, a sequence split across pieces is completed by the next piece), then
are cut into lines at CRLF, lone LF or lone CR. A CR that ends one piece may be the first half
of a CRLF: we end the line at once and remember to swallow a LF that starts the next piece, so
the same bytes give the same lines however they are split. One BOM is dropped at the very
start of the stream only.

Each line is a field (``name: value``, one leading space of the value dropped), a comment
(starts with ``:``) or empty. ``data`` lines accumulate; ``event`` sets the type of the event
being built; ``id`` sets the last event id (kept across events); ``retry`` with only digits
sets the reconnection time. An empty line dispatches the event being built if it has data
(``data`` lines joined with LF, type ``message`` by default) and resets the data and type. At
the end of the stream an event that was not terminated by an empty line is discarded.

The decoder is a pure value machine: :meth:`SSEDecoder.feed` returns the events completed by
the piece, :meth:`SSEDecoder.finish` ends the stream. Feeding a stream whole, byte by byte or
in any other split yields the same events.
"""

from __future__ import annotations

import codecs
import re

import attrs

__all__ = ["SSEDecoder", "SSEEvent"]

_LINE_END = re.compile("[\r\n]")


@attrs.frozen
class SSEEvent:
    """One dispatched event."""

    event: str = "message"
    data: str = ""
    id: str = ""
    """The last event id in force when the event was dispatched."""


class SSEDecoder:
    """Turns byte pieces of an event stream into :class:`SSEEvent` values."""

    __slots__ = ("_buf", "_data", "_event", "_last_id", "_skip_lf", "_started", "_utf8", "retry")

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self._buf: list[str] = []
        """Pieces of the current, unterminated line (none holds a line ending)."""
        self._skip_lf = False
        self._started = False
        self._data: list[str] = []
        self._event = ""
        self._last_id = ""
        self.retry: int | None = None
        """Reconnection time in ms from the last valid ``retry`` field, if any."""

    @property
    def pending(self) -> bool:
        """``True`` when an unterminated line or event is buffered."""
        return bool(self._buf or self._data or self._event)

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Decode one piece of the stream; return the events it completed."""
        return self._feed_text(self._utf8.decode(chunk))

    def finish(self) -> list[SSEEvent]:
        """End the stream. A pending, unterminated event is discarded (per the standard)."""
        events = self._feed_text(self._utf8.decode(b"", final=True))
        self._buf.clear()
        self._data.clear()
        self._event = ""
        return events

    def _feed_text(self, text: str) -> list[SSEEvent]:
        if not text:
            return []
        if not self._started:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
        if self._skip_lf:
            self._skip_lf = False
            if text.startswith("\n"):
                text = text[1:]
        events: list[SSEEvent] = []
        if self._buf:
            # A line continues from earlier pieces. The buffered pieces hold no line ending,
            # so they are joined once, when a line ending finally arrives (a long line
            # arriving in many pieces costs linear, not quadratic, time), and the join is
            # the line's value alone: a long line exists once, not as the line, its value
            # and copies of them.
            end = _LINE_END.search(text)
            if end is None:
                self._buf.append(text)
                return events
            cut = end.start()
            if cut:
                self._buf.append(text[:cut])
            self._long_line(events)
            cut += 1
            if text[cut - 1] == "\r":
                if cut == len(text):
                    self._skip_lf = True  # the first half of a CRLF split across pieces
                elif text[cut] == "\n":
                    cut += 1
            text = text[cut:]
        if "\n" not in text and "\r" not in text:
            # No line ends here: park the piece.
            if text:
                self._buf.append(text)
            return events
        if "\r" in text:
            # A CR ending the text may be the first half of a CRLF split across pieces.
            self._skip_lf = text[-1] == "\r"
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")
        rest = lines.pop()
        for line in lines:
            self._line(line, events)
        if rest:
            self._buf.append(rest)
        return events

    def _long_line(self, events: list[SSEEvent]) -> None:
        """Process the line made of the buffered pieces (and empty the buffer)."""
        pieces = self._buf
        self._buf = []
        first = pieces[0]
        colon = first.find(":")
        if not 0 < colon < len(first) - 1:
            # A comment, or the name, colon and the value's first character are not all in
            # the first piece (rare): the whole line, the plain way.
            self._line("".join(pieces), events)
            return
        start = colon + 2 if first[colon + 1] == " " else colon + 1
        name = first[:colon]
        pieces[0] = first[start:]
        value = "".join(pieces)
        pieces.clear()
        self._field(name, value, events)

    def _line(self, line: str, events: list[SSEEvent]) -> None:
        if not line:
            if self._data:
                events.append(
                    SSEEvent(self._event or "message", "\n".join(self._data), self._last_id)
                )
                self._data = []
            self._event = ""
            return
        if line[0] == ":":
            return
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":  # the common field, without a call
            self._data.append(value)
        else:
            self._field(name, value, events)

    def _field(self, name: str, value: str, events: list[SSEEvent]) -> None:
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry = int(value)
