"""Agents behind a web endpoint, trio-native: an ASGI app served by hypercorn's trio worker.

One driver is opened at start-up and shared by every request, so concurrent requests share
its inference slots, its tool coalescing and cache, and the server's prefix cache. Routes:

- ``POST /runs`` with ``{"inputs": {"record": "r1"}}``: runs one agent, answers its result
  as JSON once it ends.
- ``POST /runs/stream``, same body: server-sent events: ``started`` at once, then the agent's
  step events as they happen (``request_started``, ``model_replied``, ``tool_started``,
  ``tool_ended``...; each ``data`` is the event as ``agentcore.core.dumps`` writes it), then
  ``result``. With ``"tokens": true`` in the body the reply's text arrives too, as
  ``model_delta`` events.
- ``GET /stats``: the driver's statistics and the service's counters; ``GET /health``.

A client that disconnects cancels its own agent and nothing else. A bad request gets a 4xx
answer with a JSON body ``{"error": {"type": ..., "message": ...}}``; nothing of a request
body is logged.

Needs ``pip install 'trio-agentcore[service]'``. Run::

    python examples/service_trio.py --port 8080                 # embedded sim:// backend
    python examples/service_trio.py --backend vllm://127.0.0.1:8000 --model M --port 8080
    curl -s localhost:8080/runs -d '{"inputs": {"record": "r7"}}'
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import cattrs
import hypercorn
import hypercorn.trio
import trio

import agentcore
from agentcore.sim import SimConfig

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

MAX_BODY = 64 * 1024
TOOL_SECONDS = float(os.environ.get("SERVICE_TOOL_SECONDS", "0.2"))


@agentcore.tool(coalesce=True)  # a read: identical concurrent lookups share one call
async def lookup(key: str) -> str:
    """Look a record up in the registry.

    Args:
        key: the record key.
    """
    await trio.sleep(TOOL_SECONDS)  # stands for a call to a registry service
    return f"{key}: active since 2024, owner: team-{len(key) % 7}"


AGENT = agentcore.Agent(
    instructions="You answer questions about records. Look the record up before you answer.",
    tools=[lookup],
    max_turns=4,
    name="web",
)
"""The same agent as ``TASK``, run one at a time with its step events (``/runs/stream``)."""

TASK = agentcore.Task(
    prompt="What does the registry say about record {record}?",
    system="You answer questions about records. Look the record up before you answer.",
    tools=[lookup],
    max_turns=4,
)


class BadRequest(Exception):
    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


def result_json(result: agentcore.Result) -> dict[str, Any]:
    error = None
    if result.error is not None:
        error = {"kind": result.error.kind.value, "message": result.error.message}
    return {
        "status": result.status,
        "output": cattrs.unstructure(result.output),
        "error": error,
        "turns": result.turns,
        "usage": cattrs.unstructure(result.usage),
    }


def parse_inputs(body: bytes) -> dict[str, str]:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(400, "invalid_json", f"the body is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("inputs"), dict):
        raise BadRequest(422, "invalid_body", 'expected {"inputs": {"record": "..."}}')
    inputs = data["inputs"]
    if not all(isinstance(v, str | int | float) for v in inputs.values()):
        raise BadRequest(422, "invalid_body", "input values must be strings or numbers")
    if "record" not in inputs:
        raise BadRequest(422, "invalid_body", "inputs.record is required")
    return {str(k): str(v) for k, v in inputs.items()}


def wants_tokens(body: bytes) -> bool:
    """Whether the (already validated) body asks for the reply's text as it arrives."""
    return json.loads(body).get("tokens") is True


class App:
    """The ASGI application; every request shares ``driver``."""

    def __init__(self, driver: agentcore.Driver) -> None:
        self.driver = driver
        self.numbers = itertools.count()
        self.served = 0
        self.disconnected = 0
        self.active = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        try:
            await self.route(scope, receive, send)
        except BadRequest as bad:
            error = {"error": {"type": bad.kind, "message": bad.message}}
            await respond(send, bad.status, error)

    async def route(self, scope: Scope, receive: Receive, send: Send) -> None:
        path, method = scope["path"], scope["method"]
        if path in ("/runs", "/runs/stream"):
            if method != "POST":
                raise BadRequest(405, "method_not_allowed", f"use POST for {path}")
            body = await read_body(receive)
            if body is None:
                return  # the client left before sending its body
            inputs = parse_inputs(body)
            if path == "/runs":
                await self.run(inputs, receive, send)
            else:
                await self.stream(inputs, wants_tokens(body), receive, send)
        elif path == "/stats" and method == "GET":
            await respond(send, 200, self.stats())
        elif path == "/health" and method == "GET":
            await respond(send, 200, {"ok": True})
        else:
            raise BadRequest(404, "not_found", f"no route for {method} {path}")

    @contextlib.asynccontextmanager
    async def serving(self, receive: Receive) -> AsyncIterator[None]:
        """Run the block as one request's agent: counted while active, cancelled (and nothing
        else) when the client disconnects first."""
        self.active += 1
        try:
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    self.disconnected += 1
                    nursery.cancel_scope.cancel()

                nursery.start_soon(watch)
                yield
                nursery.cancel_scope.cancel()
        finally:
            self.active -= 1

    async def agent(self, inputs: dict[str, str], receive: Receive) -> agentcore.Result | None:
        """Run one agent; ``None`` if the client disconnected first (the agent is cancelled)."""
        outcome: list[agentcore.Result] = []
        async with self.serving(receive):
            batch = f"web-{next(self.numbers)}"
            outcome += await agentcore.run_batch(
                TASK, [inputs], driver=self.driver, warm=False, batch_id=batch
            )
        if not outcome:
            return None
        self.served += 1
        return outcome[0]

    async def run(self, inputs: dict[str, str], receive: Receive, send: Send) -> None:
        result = await self.agent(inputs, receive)
        if result is not None:
            await respond(send, 200, result_json(result))

    async def stream(
        self, inputs: dict[str, str], tokens: bool, receive: Receive, send: Send
    ) -> None:
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send_event(send, "started", {"record": inputs["record"]})
        result: agentcore.Result | None = None
        async with self.serving(receive):
            prompt = TASK.prompt.format_map(inputs)
            run_id = f"web-{next(self.numbers)}"
            async with AGENT.watch(
                prompt, driver=self.driver, deltas=tokens, run_id=run_id
            ) as steps:
                async for step in steps:
                    await send_frame(send, step.name, agentcore.core.dumps(step))
            result = steps.result
        if result is None:
            return  # the client left: its agent was cancelled
        self.served += 1
        await send_event(send, "result", result_json(result))
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def stats(self) -> dict[str, Any]:
        driver = self.driver.statistics()
        return {
            "service": {
                "served": self.served,
                "disconnected": self.disconnected,
                "active": self.active,
            },
            "driver": {
                "runs": driver.runs,
                "runs_ok": driver.runs_ok,
                "requests": driver.requests,
                "tool_calls": driver.tool_calls,
                "tool_executions": driver.tool_executions,
                "latency_p50": driver.latency.p50,
                "peak_slots_in_use": driver.slots.peak_in_use,
            },
        }


async def read_body(receive: Receive) -> bytes | None:
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        body += message.get("body", b"")
        if len(body) > MAX_BODY:
            raise BadRequest(413, "too_large", f"the body exceeds {MAX_BODY} bytes")
        if not message.get("more_body", False):
            return bytes(body)


async def respond(send: Send, status: int, payload: Any) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_event(send: Send, name: str, payload: Any) -> None:
    await send_frame(send, name, json.dumps(payload).encode())


async def send_frame(send: Send, name: str, data: bytes) -> None:
    frame = b"event: " + name.encode() + b"\ndata: " + data + b"\n\n"
    await send({"type": "http.response.body", "body": frame, "more_body": True})


async def serve(args: argparse.Namespace) -> None:
    config = hypercorn.Config()
    config.bind = [f"fd://{args.fd}"] if args.fd is not None else [f"127.0.0.1:{args.port}"]
    config.graceful_timeout = 1.0
    options: dict[str, Any] = {}
    if args.backend == "sim://":
        options["config"] = SimConfig(speedup=args.sim_speedup)
    async with agentcore.open_driver(
        args.backend, model=args.model, max_inflight=args.slots, tools=TASK.tools, **options
    ) as driver:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:

            async def shutdown() -> None:
                async for _ in signals:
                    return

            print(f"serving on {config.bind[0]}", flush=True)
            await hypercorn.trio.serve(App(driver), config, shutdown_trigger=shutdown)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="sim://")
    parser.add_argument("--model", default="sim")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--fd", type=int, default=None, help="serve on this listening socket")
    parser.add_argument("--slots", type=int, default=32, help="max_inflight")
    parser.add_argument("--sim-speedup", type=float, default=10.0)
    trio.run(serve, parser.parse_args())


if __name__ == "__main__":
    main()
