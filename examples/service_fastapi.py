"""Agents behind a web endpoint on asyncio: FastAPI + uvicorn, over the embedding loop.

The same service as ``service_trio.py`` for asyncio frameworks. agentcore's driver is trio;
here the pure agent loop is driven by asyncio code instead, as docs/embedding.md shows (the
``run_asyncio`` loop below is that page's, with retries of retryable model failures added).
One ``httpx.AsyncClient`` (one connection pool to the backend) is opened at start-up and shared
by every request; an ``asyncio.Semaphore`` bounds the model requests in flight. Routes:

- ``POST /runs`` with ``{"inputs": {"record": "r1"}}``: runs one agent, answers its result.
- ``POST /runs/stream``: server-sent events ``started``, then ``result``.
- ``GET /stats``, ``GET /health``.

The body is read as JSON whatever its content type, so ``curl -d '{...}'`` (which sends a
form content type) works. A client that disconnects cancels its own agent and nothing else. A
bad body gets FastAPI's 422 JSON answer (invalid JSON included); unknown routes a 404 JSON
answer.

Needs ``pip install 'trio-agentcore[service]'`` and an OpenAI-compatible backend, for example
``agentcore sim --port 8000``. Run::

    python examples/service_fastapi.py --backend http://127.0.0.1:8000/v1 --port 8081
    curl -s localhost:8081/runs -d '{"inputs": {"record": "r7"}}'
    curl -sN localhost:8081/runs/stream -d '{"inputs": {"record": "r7"}}'
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
from collections.abc import AsyncIterator
from typing import Annotated, Any

import cattrs
import httpx
import pydantic
import uvicorn
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import StreamingResponse

import agentcore
from agentcore.core import (
    Abort,
    AgentLoop,
    CallModel,
    Finish,
    LoopConfig,
    ModelFailed,
    SystemMessage,
    ToolFailed,
    ToolReturned,
    UserMessage,
)

TOOL_SECONDS = float(os.environ.get("SERVICE_TOOL_SECONDS", "0.2"))
SYSTEM = "You answer questions about records. Look the record up before you answer."
PROMPT = "What does the registry say about record {record}?"
MAX_ATTEMPTS = 4


@agentcore.tool(coalesce=True)  # a read: identical concurrent lookups share one call
async def lookup(key: str) -> str:
    """Look a record up in the registry.

    Args:
        key: the record key.
    """
    await asyncio.sleep(TOOL_SECONDS)  # stands for a call to a registry service
    return f"{key}: active since 2024, owner: team-{len(key) % 7}"


TOOLS = {lookup.name: lookup}


class RunBody(pydantic.BaseModel):
    inputs: dict[str, str | int | float]

    @pydantic.field_validator("inputs")
    @classmethod
    def needs_record(cls, value: dict[str, Any]) -> dict[str, Any]:
        if "record" not in value:
            raise ValueError("inputs.record is required")
        return value


# ---------------------------------------------------------------- the loop of docs/embedding.md


async def call_model_asyncio(
    client: httpx.AsyncClient, codec: Any, call: CallModel, slots: asyncio.Semaphore
) -> Any:
    request = codec.encode(call)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        async with slots:
            try:
                response = await client.request(
                    request.method, request.url, headers=request.headers, content=request.body
                )
            except httpx.TransportError as error:
                failure = agentcore.ModelError(
                    agentcore.ErrorKind.CONNECTION, str(error) or repr(error), retryable=True
                )
                event: Any = ModelFailed(call.request_id, failure)
            else:
                headers = tuple(response.headers.multi_items())
                event = codec.decode(
                    call.request_id, response.status_code, headers, response.content
                )
        if not isinstance(event, ModelFailed) or not event.error.retryable:
            return event
        if attempt < MAX_ATTEMPTS:
            await asyncio.sleep(event.error.retry_after or 0.5 * attempt)
    return event


async def call_tool_asyncio(call: Any) -> Any:
    try:
        tool = TOOLS[call.name]
        bound = tool.bind(tool.spec.validator(call.arguments))
        result = await bound() if tool.is_async else await asyncio.to_thread(bound)
        content = result if isinstance(result, str) else json.dumps(result)
    except Exception as error:
        return ToolFailed(call.call_id, agentcore.ToolError(type(error).__name__, str(error)))
    return ToolReturned(call.call_id, content)


async def run_asyncio(loop: AgentLoop, service: Service) -> Finish | Abort:
    outcomes: asyncio.Queue[Any] = asyncio.Queue()

    async def perform(effect: Any) -> None:
        if isinstance(effect, CallModel):
            event = await call_model_asyncio(service.client, service.codec, effect, service.slots)
        else:
            event = await call_tool_asyncio(effect)
        outcomes.put_nowait(event)

    async with asyncio.TaskGroup() as tasks:
        effects = loop.start()
        while True:
            for effect in effects:
                if isinstance(effect, Finish | Abort):
                    return effect
                tasks.create_task(perform(effect))
            effects = loop.handle(await outcomes.get())


# ---------------------------------------------------------------- the service


class Service:
    def __init__(self, backend: str, model: str, slots: int) -> None:
        self.codec = agentcore.wire.backend(backend, model=model).codec
        self.client = httpx.AsyncClient(
            timeout=300,
            limits=httpx.Limits(max_connections=slots, max_keepalive_connections=slots),
        )
        self.slots = asyncio.Semaphore(slots)
        self.numbers = itertools.count()
        self.served = 0
        self.disconnected = 0
        self.active = 0

    def loop(self, inputs: dict[str, Any]) -> AgentLoop:
        config = LoopConfig(
            run_id=f"web-{next(self.numbers)}",
            tools=[t.spec for t in TOOLS.values()],
            max_turns=4,
        )
        prompt = PROMPT.format(**{k: str(v) for k, v in inputs.items()})
        return AgentLoop(config, [SystemMessage(SYSTEM), UserMessage(prompt)])

    async def agent(self, inputs: dict[str, Any]) -> Finish | Abort:
        self.active += 1
        try:
            end = await run_asyncio(self.loop(inputs), self)
        finally:
            self.active -= 1
        self.served += 1
        return end


async def run_body(request: Request) -> RunBody:
    """The request body as a :class:`RunBody`, read as JSON whatever the content type says.

    A plain ``body: RunBody`` parameter makes FastAPI refuse any content type but JSON with a
    422, and ``curl -d`` sends ``application/x-www-form-urlencoded``.
    """
    try:
        return RunBody.model_validate_json(await request.body())
    except pydantic.ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        raise RequestValidationError(
            [{**error, "loc": ("body", *error["loc"])} for error in errors]
        ) from None


JsonBody = Annotated[RunBody, Depends(run_body)]


def end_json(end: Finish | Abort) -> dict[str, Any]:
    if isinstance(end, Finish):
        status, output, error = "ok", cattrs.unstructure(end.output), None
    else:
        status, output = "failed", None
        error = {"kind": end.reason.kind.value, "message": end.reason.message}
    return {"status": status, "output": output, "error": error,
            "usage": cattrs.unstructure(end.usage)}  # fmt: skip


def make_app(backend: str, model: str, slots: int) -> FastAPI:
    service: Service | None = None

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        nonlocal service
        service = Service(backend, model, slots)
        try:
            yield
        finally:
            await service.client.aclose()

    app = FastAPI(lifespan=lifespan)

    def current() -> Service:
        assert service is not None
        return service

    @app.post("/runs")
    async def runs(request: Request, body: JsonBody) -> Any:
        service = current()
        agent = asyncio.create_task(service.agent(body.inputs))

        async def disconnected() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass

        watcher = asyncio.create_task(disconnected())
        done, _ = await asyncio.wait({agent, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if agent not in done:
            agent.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await agent
            service.disconnected += 1
            return None
        watcher.cancel()
        return end_json(agent.result())

    @app.post("/runs/stream")
    async def stream(body: JsonBody) -> StreamingResponse:
        service = current()

        async def events() -> AsyncIterator[bytes]:
            started = json.dumps({"record": body.inputs["record"]})
            yield f"event: started\ndata: {started}\n\n".encode()
            try:
                end = await service.agent(body.inputs)  # cancelled with us if the client leaves
            except asyncio.CancelledError:
                service.disconnected += 1
                raise
            yield f"event: result\ndata: {json.dumps(end_json(end))}\n\n".encode()

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.get("/stats")
    async def stats() -> Any:
        service = current()
        return {"service": {"served": service.served, "disconnected": service.disconnected,
                            "active": service.active}}  # fmt: skip

    @app.get("/health")
    async def health() -> Any:
        return {"ok": True}

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="http://127.0.0.1:8000/v1")
    parser.add_argument("--model", default="sim")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--fd", type=int, default=None, help="serve on this listening socket")
    parser.add_argument("--slots", type=int, default=32, help="model requests in flight")
    args = parser.parse_args()
    app = make_app(args.backend, args.model, args.slots)
    print("serving", flush=True)
    if args.fd is not None:
        uvicorn.run(app, fd=args.fd, log_level="warning")
    else:
        uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
