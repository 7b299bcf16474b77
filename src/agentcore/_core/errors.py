"""The exception tree of agentcore.

Everything agentcore raises on purpose derives from :class:`AgentcoreError`. Model
misbehaviour, failing tools and failing servers are *not* exceptions: they travel as data
(events and typed reasons) and end up in a :class:`~agentcore.Result`. Exceptions are kept for
programming errors (an illegal event fed to the loop, a bad configuration, undecodable input).
"""

from __future__ import annotations

import enum
from typing import Any

__all__ = [
    "AgentcoreError",
    "ConfigError",
    "DecodeError",
    "InternalError",
    "JournalError",
    "JournalFull",
    "JournalLocked",
    "JournalMismatch",
    "LocalProtocolError",
    "TransportError",
    "TransportErrorKind",
]


class AgentcoreError(Exception):
    """Base class of every exception agentcore raises on purpose."""


class LocalProtocolError(AgentcoreError):
    """An event was illegal for the loop's current state.

    This means the code driving an :class:`~agentcore.core.AgentLoop` lost track of its state (a
    result for an unknown call id, a second reply to one request, anything after the run
    ended). The loop moves to ``RunState.ERROR`` and stays there.

    Attributes:
        state: the state the loop was in when the event arrived (a ``RunState``), if known.
        event: the offending event, if any.
    """

    def __init__(self, message: str, *, state: Any = None, event: Any = None) -> None:
        super().__init__(message)
        self.state = state
        self.event = event


class DecodeError(AgentcoreError, ValueError):
    """Input could not be decoded into the requested agentcore type.

    Raised by :func:`agentcore.core.loads` and by codecs for undecodable bytes. The underlying
    orjson/cattrs error, if any, is chained as ``__cause__``.
    """


class ConfigError(AgentcoreError, ValueError):
    """An invalid configuration value (loop config, backend URL, tool definition...)."""


class TransportErrorKind(enum.StrEnum):
    """Why a transport could not complete an exchange.

    The model client maps each kind to a ``ModelError`` in one table
    (:mod:`agentcore._codecs.classify`): every kind is worth a retry except ``REFUSED`` and
    ``TOO_LARGE``.
    """

    CONNECT = "connect"
    """No connection could be made (refused, unreachable, name not resolved, TLS failed)."""
    TIMEOUT = "timeout"
    """A time limit ran out."""
    READ = "read"
    """Reading the response failed."""
    WRITE = "write"
    """Writing the request failed (the connection broke)."""
    CLOSED = "closed"
    """The peer closed the connection, or the transport was closed."""
    PROTOCOL = "protocol"
    """The response is not valid HTTP."""
    TOO_LARGE = "too_large"
    """The reply passed the transport's ``max_reply_bytes`` (announced or received); the
    connection was closed without reading the rest. The same reply would be as large again."""
    REFUSED = "refused"
    """The request itself cannot be written (a header value with a control character, a URL
    that is not percent-encoded...). Sending it again can never succeed."""


class TransportError(AgentcoreError):
    """A transport could not complete an HTTP exchange.

    Transports raise only this (never an httpx, h11, trio or ssl exception); the model client
    turns it into a ``ModelFailed`` event for the loop.

    Attributes:
        kind: a :class:`TransportErrorKind` (a ``str`` enum, so ``kind == "timeout"`` holds).
        response_started: ``True`` once any byte of the response had arrived; a request that
            failed before that on a reused connection may be retried safely.
    """

    def __init__(
        self, kind: TransportErrorKind | str, message: str, *, response_started: bool = False
    ) -> None:
        self.kind = TransportErrorKind(kind)
        super().__init__(f"{self.kind.value}: {message}")
        self.message = message
        self.response_started = response_started


class JournalError(AgentcoreError):
    """A step journal cannot be used: it is not a journal, cannot be read or written.

    The message names the journal's file. Subclasses say why more precisely.
    """


class JournalLocked(JournalError):
    """Another process holds the journal (or the results file): two runs must not write one."""


class JournalMismatch(JournalError):
    """The journal was written for another task, batch or format version; the message names
    what differs."""


class JournalFull(JournalError):
    """The disk (or the journal's size limit) is full. Every step committed before is kept;
    the run stops rather than go on without its journal."""


class InternalError(AgentcoreError):
    """Something that should never happen happened. Please file a bug."""
