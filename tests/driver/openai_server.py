"""A tiny OpenAI-compatible chat-completions server on loopback (trio + h11), for driver tests.

Each request's JSON body goes to a ``respond(body, n)`` function (``n`` counts requests from 0)
that returns a :class:`Reply`: a status, headers and either a whole body or SSE frames.
Requests to the paths in ``routes`` (an engine's other endpoints, such as ``/metrics``) go to
their own function instead, with the JSON body (``{}`` when empty), and are recorded in
``LoopbackServer.routed``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import h11
import orjson
import trio


@attrs.frozen
class Reply:
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    frames: Sequence[bytes] | None = None
    """SSE frames sent one by one (``body`` is ignored then)."""
    frame_delay: float = 0.0
    cut_after: int | None = None
    """Close the connection after this many frames (a truncated stream)."""
    delay: float = 0.0
    """Seconds (trio time) the server waits before answering."""


def completion(
    content: str | None = None,
    tool_calls: Sequence[tuple[str, str, str]] = (),
    *,
    prompt: int = 20,
    completion_tokens: int = 5,
    cached: int | None = None,
) -> Reply:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in tool_calls
        ]
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt + completion_tokens,
    }
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": usage,
    }
    return Reply(headers=(("content-type", "application/json"),), body=orjson.dumps(body))


def streamed_text(pieces: Sequence[str], *, frame_delay: float = 0.0) -> Reply:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        payload = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + orjson.dumps(payload) + b"\n\n"

    usage = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [],
        "usage": {"prompt_tokens": 9, "completion_tokens": len(pieces), "total_tokens": 9},
    }
    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({"content": p}) for p in pieces]
    frames.append(chunk({}, "stop"))
    frames.append(b"data: " + orjson.dumps(usage) + b"\n\n")
    frames.append(b"data: [DONE]\n\n")
    return Reply(
        headers=(("content-type", "text/event-stream"),), frames=frames, frame_delay=frame_delay
    )


def error(status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> Reply:
    body = orjson.dumps({"error": {"message": message, "type": "error", "code": None}})
    return Reply(status, (("content-type", "application/json"), *headers), body)


@attrs.define
class LoopbackServer:
    url: str
    requests: list[dict[str, Any]] = attrs.field(factory=list)
    connections: int = 0
    """Connections accepted so far."""
    open_connections: int = 0
    """Connections not closed yet."""
    routed: list[tuple[str, dict[str, Any]]] = attrs.field(factory=list)
    """``(path, body)`` of each request answered by a route."""


Routes = Mapping[str, Callable[[dict[str, Any]], Reply]]


async def _serve(
    server: LoopbackServer,
    respond: Callable[[dict[str, Any], int], Reply],
    routes: Routes,
    stream: Any,
) -> None:
    server.connections += 1
    server.open_connections += 1
    try:
        # A client may go away mid-reply, as cancelled clients do.
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await _exchange(server, respond, routes, stream)
    finally:
        server.open_connections -= 1


async def _exchange(
    server: LoopbackServer,
    respond: Callable[[dict[str, Any], int], Reply],
    routes: Routes,
    stream: Any,
) -> None:
    conn = h11.Connection(h11.SERVER)
    async with stream:
        while True:
            body = bytearray()
            path = ""
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    conn.receive_data(data)
                elif isinstance(event, h11.Request):
                    path = event.target.decode().split("?", 1)[0]
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    break
                elif isinstance(event, h11.ConnectionClosed):
                    return
            request = orjson.loads(bytes(body)) if body else {}
            route = routes.get(path)
            if route is not None:
                server.routed.append((path, request))
                reply = route(request)
            else:
                n = len(server.requests)
                server.requests.append(request)
                reply = respond(request, n)
            if reply.delay:
                await trio.sleep(reply.delay)
            if reply.frames is None:
                headers = [*reply.headers, ("content-length", str(len(reply.body)))]
                await stream.send_all(
                    conn.send(h11.Response(status_code=reply.status, headers=headers))
                )
                await stream.send_all(conn.send(h11.Data(data=reply.body)))
            else:
                head = h11.Response(status_code=reply.status, headers=list(reply.headers))
                await stream.send_all(conn.send(head))
                for k, frame in enumerate(reply.frames):
                    if reply.cut_after is not None and k >= reply.cut_after:
                        return  # hang up mid-stream
                    await trio.sleep(reply.frame_delay)
                    await stream.send_all(conn.send(h11.Data(data=frame)))
            await stream.send_all(conn.send(h11.EndOfMessage()))
            if conn.our_state is h11.MUST_CLOSE:
                return
            conn.start_next_cycle()


@asynccontextmanager
async def open_openai_server(
    respond: Callable[[dict[str, Any], int], Reply], routes: Routes | None = None
) -> AsyncIterator[LoopbackServer]:
    async with trio.open_nursery() as nursery:
        server = LoopbackServer("")
        handler = functools.partial(_serve, server, respond, routes or {})
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, handler, 0, host="127.0.0.1")
        )
        port = listeners[0].socket.getsockname()[1]
        server.url = f"http://127.0.0.1:{port}/v1"
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()
