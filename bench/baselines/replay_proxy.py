"""A loopback HTTP proxy that adds the Dynamo replay annotation to chat requests.

Clients that cannot add ``nvext.annotations`` themselves (BatchAgent) talk to this proxy
instead of the Dynamo frontend. For each ``POST .../chat/completions`` it derives the reply
key from the conversation (:func:`_common.reply_key_of_openai_messages`: the topic mark of
the user message and the number of assistant turns so far), appends
``output_replay_id:KEY`` to ``nvext.annotations`` and forwards the request, so every
contender gets the same scripted replies from the mocker. Everything else is passed through
unchanged, both ways; streamed answers are relayed chunk by chunk.

One more adjustment: the Dynamo mocker refuses requests without ``max_tokens``. A request
without a token limit gets the workload's limit when it carries a reply key, and a limit of
one token otherwise (a request the script does not know, such as a warm-up ping, would
otherwise be answered with random tokens up to the full limit).

Run: ``python replay_proxy.py --upstream http://127.0.0.1:PORT [--port 0]``; it prints
``listening on PORT`` once ready and serves until killed. trio + h11 on the server side,
httpx on the client side; 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
from pathlib import Path

import h11
import httpx
import orjson
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import reply_key_of_openai_messages

_HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"transfer-encoding", b"content-length", b"host",
     b"proxy-connection", b"te", b"trailer", b"upgrade"}
)  # fmt: skip


class Proxy:
    def __init__(self, upstream: str, max_tokens: int) -> None:
        self.client = httpx.AsyncClient(
            base_url=upstream,
            timeout=httpx.Timeout(600.0),
            limits=httpx.Limits(max_connections=1024, max_keepalive_connections=1024),
        )
        self.max_tokens = max_tokens
        self.annotated = 0
        self.passed = 0

    def rewrite(self, body: bytes) -> bytes:
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            return body
        if not isinstance(payload, dict) or not isinstance(payload.get("messages"), list):
            return body
        key = reply_key_of_openai_messages(payload["messages"])
        if key is not None:
            nvext = payload.setdefault("nvext", {})
            nvext["annotations"] = [*nvext.get("annotations", []), f"output_replay_id:{key}"]
            self.annotated += 1
        else:
            self.passed += 1
        if "max_tokens" not in payload and "max_completion_tokens" not in payload:
            payload["max_tokens"] = self.max_tokens if key is not None else 1
        return orjson.dumps(payload)

    async def serve(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request, body = await self._read_request(conn, stream)
                if request is None:
                    return
                await self._forward(conn, stream, request, body)
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.RemoteProtocolError):
            return
        finally:
            await stream.aclose()

    async def _read_request(
        self, conn: h11.Connection, stream: trio.SocketStream
    ) -> tuple[h11.Request | None, bytes]:
        request: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                conn.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return request, bytes(body)
            elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return None, b""

    async def _forward(
        self, conn: h11.Connection, stream: trio.SocketStream, request: h11.Request, body: bytes
    ) -> None:
        target = request.target.decode()
        if request.method == b"POST" and target.rstrip("/").endswith("/chat/completions"):
            body = self.rewrite(body)
        headers = [
            (k.decode(), v.decode()) for k, v in request.headers if k.lower() not in _HOP_BY_HOP
        ]
        upstream = self.client.build_request(
            request.method.decode(), target, headers=headers, content=body
        )
        try:
            answer = await self.client.send(upstream, stream=True)
        except httpx.HTTPError as exc:
            message = f"proxy: upstream failed: {exc}".encode()
            await stream.send_all(
                conn.send(
                    h11.Response(status_code=502, headers=[("content-length", str(len(message)))])
                )
            )
            await stream.send_all(conn.send(h11.Data(data=message)))
            await stream.send_all(conn.send(h11.EndOfMessage()))
            return
        try:
            out_headers = [(k, v) for k, v in answer.headers.raw if k.lower() not in _HOP_BY_HOP]
            out_headers.append((b"transfer-encoding", b"chunked"))
            await stream.send_all(
                conn.send(h11.Response(status_code=answer.status_code, headers=out_headers))
            )
            async for chunk in answer.aiter_raw():
                if chunk:
                    await stream.send_all(conn.send(h11.Data(data=chunk)))
            await stream.send_all(conn.send(h11.EndOfMessage()))
        finally:
            await answer.aclose()


async def main(upstream: str, port: int, max_tokens: int) -> None:
    proxy = Proxy(upstream, max_tokens)
    async with proxy.client, trio.open_nursery() as nursery:
        serve = functools.partial(trio.serve_tcp, proxy.serve, port, host="127.0.0.1")
        listeners = await nursery.start(serve)
        print(f"listening on {listeners[0].socket.getsockname()[1]}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="replay-annotation proxy for Dynamo")
    parser.add_argument("--upstream", required=True, help="http://127.0.0.1:PORT of the frontend")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--max-tokens", type=int, default=256)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(main, args.upstream, args.port, args.max_tokens)
