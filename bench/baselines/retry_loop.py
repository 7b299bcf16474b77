"""The naive agent loop with retries: trio + httpx + orjson, retrying only the refused request.

One task per agent (``Record: rN``, the *refusals* workload of ``refusing_server.py``); each
sends the conversation to ``/v1/chat/completions`` streamed, runs the reply's tool calls
(``lookup``, ``--tool-latency`` seconds each), appends the results and asks again until a
reply has no tool call. A ``trio.Semaphore`` of ``--slots`` bounds the requests in flight; it
is held for one attempt only, not through tool waits or retry waits.

A failed attempt (an error status, a connection error, a stream cut short) is retried, that
request alone, up to 6 attempts: after the server's ``retry-after-ms`` or ``retry-after``
when it sent one, else after 0.25 s doubling per failure. Nothing else slows down.

Prints one JSON report line: wall time, agents answered correctly, attempts, retries.

Run: ``python retry_loop.py --url http://127.0.0.1:PORT --agents 1000 --slots 32``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from refusing_server import answer_text, tool_turns

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Read one page of a record.",
            "parameters": {
                "type": "object",
                "properties": {"key": {"type": "string"}, "page": {"type": "integer"}},
                "required": ["key", "page"],
            },
        },
    }
]
SYSTEM = "You read records page by page with the lookup tool, then say how many pages you read."


class Failed(Exception):
    def __init__(self, retry_after: float | None) -> None:
        super().__init__(retry_after)
        self.retry_after = retry_after


class Loop:
    def __init__(self, url: str, slots: int, tool_latency: float) -> None:
        self.endpoint = url.rstrip("/") + "/v1/chat/completions"
        self.slots = trio.Semaphore(slots)
        limits = httpx.Limits(max_connections=slots, max_keepalive_connections=slots)
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(60.0), limits=limits)
        self.tool_latency = tool_latency
        self.attempts = 0
        self.retries = 0
        self.correct = 0
        self.failed = 0

    async def attempt(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """One streamed attempt: the assembled assistant message."""
        body = {"model": "bench", "messages": messages, "tools": TOOLS, "stream": True,
                "stream_options": {"include_usage": True}}  # fmt: skip
        self.attempts += 1
        content: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        finished = False
        try:
            async with self.client.stream("POST", self.endpoint, content=orjson.dumps(body)) as r:
                if r.status_code != 200:
                    await r.aread()
                    headers = r.headers
                    if "retry-after-ms" in headers:
                        raise Failed(float(headers["retry-after-ms"]) / 1000)
                    if "retry-after" in headers:
                        raise Failed(float(headers["retry-after"]))
                    raise Failed(None)
                async for line in r.aiter_lines():
                    if not line.startswith("data: "):
                        continue
                    data = line[6:]
                    if data == "[DONE]":
                        finished = True  # read on to the end: the connection is kept
                        continue
                    chunk = orjson.loads(data)
                    for choice in chunk.get("choices") or ():
                        delta = choice.get("delta") or {}
                        if delta.get("content"):
                            content.append(delta["content"])
                        for call in delta.get("tool_calls") or ():
                            slot = calls.setdefault(
                                call["index"], {"id": "", "name": "", "args": ""}
                            )
                            slot["id"] += call.get("id") or ""
                            function = call.get("function") or {}
                            slot["name"] += function.get("name") or ""
                            slot["args"] += function.get("arguments") or ""
        except httpx.HTTPError:
            raise Failed(None) from None
        if not finished:
            raise Failed(None)
        message: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
        if calls:
            message["tool_calls"] = [
                {"id": c["id"], "type": "function",
                 "function": {"name": c["name"], "arguments": c["args"]}}
                for _, c in sorted(calls.items())
            ]  # fmt: skip
        return message

    async def ask(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The reply to ``messages``, retrying the refused attempts of this request only."""
        for attempt in range(6):
            try:
                async with self.slots:
                    return await self.attempt(messages)
            except Failed as failure:
                if attempt == 5:
                    raise
                self.retries += 1
                wait = failure.retry_after
                await trio.sleep(0.25 * 2**attempt if wait is None else wait)
        raise AssertionError("unreachable")

    async def lookup(self, call: dict[str, Any], out: list[dict[str, Any]], n: int) -> None:
        arguments = orjson.loads(call["function"]["arguments"])
        await trio.sleep(self.tool_latency)
        content = f"page {arguments['page']} of {arguments['key']}: nothing unusual"
        out[n] = {"role": "tool", "tool_call_id": call["id"], "content": content}

    async def agent(self, record: int) -> None:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Record: r{record}. How many pages does it have?"},
        ]
        try:
            for _ in range(8):
                message = await self.ask(messages)
                messages.append(message)
                calls = message.get("tool_calls") or []
                if not calls:
                    pages = tool_turns(record)
                    self.correct += message.get("content") == answer_text(record, pages)
                    return
                results: list[dict[str, Any]] = [{}] * len(calls)
                async with trio.open_nursery() as nursery:
                    for n, call in enumerate(calls):
                        nursery.start_soon(self.lookup, call, results, n)
                messages += results
        except Failed:
            self.failed += 1


async def main(args: argparse.Namespace) -> None:
    loop = Loop(args.url, args.slots, args.tool_latency)
    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for record in range(args.agents):
            nursery.start_soon(loop.agent, record)
    wall = time.perf_counter() - started
    await loop.client.aclose()
    report = {
        "wall": wall, "agents": args.agents, "correct": loop.correct, "failed": loop.failed,
        "attempts": loop.attempts, "retries": loop.retries,
    }  # fmt: skip
    print(orjson.dumps(report).decode(), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--slots", type=int, default=32)
    parser.add_argument("--tool-latency", type=float, default=0.05)
    trio.run(main, parser.parse_args())
