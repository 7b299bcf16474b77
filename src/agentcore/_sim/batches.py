"""The simulator's Batch APIs: OpenAI's files and batches, Anthropic's message batches.

Theory of operation
-------------------
:class:`BatchStore` keeps uploaded files and batches in memory (the oldest are forgotten past
:data:`MAX_KEPT` of each). Nothing runs in the background: every request that looks at a batch
(a retrieve, a listing, a results download, a cancel) first *advances* it to the present, and
every batch follows its providers' documented life in simulated time (trio time divided by
``SimConfig.speedup``):

- it lasts ``batch_delay`` seconds, or a duration drawn per batch up to ``batch_delay_max``;
  its lines are answered one by one over that time, in an order drawn per batch, so results
  come back in any order, and progress is visible in the counts;
- OpenAI: ``validating`` (the first 2 % of the duration), then ``in_progress``, ``finalizing``
  (the last 2 %), ``completed``, with an output file of the lines that succeeded and an error
  file of those that did not. A batch that breaks a documented limit is created and then
  ``failed`` at the end of validation, its reasons in ``errors.data`` (``too_many_tasks``,
  ``file_too_large``, ``model_mismatch`` for a second model in one file, and
  ``token_limit_exceeded`` when the prompt tokens of the batches of its model not yet ended
  would pass ``batch_enqueued_tokens``);
- Anthropic: ``in_progress``, then ``ended`` with a ``results_url``; its counts stay
  ``processing`` until the end, as documented. A batch over ``batch_max_requests`` is refused
  with a 400, one over ``batch_max_bytes`` with a 413 (``request_too_large``). Results answer
  404 once ``batch_retention`` (29 days) has passed since the creation;
- a batch still running when its window (``batch_window``, 24 h) closes expires: the lines
  answered by then keep their answers, the others are expired (OpenAI: an error-file line
  ``batch_expired``; Anthropic: ``result.type: expired``). ``batch_expire`` names batches
  that run past their window on purpose, half their lines answered;
- a cancel moves the batch to ``cancelling`` / ``canceling`` for a simulated minute, or half
  the time it had left if less (lines due by then are still answered), then ``cancelled`` /
  ``ended``, the rest ``batch_cancelled`` / ``canceled``.

Each line is answered as the synchronous endpoint would answer its body (same planner, same
seed, so the same content as a synchronous request); a share ``SimConfig.batch_fail_rate`` of
lines fails instead (OpenAI: the line's ``response.status_code`` in the error file; Anthropic:
``result.type: errored``), of the type ``batch_fail_type`` or drawn, decided from the line's
content and the number of times that content failed before, so a line sent again gets a fresh
draw. A model outside ``SimConfig.models`` is answered 404 (``model_not_found``), line by
line, as the synchronous endpoint answers it.

Prompt caching: an OpenAI line's ``cached_tokens`` come from the engine's prefix cache (as a
synchronous request's would, without its timing). An Anthropic request whose system prompt or
tools carry ``cache_control`` writes its system block (with the tools) to a cache of that TTL
(``5m`` by default, or ``1h``) on a miss and reads it on a hit, from 1,024 tokens on, as
Anthropic documents; its usage reports ``cache_creation_input_tokens`` (split by TTL in
``cache_creation``) and ``cache_read_input_tokens``, and ``service_tier: batch`` in a batch.

Files and batches can be deleted (OpenAI ``DELETE /v1/files/{id}``, Anthropic
``DELETE /v1/messages/batches/{id}`` once ended). ``batches_created`` counts creations: a client
that never submits a hop twice leaves it equal to the number of hops.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, Final

import orjson

from .config import SimConfig
from .policy import FaultInjector, plan_reply, prompt_digest
from .prefix_cache import PrefixCache, block_hashes
from .request import InvalidRequest, parse_chat_request
from .responses import completion_body, usage
from .template import render_prompt_parts
from .tokens import TokenMemo, count_tokens, split_tokens

__all__ = ["MAX_KEPT", "BatchStore", "Routed", "anthropic_to_chat", "chat_to_message"]

MAX_KEPT: Final = 1000
"""Files and batches kept (each); older ones are forgotten."""
OPENAI_MAX_REQUESTS: Final = 50_000
OPENAI_MAX_BYTES: Final = 200_000_000
ANTHROPIC_MAX_REQUESTS: Final = 100_000
ANTHROPIC_MAX_BYTES: Final = 256_000_000
CANCEL_SECONDS: Final = 60.0
"""Simulated seconds a cancelled batch spends cancelling, at most (and at most half the time
it had left)."""
PHASE_SHARE: Final = 0.02
"""Share of a batch's duration spent validating (OpenAI), and as much finalizing."""
ANTHROPIC_CACHE_MIN_TOKENS: Final = 1024
"""Shortest prompt prefix Anthropic caches (its documented minimum for most models)."""

Routed = tuple[int, bytes, bytes]
"""A status, a body and its content type."""

_JSON = b"application/json"
_JSONL = b"application/binary"
_MAX_REMEMBERED = 100_000

# How a failed line reads, per Anthropic error type: OpenAI's status, type and code, and
# Anthropic's status.
_FAILURES: Final = {
    "rate_limit_error": (429, "requests", "rate_limit_exceeded", 429),
    "api_error": (500, "server_error", None, 500),
    "overloaded_error": (503, "server_error", "overloaded", 529),
    "timeout_error": (504, "server_error", "timeout", 504),
    "billing_error": (429, "insufficient_quota", "insufficient_quota", 402),
}
_ANTHROPIC_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def _error(status: int, message: str, kind: str = "invalid_request_error",
           code: str | None = None) -> Routed:  # fmt: skip
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return status, orjson.dumps(body), _JSON


def _anthropic_error(status: int, message: str) -> Routed:
    kind = _ANTHROPIC_TYPES.get(status, "api_error")
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": None}
    return status, orjson.dumps(body), _JSON


def _ok(value: Any) -> Routed:
    return 200, orjson.dumps(value), _JSON


def _rfc3339(seconds: float) -> str:
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    days, hours = divmod(hours, 24)
    return f"2026-01-{1 + days % 28:02d}T{hours:02d}:{rest // 60:02d}:{rest % 60:02d}Z"


def _draw(*parts: object) -> float:
    """A deterministic draw in ``[0, 1)`` from ``parts``."""
    digest = hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _multipart(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """The parts of a ``multipart/form-data`` body: name -> (filename, content)."""
    boundary = ""
    for piece in content_type.split(";")[1:]:
        key, _, value = piece.strip().partition("=")
        if key.lower() == "boundary":
            boundary = value.strip('"')
    if not boundary:
        return {}
    parts: dict[str, tuple[str | None, bytes]] = {}
    for chunk in body.split(b"--" + boundary.encode())[1:]:
        if chunk.startswith(b"--"):
            break
        head, _, content = chunk.partition(b"\r\n\r\n")
        content = content.removesuffix(b"\r\n")
        name: str | None = None
        filename: str | None = None
        for line in head.decode("latin-1").split("\r\n"):
            if line.lower().startswith("content-disposition:"):
                for item in line.split(";")[1:]:
                    key, _, value = item.strip().partition("=")
                    if key == "name":
                        name = value.strip('"')
                    elif key == "filename":
                        filename = value.strip('"')
        if name is not None:
            parts[name] = (filename, content)
    return parts


class _Batch:
    """One batch: its lines, its timeline, its answers so far."""

    def __init__(self, kind: str, batch_id: str, number: int, lines: list[tuple[str, Any]],
                 now: float) -> None:  # fmt: skip
        self.kind = kind  # "openai" or "anthropic"
        self.id = batch_id
        self.number = number
        self.lines = lines
        self.created = now
        self.validated = now
        self.finalizing = now
        self.due = now
        self.window_end = now
        self.stop = now
        self.order: list[int] = []
        self.times: list[float] = []
        self.answered = 0
        self.cancelled_at: float | None = None
        self.ended: float | None = None
        self.status = "validating" if kind == "openai" else "in_progress"
        self.errors: list[dict[str, Any]] | None = None
        self.tokens = 0
        self.model: str | None = None
        self.input_file_id = ""
        self.endpoint = "/v1/chat/completions"
        self.window = "24h"
        self.metadata: Any = None
        self.output_file_id: str | None = None
        self.error_file_id: str | None = None
        self.good: list[bytes] = []
        self.bad: list[bytes] = []
        self.results = b""
        self.succeeded = 0
        self.failed = 0
        self.unfinished = 0
        self.usage = [0, 0, 0, 0]  # input, cached, output, reasoning tokens
        self.deleted = False


_AsJson = Callable[[_Batch], dict[str, Any]]
"""A provider's JSON form of a batch."""


def _key_of(headers: dict[bytes, bytes]) -> str | None:
    """The API key a request carries (``x-api-key`` or ``Authorization: Bearer``)."""
    key = headers.get(b"x-api-key")
    if key is not None:
        return key.decode("latin-1")
    auth = headers.get(b"authorization", b"").decode("latin-1")
    scheme, _, token = auth.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


def auth_refusal(
    path: bytes, headers: dict[bytes, bytes], keys: tuple[str, ...] | None
) -> Routed | None:
    """The 401 a request gets when ``keys`` is set and it carries none of them, shaped as
    the API of ``path`` answers it; ``None`` when it may pass."""
    if keys is None or path == b"/health":
        return None
    key = _key_of(headers)
    if key in keys:
        return None
    shown = "none" if not key else f"{key[:6]}..."
    if path.startswith(b"/v1/messages"):
        return _anthropic_error(401, f"invalid x-api-key ({shown}, simulated)")
    message = f"Incorrect API key provided: {shown} (simulated)"
    return _error(401, message, "invalid_request_error", "invalid_api_key")


class BatchStore:
    """The files and batches of one simulated server (see the module docstring)."""

    def __init__(self, config: SimConfig, tokens: TokenMemo, numbers: Iterator[int],
                 cache: PrefixCache | None = None) -> None:  # fmt: skip
        self.config = config
        self.tokens = tokens
        self.numbers = numbers
        self.cache = cache
        self.faults = FaultInjector(config.batch_fail_rate, config.seed)
        self.files: OrderedDict[str, tuple[str, str, bytes, float]] = OrderedDict()
        self.batches: OrderedDict[str, _Batch] = OrderedDict()
        self.ids = itertools.count(1)
        self._anthropic_cache: dict[bytes, float] = {}
        self.batches_created = 0
        """Batches created (both APIs)."""
        self.batch_lines = 0
        """Lines answered (succeeded or failed)."""
        self.batch_lines_failed = 0
        """Of those, lines failed on purpose."""

    # -- routing ------------------------------------------------------------------------------

    def route(self, method: bytes, path: bytes, headers: dict[bytes, bytes], body: bytes,
              now: float) -> Routed | None:  # fmt: skip
        """The answer to a batch or file request, or ``None`` when the path is not one."""
        parts = path.decode(errors="replace").rstrip("/").split("/")
        if len(parts) < 3 or parts[1] != "v1":
            return None
        rest = parts[2:]
        verb = method.decode()
        if rest[0] == "files":
            return self._files(verb, rest[1:], headers, body, now)
        if rest[0] == "batches":
            return self._openai(verb, rest[1:], body, now)
        if rest == ["messages"] and verb == "POST":  # the synchronous Messages endpoint
            try:
                params = orjson.loads(body)
            except orjson.JSONDecodeError:
                return _anthropic_error(400, "the request body is not valid JSON")
            status, answer = self._answer_anthropic(params, now, "standard")
            if status != 200:
                answer = {"type": "error", "error": answer, "request_id": None}
            return status, orjson.dumps(answer), _JSON
        if rest[:2] == ["messages", "batches"]:
            return self._anthropic(verb, rest[2:], body, now)
        return None

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self.ids):06d}sim"

    def _keep_file(self, file_id: str, filename: str, purpose: str, data: bytes,
                   now: float) -> None:  # fmt: skip
        self.files[file_id] = (filename, purpose, data, now)
        while len(self.files) > MAX_KEPT:
            self.files.popitem(last=False)

    def _seconds(self, simulated: float) -> float:
        return simulated / self.config.speedup

    def _new_batch(
        self, kind: str, prefix: str, lines: list[tuple[str, Any]], now: float
    ) -> _Batch:
        """A batch of ``kind`` created now, kept (and counted), its timeline drawn."""
        config = self.config
        self.batches_created += 1
        number = self.batches_created
        batch = _Batch(kind, self._new_id(prefix), number, lines, now)
        duration = config.batch_delay
        if config.batch_delay_max is not None and config.batch_delay_max > duration:
            spread = config.batch_delay_max - duration
            duration += spread * _draw("duration", config.seed, number)
        duration = self._seconds(duration)
        window = self._seconds(config.batch_window)
        phase = duration * PHASE_SHARE if kind == "openai" else 0.0
        batch.validated = now + phase
        batch.due = now + duration
        batch.finalizing = batch.due - phase
        batch.window_end = now + window
        span = batch.finalizing - batch.validated
        if number in config.batch_expire:
            span = 2 * (batch.window_end - batch.validated)  # half the lines by the window's end
            batch.due = batch.window_end + span
        batch.stop = min(batch.due, batch.window_end)
        count = len(lines)
        batch.order = sorted(range(count), key=lambda i: _draw("order", config.seed, number, i))
        batch.times = [batch.validated + span * (k + 1) / count for k in range(count)]
        self.batches[batch.id] = batch
        while len(self.batches) > MAX_KEPT:
            self.batches.popitem(last=False)
        return batch

    def _listing(self, kind: str, now: float, as_json: _AsJson) -> dict[str, Any]:
        """The batches of ``kind``, advanced, newest first, as both providers list them."""
        mine = [b for b in self.batches.values() if b.kind == kind and not b.deleted]
        for batch in mine:
            self._advance(batch, now)
        data = [as_json(b) for b in reversed(mine)]
        first = data[0]["id"] if data else None
        last = data[-1]["id"] if data else None
        return {"data": data, "has_more": False, "first_id": first, "last_id": last}

    def _get_or_cancel(
        self, batch: _Batch, verb: str, rest: list[str], now: float, as_json: _AsJson
    ) -> Routed | None:
        """``GET`` one batch (advanced) or ``POST`` its ``cancel``, as both providers route
        them; ``None`` for any other route."""
        if len(rest) == 1 and verb == "GET":
            self._advance(batch, now)
            return _ok(as_json(batch))
        if rest[1:] == ["cancel"] and verb == "POST":
            self._advance(batch, now)
            if batch.ended is None and batch.cancelled_at is None:
                batch.cancelled_at = now
                lag = min(self._seconds(CANCEL_SECONDS), (batch.stop - now) / 2)
                batch.stop = min(batch.stop, now + lag)
            self._advance(batch, now)
            return _ok(as_json(batch))
        return None

    # -- OpenAI files -------------------------------------------------------------------------

    def _file_json(self, file_id: str) -> dict[str, Any]:
        filename, purpose, data, created = self.files[file_id]
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(created),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
            "status_details": None,
        }

    def _files(self, verb: str, rest: list[str], headers: dict[bytes, bytes], body: bytes,
               now: float) -> Routed:  # fmt: skip
        if not rest and verb == "POST":
            content_type = headers.get(b"content-type", b"").decode("latin-1")
            parts = _multipart(content_type, body)
            if "file" not in parts or "purpose" not in parts:
                return _error(400, "a file upload needs the multipart fields 'file' and 'purpose'")
            filename, data = parts["file"]
            file_id = self._new_id("file-")
            self._keep_file(file_id, filename or "upload.jsonl", parts["purpose"][1].decode(),
                            data, now)  # fmt: skip
            return _ok(self._file_json(file_id))
        if not rest or rest[0] not in self.files:
            return _error(404, f"No such File object: {rest[0] if rest else ''!r}",
                          code="file_not_found")  # fmt: skip
        if len(rest) == 1 and verb == "GET":
            return _ok(self._file_json(rest[0]))
        if len(rest) == 1 and verb == "DELETE":
            del self.files[rest[0]]
            return _ok({"id": rest[0], "object": "file", "deleted": True})
        if rest[1:] == ["content"] and verb == "GET":
            return 200, self.files[rest[0]][2], _JSONL
        return _error(405, f"no route for {verb} /v1/files/{'/'.join(rest)}")

    # -- OpenAI batches -----------------------------------------------------------------------

    def _openai_lines(self, data: bytes) -> tuple[list[tuple[str, Any]], list[dict[str, Any]]]:
        """The lines of an input file, and what its validation finds wrong with it."""
        lines: list[tuple[str, Any]] = []
        errors: list[dict[str, Any]] = []
        seen: set[str] = set()

        def wrong(code: str, message: str, number: int | None) -> None:
            errors.append({"code": code, "message": message, "param": None, "line": number})

        for number, raw in enumerate(data.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                line = orjson.loads(raw)
            except orjson.JSONDecodeError:
                wrong("invalid_json_line", "This line is not parseable as valid JSON.", number)
                continue
            custom_id = line.get("custom_id") if isinstance(line, dict) else None
            if not isinstance(custom_id, str):
                wrong("missing_required_parameter", "The line has no custom_id.", number)
                continue
            if custom_id in seen:
                wrong("duplicate_custom_id", f"The custom_id {custom_id!r} is not unique.", number)
            if line.get("method") != "POST" or line.get("url") != "/v1/chat/completions":
                wrong("url_mismatch", "Only POST /v1/chat/completions is simulated.", number)
            seen.add(custom_id)
            lines.append((custom_id, line.get("body")))
        if not lines and not errors:
            wrong("empty_file", "The input file has no requests.", None)
        return lines, errors

    def _validate_openai(self, batch: _Batch, size: int, now: float) -> list[dict[str, Any]]:
        """What makes a batch fail validation beyond its lines: its size, its models, the
        enqueued-token limit (the batch's model and prompt tokens are noted on it)."""
        config = self.config
        errors: list[dict[str, Any]] = []
        most = config.batch_max_requests or OPENAI_MAX_REQUESTS
        if len(batch.lines) > most:
            errors.append({"code": "too_many_tasks", "line": None, "param": None,
                           "message": f"A batch holds at most {most} requests "
                                      f"(this one holds {len(batch.lines)})."})  # fmt: skip
        largest = config.batch_max_bytes or OPENAI_MAX_BYTES
        if size > largest:
            errors.append({"code": "file_too_large", "line": None, "param": None,
                           "message": f"The input file holds {size} bytes, more than the "
                                      f"{largest} a batch may hold."})  # fmt: skip
        tokens = 0
        for number, (_, body) in enumerate(batch.lines, 1):
            model = body.get("model") if isinstance(body, dict) else None
            if batch.model is None:
                batch.model = model
            elif model != batch.model:
                message = (
                    f"The model {model!r} does not match the batch's model {batch.model!r}: "
                    "a batch uses one model."
                )
                errors.append(
                    {"code": "model_mismatch", "line": number, "param": "model", "message": message}
                )
            with contextlib.suppress(InvalidRequest):
                tokens += len(self.tokens.split(render_prompt_parts(parse_chat_request(body))))
        batch.tokens = tokens
        limit = config.batch_enqueued_tokens
        if limit is not None and not errors:
            queued = 0
            for other in self.batches.values():
                if other is not batch and other.kind == "openai" and other.model == batch.model:
                    self._advance(other, now)
                    if other.ended is None and other.errors is None:
                        queued += other.tokens
            if queued + tokens > limit:
                errors.append({"code": "token_limit_exceeded", "line": None, "param": None,
                               "message": f"Enqueued token limit reached for {batch.model} in "
                                          f"organization org-sim. Limit: {limit:,} enqueued "
                                          "tokens. Please try submitting an equal or smaller "
                                          "batch once your current batches have completed "
                                          "(simulated)."})  # fmt: skip
        return errors

    def _openai(self, verb: str, rest: list[str], body: bytes, now: float) -> Routed:
        if not rest and verb == "POST":
            try:
                params = orjson.loads(body)
            except orjson.JSONDecodeError:
                return _error(400, "the request body is not valid JSON")
            file_id = params.get("input_file_id") if isinstance(params, dict) else None
            if not isinstance(file_id, str) or file_id not in self.files:
                return _error(400, f"No such File object: {file_id!r}", code="file_not_found")
            if params.get("endpoint") != "/v1/chat/completions":
                return _error(400, "only the /v1/chat/completions endpoint is simulated")
            if params.get("completion_window") != "24h":
                return _error(400, "completion_window must be '24h'")
            data = self.files[file_id][2]
            lines, errors = self._openai_lines(data)
            batch = self._new_batch("openai", "batch_", lines, now)
            batch.input_file_id = file_id
            batch.metadata = params.get("metadata")
            errors += self._validate_openai(batch, len(data), now)
            if errors:
                batch.errors = errors
            return _ok(self._openai_json(batch))
        if not rest and verb == "GET":
            return _ok({"object": "list", **self._listing("openai", now, self._openai_json)})
        found = self.batches.get(rest[0])
        if found is None or found.kind != "openai":
            return _error(404, f"No batch found with id {rest[0]!r}.", code="not_found")
        routed = self._get_or_cancel(found, verb, rest, now, self._openai_json)
        if routed is not None:
            return routed
        return _error(405, f"no route for {verb} /v1/batches/{'/'.join(rest)}")

    def _openai_json(self, batch: _Batch) -> dict[str, Any]:
        def at(when: float | None) -> int | None:
            return None if when is None else int(when)

        ended, status = batch.ended, batch.status
        in_progress = None if batch.errors is not None else batch.validated
        finalizing = batch.finalizing if status in ("finalizing", "completed") else None
        input_tokens, cached, output, reasoning = batch.usage
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": batch.endpoint,
            "model": batch.model,
            "errors": None if batch.errors is None else {"object": "list", "data": batch.errors},
            "input_file_id": batch.input_file_id,
            "completion_window": batch.window,
            "status": status,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "created_at": int(batch.created),
            "in_progress_at": at(in_progress if status != "validating" else None),
            "expires_at": int(batch.window_end),
            "finalizing_at": at(finalizing),
            "completed_at": at(ended if status == "completed" else None),
            "failed_at": at(ended if status == "failed" else None),
            "expired_at": at(ended if status == "expired" else None),
            "cancelling_at": at(batch.cancelled_at),
            "cancelled_at": at(ended if status == "cancelled" else None),
            "request_counts": {
                "total": len(batch.lines),
                "completed": batch.succeeded,
                "failed": batch.failed + batch.unfinished,
            },
            "metadata": batch.metadata,
            "usage": {
                "input_tokens": input_tokens,
                "input_tokens_details": {"cached_tokens": cached},
                "output_tokens": output,
                "output_tokens_details": {"reasoning_tokens": reasoning},
                "total_tokens": input_tokens + output,
            },
        }

    # -- Anthropic message batches ------------------------------------------------------------

    def _anthropic(self, verb: str, rest: list[str], body: bytes, now: float) -> Routed:
        config = self.config
        if not rest and verb == "POST":
            largest = config.batch_max_bytes or ANTHROPIC_MAX_BYTES
            if len(body) > largest:
                return _anthropic_error(413, f"Request exceeds the maximum size of {largest} bytes")
            try:
                params = orjson.loads(body)
            except orjson.JSONDecodeError:
                return _anthropic_error(400, "the request body is not valid JSON")
            requests = params.get("requests") if isinstance(params, dict) else None
            if not isinstance(requests, list) or not requests:
                return _anthropic_error(400, "requests: a non-empty list is required")
            most = config.batch_max_requests or ANTHROPIC_MAX_REQUESTS
            if len(requests) > most:
                return _anthropic_error(400, f"requests: a batch holds at most {most} requests")
            lines: list[tuple[str, Any]] = []
            seen: set[str] = set()
            for number, item in enumerate(requests):
                custom_id = item.get("custom_id") if isinstance(item, dict) else None
                if not isinstance(custom_id, str) or not isinstance(item.get("params"), dict):
                    return _anthropic_error(
                        400, f"requests.{number}: custom_id and params are required"
                    )
                if custom_id in seen:
                    return _anthropic_error(
                        400, f"requests.{number}: custom_id {custom_id!r} is not unique"
                    )
                seen.add(custom_id)
                lines.append((custom_id, item["params"]))
            batch = self._new_batch("anthropic", "msgbatch_", lines, now)
            return _ok(self._anthropic_json(batch))
        if not rest and verb == "GET":
            return _ok(self._listing("anthropic", now, self._anthropic_json))
        found = self.batches.get(rest[0])
        if found is None or found.kind != "anthropic" or found.deleted:
            return _anthropic_error(404, f"no message batch {rest[0]!r}")
        batch = found
        routed = self._get_or_cancel(batch, verb, rest, now, self._anthropic_json)
        if routed is not None:
            return routed
        if len(rest) == 1 and verb == "DELETE":
            self._advance(batch, now)
            if batch.ended is None:
                return _anthropic_error(
                    400, f"message batch {batch.id} is still processing: cancel it first"
                )
            batch.deleted = True
            return _ok({"id": batch.id, "type": "message_batch_deleted"})
        if rest[1:] == ["results"] and verb == "GET":
            self._advance(batch, now)
            if batch.ended is None:
                return _anthropic_error(400, f"message batch {batch.id} has not ended yet")
            if now >= batch.created + self._seconds(config.batch_retention):
                return _anthropic_error(
                    404, f"the results of message batch {batch.id} are no longer available"
                )
            return 200, batch.results, _JSONL
        return _anthropic_error(405, f"no route for {verb} /v1/messages/batches/{'/'.join(rest)}")

    def _anthropic_json(self, batch: _Batch) -> dict[str, Any]:
        ended = batch.ended
        total = len(batch.lines)
        archived = batch.created + self._seconds(self.config.batch_retention)
        cancelled = batch.cancelled_at is not None
        status = "ended" if ended is not None else "canceling" if cancelled else "in_progress"
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": {
                "processing": total if ended is None else 0,
                "succeeded": 0 if ended is None else batch.succeeded,
                "errored": 0 if ended is None else batch.failed,
                "canceled": batch.unfinished if ended is not None and cancelled else 0,
                "expired": batch.unfinished if ended is not None and not cancelled else 0,
            },
            "ended_at": None if ended is None else _rfc3339(ended),
            "created_at": _rfc3339(batch.created),
            "expires_at": _rfc3339(batch.window_end),
            "archived_at": _rfc3339(archived) if ended is not None else None,
            "cancel_initiated_at": None if not cancelled else _rfc3339(batch.cancelled_at or 0),
            "results_url": None if ended is None else f"/v1/messages/batches/{batch.id}/results",
        }

    # -- time passing -------------------------------------------------------------------------

    def _advance(self, batch: _Batch, now: float) -> None:
        """Bring ``batch`` to ``now``: answer the lines due by then, end it if it is due."""
        if batch.ended is not None:
            return
        if batch.errors is not None:  # failed validation
            if now >= batch.validated:
                batch.ended = batch.validated
                batch.status = "failed"
            return
        cutoff = min(now, batch.stop)
        times = batch.times
        while batch.answered < len(times) and times[batch.answered] <= cutoff:
            self._answer_line(batch, batch.order[batch.answered], times[batch.answered])
            batch.answered += 1
        if now >= batch.stop:
            self._end(batch, batch.stop)
        elif batch.cancelled_at is not None:
            batch.status = "cancelling"
        elif batch.kind == "openai":
            if now < batch.validated:
                batch.status = "validating"
            elif now >= batch.finalizing:
                batch.status = "finalizing"
            else:
                batch.status = "in_progress"

    def _answer_line(self, batch: _Batch, index: int, when: float) -> None:
        custom_id, body = batch.lines[index]
        if batch.kind == "openai":
            status, answer = self._answer(body, when)
        else:
            status, answer = self._answer_anthropic(body, when, "batch")
        self.batch_lines += 1
        ok = status == 200
        batch.succeeded += ok
        batch.failed += not ok
        number = f"{batch.number}_{index}"
        if batch.kind == "openai":
            if ok:
                counts = answer["usage"]
                details = counts.get("prompt_tokens_details") or {}
                reasoning = (counts.get("completion_tokens_details") or {}).get("reasoning_tokens")
                batch.usage[0] += counts["prompt_tokens"]
                batch.usage[1] += details.get("cached_tokens") or 0
                batch.usage[2] += counts["completion_tokens"]
                batch.usage[3] += reasoning or 0
            line = {
                "id": f"batch_req_{number}",
                "custom_id": custom_id,
                "response": {"status_code": status, "request_id": f"req_{number}", "body": answer},
                "error": None,
            }
            (batch.good if ok else batch.bad).append(orjson.dumps(line) + b"\n")
            return
        result: dict[str, Any] = {"type": "succeeded", "message": answer}
        if not ok:
            error = {"type": "error", "error": answer, "request_id": f"req_{number}"}
            result = {"type": "errored", "error": error}
        batch.good.append(orjson.dumps({"custom_id": custom_id, "result": result}) + b"\n")

    def _end(self, batch: _Batch, when: float) -> None:
        """End ``batch`` at ``when``: the lines not answered are cancelled or expired, and the
        results are written."""
        cancelled = batch.cancelled_at is not None
        complete = batch.answered == len(batch.lines)
        batch.ended = when
        batch.status = "cancelled" if cancelled else "completed" if complete else "expired"
        for index in batch.order[batch.answered :]:
            custom_id = batch.lines[index][0]
            batch.unfinished += 1
            if batch.kind == "anthropic":
                kind = "canceled" if cancelled else "expired"
                result = {"custom_id": custom_id, "result": {"type": kind}}
                batch.good.append(orjson.dumps(result) + b"\n")
                continue
            code, message = (
                ("batch_cancelled", "This request was cancelled with its batch.")
                if cancelled
                else ("batch_expired",
                      "This request could not be executed before the completion window "
                      "expired.")
            )  # fmt: skip
            line: dict[str, Any] = {
                "id": f"batch_req_{batch.number}_{index}",
                "custom_id": custom_id,
                "response": None,
                "error": {"code": code, "message": message},
            }
            batch.bad.append(orjson.dumps(line) + b"\n")
        if batch.kind == "anthropic":
            batch.results = b"".join(batch.good)
        else:
            if batch.good:
                batch.output_file_id = self._new_id("file-")
                self._keep_file(batch.output_file_id, f"{batch.id}_output.jsonl",
                                "batch_output", b"".join(batch.good), when)  # fmt: skip
            if batch.bad:
                batch.error_file_id = self._new_id("file-")
                self._keep_file(batch.error_file_id, f"{batch.id}_error.jsonl",
                                "batch_output", b"".join(batch.bad), when)  # fmt: skip
        batch.good, batch.bad = [], []

    # -- answering ----------------------------------------------------------------------------

    def _fault(self, digest: bytes) -> str | None:
        """The Anthropic error type a line fails with (see :data:`_FAILURES`), or ``None``."""
        drawn = self.faults.decide(digest)
        if drawn is None:
            return None
        self.batch_lines_failed += 1
        kind = self.config.batch_fail_type
        if kind is None:
            kind = "rate_limit_error" if drawn == 429 else "api_error"
        return kind

    def _answer(self, body: Any, now: float) -> tuple[int, Any]:
        """A chat body's status and answer, as the chat endpoint would give them."""
        status, answer, _, _ = self._answer_parts(body, prefix_cache=True)
        return status, answer

    def _answer_parts(
        self, body: Any, *, prefix_cache: bool
    ) -> tuple[int, Any, list[str], str | None]:
        """:meth:`_answer`, with the prompt's rendered parts and the injected failure's
        Anthropic type (``None``: none)."""
        config = self.config
        try:
            request = parse_chat_request(body)
        except InvalidRequest as exc:
            error = {"message": exc.message, "type": "invalid_request_error",
                     "param": exc.param, "code": None}  # fmt: skip
            return 400, {"error": error}, [], None
        model = request.model or config.model
        if config.models is not None and model not in config.models:
            message = f"The model `{model}` does not exist or you do not have access to it."
            error = {"message": message, "type": "invalid_request_error", "param": None,
                     "code": "model_not_found"}  # fmt: skip
            return 404, {"error": error}, [], None
        parts = render_prompt_parts(request)
        digest = prompt_digest("".join(parts), config.seed)
        fault = self._fault(digest)
        if fault is not None:
            status, kind, code, _ = _FAILURES[fault]
            message = f"The batch line failed (simulated; request req_{next(self.numbers)})"
            error = {"message": message, "type": kind, "param": None, "code": code}
            return status, {"error": error}, parts, fault
        tokens = self.tokens.split(parts)
        number = next(self.numbers)
        reply = plan_reply(request, config, digest, number)
        cached = 0
        cache = self.cache
        if prefix_cache and cache is not None:
            size = config.block_size
            names = block_hashes(tokens, size, request.cache_salt)
            cached = min(cache.match(names), (len(tokens) - 1) // size) * size
            whole = tokens + split_tokens(reply.rendered())
            cache.insert(block_hashes(whole, size, request.cache_salt))
        counts = usage(len(tokens), cached, reply)
        response_id = f"chatcmpl-{digest.hex()[:12]}{number:x}"
        answer = orjson.loads(completion_body(response_id, model, reply, counts, "default"))
        return 200, answer, parts, None

    def _answer_anthropic(self, params: Any, now: float, tier: str) -> tuple[int, Any]:
        try:
            chat = anthropic_to_chat(params)
        except (TypeError, KeyError, AttributeError, ValueError) as exc:
            return 400, {"type": "invalid_request_error", "message": f"invalid params: {exc}"}
        status, answer, parts, fault = self._answer_parts(chat, prefix_cache=False)
        if status != 200:
            message = answer.get("error", {}).get("message", "")
            if fault is not None:
                return _FAILURES[fault][3], {"type": fault, "message": message}
            return status, {"type": _ANTHROPIC_TYPES.get(status, "api_error"), "message": message}
        read, written, ttl = self._anthropic_cached(params, parts, now)
        return 200, chat_to_message(answer, read, written, ttl, tier)

    def _anthropic_cached(
        self, params: dict[str, Any], parts: list[str], now: float
    ) -> tuple[int, int, str]:
        """Prompt caching of an Anthropic request: the tokens read from the cache, the tokens
        written to it, and the TTL of its breakpoints (see the module docstring)."""
        ttl = _cache_ttl(params)
        if ttl is None or not parts or not parts[0].startswith("<|im_start|>system"):
            return 0, 0, "5m"
        size = count_tokens(parts[0])
        if size < ANTHROPIC_CACHE_MIN_TOKENS:
            return 0, 0, ttl
        key = hashlib.blake2b(
            f"{params.get('model')}\0{ttl}\0{parts[0]}".encode(), digest_size=16
        ).digest()
        lifetime = self._seconds(3600.0 if ttl == "1h" else 300.0)
        cache = self._anthropic_cache
        alive = cache.get(key, -1.0) >= now
        if len(cache) >= _MAX_REMEMBERED:
            cache.clear()
        cache[key] = now + lifetime  # a hit refreshes the entry, a miss writes it
        return (size, 0, ttl) if alive else (0, size, ttl)


def _cache_ttl(params: dict[str, Any]) -> str | None:
    """The TTL of a request's ``cache_control`` breakpoints in its system prompt or tools
    (``None``: it has none)."""
    found: str | None = None
    system = params.get("system")
    blocks = [*(system if isinstance(system, list) else []), *(params.get("tools") or [])]
    for block in blocks:
        control = block.get("cache_control") if isinstance(block, dict) else None
        if isinstance(control, dict):
            found = str(control.get("ttl") or "5m")
    return found


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


def anthropic_to_chat(params: dict[str, Any]) -> dict[str, Any]:
    """The chat request an Anthropic Messages request means (for the simulated model)."""
    messages: list[dict[str, Any]] = []
    system = params.get("system")
    if system:
        messages.append({"role": "system", "content": _text_of(system)})
    for message in params["messages"]:
        content = message["content"]
        if isinstance(content, str):
            messages.append({"role": message["role"], "content": content})
            continue
        if message["role"] == "assistant":
            calls = [
                {"id": b["id"], "type": "function",
                 "function": {"name": b["name"], "arguments": orjson.dumps(b["input"]).decode()}}
                for b in content if b.get("type") == "tool_use"
            ]  # fmt: skip
            turn: dict[str, Any] = {"role": "assistant", "content": _text_of(content) or None}
            if calls:
                turn["tool_calls"] = calls
            messages.append(turn)
            continue
        for block in content:
            if block.get("type") == "tool_result":
                messages.append({"role": "tool", "tool_call_id": block["tool_use_id"],
                                 "content": _text_of(block.get("content", ""))})  # fmt: skip
        text = _text_of(content)
        if text:
            messages.append({"role": "user", "content": text})
    chat: dict[str, Any] = {"model": params.get("model"), "messages": messages}
    if params.get("max_tokens") is not None:
        chat["max_tokens"] = params["max_tokens"]
    tools = params.get("tools") or []
    if tools:
        chat["tools"] = [
            {"type": "function", "function": {"name": t["name"],
             "description": t.get("description", ""), "parameters": t["input_schema"]}}
            for t in tools
        ]  # fmt: skip
    choice = params.get("tool_choice")
    if isinstance(choice, dict):
        kind = choice.get("type")
        if kind == "any":
            chat["tool_choice"] = "required"
        elif kind == "tool":
            chat["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
        elif kind in ("auto", "none"):
            chat["tool_choice"] = kind
    return chat


def chat_to_message(
    answer: dict[str, Any],
    read: int = 0,
    written: int = 0,
    ttl: str = "5m",
    tier: str = "standard",
) -> dict[str, Any]:
    """The Anthropic Message of a chat completion (``read``/``written``: its prompt tokens read
    from and written to the prompt cache, with the TTL written; ``tier``: the service tier it
    reports)."""
    choice = answer["choices"][0]
    message = choice["message"]
    content: list[dict[str, Any]] = []
    if message.get("content"):
        content.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or []:
        function = call["function"]
        content.append({"type": "tool_use", "id": call["id"], "name": function["name"],
                        "input": orjson.loads(function["arguments"])})  # fmt: skip
    stop = {"tool_calls": "tool_use", "length": "max_tokens"}.get(choice["finish_reason"],
                                                                    "end_turn")  # fmt: skip
    counts = answer["usage"]
    prompt = counts["prompt_tokens"]
    return {
        "id": "msg_" + answer["id"].removeprefix("chatcmpl-"),
        "type": "message",
        "role": "assistant",
        "model": answer["model"],
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": max(prompt - read - written, 0),
            "output_tokens": counts["completion_tokens"],
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written if ttl != "1h" else 0,
                "ephemeral_1h_input_tokens": written if ttl == "1h" else 0,
            },
            "service_tier": tier,
        },
    }
