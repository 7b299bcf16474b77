"""Classification of failed model requests into :class:`~agentcore.ModelError` values.

This module is the one place where ``ModelError`` values are made from what happened at the
I/O edge. It decides the *kind*; whether a kind is worth a retry is its row's ``retryable`` in
the error table (:data:`agentcore._core.error_policy.ERROR_POLICY`). Its inputs:

- a transport failure (:func:`transport_failure`): every :class:`~agentcore.wire.
  TransportErrorKind` is a retryable connection or timeout error, except ``REFUSED`` (a request
  that cannot be written, such as a header value with a control character), which is a final
  ``BAD_REQUEST``; a stream broken after the response started is a retryable truncation;
- a request the codec cannot encode (:func:`unusable_request`): a final ``BAD_REQUEST``;
- a 2xx reply that does not follow the protocol (:func:`protocol_error`: a JSON body cut short
  by a proxy or a dying server, an event stream with a malformed event): retryable, within
  the retry policy's bounds, streamed or not;
- the run's deadline (:func:`deadline_error`): final;
- an HTTP error answer: the status, the ``retry-after`` family of headers,
  ``x-should-retry``, and the error body, whose shape differs between servers:

- OpenAI and current vLLM: ``{"error": {"message", "type", "code", "param"}}``;
- SGLang and older vLLM: flat ``{"object": "error", "message", "type", "code"}``;
- FastAPI-style servers: ``{"detail": ...}`` (a string or a list of validation problems);
- Anthropic: ``{"type": "error", "error": {"type", "message"}}``;
- AWS Bedrock: ``{"message"}`` (an HTTP error's type is in its ``x-amzn-errortype`` header,
  and its status decides as for any server); an exception inside a stream names its type in
  the frame's headers, and is classified by :func:`classify_stream_error` like the others.

Rules, in order:

1. A quota or billing type/code (``insufficient_quota``, ``billing_error``...) is ``QUOTA``
   and final, even on a 429: waiting does not refill a spent balance.
2. A context-length type/code (``context_length_exceeded``, ``request_too_large``,
   llama-server's ``exceed_context_size_error``) or a context-overflow wording in a 4xx
   message is ``TOO_LARGE`` and final. The wordings: OpenAI's and vLLM's "maximum context
   length", vLLM's "longer than the maximum model length" (its input processor), SGLang's
   "longer than the model's context length" (and its "exceeds the model's maximum context
   length", covered by the first), llama-server's "exceeds the available context size".
3. An overload type (``overloaded_error``) on a 429 or 5xx is ``OVERLOADED``.
4. Otherwise the status decides: 429 rate limited, 408 timeout, 409 conflict, 503/529
   overloaded, other 5xx server error (all retryable); 400/422 bad request, 401/403 auth,
   404 not found, 413 too large, 402 quota (final); any other status a protocol error, final
   although ``PROTOCOL`` is retryable for a garbled 2xx reply: a status outside the error
   range (a 3xx redirect the client does not follow) comes back the same on every attempt.
5. ``x-should-retry: true|false`` overrides the retryability decided above (the OpenAI and
   Anthropic SDKs honour the same header).

Nothing here raises: malformed bodies and headers are tolerated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson

from .._core.error_policy import policy_of
from .._core.errors import TransportError, TransportErrorKind
from .._core.events import ErrorKind, ModelError, ModelFailed
from .http import Headers, header
from .jsonbody import loads

__all__ = [
    "classify_http_error",
    "classify_status",
    "classify_stream_error",
    "connection_error",
    "deadline_error",
    "protocol_error",
    "reply_payload",
    "retry_after_seconds",
    "transport_failure",
    "truncated_stream",
    "unusable_request",
]

MAX_MESSAGE_CHARS = 2000
"""Error messages are cut to this length: enough for any real server message, while a
misbehaving server that answers with a whole HTML page does not bloat transcripts."""

_QUOTA_CODES = frozenset(
    {
        "insufficient_quota",
        "billing_error",
        "billing_hard_limit_reached",
        "billing_not_active",
        "credit_balance_exhausted",
        "project_spend_limit_exceeded",
        "spend_limit_exceeded",
    }
)
_TOO_LARGE_CODES = frozenset(
    {"context_length_exceeded", "request_too_large", "exceed_context_size_error"}
)
_OVERLOAD_CODES = frozenset({"overloaded_error", "overloaded", "server_overloaded"})
_RATE_LIMIT_CODES = frozenset({"rate_limit_error", "rate_limit_exceeded", "slow_down"})
_CONTEXT_PHRASES = (
    "maximum context length",
    "context length exceeded",
    "context window",
    "longer than the maximum model length",  # vLLM: "The decoder prompt (length N) is ..."
    "longer than the model's context length",  # SGLang: "The input (N tokens) is ..."
    "exceeds the available context size",  # llama-server
)

# Error types that name a kind on their own, used for in-stream errors (which arrive over a
# 200 response and so have no meaningful status).
_TYPE_KINDS: Mapping[str, ErrorKind] = {
    **dict.fromkeys(_QUOTA_CODES, ErrorKind.QUOTA),
    **dict.fromkeys(_TOO_LARGE_CODES, ErrorKind.TOO_LARGE),
    **dict.fromkeys(_OVERLOAD_CODES, ErrorKind.OVERLOADED),
    **dict.fromkeys(_RATE_LIMIT_CODES, ErrorKind.RATE_LIMITED),
    "invalid_request_error": ErrorKind.BAD_REQUEST,
    "badrequesterror": ErrorKind.BAD_REQUEST,
    "authentication_error": ErrorKind.AUTH,
    "permission_error": ErrorKind.AUTH,
    "not_found_error": ErrorKind.NOT_FOUND,
    "api_error": ErrorKind.SERVER,
    "server_error": ErrorKind.SERVER,
    "internalservererror": ErrorKind.SERVER,
    "timeout_error": ErrorKind.TIMEOUT,
    # AWS Bedrock's exception types (a stream's ``:exception-type``), lower-cased
    "throttlingexception": ErrorKind.RATE_LIMITED,
    "servicequotaexceededexception": ErrorKind.RATE_LIMITED,
    "serviceunavailableexception": ErrorKind.OVERLOADED,
    "modelnotreadyexception": ErrorKind.OVERLOADED,
    "internalserverexception": ErrorKind.SERVER,
    "modelstreamerrorexception": ErrorKind.SERVER,
    "modeltimeoutexception": ErrorKind.TIMEOUT,
    "validationexception": ErrorKind.BAD_REQUEST,
    "modelerrorexception": ErrorKind.BAD_REQUEST,
    "accessdeniedexception": ErrorKind.AUTH,
    "resourcenotfoundexception": ErrorKind.NOT_FOUND,
}

_STATUS_KINDS: Mapping[int, ErrorKind] = {
    400: ErrorKind.BAD_REQUEST,
    401: ErrorKind.AUTH,
    402: ErrorKind.QUOTA,
    403: ErrorKind.AUTH,
    404: ErrorKind.NOT_FOUND,
    408: ErrorKind.TIMEOUT,
    409: ErrorKind.CONFLICT,
    413: ErrorKind.TOO_LARGE,
    422: ErrorKind.BAD_REQUEST,
    429: ErrorKind.RATE_LIMITED,
    503: ErrorKind.OVERLOADED,
    529: ErrorKind.OVERLOADED,
}


def retry_after_seconds(headers: Headers) -> float | None:
    """How long the server asked us to wait, in seconds.

    ``retry-after-ms`` (milliseconds, a non-standard header OpenAI sends) wins over
    ``retry-after`` (delta-seconds). A ``retry-after`` holding an HTTP-date is not evaluated:
    that needs a wall clock, which codecs do not have, so the result is ``None`` and the
    driver falls back to its own backoff. Negative or non-numeric values are ignored.

    Args:
        headers: response headers (names lower-case).

    Returns:
        The delay in seconds, or ``None`` when the server gave no usable delay.
    """
    millis = _non_negative_number(header(headers, "retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    return _non_negative_number(header(headers, "retry-after"))


def classify_status(
    status: int,
    headers: Headers,
    *,
    error_type: str | None = None,
    code: str | None = None,
    message: str = "",
) -> ModelError:
    """Classify an HTTP error response from its status, headers and parsed error fields.

    Args:
        status: the HTTP status.
        headers: response headers (names lower-case).
        error_type: the server's error ``type``, if it gave one.
        code: the server's error ``code``, if it gave one as a string.
        message: the server's error message.

    Returns:
        The classified error, with ``retry_after`` filled from the headers.
    """
    names = {n.lower() for n in (error_type, code) if n}
    kind = _kind_for(status, names, message)
    retryable = policy_of(kind).retryable and status >= 400  # see rule 4 on other statuses
    should_retry = header(headers, "x-should-retry")
    if should_retry is not None:
        flag = should_retry.strip().lower()
        if flag == "true":
            retryable = True
        elif flag == "false":
            retryable = False
    return ModelError(
        kind=kind,
        message=_clip(message) or f"HTTP {status}",
        status=status,
        retryable=retryable,
        retry_after=retry_after_seconds(headers),
        code=code or error_type or None,
    )


def classify_http_error(status: int, headers: Headers, body: bytes) -> ModelError:
    """Classify a complete non-2xx response, parsing whichever error body shape it carries.

    Args:
        status: the HTTP status.
        headers: response headers (names lower-case).
        body: the raw response body (JSON or not; any bytes are tolerated).

    Returns:
        The classified error.
    """
    try:
        payload: Any = loads(body)
    except orjson.JSONDecodeError:
        payload = None
    if isinstance(payload, Mapping):
        error_type, code, message, _ = error_fields(payload)
        if message or error_type or code:
            return classify_status(
                status, headers, error_type=error_type, code=code, message=message
            )
    text = body.decode("utf-8", "replace").strip()
    return classify_status(status, headers, message=text)


def classify_stream_error(payload: Mapping[str, Any]) -> ModelError:
    """Classify an error that arrived inside a 200 event stream.

    Accepts ``{"error": {...}}``, Anthropic's ``{"type": "error", "error": {...}}`` and flat
    ``{"message", "type", "code"}`` payloads. A numeric ``code`` that is an HTTP error status
    (vLLM puts the status there) is classified like that status; otherwise the error type
    decides, and an error of unknown type counts as a retryable server failure.

    Args:
        payload: the event's parsed JSON data.

    Returns:
        The classified error (``status`` is the status the payload named, if any).
    """
    error_type, code, message, status = error_fields(payload)
    names = [n.lower() for n in (error_type, code) if n]
    kind = next((_TYPE_KINDS[n] for n in names if n in _TYPE_KINDS), None)
    if kind in (None, ErrorKind.BAD_REQUEST) and _mentions_context_length(message):
        kind = ErrorKind.TOO_LARGE
    if kind is None and status is not None:
        kind = _kind_for(status, set(names), message)
    if kind is None:
        kind = ErrorKind.SERVER
    return ModelError(
        kind=kind,
        message=_clip(message) or "error event in the response stream",
        status=status,
        retryable=policy_of(kind).retryable,
        code=code or error_type or None,
    )


def connection_error(message: str) -> ModelError:
    """A retryable failure to reach the server or to read its answer.

    Args:
        message: what went wrong (shown in logs and results).
    """
    return _made(ErrorKind.CONNECTION, _clip(message))


def truncated_stream(message: str) -> ModelError:
    """A retryable failure for a stream that ended before the reply was complete.

    Args:
        message: what was missing.
    """
    return _made(ErrorKind.CONNECTION, _clip(message))


def deadline_error() -> ModelError:
    """A final failure for a request interrupted by its run's deadline."""
    return _made(ErrorKind.DEADLINE, "the run's deadline passed")


def protocol_error(message: str, status: int | None = None) -> ModelError:
    """A retryable failure for a reply that does not follow the protocol (a body cut short or
    garbled on its way, a malformed event stream).

    A server that answers a well-formed request with a 2xx status meant to answer it; a body
    that cannot be read is damage in transit as often as a server bug, so it is retried like a
    cut stream, within the retry policy's bounds.

    Args:
        message: what is wrong with the reply (kept as given).
        status: the HTTP status of the reply, when there is one.
    """
    return _made(ErrorKind.PROTOCOL, message, status)


def reply_payload(
    request_id: str, status: int, headers: Headers, body: bytes | str
) -> dict[str, Any] | ModelFailed:
    """The JSON object of a complete reply, or the failure the reply amounts to: a non-2xx
    answer classified from its status and body; a 2xx body that is not a JSON object a
    (retryable) :func:`protocol_error`.

    Args:
        request_id: the request the reply answers.
        status: the HTTP status.
        headers: response headers (names lower-case).
        body: the whole response body (bytes, or text a caller already decoded from UTF-8).
    """
    if not 200 <= status < 300:
        raw = body.encode() if isinstance(body, str) else body
        return ModelFailed(request_id, classify_http_error(status, headers, raw))
    try:
        payload = loads(body)
    except orjson.JSONDecodeError as exc:
        return ModelFailed(request_id, protocol_error(f"reply is not JSON: {exc}", status))
    if not isinstance(payload, dict):
        return ModelFailed(request_id, protocol_error("reply is not a JSON object", status))
    return payload


def unusable_request(message: str) -> ModelError:
    """A final failure for a request the codec refused to encode: retrying cannot help.

    Args:
        message: why the request cannot be encoded.
    """
    return _made(ErrorKind.BAD_REQUEST, _clip(message))


_TRANSPORT_KINDS: Mapping[TransportErrorKind, ErrorKind] = {
    TransportErrorKind.CONNECT: ErrorKind.CONNECTION,
    TransportErrorKind.TIMEOUT: ErrorKind.TIMEOUT,
    TransportErrorKind.READ: ErrorKind.CONNECTION,
    TransportErrorKind.WRITE: ErrorKind.CONNECTION,
    TransportErrorKind.CLOSED: ErrorKind.CONNECTION,
    TransportErrorKind.PROTOCOL: ErrorKind.CONNECTION,
    TransportErrorKind.REFUSED: ErrorKind.BAD_REQUEST,
    TransportErrorKind.TOO_LARGE: ErrorKind.REPLY_TOO_LARGE,
}
"""Each transport failure kind: the error kind it becomes (whose row says whether a retry may
help)."""


def transport_failure(exc: TransportError, *, streamed: bool = False) -> ModelError:
    """The ``ModelError`` for a transport failure.

    Args:
        exc: what the transport raised.
        streamed: the reply was being streamed; a failure after the response started is
            then a truncated stream (retryable) whatever its kind.
    """
    if streamed and exc.response_started and exc.kind is not TransportErrorKind.TOO_LARGE:
        return truncated_stream(f"stream interrupted: {exc}")
    message = exc.message if exc.kind is TransportErrorKind.TOO_LARGE else str(exc)
    return _made(_TRANSPORT_KINDS[exc.kind], _clip(message))


def error_fields(payload: Mapping[str, Any]) -> tuple[str | None, str | None, str, int | None]:
    """``(type, code, message, status)`` from an error body of any supported shape.

    ``code`` is kept only when it is a string; an integer code in the HTTP error range is
    returned as ``status`` instead. Missing or ill-typed fields come back as ``None``/``""``.
    """
    inner = payload.get("error")
    if isinstance(inner, Mapping):
        fields: Mapping[str, Any] = inner
    elif isinstance(inner, str):
        fields = {"message": inner}
    else:
        fields = payload
    error_type = fields.get("type")
    if not isinstance(error_type, str) or error_type == "error":
        error_type = None
    raw_code = fields.get("code")
    code = raw_code if isinstance(raw_code, str) and raw_code else None
    status = None
    if isinstance(raw_code, int) and not isinstance(raw_code, bool) and 400 <= raw_code <= 599:
        status = raw_code
    message = fields.get("message")
    if message is None:
        message = fields.get("detail", payload.get("detail"))
    return error_type, code, _as_text(message), status


def _made(kind: ErrorKind, message: str, status: int | None = None) -> ModelError:
    """A ``ModelError`` of ``kind`` whose retryability is its row's."""
    return ModelError(
        kind=kind, message=message, status=status, retryable=policy_of(kind).retryable
    )


def _kind_for(status: int, names: set[str], message: str) -> ErrorKind:
    if 400 <= status < 500:
        if names & _QUOTA_CODES:
            return ErrorKind.QUOTA
        if names & _TOO_LARGE_CODES or _mentions_context_length(message):
            return ErrorKind.TOO_LARGE
    if (status == 429 or status >= 500) and names & _OVERLOAD_CODES:
        return ErrorKind.OVERLOADED
    kind = _STATUS_KINDS.get(status)
    if kind is not None:
        return kind
    if 500 <= status <= 599:
        return ErrorKind.SERVER
    if 400 <= status < 500:
        return ErrorKind.BAD_REQUEST
    return ErrorKind.PROTOCOL


def _mentions_context_length(message: str) -> bool:
    lowered = message.lower()
    return any(phrase in lowered for phrase in _CONTEXT_PHRASES)


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return str(value)


def _clip(message: str) -> str:
    message = message.strip()
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    return message[: MAX_MESSAGE_CHARS - 3] + "..."


def _non_negative_number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    if not math.isfinite(number) or number < 0:
        return None
    return number
