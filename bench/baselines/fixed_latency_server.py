"""An OpenAI-compatible loopback server whose every answer takes the same fixed time.

The overhead benchmark needs a model that costs exactly the same for every client, so the
client's own cost shows. ``agentcore sim`` models prefill and decode per token (its latency
varies with the reply), so this server stands in: trio + h11, ``POST /v1/chat/completions``
(complete or streamed as server-sent events), ``GET /v1/models``, 404 for anything else.

Its model follows the *lookup* workload: when tools are offered and the conversation has no
assistant turn yet, it calls the first tool with the conversation's record key (``Record:
rN`` in the user message); otherwise it answers with one sentence. Every answer is sent after
``--latency`` seconds (default 50 ms), however many requests run at once.

Run: ``python fixed_latency_server.py [--port 0] [--latency 0.05]``; prints ``listening on
PORT`` once ready and serves until killed (127.0.0.1 only).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import re

import h11
import orjson
import trio

_RECORD = re.compile(r"Record: (r\d+)")
_COUNTER = itertools.count()


def plan_reply(request: dict[str, object]) -> tuple[str | None, list[dict[str, object]]]:
    """The content and tool calls of the reply to ``request``."""
    messages = request.get("messages") or []
    assert isinstance(messages, list)
    tools = request.get("tools") or []
    assert isinstance(tools, list)
    answered = any(m.get("role") == "assistant" for m in messages)
    key = "r0"
    for message in messages:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str):
            found = _RECORD.search(content)
            if found:
                key = found.group(1)
    if tools and not answered:
        name = tools[0]["function"]["name"]
        parameters = tools[0]["function"].get("parameters", {}).get("properties", {})
        parameter = next(iter(parameters), "key")
        call = {
            "id": f"call_{next(_COUNTER)}",
            "type": "function",
            "function": {"name": name, "arguments": orjson.dumps({parameter: key}).decode()},
        }
        return None, [call]
    return f"The registry lists record {key} as active.", []


def completion(request: dict[str, object]) -> bytes:
    content, calls = plan_reply(request)
    message: dict[str, object] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return orjson.dumps(
        {
            "id": f"chatcmpl-{next(_COUNTER)}",
            "object": "chat.completion",
            "created": 1700000000,
            "model": request.get("model", "bench-model"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": 12, "total_tokens": 112},
        }
    )


def stream_events(request: dict[str, object], pieces: int = 1) -> list[bytes]:
    content, calls = plan_reply(request)
    ident = f"chatcmpl-{next(_COUNTER)}"
    model = request.get("model", "bench-model")

    def chunk(delta: dict[str, object], finish: str | None = None, **extra: object) -> bytes:
        body = {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return b"data: " + orjson.dumps(body) + b"\n\n"

    events = [chunk({"role": "assistant", "content": ""})]
    if calls:
        tool_calls = [{"index": i, **call} for i, call in enumerate(calls)]
        events.append(chunk({"tool_calls": tool_calls}))
        events.append(chunk({}, "tool_calls"))
    else:
        text = str(content)
        size = max(1, -(-len(text) // max(1, pieces)))
        events.extend(chunk({"content": text[i : i + size]}) for i in range(0, len(text), size))
        events.append(chunk({}, "stop"))
    options = request.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        usage = {"prompt_tokens": 100, "completion_tokens": 12, "total_tokens": 112}
        final = {"id": ident, "object": "chat.completion.chunk", "created": 1700000000,
                 "model": model, "choices": [], "usage": usage}  # fmt: skip
        events.append(b"data: " + orjson.dumps(final) + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    return events


class Server:
    def __init__(self, latency: float, pieces: int = 1) -> None:
        self.latency = latency
        self.pieces = pieces

    async def serve(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request: h11.Request | None = None
                body = bytearray()
                while True:
                    event = conn.next_event()
                    if event is h11.NEED_DATA:
                        conn.receive_data(await stream.receive_some(65536))
                    elif isinstance(event, h11.Request):
                        request = event
                    elif isinstance(event, h11.Data):
                        body += event.data
                    elif isinstance(event, h11.EndOfMessage):
                        break
                    else:
                        return
                assert request is not None
                await self.answer(conn, stream, request, bytes(body))
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.RemoteProtocolError):
            return
        finally:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.aclose()

    async def answer(
        self, conn: h11.Connection, stream: trio.SocketStream, request: h11.Request, body: bytes
    ) -> None:
        target = request.target.split(b"?")[0].rstrip(b"/")
        if request.method == b"GET" and target.endswith(b"/models"):
            payload = b'{"object":"list","data":[{"id":"bench-model","object":"model"}]}'
            await self.send(conn, stream, 200, payload)
            return
        if request.method != b"POST" or not target.endswith(b"/chat/completions"):
            await self.send(conn, stream, 404, b'{"error":{"message":"not found"}}')
            return
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            await self.send(conn, stream, 400, b'{"error":{"message":"invalid JSON"}}')
            return
        await trio.sleep(self.latency)
        if not parsed.get("stream"):
            await self.send(conn, stream, 200, completion(parsed))
            return
        headers = [("content-type", "text/event-stream"), ("transfer-encoding", "chunked")]
        data = conn.send(h11.Response(status_code=200, headers=headers))
        for event in stream_events(parsed, self.pieces):
            data += conn.send(h11.Data(data=event))
        await stream.send_all(data + conn.send(h11.EndOfMessage()))

    async def send(
        self, conn: h11.Connection, stream: trio.SocketStream, status: int, payload: bytes
    ) -> None:
        headers = [("content-type", "application/json"), ("content-length", str(len(payload)))]
        data = conn.send(h11.Response(status_code=status, headers=headers))
        data += conn.send(h11.Data(data=payload))
        await stream.send_all(data + conn.send(h11.EndOfMessage()))


async def main(port: int, latency: float, pieces: int = 1) -> None:
    server = Server(latency, pieces)
    async with trio.open_nursery() as nursery:
        serve = functools.partial(trio.serve_tcp, server.serve, port, host="127.0.0.1")
        listeners = await nursery.start(serve)
        print(f"listening on {listeners[0].socket.getsockname()[1]}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per answer")
    parser.add_argument(
        "--pieces", type=int, default=1, help="content chunks per streamed text answer"
    )
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(main, args.port, args.latency, args.pieces)
