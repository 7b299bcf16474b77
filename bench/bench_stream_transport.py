"""Client CPU per streamed request on the lean transport, one source tree against another.

A server process on 127.0.0.1 answers every request with a streamed chat completion in the
OpenAI format: ``--events`` SSE events of a few tokens each, **one HTTP chunk per event** (as
vLLM, llama.cpp and Dynamo send them), written ``--per-write`` events at a time. A client
process runs ``--slots`` concurrent tasks that send ``--requests`` requests in all and
measures its own CPU time (``time.process_time``); the figure is CPU per request. Two client
paths are measured:

- ``transport``: ``LeanTransport.open_stream`` and ``receive()`` until the end of the body;
- ``client``: ``HttpModelClient`` (the OpenAI codec's encoder and stream decoder over the
  lean transport), i.e. what the driver spends per streamed model request outside itself.

The client runs in a subprocess per source tree (``--src``, repeatable; the working tree's
``src`` by default), so the code as it was (``git archive <commit> src | tar -x -C /tmp/base``)
and the code as it is are measured against the same server in one run, alternating, each
cell the median of ``--repeats`` runs:

    .venv/bin/python bench/bench_stream_transport.py --src /tmp/base/src --src src
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from functools import partial
from pathlib import Path

import trio
from _common import child_report

ROOT = Path(__file__).resolve().parents[1]

# ---- the server (separate process) ----


def _event(i: int, last: bool) -> bytes:
    if last:
        delta, finish = "{}", '"stop"'
        usage = f',"usage":{{"prompt_tokens":90,"completion_tokens":{i},"total_tokens":{90 + i}}}'
    else:
        delta, finish, usage = f'{{"content":"tok{i} "}}', "null", ""
    payload = (
        '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,'
        f'"model":"bench-model","choices":[{{"index":0,"delta":{delta},'
        f'"finish_reason":{finish}}}]{usage}}}'
    )
    return f"data: {payload}\n\n".encode()


def _response_writes(events: int, per_write: int) -> list[bytes]:
    sse = [_event(i, False) for i in range(events)] + [_event(events, True), b"data: [DONE]\n\n"]
    chunks = [b"%x\r\n%s\r\n" % (len(e), e) for e in sse]
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    writes = [head + b"".join(chunks[:per_write])]
    writes += [
        b"".join(chunks[i : i + per_write]) for i in range(per_write, len(chunks), per_write)
    ]
    writes[-1] += b"0\r\n\r\n"
    return writes


async def _serve_connection(stream: trio.SocketStream, writes: list[bytes]) -> None:
    buffer = b""
    try:
        while True:
            while (end := buffer.find(b"\r\n\r\n")) < 0:
                data = await stream.receive_some(65536)
                if not data:
                    return
                buffer += data
            head = buffer[:end].lower()
            length = 0
            for line in head.split(b"\r\n"):
                if line.startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            while len(buffer) < end + 4 + length:
                data = await stream.receive_some(65536)
                if not data:
                    return
                buffer += data
            buffer = buffer[end + 4 + length :]
            for write in writes:
                await stream.send_all(write)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await trio.aclose_forcefully(stream)


async def _serve_main(events: int, per_write: int) -> None:
    writes = _response_writes(events, per_write)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            partial(trio.serve_tcp, partial(_serve_connection, writes=writes), 0, host="127.0.0.1")
        )
        print(listeners[0].socket.getsockname()[1], flush=True)
        await trio.to_thread.run_sync(sys.stdin.read)  # until the parent closes our stdin
        nursery.cancel_scope.cancel()


# ---- the client (a subprocess per source tree) ----

_CLIENT = r"""
import json, sys, time
import trio
from agentcore import Timeouts
from agentcore._transports.model_client import HttpModelClient
from agentcore._transports.lean import LeanTransport, Origin
from agentcore.core import CallModel, UserMessage
from agentcore.wire import HttpRequest, backend

port, mode, slots, requests = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
base = f"http://127.0.0.1:{port}/v1"
timeouts = Timeouts(connect=10.0, read=30.0, total=120.0)
codec = backend(base, model="bench-model").codec
call = CallModel("bench-0/0", (UserMessage("Summarise the quarterly report in one line."),))
headers = [("content-type", "application/json")]
request = HttpRequest("POST", base + "/chat/completions", headers, b"{}")

async def main():
    transport = LeanTransport(Origin.from_url(base), max_connections=slots)
    client = HttpModelClient(codec, transport, stream=True)
    left = [requests]
    received = [0]

    async def worker():
        while left[0] > 0:
            left[0] -= 1
            if mode == "transport":
                async with transport.open_stream(request, timeouts) as stream:
                    while chunk := await stream.receive():
                        received[0] += len(chunk)
            else:
                exchange = await client.exchange(call)
                assert exchange.event.message.content, exchange
                received[0] += 1

    cpu, wall = time.process_time(), time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(slots):
            nursery.start_soon(worker)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    await transport.aclose()
    print(json.dumps({"cpu": cpu, "wall": wall, "received": received[0]}))

trio.run(main)
"""


def _client(src: Path, port: int, mode: str, slots: int, requests: int) -> dict[str, float]:
    argv = [sys.executable, "-c", _CLIENT, str(port), mode, str(slots), str(requests)]
    return child_report(argv, src=src)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--events", type=int, default=200, help="SSE events (= HTTP chunks)")
    parser.add_argument("--per-write", type=int, default=4, help="events per server write")
    parser.add_argument("--slots", type=int, default=32, help="concurrent streams")
    parser.add_argument("--requests", type=int, default=2000, help="requests per run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--src", action="append", type=Path, help="a source tree (repeatable)")
    args = parser.parse_args(argv)
    if args.serve:
        trio.run(_serve_main, args.events, args.per_write)
        return 0
    sources = args.src or [ROOT / "src"]
    server = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--serve",
            f"--events={args.events}",
            f"--per-write={args.per_write}",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        print(
            f"{args.requests:,} streamed requests per run, {args.slots} at once, "
            f"{args.events + 2} SSE events each, one HTTP chunk per event, "
            f"{args.per_write} events per server write; client CPU per request, "
            f"median of {args.repeats}"
        )
        cells: dict[tuple[str, Path], list[float]] = {}
        for _ in range(args.repeats):
            for mode in ("transport", "client"):
                for src in sources:  # alternating, so drifts of the machine hit every tree
                    run = _client(src, port, mode, args.slots, args.requests)
                    cells.setdefault((mode, src), []).append(1e6 * run["cpu"] / args.requests)
        for mode in ("transport", "client"):
            first = statistics.median(cells[(mode, sources[0])])
            for src in sources:
                runs = cells[(mode, src)]
                median = statistics.median(runs)
                passes = " / ".join(f"{r:.0f}" for r in runs)
                print(
                    f"  {mode:9s} {src}: {median:7.1f} us per request "
                    f"(passes {passes}; {median / first:.2f}x the first tree)"
                )
    finally:
        assert server.stdin is not None
        server.stdin.close()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
