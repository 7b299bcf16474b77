"""The simulator's Batch APIs: OpenAI's files and batches, Anthropic's message batches.

Theory of operation
-------------------
:class:`BatchStore` keeps uploaded files and batches in memory (the oldest are forgotten past
:data:`MAX_KEPT` of each). A batch is created ``in_progress`` and becomes due
``SimConfig.batch_delay`` simulated seconds later; nothing runs in the background: the first
request that looks at a due batch (a retrieve, a listing, a results download) answers every
line of it at once and ends it (OpenAI: ``completed`` with an output file and, when any line
failed, an error file; Anthropic: ``processing_status: ended`` with a ``results_url``). A
cancelled batch ends at once, its lines cancelled (``cancelled`` / ``canceled``).

Each line is answered as the chat endpoint would answer its body (same planner, same seed,
so the same content as a synchronous request); a share ``SimConfig.batch_fail_rate`` of lines
fails instead (OpenAI: the line's ``response.status_code`` is 500 or 429 in the error file;
Anthropic: ``result.type: errored``), decided from the line's content and the number of times
that content failed before, so a line sent again gets a fresh draw. Anthropic lines are
translated to the chat request they mean (system, text, ``tool_use``, ``tool_result``,
tools, ``tool_choice``) and the reply back into a Message.

``batches_created`` counts creations: a client that never submits a hop twice leaves it
equal to the number of hops.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, Final

import orjson

from .config import SimConfig
from .policy import FaultInjector, plan_reply, prompt_digest
from .request import InvalidRequest, parse_chat_request
from .responses import completion_body, usage
from .template import render_prompt_parts
from .tokens import TokenMemo

__all__ = ["MAX_KEPT", "BatchStore", "Routed"]

MAX_KEPT: Final = 1000
"""Files and batches kept (each); older ones are forgotten."""
MAX_REQUESTS: Final = 100_000
"""Most lines a batch may hold (both providers' limit)."""

Routed = tuple[int, bytes, bytes]
"""A status, a body and its content type."""

_JSON = b"application/json"
_JSONL = b"application/binary"


def _error(status: int, message: str, kind: str = "invalid_request_error") -> Routed:
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return status, orjson.dumps(body), _JSON


def _ok(value: Any) -> Routed:
    return 200, orjson.dumps(value), _JSON


def _rfc3339(seconds: float) -> str:
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    days, hours = divmod(hours, 24)
    return f"2026-01-{1 + days % 28:02d}T{hours:02d}:{rest // 60:02d}:{rest % 60:02d}Z"


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
    """One batch: its lines, its state, its answers once ended."""

    def __init__(
        self, kind: str, batch_id: str, lines: list[tuple[str, Any]], now: float, due: float
    ) -> None:
        self.kind = kind  # "openai" or "anthropic"
        self.id = batch_id
        self.lines = lines
        self.created = now
        self.due = due
        self.ended: float | None = None
        self.cancelled = False
        self.input_file_id = ""
        self.endpoint = "/v1/chat/completions"
        self.window = "24h"
        self.metadata: Any = None
        self.output_file_id: str | None = None
        self.error_file_id: str | None = None
        self.results = b""
        self.succeeded = 0
        self.failed = 0


_AsJson = Callable[[_Batch], dict[str, Any]]
"""A provider's JSON form of a batch."""


class BatchStore:
    """The files and batches of one simulated server (see the module docstring)."""

    def __init__(self, config: SimConfig, tokens: TokenMemo, numbers: Iterator[int]) -> None:
        self.config = config
        self.tokens = tokens
        self.numbers = numbers
        self.faults = FaultInjector(config.batch_fail_rate, config.seed)
        self.files: OrderedDict[str, tuple[str, str, bytes, float]] = OrderedDict()
        self.batches: OrderedDict[str, _Batch] = OrderedDict()
        self.ids = itertools.count(1)
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
                status, answer = self._answer_anthropic(orjson.loads(body))
            except orjson.JSONDecodeError:
                return _error(400, "the request body is not valid JSON")
            if status != 200:
                answer = {"type": "error", "error": answer}
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

    def _new_batch(
        self, kind: str, prefix: str, lines: list[tuple[str, Any]], now: float
    ) -> _Batch:
        """A batch of ``kind`` created now, kept (and counted), due ``batch_delay`` from now."""
        due = now + self.config.batch_delay / self.config.speedup
        batch = _Batch(kind, self._new_id(prefix), lines, now, due)
        self.batches[batch.id] = batch
        self.batches_created += 1
        while len(self.batches) > MAX_KEPT:
            self.batches.popitem(last=False)
        return batch

    def _listing(self, kind: str, now: float, as_json: _AsJson) -> dict[str, Any]:
        """The batches of ``kind``, settled, newest first, as both providers list them."""
        mine = [b for b in self.batches.values() if b.kind == kind]
        for batch in mine:
            self._settle(batch, now)
        data = [as_json(b) for b in reversed(mine)]
        first = data[0]["id"] if data else None
        last = data[-1]["id"] if data else None
        return {"data": data, "has_more": False, "first_id": first, "last_id": last}

    def _get_or_cancel(
        self, batch: _Batch, verb: str, rest: list[str], now: float, as_json: _AsJson
    ) -> Routed | None:
        """``GET`` one batch (settled) or ``POST`` its ``cancel``, as both providers route them;
        ``None`` for any other route."""
        if len(rest) == 1 and verb == "GET":
            self._settle(batch, now)
            return _ok(as_json(batch))
        if rest[1:] == ["cancel"] and verb == "POST":
            self._cancel(batch, now)
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
            return _error(404, f"no file {rest[0] if rest else ''!r}")
        if len(rest) == 1 and verb == "GET":
            return _ok(self._file_json(rest[0]))
        if rest[1:] == ["content"] and verb == "GET":
            return 200, self.files[rest[0]][2], _JSONL
        return _error(405, f"no route for {verb} /v1/files/{'/'.join(rest)}")

    # -- OpenAI batches -----------------------------------------------------------------------

    def _openai_lines(self, data: bytes) -> list[tuple[str, Any]] | str:
        lines: list[tuple[str, Any]] = []
        seen: set[str] = set()
        for number, raw in enumerate(data.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                line = orjson.loads(raw)
            except orjson.JSONDecodeError:
                return f"line {number} is not valid JSON"
            if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
                return f"line {number} has no custom_id"
            if line["custom_id"] in seen:
                return f"line {number}: custom_id {line['custom_id']!r} is not unique"
            if line.get("method") != "POST" or line.get("url") != "/v1/chat/completions":
                return f"line {number}: only POST /v1/chat/completions is simulated"
            seen.add(line["custom_id"])
            lines.append((line["custom_id"], line.get("body")))
        if not lines:
            return "the input file has no requests"
        if len(lines) > MAX_REQUESTS:
            return f"a batch holds at most {MAX_REQUESTS} requests"
        return lines

    def _openai(self, verb: str, rest: list[str], body: bytes, now: float) -> Routed:
        if not rest and verb == "POST":
            try:
                params = orjson.loads(body)
            except orjson.JSONDecodeError:
                return _error(400, "the request body is not valid JSON")
            file_id = params.get("input_file_id") if isinstance(params, dict) else None
            if not isinstance(file_id, str) or file_id not in self.files:
                return _error(400, f"no input file {file_id!r}")
            if params.get("endpoint") != "/v1/chat/completions":
                return _error(400, "only the /v1/chat/completions endpoint is simulated")
            if params.get("completion_window") != "24h":
                return _error(400, "completion_window must be '24h'")
            lines = self._openai_lines(self.files[file_id][2])
            if isinstance(lines, str):
                return _error(400, lines)
            batch = self._new_batch("openai", "batch_", lines, now)
            batch.input_file_id = file_id
            batch.metadata = params.get("metadata")
            return _ok(self._openai_json(batch))
        if not rest and verb == "GET":
            return _ok({"object": "list", **self._listing("openai", now, self._openai_json)})
        found = self.batches.get(rest[0])
        if found is None or found.kind != "openai":
            return _error(404, f"no batch {rest[0]!r}")
        routed = self._get_or_cancel(found, verb, rest, now, self._openai_json)
        if routed is not None:
            return routed
        return _error(405, f"no route for {verb} /v1/batches/{'/'.join(rest)}")

    def _openai_json(self, batch: _Batch) -> dict[str, Any]:
        ended = None if batch.ended is None else int(batch.ended)
        status = "in_progress" if ended is None else "completed"
        if batch.cancelled:
            status = "cancelled"
        finished = None if batch.cancelled else ended
        stopped = ended if batch.cancelled else None
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": batch.endpoint,
            "errors": None,
            "input_file_id": batch.input_file_id,
            "completion_window": batch.window,
            "status": status,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "created_at": int(batch.created),
            "in_progress_at": int(batch.created),
            "expires_at": int(batch.created) + 86400,
            "finalizing_at": finished,
            "completed_at": finished,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": stopped,
            "cancelled_at": stopped,
            "request_counts": {
                "total": len(batch.lines),
                "completed": batch.succeeded,
                "failed": batch.failed,
            },
            "metadata": batch.metadata,
        }

    # -- Anthropic message batches ------------------------------------------------------------

    def _anthropic(self, verb: str, rest: list[str], body: bytes, now: float) -> Routed:
        if not rest and verb == "POST":
            try:
                params = orjson.loads(body)
            except orjson.JSONDecodeError:
                return _error(400, "the request body is not valid JSON")
            requests = params.get("requests") if isinstance(params, dict) else None
            if not isinstance(requests, list) or not requests:
                return _error(400, "requests: a non-empty list is required")
            if len(requests) > MAX_REQUESTS:
                return _error(400, f"a batch holds at most {MAX_REQUESTS} requests")
            lines: list[tuple[str, Any]] = []
            seen: set[str] = set()
            for number, item in enumerate(requests):
                custom_id = item.get("custom_id") if isinstance(item, dict) else None
                if not isinstance(custom_id, str) or not isinstance(item.get("params"), dict):
                    return _error(400, f"requests.{number}: custom_id and params are required")
                if custom_id in seen:
                    return _error(400, f"requests.{number}: custom_id {custom_id!r} is not unique")
                seen.add(custom_id)
                lines.append((custom_id, item["params"]))
            batch = self._new_batch("anthropic", "msgbatch_", lines, now)
            return _ok(self._anthropic_json(batch))
        if not rest and verb == "GET":
            return _ok(self._listing("anthropic", now, self._anthropic_json))
        found = self.batches.get(rest[0])
        if found is None or found.kind != "anthropic":
            return _error(404, f"no message batch {rest[0]!r}", "not_found_error")
        batch = found
        routed = self._get_or_cancel(batch, verb, rest, now, self._anthropic_json)
        if routed is not None:
            return routed
        if rest[1:] == ["results"] and verb == "GET":
            self._settle(batch, now)
            if batch.ended is None:
                return _error(400, f"message batch {batch.id} has not ended yet")
            return 200, batch.results, _JSONL
        return _error(405, f"no route for {verb} /v1/messages/batches/{'/'.join(rest)}")

    def _anthropic_json(self, batch: _Batch) -> dict[str, Any]:
        ended = batch.ended
        total = len(batch.lines)
        cancelled = total - batch.succeeded - batch.failed if batch.cancelled else 0
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "in_progress" if ended is None else "ended",
            "request_counts": {
                "processing": total if ended is None else 0,
                "succeeded": batch.succeeded,
                "errored": batch.failed,
                "canceled": cancelled,
                "expired": 0,
            },
            "ended_at": None if ended is None else _rfc3339(ended),
            "created_at": _rfc3339(batch.created),
            "expires_at": _rfc3339(batch.created + 86400),
            "archived_at": None,
            "cancel_initiated_at": _rfc3339(ended) if batch.cancelled and ended else None,
            "results_url": None if ended is None else f"/v1/messages/batches/{batch.id}/results",
        }

    # -- answering ----------------------------------------------------------------------------

    def _cancel(self, batch: _Batch, now: float) -> None:
        if batch.ended is not None:
            return
        batch.cancelled = True
        batch.ended = now
        if batch.kind == "anthropic":
            out = [{"custom_id": cid, "result": {"type": "canceled"}} for cid, _ in batch.lines]
            batch.results = b"".join(orjson.dumps(line) + b"\n" for line in out)

    def _settle(self, batch: _Batch, now: float) -> None:
        """End ``batch`` if it is due: answer every line."""
        if batch.ended is not None or now < batch.due:
            return
        batch.ended = now
        good: list[bytes] = []
        bad: list[bytes] = []
        for number, (custom_id, body) in enumerate(batch.lines):
            if batch.kind == "openai":
                status, answer = self._answer(body)
            else:
                status, answer = self._answer_anthropic(body)
            self.batch_lines += 1
            ok = status == 200
            batch.succeeded += ok
            batch.failed += not ok
            self.batch_lines_failed += status in (429, 500)
            if batch.kind == "openai":
                line = {
                    "id": f"batch_req_{batch.id}_{number}",
                    "custom_id": custom_id,
                    "response": {
                        "status_code": status,
                        "request_id": f"req_{number}",
                        "body": answer,
                    },
                    "error": None,
                }
                (good if ok else bad).append(orjson.dumps(line) + b"\n")
            else:
                result: dict[str, Any] = {"type": "succeeded", "message": answer}
                if not ok:
                    result = {"type": "errored", "error": {"type": "error", "error": answer}}
                good.append(orjson.dumps({"custom_id": custom_id, "result": result}) + b"\n")
        if batch.kind == "anthropic":
            batch.results = b"".join(good)
            return
        if good:
            batch.output_file_id = self._new_id("file-")
            self._keep_file(batch.output_file_id, f"{batch.id}_output.jsonl", "batch_output",
                            b"".join(good), now)  # fmt: skip
        if bad:
            batch.error_file_id = self._new_id("file-")
            self._keep_file(batch.error_file_id, f"{batch.id}_error.jsonl", "batch_output",
                            b"".join(bad), now)  # fmt: skip

    def _answer(self, body: Any) -> tuple[int, Any]:
        """A chat body's status and answer, as the chat endpoint would give them."""
        config = self.config
        try:
            request = parse_chat_request(body)
        except InvalidRequest as exc:
            error = {"message": exc.message, "type": "invalid_request_error",
                     "param": exc.param, "code": None}  # fmt: skip
            return 400, {"error": error}
        parts = render_prompt_parts(request)
        digest = prompt_digest("".join(parts), config.seed)
        fault = self.faults.decide(digest)
        if fault is not None:
            kind = "rate_limit_error" if fault == 429 else "server_error"
            message = f"The batch line failed (simulated; request req_{next(self.numbers)})"
            return fault, {"error": {"message": message, "type": kind, "param": None,
                                     "code": None}}  # fmt: skip
        tokens = self.tokens.split(parts)
        number = next(self.numbers)
        reply = plan_reply(request, config, digest, number)
        model = request.model or config.model
        counts = usage(len(tokens), 0, reply)
        response_id = f"chatcmpl-{digest.hex()[:12]}{number:x}"
        return 200, orjson.loads(completion_body(response_id, model, reply, counts, "default"))

    def _answer_anthropic(self, params: Any) -> tuple[int, Any]:
        try:
            chat = anthropic_to_chat(params)
        except (TypeError, KeyError, AttributeError, ValueError) as exc:
            return 400, {"type": "invalid_request_error", "message": f"invalid params: {exc}"}
        status, answer = self._answer(chat)
        if status != 200:
            error = answer.get("error", {})
            kind = {429: "rate_limit_error", 500: "api_error"}.get(status, "invalid_request_error")
            return status, {"type": kind, "message": error.get("message", "")}
        return 200, chat_to_message(answer)


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


def chat_to_message(answer: dict[str, Any]) -> dict[str, Any]:
    """The Anthropic Message of a chat completion."""
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
    return {
        "id": "msg_" + answer["id"].removeprefix("chatcmpl-"),
        "type": "message",
        "role": "assistant",
        "model": answer["model"],
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": counts["prompt_tokens"],
            "output_tokens": counts["completion_tokens"],
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }
