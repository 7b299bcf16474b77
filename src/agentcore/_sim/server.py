"""The simulator's HTTP/1.1 server: trio streams, h11 framing, one task per connection.

Theory of operation
-------------------
``open_sim_server`` opens a nursery, starts ``trio.serve_tcp`` in it and yields a
:class:`SimServer`; leaving the context cancels the nursery, which closes the listener and
every connection task, wherever it is (reading a request, waiting for an engine slot,
sleeping through a decode, writing a stream).

A connection task runs h11's server cycle: read a request and its whole body, answer it,
start the next cycle if both sides are done (keep-alive), otherwise close. Complete answers
carry ``Content-Length``; streams use chunked transfer encoding. Every way a peer can go wrong
ends in an answer or a closed connection, never in an exception out of the task: a malformed
HTTP message gets h11's suggested status (usually 400) and the connection closes; malformed
JSON or an invalid request gets a 400 with an OpenAI-style error body; an unknown path a 404;
a wrong method a 405; a body over 32 MiB a 413; a peer that disappears just ends the task. An
unexpected exception (a bug) is counted in ``SimStatistics.internal_errors`` and answered with
a 500 if no response has started.

A chat request is checked, rendered into prompt text and tokenized; the fault injector may
fail it at once (429 or 500, before any engine work, like an overloaded router). Otherwise the
policy plans the reply and the engine times it: wait for a slot, prefill the uncached prompt
tokens, decode the reply (in steps, paced with the chunks, when streaming).
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
import signal
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from http import HTTPStatus

import attrs
import h11
import orjson
import trio

from .batches import BatchStore, auth_refusal
from .config import SimConfig
from .engine import Engine
from .policy import FaultInjector, plan_reply, prompt_digest
from .prefix_cache import block_hashes
from .ratelimit import SimRateLimits
from .request import InvalidRequest, parse_chat_request
from .responses import completion_body, error_body, stream_frames, usage
from .template import render_prompt_parts
from .tiers import FlexGate, wire_tier
from .tokens import TokenMemo, split_tokens

__all__ = ["SimServer", "SimStatistics", "open_sim_server", "run_sim_server"]

_MAX_BODY = 32 * 1024 * 1024
"""Largest request body accepted (bytes); a long agent transcript stays far below it."""
_RECEIVE_SIZE = 65536
_JSON = b"application/json"
_CHAT_PATHS = (b"/v1/chat/completions", b"/chat/completions")
_MODELS_PATHS = (b"/v1/models", b"/models")
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_SERVED_AS = {"flex": "flex", "standard": "default"}
"""The ``service_tier`` a reply says it was served on (OpenAI's names)."""

Headers = list[tuple[bytes, bytes]]

_log = logging.getLogger("agentcore.sim")


@attrs.frozen
class SimStatistics:
    """A snapshot of a simulated server's counters."""

    requests: int
    """Chat requests served (past validation and fault injection)."""
    streamed: int
    """Of those, streamed ones."""
    rejected: int
    """Requests answered with a 4xx status (invalid, unknown path, too large, bad HTTP)."""
    rate_limited: int
    """429 answers: injected ones and those of the request / token limits."""
    server_errors: int
    """Injected 500 answers."""
    prompt_tokens: int
    """Prompt tokens of the requests that reached prefill."""
    cached_tokens: int
    """Of those, tokens found in the prefix cache."""
    prefill_tokens: int
    """Of those, tokens computed (``prompt_tokens - cached_tokens``)."""
    completion_tokens: int
    """Output tokens decoded."""
    tool_calls: int
    """Tool calls the model made."""
    running: int
    """Requests holding an engine slot now."""
    waiting: int
    """Requests waiting for a slot now."""
    max_running: int
    """Most requests that held a slot at once."""
    max_waiting: int
    """Longest slot queue seen."""
    cache_blocks: int
    """Blocks in the prefix cache now."""
    cache_evictions: int
    """Blocks evicted from the prefix cache so far."""
    connections: int
    """Connections accepted so far."""
    open_connections: int
    """Connections open now."""
    internal_errors: int
    """Unexpected exceptions in connection tasks (a bug if not 0)."""
    flex_requests: int = 0
    """Chat requests that asked for the flex service tier (refused or not)."""
    flex_refused: int = 0
    """Of those, refused for capacity (``SimConfig.flex_refuse_rate``)."""
    batches_created: int = 0
    """Batches created through ``/v1/batches`` and ``/v1/messages/batches``."""
    batch_lines: int = 0
    """Batch lines answered (succeeded or failed)."""
    tier_tokens: Mapping[str, tuple[int, int, int, int]] = attrs.field(factory=dict)
    """Chat replies sent whole, per the tier they say they were served on (``default``,
    ``flex``): replies, prompt tokens, of those cached, completion tokens (what a provider
    bills; not the batch lines)."""


def _reason(status: int) -> bytes:
    """The reason phrase of ``status`` (Groq's 498 has none in the standard list)."""
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b"Flex Tier Capacity Exceeded" if status == 498 else b"Error"


def _send(conn: h11.Connection, event: h11.Event) -> bytes:
    return conn.send(event) or b""


class _App:
    """The request handling and counters behind one :class:`SimServer`."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.engine = Engine(config)
        self.faults = FaultInjector(config.fail_rate, config.seed)
        self.tiers = FlexGate(
            config.flex_refuse_rate, config.flex_models, config.flex_refusal_status, config.seed
        )
        self.numbers = itertools.count(1)
        self.tokens = TokenMemo()
        self.batches = BatchStore(config, self.tokens, self.numbers, self.engine.cache)
        self.requests = 0
        self.streamed = 0
        self.rejected = 0
        self.rate_limited = 0
        self.server_errors = 0
        self.tool_calls = 0
        self.connections = 0
        self.open_connections = 0
        self.internal_errors = 0
        self.tier_tokens: dict[str, list[int]] = {}
        self.retry_after_ms = str(max(1, round(1000 / config.speedup))).encode()
        self.limits: SimRateLimits | None = None
        if config.requests_per_minute is not None or config.tokens_per_minute is not None:
            self.limits = SimRateLimits(
                config.requests_per_minute, config.tokens_per_minute, config.speedup
            )

    def statistics(self) -> SimStatistics:
        engine = self.engine.counters
        cache = self.engine.cache.statistics()
        return SimStatistics(
            requests=self.requests,
            streamed=self.streamed,
            rejected=self.rejected,
            rate_limited=self.rate_limited,
            server_errors=self.server_errors,
            prompt_tokens=engine.prompt_tokens,
            cached_tokens=engine.cached_tokens,
            prefill_tokens=engine.prefill_tokens,
            completion_tokens=engine.completion_tokens,
            tool_calls=self.tool_calls,
            running=engine.running,
            waiting=engine.waiting,
            max_running=engine.max_running,
            max_waiting=engine.max_waiting,
            cache_blocks=cache.blocks,
            cache_evictions=cache.evictions,
            connections=self.connections,
            open_connections=self.open_connections,
            internal_errors=self.internal_errors,
            flex_requests=self.tiers.flex_requests,
            flex_refused=self.tiers.refused,
            batches_created=self.batches.batches_created,
            batch_lines=self.batches.batch_lines,
            tier_tokens={k: (v[0], v[1], v[2], v[3]) for k, v in self.tier_tokens.items()},
        )

    def _served(self, tier: str, prompt: int, cached: int, completion: int) -> None:
        """Count a chat reply sent whole, under the tier it says it was served on."""
        counts = self.tier_tokens.setdefault(tier, [0, 0, 0, 0])
        counts[0] += 1
        counts[1] += prompt
        counts[2] += cached
        counts[3] += completion

    # -- connection cycle ---------------------------------------------------------------------

    async def serve(self, stream: trio.SocketStream) -> None:
        """Serve one connection until the peer closes it or the server stops."""
        self.connections += 1
        self.open_connections += 1
        conn = h11.Connection(h11.SERVER)
        try:
            await self._cycle(conn, stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except h11.RemoteProtocolError as exc:
            self.rejected += 1
            await self._try_error(
                conn, stream, exc.error_status_hint, str(exc), "invalid_request_error"
            )
        except Exception:
            self.internal_errors += 1
            _log.exception("unexpected error in a simulated-backend connection")
            await self._try_error(conn, stream, 500, "internal server error", "server_error")
        finally:
            self.open_connections -= 1
            await stream.aclose()

    async def _cycle(self, conn: h11.Connection, stream: trio.SocketStream) -> None:
        while True:
            event = await self._next_event(conn, stream)
            if not isinstance(event, h11.Request):
                return
            if conn.they_are_waiting_for_100_continue:
                await stream.send_all(
                    _send(conn, h11.InformationalResponse(status_code=100, headers=[]))
                )
            body = await self._read_body(conn, stream)
            if body is None:
                self.rejected += 1
                message = f"request body larger than {_MAX_BODY} bytes"
                await self._respond(conn, stream, 413, error_body(message, "invalid_request_error"))
                return
            await self._route(conn, stream, event, body)
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()

    async def _next_event(self, conn: h11.Connection, stream: trio.SocketStream) -> object:
        while True:
            event = conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            conn.receive_data(await stream.receive_some(_RECEIVE_SIZE))

    async def _read_body(self, conn: h11.Connection, stream: trio.SocketStream) -> bytes | None:
        parts: list[bytes] = []
        size = 0
        while True:
            event = await self._next_event(conn, stream)
            if isinstance(event, h11.Data):
                size += len(event.data)
                if size > _MAX_BODY:
                    return None
                parts.append(event.data)
            else:  # EndOfMessage: h11 raises on anything else
                return b"".join(parts)

    async def _respond(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        status: int,
        body: bytes,
        headers: Headers = [],  # noqa: B006 - never mutated
        *,
        content_type: bytes = _JSON,
    ) -> None:
        response = h11.Response(
            status_code=status,
            reason=_reason(status),
            headers=[
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        )
        data = _send(conn, response)
        if body:
            data += _send(conn, h11.Data(data=body))
        await stream.send_all(data + _send(conn, h11.EndOfMessage()))

    async def _try_error(
        self, conn: h11.Connection, stream: trio.SocketStream, status: int, message: str, kind: str
    ) -> None:
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        with suppress(h11.LocalProtocolError, trio.BrokenResourceError, trio.ClosedResourceError):
            await self._respond(conn, stream, status, error_body(message, kind))

    async def _reject(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        status: int,
        message: str,
        param: str | None = None,
    ) -> None:
        self.rejected += 1
        body = error_body(message, "invalid_request_error", param)
        await self._respond(conn, stream, status, body)

    # -- routes -------------------------------------------------------------------------------

    async def _route(
        self, conn: h11.Connection, stream: trio.SocketStream, request: h11.Request, body: bytes
    ) -> None:
        path = request.target.split(b"?", 1)[0]
        method = request.method
        refused = auth_refusal(path, dict(request.headers), self.config.api_keys)
        if refused is not None:
            status, answer, content_type = refused
            self.rejected += 1
            await self._respond(conn, stream, status, answer, content_type=content_type)
            return
        if path in _CHAT_PATHS:
            if method != b"POST":
                await self._reject(conn, stream, 405, f"use POST for {path.decode()}")
                return
            extra: Headers = [(n, v) for n, v in request.headers if n == b"x-request-id"]
            await self._chat(conn, stream, body, extra)
        elif path in _MODELS_PATHS and method == b"GET":
            model = {"id": self.config.model, "object": "model", "created": 0}
            listing = {"object": "list", "data": [{**model, "owned_by": "agentcore"}]}
            await self._respond(conn, stream, 200, orjson.dumps(listing))
        elif path == b"/health" and method == b"GET":
            await self._respond(conn, stream, 200, b"")
        elif path == b"/reset_prefix_cache" and method == b"POST":
            self.engine.cache.clear()
            await self._respond(conn, stream, 200, b"")
        elif (
            routed := self.batches.route(
                method, path, dict(request.headers), body, trio.current_time()
            )
        ) is not None:
            status, answer, content_type = routed
            self.rejected += status >= 400
            await self._respond(conn, stream, status, answer, content_type=content_type)
        else:
            await self._reject(
                conn, stream, 404, f"no route for {method.decode()} {path.decode(errors='replace')}"
            )

    async def _chat(
        self, conn: h11.Connection, stream: trio.SocketStream, body: bytes, headers: Headers
    ) -> None:
        config = self.config
        try:
            decoded = orjson.loads(body)
            request = parse_chat_request(decoded)
        except orjson.JSONDecodeError as exc:
            await self._reject(conn, stream, 400, f"the request body is not valid JSON: {exc}")
            return
        except InvalidRequest as exc:
            await self._reject(conn, stream, 400, exc.message, exc.param)
            return
        served = config.models
        if served is not None and (request.model or config.model) not in served:
            message = f"The model `{request.model}` does not exist or you do not have access to it."
            body = error_body(message, "invalid_request_error", code="model_not_found")
            self.rejected += 1
            await self._respond(conn, stream, 404, body, headers)
            return
        parts = render_prompt_parts(request)
        prompt = "".join(parts)
        digest = prompt_digest(prompt, config.seed)
        fault = self.faults.decide(digest)
        if fault is not None:
            await self._fail(conn, stream, fault, headers)
            return
        tier = wire_tier(decoded)
        if tier == "flex":
            refusal = self.tiers.decide(request.model or config.model, digest)
            if refusal is not None:
                status, error = refusal
                if status == 400:
                    self.rejected += 1
                else:
                    self.rate_limited += 1
                await self._respond(conn, stream, status, error, headers)
                return
        tokens = self.tokens.split(parts)
        limits = self.limits
        if limits is not None:
            now = trio.current_time()
            wait = limits.admit(now, len(tokens))
            if wait is not None:
                await self._limited(conn, stream, wait, [*headers, *limits.headers(now)])
                return
        self.requests += 1
        number = next(self.numbers)
        reply = plan_reply(request, config, digest, number)
        self.tool_calls += len(reply.tool_calls)
        names = block_hashes(tokens, config.block_size, request.cache_salt)
        model = request.model or config.model
        response_id = f"chatcmpl-{digest.hex()[:12]}{number:x}"
        engine = self.engine
        if not request.stream or config.ignore_stream:
            async with engine.slot(request.priority):
                cached = await engine.prefill(tokens, names)
                await engine.decode(reply.completion_tokens)
                engine.finish(tokens, names, split_tokens(reply.rendered()), request.cache_salt)
            if limits is not None:
                limits.charge(trio.current_time(), reply.completion_tokens)
                headers = [*headers, *limits.headers(trio.current_time())]
            counts = usage(len(tokens), cached, reply)
            answer = completion_body(response_id, model, reply, counts, _SERVED_AS[tier])
            await self._respond(conn, stream, 200, answer, headers)
            self._served(_SERVED_AS[tier], len(tokens), cached, reply.completion_tokens)
            return
        self.streamed += 1
        if limits is not None:  # sent before decoding: the completion is not counted yet
            headers = [*headers, *limits.headers(trio.current_time())]
        response = h11.Response(
            status_code=200,
            reason=b"OK",
            headers=[
                (b"content-type", b"text/event-stream"),
                (b"cache-control", b"no-cache"),
                *headers,
            ],
        )
        await stream.send_all(_send(conn, response))
        pending = b""
        async with engine.slot(request.priority):
            cached = await engine.prefill(tokens, names)
            totals = usage(len(tokens), cached, reply) if request.include_usage else None
            frames = stream_frames(response_id, model, reply, totals, config.stream_chunk_tokens)
            for count, frame in frames:
                if count:
                    await stream.send_all(pending)
                    pending = b""
                    await engine.decode(count)
                pending += _send(conn, h11.Data(data=frame))
            engine.finish(tokens, names, split_tokens(reply.rendered()), request.cache_salt)
        if limits is not None:
            limits.charge(trio.current_time(), reply.completion_tokens)
        await stream.send_all(pending + _send(conn, h11.EndOfMessage()))
        self._served(_SERVED_AS[tier], len(tokens), cached, reply.completion_tokens)

    async def _limited(
        self, conn: h11.Connection, stream: trio.SocketStream, wait: float, headers: Headers
    ) -> None:
        self.rate_limited += 1
        body = error_body(
            "Rate limit reached for requests or tokens per minute (simulated)",
            "rate_limit_error",
            code="rate_limit_exceeded",
        )
        retry = [
            (b"retry-after", str(max(1, math.ceil(wait))).encode()),
            (b"retry-after-ms", str(max(1, math.ceil(wait * 1000))).encode()),
        ]
        await self._respond(conn, stream, 429, body, [*retry, *headers])

    async def _fail(
        self, conn: h11.Connection, stream: trio.SocketStream, status: int, headers: Headers
    ) -> None:
        if status == 429:
            self.rate_limited += 1
            body = error_body(
                "Rate limit reached for requests (simulated)",
                "rate_limit_error",
                code="rate_limit_exceeded",
            )
            headers = [(b"retry-after", b"1"), (b"retry-after-ms", self.retry_after_ms), *headers]
        else:
            self.server_errors += 1
            body = error_body(
                "The server had an error processing the request (simulated)", "server_error"
            )
        await self._respond(conn, stream, status, body, headers)


@attrs.define(eq=False)
class SimServer:
    """A running simulated backend (see :func:`open_sim_server`)."""

    url: str
    """Base URL of the OpenAI-compatible API, e.g. ``http://127.0.0.1:8123/v1``."""
    port: int
    """The TCP port it listens on."""
    config: SimConfig
    _app: _App = attrs.field(repr=False)

    def statistics(self) -> SimStatistics:
        """A snapshot of the server's counters."""
        return self._app.statistics()

    def reset_prefix_cache(self) -> None:
        """Empty the prefix cache (as vLLM's ``POST /reset_prefix_cache`` does)."""
        self._app.engine.cache.clear()


@asynccontextmanager
async def open_sim_server(
    port: int = 0, config: SimConfig | None = None, host: str = "127.0.0.1"
) -> AsyncIterator[SimServer]:
    """Run a simulated OpenAI-compatible backend for the duration of the block.

    The server answers ``POST /v1/chat/completions`` (plain and streamed), ``GET /v1/models``,
    ``GET /health``, ``POST /reset_prefix_cache``, and the Batch APIs (OpenAI's ``/v1/files``
    and ``/v1/batches``, Anthropic's ``/v1/messages/batches`` and ``/v1/messages``:
    :mod:`agentcore._sim.batches`). Its model calls offered tools with
    schema-valid arguments for ``config.tool_rounds`` turns, then answers (JSON valid against
    the requested schema, when there is one). Its latency model has ``config.slots`` batch
    slots, prefill time per uncached prompt token, decode time per output token and a block
    prefix cache; usage reports ``prompt_tokens_details.cached_tokens``. See ``docs/sim.md``.

    Args:
        port: TCP port; 0 picks a free one.
        config: the simulator's knobs (defaults: :class:`SimConfig`).
        host: the address to listen on.

    Yields:
        The running server. Leaving the block stops it and every connection task.
    """
    config = config or SimConfig()
    app = _App(config)
    # An exception of the caller's block (or of binding the port) is taken out before the
    # nursery would wrap it in an exception group, and re-raised as itself once the server is
    # stopped (as the driver's ``body_nursery`` does; this floor cannot import it).
    raised: BaseException | None = None
    async with trio.open_nursery() as nursery:
        serve = functools.partial(trio.serve_tcp, app.serve, port, host=host)
        try:
            listeners: list[trio.SocketListener] = await nursery.start(serve)
            bound = listeners[0].socket.getsockname()[1]
            shown = f"[{host}]" if ":" in host else host
            yield SimServer(f"http://{shown}:{bound}/v1", bound, config, app)
        except BaseException as exc:  # re-raised below, once the server is stopped
            raised = exc
        finally:
            nursery.cancel_scope.cancel()
    if raised is not None:
        raise raised


def run_sim_server(host: str, port: int, config: SimConfig) -> None:
    """Serve the simulated backend until interrupted; the entry of ``agentcore sim``.

    Prints the base URL once listening. SIGINT (Ctrl-C) or SIGTERM stops the server cleanly
    and the function returns.

    Args:
        host: the address to listen on.
        port: TCP port; 0 picks a free one.
        config: the simulator's knobs.
    """

    async def serve() -> None:
        with trio.open_signal_receiver(*_STOP_SIGNALS) as signals:
            async with open_sim_server(port, config, host) as server:
                print(f"agentcore sim: serving {server.url} (model {config.model})", flush=True)
                async for _ in signals:
                    break

    trio.run(serve)
