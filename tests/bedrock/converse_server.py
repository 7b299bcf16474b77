"""A loopback server that speaks Bedrock's Converse and ConverseStream (trio + h11).

It checks every request's SigV4 signature the way AWS does (recomputed with botocore from the
request as received: method, path, signed headers, body), answers a bad one with 403
``InvalidSignatureException``, can refuse the first requests with 429
``ThrottlingException``, and otherwise replies like a model: a ``toolUse`` of the first tool
offered while the conversation has no tool result, then a text answer.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import h11
import orjson
import trio
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.fuzz.targets import load_target

frames = load_target("fuzz_stream_bedrock")

ACCESS_KEY = "AKIDEXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
SESSION_TOKEN = "session-token-example"
REGION = "us-east-1"


@attrs.define
class ConverseServer:
    url: str = ""
    throttle_first: int = 0
    seen: list[dict[str, Any]] = attrs.field(factory=list)
    """One entry per request: method, target, headers, body (parsed), signature_ok."""


def signature_ok(method: str, target: str, headers: dict[str, str], body: bytes) -> bool:
    authorization = headers.get("authorization", "")
    if not authorization.startswith("AWS4-HMAC-SHA256 ") or "x-amz-date" not in headers:
        return False
    fields = dict(
        part.strip().split("=", 1) for part in authorization[len("AWS4-HMAC-SHA256 ") :].split(",")
    )
    signed = fields["SignedHeaders"].split(";")
    request = AWSRequest(
        method=method,
        url=f"http://{headers['host']}{target}",
        data=body,
        headers={name: headers[name] for name in signed if name in headers},
    )
    request.context["timestamp"] = headers["x-amz-date"]
    signer = SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN), "bedrock", REGION)
    expected = signer.signature(
        signer.string_to_sign(request, signer.canonical_request(request)), request
    )
    return bool(fields["Signature"] == expected)


def answer(body: dict[str, Any]) -> tuple[str, tuple[str, str, dict[str, Any]] | None]:
    """(text, tool use) the model answers ``body`` with."""
    last = body["messages"][-1]["content"]
    has_result = any("toolResult" in block for block in last)
    tools = body.get("toolConfig", {}).get("tools", [])
    specs = [t["toolSpec"] for t in tools if "toolSpec" in t]
    if specs and not has_result:
        return "", ("tooluse_" + str(len(body["messages"])), specs[0]["name"], {"key": "k1"})
    return "The record k1 is active.", None


def converse_json(text: str, tool: tuple[str, str, dict[str, Any]] | None) -> bytes:
    content: list[dict[str, Any]] = []
    if text:
        content.append({"text": text})
    if tool is not None:
        content.append({"toolUse": {"toolUseId": tool[0], "name": tool[1], "input": tool[2]}})
    usage = {"inputTokens": 30, "outputTokens": 9, "totalTokens": 39, "cacheReadInputTokens": 20}
    return orjson.dumps(
        {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": "tool_use" if tool else "end_turn",
            "usage": usage,
            "metrics": {"latencyMs": 40},
        }
    )


async def _exchange(server: ConverseServer, stream: Any) -> None:
    conn = h11.Connection(h11.SERVER)
    async with stream:
        while True:
            body = bytearray()
            request: h11.Request | None = None
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    conn.receive_data(data)
                elif isinstance(event, h11.Request):
                    request = event
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    break
                elif isinstance(event, h11.ConnectionClosed):
                    return
            assert request is not None
            headers = {n.decode(): v.decode() for n, v in request.headers}
            method, target = request.method.decode(), request.target.decode()
            ok = signature_ok(method, target, headers, bytes(body))
            parsed = orjson.loads(bytes(body))
            server.seen.append(
                {
                    "method": method,
                    "target": target,
                    "headers": headers,
                    "body": parsed,
                    "signature_ok": ok,
                }
            )
            status, reply_headers, payload = 200, [("content-type", "application/json")], b""
            streamed = target.endswith("/converse-stream")
            if not ok:
                status, streamed = 403, False
                reply_headers.append(("x-amzn-errortype", "InvalidSignatureException:http://x/"))
                payload = b'{"message": "The request signature we calculated does not match"}'
            elif len(server.seen) <= server.throttle_first:
                status, streamed = 429, False
                reply_headers.append(("x-amzn-errortype", "ThrottlingException:http://x/"))
                payload = b'{"message": "Too many requests, please wait before trying again."}'
            elif streamed:
                text, tool = answer(parsed)
                fragments = None
                if tool is not None:
                    raw = orjson.dumps(tool[2]).decode()
                    fragments = (tool[0], tool[1], [raw[:5], raw[5:]])
                payload = frames.reply(text, fragments)
                reply_headers = [("content-type", "application/vnd.amazon.eventstream")]
            else:
                payload = converse_json(*answer(parsed))
            reply_headers.append(("content-length", str(len(payload))))
            await stream.send_all(
                conn.send(h11.Response(status_code=status, headers=reply_headers))
            )
            await stream.send_all(conn.send(h11.Data(data=payload)))
            await stream.send_all(conn.send(h11.EndOfMessage()))
            if conn.our_state is h11.MUST_CLOSE:
                return
            conn.start_next_cycle()


async def _serve(server: ConverseServer, stream: Any) -> None:
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await _exchange(server, stream)


@asynccontextmanager
async def open_converse_server(throttle_first: int = 0) -> AsyncIterator[ConverseServer]:
    async with trio.open_nursery() as nursery:
        server = ConverseServer(throttle_first=throttle_first)
        listeners = await nursery.start(
            functools.partial(
                trio.serve_tcp, functools.partial(_serve, server), 0, host="127.0.0.1"
            )
        )
        server.url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()
