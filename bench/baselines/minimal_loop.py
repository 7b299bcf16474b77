"""The minimal agent loop: trio + httpx + orjson, written the way one would by hand.

One task per agent; each sends the conversation to ``/v1/chat/completions``, runs the tool
calls of the reply (concurrently, each one executed: no coalescing, no cache), appends the
results and asks again, until a reply has no tool call or the turn budget is spent. A
``trio.Semaphore`` bounds the requests in flight (the inference slots).

Two switches turn it into the baselines of the benchmarks:

- ``--hold-slot``: an agent takes its slot once and keeps it for its whole run, through tool
  waits (what a loop does when it simply limits concurrent *agents*);
- ``--isolate``: each agent's system prompt starts with its own session line, so no prompt
  prefix is shared between agents and a prefix cache only helps within one agent's run (as if
  each agent had the server to itself, or the cache were flushed between agents).

With both on it is the *isolated* baseline (``isolated.py``). Without them it is the plain
*minimal loop*: slots released during tool waits, prefix cache shared through the server,
no prefix warming, no coalescing.

``--client-per-slot`` changes only the plumbing: instead of one ``httpx.AsyncClient`` whose
pool holds ``--slots`` connections, each slot owns a client with a single connection, handed
out through a channel. httpcore's pool scans its connections for every request it assigns,
so the shared pool costs more CPU as the slots grow; this variant is the leanest loop one can
write on httpx. Prints one JSON report line.

Run: ``python minimal_loop.py WORKLOAD.json --url http://127.0.0.1:PORT --slots 8``
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import Workload, emit, reply_key_of_openai_messages, self_cpu, tool_result


class Loop:
    def __init__(
        self,
        workload: Workload,
        url: str,
        slots: int,
        *,
        hold_slot: bool,
        isolate: bool,
        per_slot: bool = False,
    ) -> None:
        self.workload = workload
        self.endpoint = url.rstrip("/") + "/v1/chat/completions"
        self.slots = trio.Semaphore(slots)
        self.hold_slot = hold_slot
        self.isolate = isolate
        self.client = self._client(slots)
        self.per_slot = per_slot
        # With a client per slot, taking a slot means taking a client out of the channel.
        self.free, self.taken = trio.open_memory_channel[httpx.AsyncClient](slots)
        self.clients = [self._client(1) for _ in range(slots if per_slot else 0)]
        for client in self.clients:
            self.free.send_nowait(client)
        self.current: dict[int, httpx.AsyncClient] = {}
        shape = workload.tool
        self.tools = [
            {
                "type": "function",
                "function": {
                    "name": shape.name,
                    "description": shape.description,
                    "parameters": {
                        "type": "object",
                        "properties": {shape.parameter: {"type": "string"}},
                        "required": [shape.parameter],
                    },
                },
            }
        ]
        self.tool_calls = 0
        self.tool_executions = 0
        self.requests = 0
        self.ok = 0
        self.failed = 0

    async def run_tool(self, call: dict[str, Any], out: list[dict[str, Any]], slot: int) -> None:
        self.tool_calls += 1
        function = call["function"]
        try:
            arguments = orjson.loads(function.get("arguments") or "{}")
            argument = str(arguments[self.workload.tool.parameter])
        except (orjson.JSONDecodeError, KeyError, TypeError):
            content = "error: invalid arguments"
        else:
            self.tool_executions += 1
            await trio.sleep(self.workload.tool.latency)
            content = tool_result(function["name"], argument)
        out[slot] = {"role": "tool", "tool_call_id": call["id"], "content": content}

    @staticmethod
    def _client(connections: int) -> httpx.AsyncClient:
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        return httpx.AsyncClient(timeout=httpx.Timeout(300.0), limits=limits)

    @contextlib.asynccontextmanager
    async def slot(self, index: int) -> AsyncIterator[None]:
        """Hold one inference slot (and, with a client per slot, its client)."""
        if not self.per_slot:
            async with self.slots:
                yield
            return
        client = await self.taken.receive()
        self.current[index] = client
        try:
            yield
        finally:
            del self.current[index]
            self.free.send_nowait(client)

    async def aclose(self) -> None:
        await self.client.aclose()
        for client in self.clients:
            await client.aclose()

    async def ask(self, index: int, messages: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.workload.model,
            "tools": self.tools,
            "messages": messages,
            "max_tokens": self.workload.max_tokens,
        }
        if self.workload.annotate:
            key = reply_key_of_openai_messages(messages)
            if key is not None:
                body["nvext"] = {"annotations": [f"output_replay_id:{key}"]}
        self.requests += 1
        client = self.current[index] if self.per_slot else self.client
        answer = await client.post(
            self.endpoint, content=orjson.dumps(body), headers={"content-type": "application/json"}
        )
        answer.raise_for_status()
        message: dict[str, Any] = orjson.loads(answer.content)["choices"][0]["message"]
        return message

    async def agent(self, index: int) -> None:
        try:
            if self.hold_slot:
                async with self.slot(index):
                    await self._converse(index)
            else:
                await self._converse(index)
            self.ok += 1
        except (httpx.HTTPError, KeyError, IndexError, orjson.JSONDecodeError):
            self.failed += 1

    async def _converse(self, index: int) -> None:
        system = self.workload.system
        if self.isolate:
            system = f"Session {index}.\n{system}"
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": self.workload.user_message(index)},
        ]
        for _ in range(self.workload.max_turns + 1):
            if self.hold_slot:
                reply = await self.ask(index, messages)
            else:
                async with self.slot(index):
                    reply = await self.ask(index, messages)
            calls = reply.get("tool_calls") or []
            messages.append(
                {
                    "role": "assistant",
                    "content": reply.get("content"),
                    **({"tool_calls": calls} if calls else {}),
                }
            )
            if not calls:
                return
            results: list[dict[str, Any]] = [{}] * len(calls)
            async with trio.open_nursery() as nursery:
                for slot, call in enumerate(calls):
                    nursery.start_soon(self.run_tool, call, results, slot)
            messages.extend(results)


async def main(args: argparse.Namespace) -> None:
    workload = Workload.load(args.workload)
    loop = Loop(
        workload,
        args.url,
        args.slots,
        hold_slot=args.hold_slot,
        isolate=args.isolate,
        per_slot=args.client_per_slot,
    )
    cpu0, t0 = self_cpu(), time.perf_counter()
    try:
        async with trio.open_nursery() as nursery:
            for index in range(len(workload.inputs)):
                nursery.start_soon(loop.agent, index)
    finally:
        await loop.aclose()
    emit(
        {
            "wall": time.perf_counter() - t0,
            "cpu": self_cpu() - cpu0,
            "ok": loop.ok,
            "failed": loop.failed,
            "requests": loop.requests,
            "tool_calls": loop.tool_calls,
            "tool_executions": loop.tool_executions,
        }
    )


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", type=Path)
    parser.add_argument("--url", required=True, help="http://127.0.0.1:PORT of the server")
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--hold-slot", action="store_true", help="keep the slot through tool waits")
    parser.add_argument(
        "--isolate", action="store_true", help="no prompt prefix shared between agents"
    )
    parser.add_argument(
        "--client-per-slot", action="store_true", help="one single-connection client per slot"
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    trio.run(main, parse())
