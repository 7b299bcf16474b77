"""An OpenAI-compatible loopback server that refuses requests, in one of two ways.

Two kinds of server answer ``429``, and a client should treat them differently:

- ``--kind per-request``: a proxy or balancer in front of several deployments, a gateway
  with limits per replica, a self-hosted server shedding load. It refuses about
  ``--refuse`` (4 %) of requests, each on its own draw, with ``429``, a ``retry-after-ms`` of
  150 to 450 ms (``retry-after: 1``) and ``x-ratelimit-remaining-requests: 0``, while the
  next request would pass; it also answers ``503`` and ``529`` (overloaded) and cuts
  connections mid-stream (``--faults``, 1 % each). Its successful replies publish no limits.
- ``--kind shared``: a hosted API with one quota for every request (a truthful limiter). It
  publishes ``x-ratelimit-limit-requests``, ``-remaining-requests`` and ``-reset-requests`` on
  every reply, and refuses a request with ``429`` and the time until its bucket (``--rpm``
  requests a minute, refilled continuously) holds one again, which is then true for every
  sender.

Its model follows the *refusals* workload: an agent's first user message says ``Record: rN``;
while the conversation holds fewer than ``1 + N % 5`` tool results (and tools are offered) it
calls ``lookup`` with the key and the page (the number of results so far), then answers
``Record rN: K pages read.`` with K the tool results it saw. Every answer waits ``--latency``
seconds (50 ms), streamed (role, two content pieces or the tool call, finish, usage) or
whole. ``GET /stats`` answers its counters as JSON.

Run: ``python refusing_server.py --kind per-request [--port 0]``; prints ``listening on PORT``
once ready and serves until killed (127.0.0.1 only).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import random
import re
import sys
from pathlib import Path
from typing import Any

import h11
import orjson
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fixed_latency_server

_RECORD = re.compile(r"Record: r(\d+)")
_COUNTER = itertools.count()


def tool_turns(record: int) -> int:
    """How many tool results the agent of ``record`` must bring before the answer."""
    return 1 + record % 5


def answer_text(record: int, pages: int) -> str:
    """The answer after ``pages`` tool results."""
    return f"Record r{record}: {pages} pages read."


def plan(request: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    """The reply's text, or its tool call."""
    messages = request.get("messages") or []
    record = 0
    for message in messages:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str):
            found = _RECORD.search(content)
            if found:
                record = int(found.group(1))
                break
    pages = sum(1 for m in messages if m.get("role") == "tool")
    if request.get("tools") and pages < tool_turns(record):
        arguments = orjson.dumps({"key": f"r{record}", "page": pages}).decode()
        call = {"id": f"call_{next(_COUNTER)}", "type": "function",
                "function": {"name": "lookup", "arguments": arguments}}  # fmt: skip
        return None, call
    return answer_text(record, pages), None


def _chunk(ident: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {"id": ident, "object": "chat.completion.chunk", "created": 0, "model": "bench",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip
    return b"data: " + orjson.dumps(body) + b"\n\n"


def stream_frames(request: dict[str, Any]) -> list[bytes]:
    text, call = plan(request)
    ident = f"chatcmpl-{next(_COUNTER)}"
    frames = [_chunk(ident, {"role": "assistant", "content": ""})]
    if call is not None:
        frames.append(_chunk(ident, {"tool_calls": [{"index": 0, **call}]}))
        frames.append(_chunk(ident, {}, "tool_calls"))
    else:
        assert text is not None
        half = len(text) // 2
        frames += [_chunk(ident, {"content": text[:half]}), _chunk(ident, {"content": text[half:]})]
        frames.append(_chunk(ident, {}, "stop"))
    usage = {"prompt_tokens": 120, "completion_tokens": 12, "total_tokens": 132}
    final = {"id": ident, "object": "chat.completion.chunk", "created": 0, "model": "bench",
             "choices": [], "usage": usage}  # fmt: skip
    frames += [b"data: " + orjson.dumps(final) + b"\n\n", b"data: [DONE]\n\n"]
    return frames


def whole_body(request: dict[str, Any]) -> bytes:
    text, call = plan(request)
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if call is not None:
        message["tool_calls"] = [call]
    return orjson.dumps({
        "id": f"chatcmpl-{next(_COUNTER)}", "object": "chat.completion", "created": 0,
        "model": "bench",
        "choices": [{"index": 0, "message": message,
                     "finish_reason": "tool_calls" if call else "stop"}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 12, "total_tokens": 132},
    })  # fmt: skip


class Server(fixed_latency_server.Server):
    """The fixed-latency server's connection loop, with this module's answers."""

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args.latency)
        self.kind: str = args.kind
        self.refuse: float = args.refuse
        self.faults: float = args.faults
        # Imported here: the clients import this module for the workload, from any tree.
        from agentcore._core.tokenbucket import TokenBucket

        self.random = random.Random(args.seed)
        self.bucket = TokenBucket(args.rpm / 60.0, float(args.rpm))
        self.counts = {"requests": 0, "answered": 0, "refused_429": 0, "refused_503": 0,
                       "refused_529": 0, "cut": 0}  # fmt: skip

    def limit_headers(self, now: float) -> list[tuple[str, str]]:
        """What the shared kind publishes on every reply."""
        if self.kind != "shared":
            return []
        remaining = max(0, int(self.bucket.level(now)))
        reset = self.bucket.until_full(now)
        return [
            ("x-ratelimit-limit-requests", str(int(self.bucket.capacity))),
            ("x-ratelimit-remaining-requests", str(remaining)),
            ("x-ratelimit-reset-requests", f"{max(1, round(reset * 1000))}ms"),
        ]

    def decide(self) -> tuple[int, list[tuple[str, str]]] | str | None:
        """A refusal (status, headers), ``"cut"``, or ``None`` to answer."""
        now = trio.current_time()
        draw = self.random.random()
        if self.kind == "shared":
            wait = self.bucket.wait(now, 1.0)
            if wait > 0:
                millis = max(1, round(wait * 1000))
                headers = [
                    ("retry-after-ms", str(millis)),
                    ("retry-after", str(-(-millis // 1000))),
                ]
                return 429, headers + self.limit_headers(now)
            self.bucket.take(now, 1.0)
        elif draw < self.refuse:
            millis = self.random.randint(150, 450)
            headers = [("retry-after-ms", str(millis)), ("retry-after", "1"),
                       ("x-ratelimit-remaining-requests", "0")]  # fmt: skip
            return 429, headers
        draw -= self.refuse
        if 0 <= draw < self.faults:
            return 503, []
        if 0 <= draw - self.faults < self.faults:
            return 529, []
        if 0 <= draw - 2 * self.faults < self.faults:
            return "cut"
        return None

    async def answer(
        self, conn: h11.Connection, stream: trio.SocketStream, request: h11.Request, body: bytes
    ) -> None:
        """Answer one request (or cut its connection, which ends the connection's loop)."""
        target = request.target.split(b"?")[0].rstrip(b"/")
        if request.method == b"GET" and target.endswith(b"/stats"):
            await self.send(conn, stream, 200, orjson.dumps(self.counts))
            return
        if request.method != b"POST" or not target.endswith(b"/chat/completions"):
            await self.send(conn, stream, 404, b'{"error":{"message":"not found"}}')
            return
        parsed = orjson.loads(body)
        self.counts["requests"] += 1
        verdict = self.decide()
        if isinstance(verdict, tuple):
            status, headers = verdict
            await trio.sleep(0.005)
            self.counts[f"refused_{status}"] += 1
            kind = {429: "rate_limit_error", 503: "server_error", 529: "overloaded_error"}[status]
            payload = orjson.dumps({"error": {"message": f"refused ({status})", "type": kind}})
            await self.send(conn, stream, status, payload, headers)
            return
        await trio.sleep(self.latency)
        headers = self.limit_headers(trio.current_time())
        if not parsed.get("stream"):
            self.counts["answered"] += 1
            await self.send(conn, stream, 200, whole_body(parsed), headers)
            return
        frames = stream_frames(parsed)
        head = [("content-type", "text/event-stream"), ("transfer-encoding", "chunked"), *headers]
        data = conn.send(h11.Response(status_code=200, headers=head))
        if verdict == "cut":
            self.counts["cut"] += 1
            await stream.send_all(data + conn.send(h11.Data(data=frames[0])))
            await stream.aclose()
            raise trio.BrokenResourceError("cut")  # ends the connection's loop
        self.counts["answered"] += 1
        for frame in frames:
            data += conn.send(h11.Data(data=frame))
        await stream.send_all(data + conn.send(h11.EndOfMessage()))

    async def send(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        status: int,
        payload: bytes,
        extra: list[tuple[str, str]] | None = None,
    ) -> None:
        headers = [("content-type", "application/json"), ("content-length", str(len(payload)))]
        data = conn.send(h11.Response(status_code=status, headers=headers + (extra or [])))
        data += conn.send(h11.Data(data=payload))
        await stream.send_all(data + conn.send(h11.EndOfMessage()))


async def main(args: argparse.Namespace) -> None:
    server = Server(args)
    async with trio.open_nursery() as nursery:
        serve = functools.partial(trio.serve_tcp, server.serve, args.port, host="127.0.0.1")
        listeners = await nursery.start(serve)
        print(f"listening on {listeners[0].socket.getsockname()[1]}", flush=True)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", choices=["per-request", "shared"], default="per-request")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per answer")
    parser.add_argument("--refuse", type=float, default=0.04, help="share refused 429")
    parser.add_argument("--faults", type=float, default=0.01, help="share each of 503/529/cut")
    parser.add_argument("--rpm", type=int, default=600, help="requests a minute (shared)")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(main, parse())
