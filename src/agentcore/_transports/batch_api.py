"""The providers' Batch APIs on the wire: OpenAI's files + batches, Anthropic's message batches.

A :class:`BatchApi` turns the requests a codec encoded for the synchronous endpoint into one
batch, submits it, reads its state, streams its results back line by line as the status and
body the synchronous endpoint would have answered each request with (so that the same codec
decodes them), cancels it and deletes what it left behind. It keeps nothing between calls: the
journal (:mod:`agentcore._transports.batch_journal`) and the client
(:mod:`agentcore._transports.batching`) hold the state. Every call goes through a
:class:`Channel`: the transport, a request of the batch (its URL and credentials) and the cap
on the body of an API answer.

- OpenAI: upload the JSONL of ``{custom_id, method: POST, url: /v1/chat/completions, body}``
  lines (``POST /v1/files``, ``purpose=batch``), ``POST /v1/batches`` with
  ``completion_window: 24h`` and the hop's tag in ``metadata.agentcore_hop``, poll
  ``GET /v1/batches/{id}`` (``validating``, ``in_progress``, ``finalizing``, ``cancelling``)
  until ``completed``, ``failed`` (``errors.data`` says why), ``expired`` or ``cancelled``,
  then stream the output and error files (``GET /v1/files/{id}/content``). Cancel:
  ``POST /v1/batches/{id}/cancel``; clean up: ``DELETE /v1/files/{id}`` for the input, output
  and error files. Limits: 50,000 requests and 200 MB per input file.
- Anthropic: ``POST /v1/messages/batches`` with ``requests: [{custom_id, params}]``, poll
  ``GET /v1/messages/batches/{id}`` (``in_progress``, ``canceling``) until ``ended``, then
  stream the ``results_url`` JSONL (``result.type``: ``succeeded``, ``errored``, ``canceled``,
  ``expired``). Cancel: ``POST .../cancel``; clean up: ``DELETE /v1/messages/batches/{id}``.
  Limits: 100,000 requests and 256 MB per batch.

An API call answered with an error status raises :class:`BatchRefused`, which keeps the status,
the headers and the provider's body; one that cannot be made raises ``TransportError``.

A line that did not succeed for a reason of the batch (expired, cancelled, missing from the
results, its batch failed for another line) comes back as a 500 with a ``server_error`` body
naming the batch, so the codec classifies it as ``ErrorKind.SERVER``: the retry layer sends it
again, into a later hop (the batch's id in the message keeps the same line unanswered by two
batches from counting as a deterministic failure), and a fallback backend may take it. Not
``OVERLOADED``: an ended batch says nothing about the load of the endpoint the next request
goes to, and every line of a large expired batch would otherwise count as a sign of load
(shrinking adaptive slots, pausing a worker fleet). A line that failed on its own comes back
with its own status and body.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterable
from typing import Any, Final, Protocol

import attrs
import orjson

from .._codecs.http import Headers, HttpRequest, Timeouts
from .._core.errors import AgentcoreError, TransportError, TransportErrorKind
from .protocol import Transport

__all__ = [
    "ANTHROPIC_BATCHES",
    "LINE_TOO_LARGE",
    "OPENAI_BATCHES",
    "BatchApi",
    "BatchRefused",
    "BatchState",
    "Channel",
    "LineResult",
    "LineSink",
    "unanswered",
]

LineResult = tuple[int, bytes]
"""A line's status and body, as the synchronous endpoint would have answered it."""

LineSink = Callable[[str, int, bytes], None]
"""Takes each result line as it is read: its custom id, status and body."""

_TIMEOUTS: Final = Timeouts(connect=30.0, read=600.0)
_DROP_HEADERS: Final = frozenset({"content-type", "content-length", "accept", "accept-encoding"})
_HEAD_BYTES: Final = 4096
"""Bytes kept of a result line longer than the line cap, to find its custom id in."""
_CUSTOM_ID: Final = re.compile(rb'"custom_id"\s*:\s*"((?:[^"\\]|\\.)*)"')
_PERMANENT: Final = frozenset({401, 403, 404, 410})
"""Statuses of a poll or a results download that no later attempt can change."""
_SIZE_CODES: Final = frozenset({"token_limit_exceeded", "too_many_tasks", "file_too_large"})
_SIZE_WORDS: Final = ("enqueued token", "too many", "too large", "exceeds", "at most")


class BatchRefused(AgentcoreError):
    """A Batch API call answered with an error status.

    Attributes:
        what: the call (``upload``, ``create``, ``poll``, ``results``, ``cancel``, ``delete``).
        status: the HTTP status.
        headers: the answer's headers.
        body: the provider's error body (at most the channel's cap).
    """

    def __init__(self, what: str, status: int, headers: Headers, body: bytes) -> None:
        self.what = what
        self.status = status
        self.headers = headers
        self.body = body
        super().__init__(f"{what}: HTTP {status}: {_message_of(body)}")

    @property
    def permanent(self) -> bool:
        """Whether no later attempt can succeed (401, 403, 404, 410: a key or project that
        changed, a batch deleted or archived)."""
        return self.status in _PERMANENT


def _message_of(body: bytes) -> str:
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body[:300].decode(errors="replace")
    error = value.get("error") if isinstance(value, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    return body[:300].decode(errors="replace")


@attrs.frozen
class BatchError:
    """One reason an OpenAI batch ``failed`` (an entry of its ``errors.data``)."""

    code: str
    message: str
    line: int | None = None
    """The 1-based line of the input file it is about, if any."""

    @property
    def about_size(self) -> bool:
        """Whether the batch was too big (too many requests, too many bytes, or past the
        enqueued-token limit): a smaller one may pass."""
        message = self.message.lower()
        return self.code in _SIZE_CODES or any(word in message for word in _SIZE_WORDS)


@attrs.frozen
class BatchState:
    """What a poll found."""

    status: str
    """The provider's status word (``in_progress``, ``completed``, ``ended``...)."""
    ended: bool
    """Whether the batch will not change any more (its results can be read)."""
    done: int = 0
    """Lines answered so far (succeeded or failed)."""
    total: int = 0
    """Lines in the batch."""
    where: tuple[str, ...] = ()
    """Where the results are (OpenAI: the output and error file ids; Anthropic: the URL)."""
    batch_id: str = ""
    """The batch's id (named in the errors of its unanswered lines, so that the same line
    unanswered in two batches is not taken for a deterministic failure)."""
    failed: int = 0
    """Lines that failed (OpenAI's ``failed`` count; Anthropic's errored, expired, canceled)."""
    errors: tuple[BatchError, ...] = ()
    """Why the batch failed as a whole (OpenAI's ``errors.data``)."""
    files: tuple[str, ...] = ()
    """The files the batch holds at the provider (OpenAI: input, output, error)."""


def unanswered(reason: str, code: str = "batch_line_unanswered") -> LineResult:
    """The answer of a line its batch did not answer (see the module docstring)."""
    body = {"error": {"message": reason, "type": "server_error", "code": code}}
    return 500, orjson.dumps(body)


@attrs.frozen
class Channel:
    """How the calls of one batch reach the provider.

    Args:
        transport: moves the calls.
        sample: a request of the batch, as the codec encoded it (its URL and credentials).
        max_bytes: the cap on an API answer's body, and on one result line (``None``: none).
    """

    transport: Transport
    sample: HttpRequest
    max_bytes: int | None = 16 * 1024 * 1024

    def base(self, suffix: str) -> str:
        """The API's base URL (the sample's URL without ``suffix``)."""
        return self.sample.url.removesuffix(suffix).rstrip("/")

    @property
    def auth(self) -> Headers:
        """The sample's headers that go with every call (credentials, versions)."""
        return tuple((n, v) for n, v in self.sample.headers if n not in _DROP_HEADERS)

    async def call(
        self,
        what: str,
        method: str,
        url: str,
        *,
        body: bytes = b"",
        content_type: str = "application/json",
    ) -> Any:
        """One API call; its decoded JSON body.

        Raises:
            BatchRefused: an error status.
            TransportError: the call failed, its body passed the cap, or it is not JSON.
        """
        headers = self.auth
        if body:
            headers = (*headers, ("content-type", content_type))
        request = HttpRequest(method, url, headers, body)
        async with self.transport.open_stream(request, _TIMEOUTS) as response:
            parts: list[bytes] = []
            size = 0
            cap = self.max_bytes
            while chunk := await response.receive():
                size += len(chunk)
                if cap is not None and size > cap:
                    if not 200 <= response.status < 300:
                        break  # an error body: what was read is enough to say why
                    raise TransportError(
                        TransportErrorKind.TOO_LARGE,
                        f"{method} {url}: the answer passed max_reply_bytes={cap}",
                        response_started=True,
                    )
                parts.append(chunk)
            data = b"".join(parts)
            if not 200 <= response.status < 300:
                raise BatchRefused(what, response.status, response.headers, data[: cap or None])
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise TransportError(TransportErrorKind.PROTOCOL, f"{what}: not JSON: {exc}") from None

    async def stream_lines(
        self, url: str, read_line: Callable[[bytes], None], on_long: Callable[[bytes], None]
    ) -> None:
        """Stream the JSONL body at ``url``: each line to ``read_line``, except a line longer
        than the cap, whose first bytes go to ``on_long``. Memory: one line at a time.

        Raises:
            BatchRefused: an error status.
            TransportError: the download failed.
        """
        cap = self.max_bytes
        request = HttpRequest("GET", url, self.auth)
        async with self.transport.open_stream(request, _TIMEOUTS) as response:
            if not 200 <= response.status < 300:
                parts: list[bytes] = []
                while (chunk := await response.receive()) and sum(map(len, parts)) < 65536:
                    parts.append(chunk)
                raise BatchRefused("results", response.status, response.headers, b"".join(parts))
            pending = bytearray()
            skipping = False
            while chunk := await response.receive():
                start = 0
                while (end := chunk.find(b"\n", start)) >= 0:
                    if skipping:
                        skipping = False
                    else:
                        pending += chunk[start:end]
                        if cap is not None and len(pending) > cap:
                            on_long(bytes(pending[:_HEAD_BYTES]))
                        elif pending.strip():
                            read_line(bytes(pending))
                    pending.clear()
                    start = end + 1
                if skipping:
                    continue
                pending += chunk[start:]
                if cap is not None and len(pending) > cap:
                    on_long(bytes(pending[:_HEAD_BYTES]))
                    pending.clear()
                    skipping = True
            if pending.strip() and not skipping:
                read_line(bytes(pending))


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise TransportError(TransportErrorKind.PROTOCOL, f"not JSON: {exc}") from None


def _unstreamed(request: HttpRequest) -> dict[str, Any]:
    """The body of an encoded synchronous request, without the fields that ask for a stream
    (a batch answers whole replies)."""
    body: dict[str, Any] = orjson.loads(request.body)
    body.pop("stream", None)
    body.pop("stream_options", None)
    return body


LINE_TOO_LARGE: Final = 0
"""The status (not an HTTP one) of a result line longer than the cap: its body is the message
of the call's ``REPLY_TOO_LARGE`` failure, final."""


def _long_line(sink: LineSink, cap: int | None, batch_id: str) -> Callable[[bytes], None]:
    """What a result line longer than the cap becomes: its call fails for good with the
    cap named (the id is read from the line's first bytes)."""

    def take(head: bytes) -> None:
        found = _CUSTOM_ID.search(head)
        if found is None:
            return  # no id to answer: the line counts as missing, and is sent again
        message = f"batch {batch_id}: a result line passed max_reply_bytes={cap}"
        sink(found.group(1).decode(errors="replace"), LINE_TOO_LARGE, orjson.dumps(message))

    return take


class BatchApi(Protocol):
    """One provider's Batch API (see the module docstring)."""

    @property
    def name(self) -> str:
        """The backend's scheme."""
        ...

    @property
    def max_requests(self) -> int:
        """The most requests one batch may hold."""
        ...

    @property
    def max_bytes(self) -> int:
        """The most bytes one batch's input may hold."""
        ...

    def line(self, custom_id: str, request: HttpRequest) -> bytes:
        """The batch entry of one encoded synchronous request (its size counts to the limit)."""
        ...

    async def submit(self, channel: Channel, lines: list[bytes], tag: str) -> str:
        """Create a batch of ``lines``; its id. ``tag``: the journal's name for the hop (kept
        as metadata where the provider has any).

        Raises:
            BatchRefused: the provider refused the upload or the batch.
            TransportError: a call could not be made.
        """
        ...

    async def find(self, channel: Channel, tag: str) -> str | None:
        """The id of a batch created with ``tag`` (``None``: none, or the provider keeps no
        tags)."""
        ...

    async def poll(self, channel: Channel, batch_id: str) -> BatchState:
        """The batch's state now.

        Raises:
            BatchRefused: the provider refused the call (``permanent``: for good).
            TransportError: the call could not be made.
        """
        ...

    async def download(self, channel: Channel, state: BatchState, sink: LineSink) -> None:
        """Stream every result line of an ended batch into ``sink``.

        Raises:
            BatchRefused: a results file was refused (``permanent``: for good).
            TransportError: a download failed.
        """
        ...

    async def cancel(self, channel: Channel, batch_id: str) -> None:
        """Ask the provider to cancel the batch."""
        ...

    async def clean_up(self, channel: Channel, state: BatchState) -> None:
        """Delete what an ended batch left at the provider (files, or the batch)."""
        ...


@attrs.frozen
class _OpenAIBatches:
    name: str = "openai-batch"
    max_requests: int = 50_000
    max_bytes: int = 200_000_000  # "200 MB": read as 10**6 bytes, the smaller reading

    def line(self, custom_id: str, request: HttpRequest) -> bytes:
        body = _unstreamed(request)
        entry = {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions",
                 "body": body}  # fmt: skip
        return orjson.dumps(entry) + b"\n"

    async def submit(self, channel: Channel, lines: list[bytes], tag: str) -> str:
        base = channel.base("/chat/completions")
        boundary = secrets.token_hex(16)
        body = b"".join([
            f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
            .encode(),
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="{tag}.jsonl"\r\nContent-Type: application/jsonl\r\n\r\n'.encode(),
            *lines,
            f"\r\n--{boundary}--\r\n".encode(),
        ])  # fmt: skip
        kind = f"multipart/form-data; boundary={boundary}"
        uploaded = await channel.call(
            "upload", "POST", f"{base}/files", body=body, content_type=kind
        )
        create = {
            "input_file_id": uploaded["id"],
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
            "metadata": {"agentcore_hop": tag},
        }
        created = await channel.call("create", "POST", f"{base}/batches", body=orjson.dumps(create))
        return str(created["id"])

    async def find(self, channel: Channel, tag: str) -> str | None:
        base = channel.base("/chat/completions")
        after = ""
        for _ in range(10):  # the 1,000 newest batches
            listing = await channel.call("list", "GET", f"{base}/batches?limit=100{after}")
            data = listing.get("data") or []
            for batch in data:
                if (batch.get("metadata") or {}).get("agentcore_hop") == tag:
                    return str(batch["id"])
            if not listing.get("has_more") or not data:
                return None
            after = f"&after={data[-1]['id']}"
        return None

    async def poll(self, channel: Channel, batch_id: str) -> BatchState:
        base = channel.base("/chat/completions")
        batch = await channel.call("poll", "GET", f"{base}/batches/{batch_id}")
        status = str(batch.get("status"))
        counts = batch.get("request_counts") or {}
        where = tuple(f for f in (batch.get("output_file_id"), batch.get("error_file_id")) if f)
        files = (*([batch["input_file_id"]] if batch.get("input_file_id") else []), *where)
        ended = status in ("completed", "failed", "expired", "cancelled")
        failed = int(counts.get("failed") or 0)
        done = int(counts.get("completed") or 0) + failed
        total = int(counts.get("total") or 0)
        errors = tuple(
            BatchError(str(e.get("code") or ""), str(e.get("message") or ""), e.get("line"))
            for e in ((batch.get("errors") or {}).get("data") or [])
            if isinstance(e, dict)
        )
        return BatchState(status, ended, done, total, where, batch_id, failed, errors, files)

    async def download(self, channel: Channel, state: BatchState, sink: LineSink) -> None:
        base = channel.base("/chat/completions")
        long_line = _long_line(sink, channel.max_bytes, state.batch_id)

        def read(raw: bytes) -> None:
            line = _json(raw)
            custom_id, (status, body) = _openai_line(line, state)
            sink(custom_id, status, body)

        for file_id in state.where:
            await channel.stream_lines(f"{base}/files/{file_id}/content", read, long_line)

    async def cancel(self, channel: Channel, batch_id: str) -> None:
        base = channel.base("/chat/completions")
        await channel.call("cancel", "POST", f"{base}/batches/{batch_id}/cancel")

    async def clean_up(self, channel: Channel, state: BatchState) -> None:
        base = channel.base("/chat/completions")
        for file_id in state.files:
            await channel.call("delete", "DELETE", f"{base}/files/{file_id}")


def _openai_line(line: Any, state: BatchState) -> tuple[str, LineResult]:
    custom_id = str(line.get("custom_id"))
    response = line.get("response")
    if isinstance(response, dict) and "status_code" in response:
        return custom_id, (int(response["status_code"]), orjson.dumps(response.get("body")))
    error = line.get("error") or {}
    code = str(error.get("code") or "batch_line_unanswered")
    reason = f"batch {state.batch_id} {state.status}: line not answered: {code}: "
    return custom_id, unanswered(reason + str(error.get("message")), code)


_ANTHROPIC_STATUS: Final = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "conflict_error": 409,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
"""Anthropic's error types and the statuses its API answers them with (its errors page and
the SDK's error types); an unknown type is a 500."""


@attrs.frozen
class _AnthropicBatches:
    name: str = "anthropic-batch"
    max_requests: int = 100_000
    max_bytes: int = 256_000_000  # "256 MB": read as 10**6 bytes, the smaller reading

    def line(self, custom_id: str, request: HttpRequest) -> bytes:
        return orjson.dumps({"custom_id": custom_id, "params": _unstreamed(request)})

    async def submit(self, channel: Channel, lines: list[bytes], tag: str) -> str:
        base = channel.base("/messages")
        body = b'{"requests":[' + b",".join(lines) + b"]}"
        created = await channel.call("create", "POST", f"{base}/messages/batches", body=body)
        return str(created["id"])

    async def find(self, channel: Channel, tag: str) -> str | None:
        return None  # a message batch carries no metadata to find it by

    async def poll(self, channel: Channel, batch_id: str) -> BatchState:
        base = channel.base("/messages")
        batch = await channel.call("poll", "GET", f"{base}/messages/batches/{batch_id}")
        status = str(batch.get("processing_status"))
        counts = batch.get("request_counts") or {}
        total = sum(int(v or 0) for v in counts.values())
        done = total - int(counts.get("processing") or 0)
        failed = sum(int(counts.get(k) or 0) for k in ("errored", "canceled", "expired"))
        url = batch.get("results_url")
        where = (url,) if url else ()
        return BatchState(status, status == "ended", done, total, where, batch_id, failed)

    async def download(self, channel: Channel, state: BatchState, sink: LineSink) -> None:
        base = channel.base("/messages")
        host = "/".join(base.split("/", 3)[:3])  # a results URL may be a path on the API's host
        long_line = _long_line(sink, channel.max_bytes, state.batch_id)

        def read(raw: bytes) -> None:
            custom_id, (status, body) = _anthropic_line(_json(raw), state)
            sink(custom_id, status, body)

        for url in state.where:
            await channel.stream_lines(host + url if url.startswith("/") else url, read,
                                       long_line)  # fmt: skip

    async def cancel(self, channel: Channel, batch_id: str) -> None:
        base = channel.base("/messages")
        await channel.call("cancel", "POST", f"{base}/messages/batches/{batch_id}/cancel")

    async def clean_up(self, channel: Channel, state: BatchState) -> None:
        base = channel.base("/messages")
        await channel.call("delete", "DELETE", f"{base}/messages/batches/{state.batch_id}")


def _anthropic_line(line: Any, state: BatchState) -> tuple[str, LineResult]:
    custom_id = str(line.get("custom_id"))
    result = line.get("result") or {}
    kind = result.get("type")
    if kind == "succeeded":
        return custom_id, (200, orjson.dumps(result.get("message")))
    if kind == "errored":
        outer = result.get("error") or {}
        inner = outer.get("error") or {}
        status = _ANTHROPIC_STATUS.get(str(inner.get("type")), 500)
        return custom_id, (status, orjson.dumps(outer))
    reason = f"batch {state.batch_id}: line {kind}"
    return custom_id, unanswered(reason, f"batch_{kind}")


def split_failed(state: BatchState, custom_ids: Iterable[str]) -> dict[str, LineResult]:
    """The answers of the lines of a batch that ``failed`` for reasons other than its size:
    a line ``errors.data`` names fails with a 400 saying why; the others, not run because of
    it, are unanswered (sent again)."""
    named: dict[int, list[str]] = {}
    general: list[str] = []
    for error in state.errors:
        text = f"{error.code}: {error.message}" if error.code else error.message
        if error.line is None:
            general.append(text)
        else:
            named.setdefault(error.line, []).append(text)
    answers: dict[str, LineResult] = {}
    for number, custom_id in enumerate(custom_ids, 1):
        reasons = named.get(number) or ([] if named else general)
        if reasons:
            message = f"batch {state.batch_id} failed: " + "; ".join(reasons)
            body = {"error": {"message": message, "type": "invalid_request_error",
                              "code": "batch_failed"}}  # fmt: skip
            answers[custom_id] = 400, orjson.dumps(body)
        else:
            answers[custom_id] = unanswered(
                f"batch {state.batch_id} failed for other lines: not run", "batch_failed"
            )
    return answers


OPENAI_BATCHES: Final[BatchApi] = _OpenAIBatches()
ANTHROPIC_BATCHES: Final[BatchApi] = _AnthropicBatches()
