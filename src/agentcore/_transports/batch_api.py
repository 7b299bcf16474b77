"""The providers' Batch APIs on the wire: OpenAI's files + batches, Anthropic's message batches.

A :class:`BatchApi` turns the requests a codec encoded for the synchronous endpoint into one
batch, submits it, reads its state and brings its results back as the status and body the
synchronous endpoint would have answered each request with, so that the same codec decodes
them. It keeps nothing between calls: the journal (:mod:`agentcore._transports.batch_journal`)
and the client (:mod:`agentcore._transports.batching`) hold the state.

- OpenAI: upload the JSONL of ``{custom_id, method: POST, url: /v1/chat/completions, body}``
  lines (``POST /v1/files``, ``purpose=batch``), ``POST /v1/batches`` with
  ``completion_window: 24h``, poll ``GET /v1/batches/{id}`` until ``completed``, ``failed``,
  ``expired`` or ``cancelled``, then read the output and error files
  (``GET /v1/files/{id}/content``) by ``custom_id``. Limits: 50,000 requests and 200 MB per
  input file.
- Anthropic: ``POST /v1/messages/batches`` with ``requests: [{custom_id, params}]``, poll
  ``GET /v1/messages/batches/{id}`` until ``processing_status`` is ``ended``, then read the
  ``results_url`` JSONL (``result.type``: ``succeeded``, ``errored``, ``canceled``,
  ``expired``). Limits: 100,000 requests and 256 MB per batch.

A line that did not succeed for a reason of the batch (expired, cancelled, missing from the
results) comes back as a 500 with a ``server_error`` body naming the batch, so the codec
classifies it as ``ErrorKind.SERVER``: the retry layer sends it again, into a later batch (the
batch's id in the message keeps the same line unanswered by two batches from counting as a
deterministic failure), and a fallback backend may take it. Not ``OVERLOADED``: an ended batch
says nothing about the load of the endpoint the next request goes to, and every line of a
large expired batch would otherwise count as a sign of load (shrinking adaptive slots, pausing
a worker fleet).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable
from typing import Any, Final, Protocol

import attrs
import orjson

from .._codecs.http import HttpRequest, Timeouts
from .._core.errors import TransportError, TransportErrorKind
from .protocol import Transport

__all__ = ["ANTHROPIC_BATCHES", "OPENAI_BATCHES", "BatchApi", "BatchState", "LineResult"]

LineResult = tuple[int, bytes]
"""A line's status and body, as the synchronous endpoint would have answered it."""

_TIMEOUTS: Final = Timeouts(connect=30.0, read=600.0)
_DROP_HEADERS: Final = frozenset({"content-type", "content-length", "accept", "accept-encoding"})


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


def _unavailable(reason: str) -> LineResult:
    body = {"error": {"message": reason, "type": "server_error", "code": "batch_line_unanswered"}}
    return 500, orjson.dumps(body)


def _base(request: HttpRequest, suffix: str) -> str:
    return request.url.removesuffix(suffix).rstrip("/")


def _auth(request: HttpRequest) -> tuple[tuple[str, str], ...]:
    return tuple((n, v) for n, v in request.headers if n not in _DROP_HEADERS)


async def _call(
    transport: Transport,
    method: str,
    url: str,
    headers: tuple[tuple[str, str], ...],
    *,
    body: bytes = b"",
    content_type: str = "application/json",
) -> Any:
    """One API call; its decoded JSON (or the raw bytes when it is not JSON)."""
    if body:
        headers = (*headers, ("content-type", content_type))
    response = await transport.send(HttpRequest(method, url, headers, body), _TIMEOUTS)
    if not 200 <= response.status < 300:
        raise TransportError(
            TransportErrorKind.PROTOCOL,
            f"{method} {url}: HTTP {response.status}: {response.body[:500]!r}",
        )
    return response.body


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


_LineReader = Callable[[Any, str], tuple[str, LineResult]]
"""Reads one line of a provider's results file (and the batch's id): its custom id and answer."""


async def _read_results(
    transport: Transport,
    urls: Iterable[str],
    auth: tuple[tuple[str, str], ...],
    read_line: _LineReader,
    *,
    state: BatchState,
    custom_ids: list[str],
) -> dict[str, LineResult]:
    """Every line's answer (one for each of ``custom_ids``) from the JSONL results files at
    ``urls``; a line they do not answer is unavailable."""
    found: dict[str, LineResult] = {}
    for url in urls:
        content = await _call(transport, "GET", url, auth)
        for raw in content.splitlines():
            if raw.strip():
                custom_id, answer = read_line(_json(raw), state.batch_id)
                found[custom_id] = answer
    reason = f"batch {state.batch_id} {state.status}: the line has no result"
    return {cid: found.get(cid) or _unavailable(reason) for cid in custom_ids}


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

    async def submit(
        self, transport: Transport, sample: HttpRequest, lines: list[bytes], tag: str
    ) -> str:
        """Create a batch of ``lines``; its id. ``sample``: a request of the batch (its URL and
        credentials); ``tag``: the journal's name for the hop (kept as metadata where the
        provider has any)."""
        ...

    async def poll(self, transport: Transport, sample: HttpRequest, batch_id: str) -> BatchState:
        """The batch's state now."""
        ...

    async def results(
        self, transport: Transport, sample: HttpRequest, state: BatchState, custom_ids: list[str]
    ) -> dict[str, LineResult]:
        """Every line's answer (one for each of ``custom_ids``) once the batch ``ended``."""
        ...


@attrs.frozen
class _OpenAIBatches:
    name: str = "openai-batch"
    max_requests: int = 50_000
    max_bytes: int = 200 * 1024 * 1024

    def line(self, custom_id: str, request: HttpRequest) -> bytes:
        body = _unstreamed(request)
        entry = {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions",
                 "body": body}  # fmt: skip
        return orjson.dumps(entry) + b"\n"

    async def submit(
        self, transport: Transport, sample: HttpRequest, lines: list[bytes], tag: str
    ) -> str:
        base, auth = _base(sample, "/chat/completions"), _auth(sample)
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
        uploaded = _json(
            await _call(transport, "POST", f"{base}/files", auth, body=body, content_type=kind)
        )
        create = {
            "input_file_id": uploaded["id"],
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
            "metadata": {"agentcore_hop": tag},
        }
        url = f"{base}/batches"
        created = _json(await _call(transport, "POST", url, auth, body=orjson.dumps(create)))
        return str(created["id"])

    async def poll(self, transport: Transport, sample: HttpRequest, batch_id: str) -> BatchState:
        base, auth = _base(sample, "/chat/completions"), _auth(sample)
        batch = _json(await _call(transport, "GET", f"{base}/batches/{batch_id}", auth))
        status = str(batch.get("status"))
        counts = batch.get("request_counts") or {}
        where = tuple(f for f in (batch.get("output_file_id"), batch.get("error_file_id")) if f)
        ended = status in ("completed", "failed", "expired", "cancelled")
        done = int(counts.get("completed") or 0) + int(counts.get("failed") or 0)
        total = int(counts.get("total") or 0)
        return BatchState(status, ended, done, total, where, batch_id)

    async def results(
        self, transport: Transport, sample: HttpRequest, state: BatchState, custom_ids: list[str]
    ) -> dict[str, LineResult]:
        base, auth = _base(sample, "/chat/completions"), _auth(sample)
        urls = [f"{base}/files/{file_id}/content" for file_id in state.where]
        return await _read_results(
            transport, urls, auth, _openai_line, state=state, custom_ids=custom_ids
        )


def _openai_line(line: Any, batch_id: str) -> tuple[str, LineResult]:
    custom_id = line.get("custom_id")
    response = line.get("response")
    if isinstance(response, dict) and "status_code" in response:
        return custom_id, (int(response["status_code"]), orjson.dumps(response.get("body")))
    error = line.get("error") or {}
    return custom_id, _unavailable(
        f"batch {batch_id}: line not answered: {error.get('code')}: {error.get('message')}"
    )


_ANTHROPIC_STATUS: Final = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


@attrs.frozen
class _AnthropicBatches:
    name: str = "anthropic-batch"
    max_requests: int = 100_000
    max_bytes: int = 256 * 1024 * 1024

    def line(self, custom_id: str, request: HttpRequest) -> bytes:
        return orjson.dumps({"custom_id": custom_id, "params": _unstreamed(request)})

    async def submit(
        self, transport: Transport, sample: HttpRequest, lines: list[bytes], tag: str
    ) -> str:
        base, auth = _base(sample, "/messages"), _auth(sample)
        body = b'{"requests":[' + b",".join(lines) + b"]}"
        url = f"{base}/messages/batches"
        created = _json(await _call(transport, "POST", url, auth, body=body))
        return str(created["id"])

    async def poll(self, transport: Transport, sample: HttpRequest, batch_id: str) -> BatchState:
        base, auth = _base(sample, "/messages"), _auth(sample)
        batch = _json(await _call(transport, "GET", f"{base}/messages/batches/{batch_id}", auth))
        status = str(batch.get("processing_status"))
        counts = batch.get("request_counts") or {}
        total = sum(int(v or 0) for v in counts.values())
        done = total - int(counts.get("processing") or 0)
        url = batch.get("results_url")
        where = (url,) if url else ()
        return BatchState(status, status == "ended", done, total, where, batch_id)

    async def results(
        self, transport: Transport, sample: HttpRequest, state: BatchState, custom_ids: list[str]
    ) -> dict[str, LineResult]:
        base, auth = _base(sample, "/messages"), _auth(sample)
        host = "/".join(base.split("/", 3)[:3])  # a results URL may be a path on the API's host
        urls = [host + url if url.startswith("/") else url for url in state.where]
        return await _read_results(
            transport, urls, auth, _anthropic_line, state=state, custom_ids=custom_ids
        )


def _anthropic_line(line: Any, batch_id: str) -> tuple[str, LineResult]:
    result = line.get("result") or {}
    kind = result.get("type")
    if kind == "succeeded":
        return line["custom_id"], (200, orjson.dumps(result.get("message")))
    if kind == "errored":
        outer = result.get("error") or {}
        inner = outer.get("error") or {}
        status = _ANTHROPIC_STATUS.get(str(inner.get("type")), 500)
        return line["custom_id"], (status, orjson.dumps(outer))
    return line["custom_id"], _unavailable(f"batch {batch_id}: line {kind}")


OPENAI_BATCHES: Final[BatchApi] = _OpenAIBatches()
ANTHROPIC_BATCHES: Final[BatchApi] = _AnthropicBatches()
